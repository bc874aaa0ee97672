# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-ofi, a memory monitor for libfabric's MR cache, and
# libummunotify-fi.so, the provider that imports it into every libfabric
# program.  Included by ../Makefile; built only where <rdma/fi_ext.h> is,
# and then
#
# all			also libummunotify-ofi.{so,a} and ofi/libummunotify-fi.so
#			(FI_PROVIDER_PATH=$(O)/ofi uses it from the build tree)
# check			also the monitor's host test (plain, ASan and UBSan),
#			against the host's libfabric and the test double
# guest-tests		also $(O)/tests/ofi-stale, the stale-data test, and
#			where mpicc is, $(O)/tests/mpi-remap, the MPI job
# install		also the library, header, pkg-config file, man pages,
#			and the provider in OFI_PROVDIR (default: the directory
#			the installed libfabric loads providers from)

HAVE_OFI	:= $(shell printf '\043include <rdma/fi_ext.h>\n' | \
			   $(CC) -E -x c - >/dev/null 2>&1 && echo y)

ifeq ($(HAVE_OFI),y)
OFI_VERSION	:= 1.0.0
OFI_SONAME	:= libummunotify-ofi.so.1
OFI_SO		:= $(O)/libummunotify-ofi.so.$(OFI_VERSION)
OFI_LIBS	:= $(OFI_SO) $(O)/$(OFI_SONAME) $(O)/libummunotify-ofi.so \
		   $(O)/libummunotify-ofi.a
OFI_PROV	:= $(O)/ofi/libummunotify-fi.so
OFI_OBJS	:= $(O)/obj/ofi/monitor.o $(O)/obj/ofi/provider.o
OFI_HDR		:= ofi/include/ummunotify-ofi.h
OFI_CFLAGS	:= -Iofi/include
OFI_PROVDIR	?= $(shell pkg-config --variable=libdir libfabric 2>/dev/null || \
			   echo $(LIBDIR))/libfabric
# Never unloaded: libfabric unloads providers in fi_fini() while the
# monitor's thread and the function pointers it gave libfabric live on.
OFI_LDFLAGS	:= -Wl,-z,nodelete -Wl,-z,defs

.PHONY: install-ofi
all: $(OFI_LIBS) $(OFI_PROV)
install: install-ofi

$(O)/obj/ofi/%.o: ofi/%.c ofi/ofi.h $(OFI_HDR) include/ummunotify.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -fPIC -c -o $@ $<

$(OFI_SO): $(OFI_OBJS) ofi/libummunotify-ofi.map $(O)/libummunotify.so
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(OFI_SONAME) \
		-Wl,--version-script=ofi/libummunotify-ofi.map $(OFI_LDFLAGS) \
		-o $@ $(OFI_OBJS) -L$(O) -lummunotify -lfabric $(LDLIBS)

$(O)/$(OFI_SONAME) $(O)/libummunotify-ofi.so: $(OFI_SO)
	ln -sfn $(notdir $(OFI_SO)) $@

$(O)/libummunotify-ofi.a: $(OFI_OBJS) ofi/libummunotify-ofi.map
	$(call static_lib,$(OFI_OBJS),ofi/libummunotify-ofi.map)

$(OFI_PROV): $(O)/obj/ofi/fi-provider.o $(O)/$(OFI_SONAME)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared $(OFI_LDFLAGS) -o $@ $< \
		-L$(O) -lummunotify-ofi

install-ofi: $(OFI_LIBS) $(OFI_PROV)
	install -D -m 644 $(OFI_HDR) $(DESTDIR)$(INCLUDEDIR)/ummunotify-ofi.h
	install -D -m 644 $(OFI_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(OFI_SO))
	ln -sfn $(notdir $(OFI_SO)) $(DESTDIR)$(LIBDIR)/$(OFI_SONAME)
	ln -sfn $(OFI_SONAME) $(DESTDIR)$(LIBDIR)/libummunotify-ofi.so
	install -D -m 644 $(O)/libummunotify-ofi.a \
		$(DESTDIR)$(LIBDIR)/libummunotify-ofi.a
	install -D -m 644 $(OFI_PROV) \
		$(DESTDIR)$(OFI_PROVDIR)/libummunotify-fi.so
	install -d $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man7
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(OFI_VERSION)|' ofi/libummunotify-ofi.pc.in \
	    >$(DESTDIR)$(PKGCONFIGDIR)/libummunotify-ofi.pc
	install -m 644 ofi/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 ofi/man/*.7 $(DESTDIR)$(MANDIR)/man7/

# The host test includes monitor.c; the device is the test double.
MON_TEST_DEPS	:= tests/ofi/test-monitor.c ofi/monitor.c ofi/provider.c \
		   ofi/ofi.h $(OFI_HDR) $(TEST_COMMON) $(SRCS:%=src/%) \
		   $(wildcard src/*.h) include/ummunotify.h
MON_TEST_SRCS	:= tests/ofi/test-monitor.c ofi/provider.c tests/double.c \
		   $(SRCS:%=src/%)
MON_TEST_LIBS	:= -Wl,--wrap=umn_open -lfabric $(LDLIBS)

.PHONY: check-ofi
check: check-ofi

$(O)/tests/test-monitor: $(MON_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Iofi $(LDFLAGS) -o $@ \
		$(MON_TEST_SRCS) $(MON_TEST_LIBS)

$(O)/tests/san/test-monitor: $(MON_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Iofi -O1 \
		-fsanitize=address,undefined -fno-sanitize-recover=all \
		$(LDFLAGS) -o $@ $(MON_TEST_SRCS) $(MON_TEST_LIBS)

check-ofi: $(O)/tests/test-monitor $(O)/tests/san/test-monitor
	@set -e; for t in $^; do echo "== $$t"; $$t; done

# The stale-data test, against the built libraries as a program would be:
# it does not call them, libfabric loads the provider.
OFI_TEST_SRCS	:= tests/ofi/ofi-stale.c tests/ofi/fab.c

guest-tests: $(O)/tests/ofi-stale

$(O)/tests/ofi-stale: $(OFI_TEST_SRCS) tests/ofi/fab.h $(OFI_HDR) \
		      $(TEST_COMMON) $(OFI_LIBS) $(OFI_PROV)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Itests/ofi $(LDFLAGS) -o $@ \
		$(OFI_TEST_SRCS) -L$(O) -lummunotify-ofi -Wl,-rpath,$(O) \
		-lfabric $(LDLIBS)

# The MPI job's program, built with the MPI's own compiler driver.
MPICC		?= mpicc
ifneq ($(shell command -v $(MPICC) 2>/dev/null),)
guest-tests: $(O)/tests/mpi-remap

$(O)/tests/mpi-remap: tests/ofi/mpi-remap.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $<
endif

-include $(OFI_OBJS:.o=.d) $(O)/obj/ofi/fi-provider.d
endif
