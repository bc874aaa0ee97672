# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-ofi, a memory monitor for libfabric's MR cache, and
# libummunotify-fi.so, a link to it in libfabric's provider directory, which
# imports it into every libfabric program.  Included by ../Makefile; built
# where <rdma/fi_ext.h> is (OFI=yes: always, OFI=no: never; see ../have.mk),
# and then
#
# all			also libummunotify-ofi.{so,a} and ofi/libummunotify-fi.so
#			(FI_PROVIDER_PATH=$(O)/ofi uses it from the build tree)
# check			also the monitor's host test (plain, ASan and UBSan,
#			TSan), against the host's libfabric and the test
#			double, and the installed library
# guest-tests		also $(O)/tests/ofi-monitor (the host test on the real
#			device), ofi-stale (the stale-data tests), ofi-exit
#			(a domain closed at exit) and, where mpicc is,
#			mpi-remap (the MPI job), and where mpicc.mpich is,
#			mpi-remap-mpich (the same program on MPICH)
# install		also the library, header, pkg-config file, man pages,
#			and the provider link in OFI_PROVDIR: by default the
#			directory the installed libfabric loads providers
#			from if PREFIX is that libfabric's, else
#			$(LIBDIR)/libfabric

HAVE_OFI	:= $(call have,OFI,rdma/fi_ext.h)

ifeq ($(HAVE_OFI),y)
OFI_VERSION	:= 1.1.0
OFI_SONAME	:= libummunotify-ofi.so.1
OFI_SO		:= $(O)/libummunotify-ofi.so.$(OFI_VERSION)
OFI_LIBS	:= $(OFI_SO) $(O)/$(OFI_SONAME) $(O)/libummunotify-ofi.so \
		   $(O)/libummunotify-ofi.a
OFI_PROV	:= $(O)/ofi/libummunotify-fi.so
OFI_OBJS	:= $(O)/obj/ofi/monitor.o $(O)/obj/ofi/provider.o
OFI_HDR		:= ofi/include/ummunotify-ofi.h
OFI_CFLAGS	:= -Iofi/include
OFI_PREFIX	:= $(shell pkg-config --variable=prefix libfabric 2>/dev/null)
ifeq ($(OFI_PREFIX),$(PREFIX))
OFI_PROVDIR	?= $(shell pkg-config --variable=libdir libfabric)/libfabric
else
OFI_PROVDIR	?= $(LIBDIR)/libfabric
endif
# Never unloaded: the fork handlers and the function pointers libfabric
# holds must outlive libfabric's dlclose() of the provider.  A run path
# for libummunotify.so.1, which libfabric's dlopen() of the provider
# needs wherever the loader does not look, and whose failure libfabric
# does not log (but in debug builds): the library's directory, $ORIGIN
# for the library, $ORIGIN/.. for the provider link in a directory
# beside it ($(LIBDIR)/libfabric, libfabric's own provider directory,
# ofi/ in the build tree).  glibc takes $ORIGIN from the path it opened:
# the link's.
OFI_LDFLAGS	:= -Wl,-z,nodelete -Wl,-z,defs -Wl,--enable-new-dtags \
		   -Wl,-rpath,'$$ORIGIN:$$ORIGIN/..'
# The provider link's directory is LIBDIR, or beside it: the run path
# finds the library, as the loader does in /lib and /usr/lib; else
# install-ofi warns unless ld.so.conf names LIBDIR.  Not into a DESTDIR:
# this system's ld.so.conf says nothing of the one it is staged for.
# ldconfig -X: -N alone still updates the libraries' links, as root.
OFI_FOUND	= $(filter $(LIBDIR),$(OFI_PROVDIR) /lib /usr/lib \
			   $(patsubst %/,%,$(dir $(OFI_PROVDIR))))

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

# The provider is the library, under the name libfabric looks for.
$(OFI_PROV): $(O)/$(OFI_SONAME)
	@mkdir -p $(dir $@)
	ln -sfn ../$(OFI_SONAME) $@

install-ofi: $(OFI_LIBS) $(OFI_PROV)
	install -D -m 644 $(OFI_HDR) $(DESTDIR)$(INCLUDEDIR)/ummunotify-ofi.h
	install -D -m 644 $(OFI_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(OFI_SO))
	ln -sfn $(notdir $(OFI_SO)) $(DESTDIR)$(LIBDIR)/$(OFI_SONAME)
	ln -sfn $(OFI_SONAME) $(DESTDIR)$(LIBDIR)/libummunotify-ofi.so
	install -D -m 644 $(O)/libummunotify-ofi.a \
		$(DESTDIR)$(LIBDIR)/libummunotify-ofi.a
	install -d $(DESTDIR)$(OFI_PROVDIR)
	ln -sfn $(if $(filter $(LIBDIR)/libfabric,$(OFI_PROVDIR)),..,$(LIBDIR))/$(OFI_SONAME) \
		$(DESTDIR)$(OFI_PROVDIR)/libummunotify-fi.so
	$(if $(OFI_FOUND)$(DESTDIR),,@/sbin/ldconfig -N -X -v 2>/dev/null | \
		grep -q '^$(LIBDIR):' || echo "install-ofi: WARNING: libfabric cannot load $(OFI_PROVDIR)/libummunotify-fi.so: neither its run path nor the loader finds $(LIBDIR)/libummunotify.so.1; install with OFI_PROVDIR=$(LIBDIR)/libfabric, or add $(LIBDIR) to /etc/ld.so.conf.d" >&2)
	install -d $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man7
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(OFI_VERSION)|' ofi/libummunotify-ofi.pc.in \
	    >$(DESTDIR)$(PKGCONFIGDIR)/libummunotify-ofi.pc
	install -m 644 ofi/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 ofi/man/*.7 $(DESTDIR)$(MANDIR)/man7/

# test-monitor: the monitor and the library from source, with the test
# double for the device (umn_open() and the device's presence wrapped at
# link time), against the host's libfabric; plain, under ASan and UBSan,
# and TSan.  ofi-monitor: the same tests on the real module, in a guest.
# Both wrap umn_read_events(), to fail the monitor's thread, and
# pthread_create(), to fail its start.
MON_TEST_SRCS	:= tests/ofi/test-monitor.c ofi/monitor.c ofi/provider.c \
		   $(SRCS:%=src/%)
MON_TEST_DEPS	:= $(MON_TEST_SRCS) tests/ofi/backend.h ofi/ofi.h $(OFI_HDR) \
		   $(TEST_COMMON) $(wildcard src/*.h) include/ummunotify.h
MON_WRAP	:= -Wl,--wrap=umn_read_events -Wl,--wrap=pthread_create
MON_DOUBLE	:= tests/ofi/backend-double.c tests/double.c $(MON_WRAP) \
		   -Wl,--wrap=umn_open -Wl,--wrap=umn_ofi__have_device \
		   -lfabric $(LDLIBS)
MON_CFLAGS	= $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Iofi $(LDFLAGS)

.PHONY: check-ofi
check: check-ofi

$(O)/tests/test-monitor: $(MON_TEST_DEPS) tests/ofi/backend-double.c
	@mkdir -p $(dir $@)
	$(CC) $(MON_CFLAGS) -o $@ $(MON_TEST_SRCS) $(MON_DOUBLE)

$(O)/tests/san/test-monitor: $(MON_TEST_DEPS) tests/ofi/backend-double.c
	@mkdir -p $(dir $@)
	$(CC) $(MON_CFLAGS) -O1 -fsanitize=address,undefined \
		-fno-sanitize-recover=all -o $@ $(MON_TEST_SRCS) $(MON_DOUBLE)

# TSan does not model atomic_thread_fence() (-Wtsan says so): the fences
# order the seqcount's atomic loads and stores, which it does see.
$(O)/tests/tsan/test-monitor: $(MON_TEST_DEPS) tests/ofi/backend-double.c
	@mkdir -p $(dir $@)
	$(CC) $(MON_CFLAGS) -O1 -fsanitize=thread -Wno-tsan -o $@ \
		$(MON_TEST_SRCS) $(MON_DOUBLE)

MON_TESTS	:= $(O)/tests/test-monitor $(call san_tests,test-monitor) \
		   $(call tsan_tests,test-monitor)
check-ofi: $(MON_TESTS) $(OFI_LIBS) $(OFI_PROV)
	@st=0; for t in $(MON_TESTS); do \
		$(tap) "$${t#$(O)/tests/}" $$t || st=1; \
		$(tap) "$${t#$(O)/tests/} grow" $$t grow || st=1; \
	done; \
	$(call say_no_san,test-monitor) $(call say_no_tsan,test-monitor) \
	$(tap) installed-ofi.sh tests/ofi/installed-ofi.sh $(O) || st=1; \
	exit $$st

guest-tests: $(O)/tests/ofi-monitor

$(O)/tests/ofi-monitor: $(MON_TEST_DEPS) tests/ofi/backend-device.c
	@mkdir -p $(dir $@)
	$(CC) $(MON_CFLAGS) -o $@ $(MON_TEST_SRCS) tests/ofi/backend-device.c \
		$(MON_WRAP) -lfabric $(LDLIBS)

# The stale-data test, against the built libraries as a program would be:
# it does not call them, libfabric loads the provider.  libofi-late.so
# runs its "late" test's teardown after every destructor.
OFI_TEST_SRCS	:= tests/ofi/ofi-stale.c tests/ofi/fab.c

guest-tests: $(O)/tests/ofi-stale

$(O)/tests/libofi-late.so: tests/ofi/late.c tests/ofi/late.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -shared -fPIC -o $@ $<

$(O)/tests/ofi-stale: $(OFI_TEST_SRCS) tests/ofi/fab.h tests/ofi/late.h \
		      $(OFI_HDR) $(TEST_COMMON) $(OFI_LIBS) $(OFI_PROV) \
		      $(O)/tests/libofi-late.so
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Itests/ofi $(LDFLAGS) -o $@ \
		$(OFI_TEST_SRCS) -L$(O) -lummunotify-ofi -Wl,-rpath,$(O) \
		-L$(O)/tests -lofi-late -Wl,-rpath,$(O)/tests -lfabric $(LDLIBS)

# A plugin's domain closed by its destructor, while the program exits.
guest-tests: $(O)/tests/ofi-exit

$(O)/tests/libofi-exit-plugin.so: tests/ofi/ofi-exit-plugin.c tests/ofi/fab.c \
				  tests/ofi/fab.h $(OFI_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(OFI_CFLAGS) -Itests/ofi $(LDFLAGS) \
		-shared -fPIC -o $@ $(filter %.c,$^) -lfabric $(LDLIBS)

$(O)/tests/ofi-exit: tests/ofi/ofi-exit.c $(O)/tests/libofi-exit-plugin.so \
		     $(OFI_LIBS) $(OFI_PROV)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< -lfabric $(LDLIBS)

# The MPI job's program, built with each MPI's own compiler driver where
# it is: Open MPI's (mpicc, Debian's default alternative) and MPICH's.  A
# program not built fails check-ofi.
MPICC		?= mpicc
MPICC_MPICH	?= mpicc.mpich

# mpi_remap NAME,MPICC: $(O)/tests/NAME, mpi-remap.c built with MPICC.
# Exported (-rdynamic): registrations.h's count comes first.
define mpi_remap
ifneq ($$(shell command -v $(2) 2>/dev/null),)
guest-tests: $(O)/tests/$(1)

$(O)/tests/$(1): tests/ofi/mpi-remap.c tests/ucx/remap.h \
		 tests/ucx/patched.h tests/ucx/registrations.h \
		 ucx/include/ummunotify-ucx.h
	@mkdir -p $$(dir $$@)
	$(2) $$(CPPFLAGS) $$(CFLAGS) -Itests/ucx -Iucx/include $$(LDFLAGS) \
		-rdynamic -o $$@ $$< -ldl
endif
endef
$(eval $(call mpi_remap,mpi-remap,$(MPICC)))
$(eval $(call mpi_remap,mpi-remap-mpich,$(MPICC_MPICH)))

-include $(OFI_OBJS:.o=.d)
endif
