# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# HAVE_VERBS := y if libummunotify-verbs is to be built: VERBS=yes always
# (a missing libibverbs is then an error), VERBS=no never, VERBS=auto (the
# default) where <infiniband/verbs.h> is.  Included by verbs.mk and by the
# top Makefile, whose demo uses the library when it is built.
VERBS		?= auto
ifeq ($(VERBS),auto)
HAVE_VERBS	:= $(shell printf '\043include <infiniband/verbs.h>\n' | \
			   $(CC) $(CPPFLAGS) -E -x c - >/dev/null 2>&1 && echo y)
else ifeq ($(VERBS),yes)
HAVE_VERBS	:= y
else ifeq ($(VERBS),no)
HAVE_VERBS	:=
else
$(error VERBS must be yes, no or auto, not "$(VERBS)")
endif
