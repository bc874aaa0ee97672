# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Which optional libraries to build.  VERBS= (libummunotify-verbs, on
# libibverbs), OFI= (libummunotify-ofi, on libfabric) and UCX=
# (libummunotify-ucx, for UCX's headers): yes always (the
# missing library is then an error), no never, auto (the default) where its
# header is.  Included by the library Makefiles and by the top Makefile,
# whose demo uses libummunotify-verbs when it is built.
VERBS		?= auto
OFI		?= auto
UCX		?= auto

# $(call have,SWITCH,HEADER) is y when the library SWITCH names is built.
have = $(strip \
	$(if $(filter yes,$($(1))),y, \
	$(if $(filter no,$($(1))),, \
	$(if $(filter auto,$($(1))), \
		$(shell printf '\043include <$(2)>\n' | \
			$(CC) $(CPPFLAGS) -E -x c - >/dev/null 2>&1 && echo y), \
	$(error $(1) must be yes, no or auto, not "$($(1))")))))
