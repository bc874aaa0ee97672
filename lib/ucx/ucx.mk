# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-ucx, loaded with LD_PRELOAD into UCX programs: UCX's
# registration caches told of memory changes by /dev/ummunotify instead of
# UCM's libc patches.  Included by ../Makefile; built where
# <ucm/api/ucm.h> is (UCX=yes: always, UCX=no: never; see ../have.mk),
# and then
#
# all			also libummunotify-ucx.so (it links no UCX library:
#			it finds UCX's functions in the process)
# check			also the installed library's exports and man pages
# guest-tests		also $(O)/tests/ucp-remap, the UCP stale-data test,
#			$(O)/tests/ucp-threads, its threaded one, and
#			$(O)/tests/ucx-unguard.so, an interposer past the
#			library
# install		also the library, header, pkg-config file, man pages

HAVE_UCX	:= $(call have,UCX,ucm/api/ucm.h)

ifeq ($(HAVE_UCX),y)
UCX_VERSION	:= 1.2.0
UCX_SONAME	:= libummunotify-ucx.so.1
UCX_SO		:= $(O)/libummunotify-ucx.so.$(UCX_VERSION)
UCX_LIBS	:= $(UCX_SO) $(O)/$(UCX_SONAME) $(O)/libummunotify-ucx.so
UCX_OBJS	:= $(O)/obj/ucx/ucx.o
UCX_HDR		:= ucx/include/ummunotify-ucx.h
UCX_CFLAGS	:= -Iucx/include

.PHONY: install-ucx check-ucx
all: $(UCX_LIBS)
install: install-ucx
check: check-ucx

$(O)/obj/ucx/%.o: ucx/%.c $(UCX_HDR) include/ummunotify.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(UCX_CFLAGS) -fPIC -c -o $@ $<

# Never unloaded: UCX keeps calling the functions it defines.
$(UCX_SO): $(UCX_OBJS) ucx/libummunotify-ucx.map $(O)/libummunotify.so
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(UCX_SONAME) \
		-Wl,--version-script=ucx/libummunotify-ucx.map \
		-Wl,-z,nodelete -Wl,-z,defs \
		-o $@ $(UCX_OBJS) -L$(O) -lummunotify -ldl $(LDLIBS)

$(O)/$(UCX_SONAME) $(O)/libummunotify-ucx.so: $(UCX_SO)
	ln -sfn $(notdir $(UCX_SO)) $@

install-ucx: $(UCX_LIBS)
	install -D -m 644 $(UCX_HDR) $(DESTDIR)$(INCLUDEDIR)/ummunotify-ucx.h
	install -D -m 644 $(UCX_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(UCX_SO))
	ln -sfn $(notdir $(UCX_SO)) $(DESTDIR)$(LIBDIR)/$(UCX_SONAME)
	ln -sfn $(UCX_SONAME) $(DESTDIR)$(LIBDIR)/libummunotify-ucx.so
	install -d $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3 \
		$(DESTDIR)$(MANDIR)/man7
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(UCX_VERSION)|' ucx/libummunotify-ucx.pc.in \
	    >$(DESTDIR)$(PKGCONFIGDIR)/libummunotify-ucx.pc
	install -m 644 ucx/man/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 ucx/man/*.7 $(DESTDIR)$(MANDIR)/man7/

check-ucx: $(UCX_LIBS)
	@$(tap) installed-ucx.sh tests/ucx/installed-ucx.sh $(O)

# The UCP stale-data test: a plain UCP program, run with the library
# preloaded (and without, the control).  It links libibverbs only to
# count the registrations UCX makes.
guest-tests: $(O)/tests/ucp-remap $(O)/tests/ucp-threads \
	     $(O)/tests/ucx-unguard.so

$(O)/tests/ucp-remap: tests/ucx/ucp-remap.c tests/ucx/remap.h \
		      tests/ucx/patched.h tests/ucx/registrations.h \
		      $(UCX_HDR) $(UCX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(UCX_CFLAGS) $(LDFLAGS) -rdynamic -o $@ \
		$< -lucp -lucs -ldl $(LDLIBS)

# The cache looked up in one thread after another changed the memory.
$(O)/tests/ucp-threads: tests/ucx/ucp-threads.c tests/ucx/remap.h \
			tests/ucx/patched.h tests/ucx/registrations.h \
			tests/ucx/ucp-map.h \
			$(UCX_HDR) $(UCX_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(UCX_CFLAGS) $(LDFLAGS) -rdynamic -o $@ \
		$< -lucp -lucs -ldl -lpthread $(LDLIBS)

# UCX's lookups sent past the library (check-ucx).
$(O)/tests/ucx-unguard.so: tests/ucx/unguard.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -shared -fPIC -o $@ $< -ldl

-include $(UCX_OBJS:.o=.d)
endif
