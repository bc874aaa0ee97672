# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-verbs, ibv_reg_mr() through the cache: a library of its
# own, so that libummunotify needs nothing but libc.  Included by
# ../Makefile; built where <infiniband/verbs.h> is (VERBS=yes: always,
# VERBS=no: never; see ../have.mk), and then
#
# all			also libummunotify-verbs.{so,a}
# check			also its host test (plain, ASan and UBSan) and an
#			install check
# guest-tests		also $(O)/tests/rdma-guest-test
# check-guest-rdma KERNELS="..."  run that under tests/rdma/with-rxe in a
#			guest of each kernel
# install		also its library, header, pkg-config file, man pages

HAVE_VERBS	:= $(call have,VERBS,infiniband/verbs.h)

ifeq ($(HAVE_VERBS),y)
VERBS_VERSION	:= 1.1.0
VERBS_SONAME	:= libummunotify-verbs.so.1
VERBS_SO	:= $(O)/libummunotify-verbs.so.$(VERBS_VERSION)
VERBS_LIBS	:= $(VERBS_SO) $(O)/$(VERBS_SONAME) \
		   $(O)/libummunotify-verbs.so $(O)/libummunotify-verbs.a
VERBS_OBJS	:= $(O)/obj/verbs/mr_cache.o
VERBS_HDR	:= verbs/include/ummunotify-verbs.h
VERBS_CFLAGS	:= -Iverbs/include

.PHONY: install-verbs
all: $(VERBS_LIBS)
install: install-verbs

$(O)/obj/verbs/%.o: verbs/%.c $(VERBS_HDR) include/ummunotify.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(VERBS_CFLAGS) -fPIC -c -o $@ $<

$(VERBS_SO): $(VERBS_OBJS) verbs/libummunotify-verbs.map \
	     $(O)/libummunotify.so
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,$(VERBS_SONAME) \
		-Wl,--version-script=verbs/libummunotify-verbs.map \
		-Wl,-z,defs -o $@ $(VERBS_OBJS) -L$(O) -lummunotify \
		-libverbs $(LDLIBS)

$(O)/$(VERBS_SONAME) $(O)/libummunotify-verbs.so: $(VERBS_SO)
	ln -sfn $(notdir $(VERBS_SO)) $@

$(O)/libummunotify-verbs.a: $(VERBS_OBJS) verbs/libummunotify-verbs.map
	$(call static_lib,$(VERBS_OBJS),verbs/libummunotify-verbs.map)

install-verbs: $(VERBS_LIBS)
	install -D -m 644 $(VERBS_HDR) \
		$(DESTDIR)$(INCLUDEDIR)/ummunotify-verbs.h
	install -D -m 644 $(VERBS_SO) $(DESTDIR)$(LIBDIR)/$(notdir $(VERBS_SO))
	ln -sfn $(notdir $(VERBS_SO)) $(DESTDIR)$(LIBDIR)/$(VERBS_SONAME)
	ln -sfn $(VERBS_SONAME) $(DESTDIR)$(LIBDIR)/libummunotify-verbs.so
	install -D -m 644 $(O)/libummunotify-verbs.a \
		$(DESTDIR)$(LIBDIR)/libummunotify-verbs.a
	install -d $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man3
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERBS_VERSION)|' verbs/libummunotify-verbs.pc.in \
	    >$(DESTDIR)$(PKGCONFIGDIR)/libummunotify-verbs.pc
	install -m 644 verbs/man/*.3 $(DESTDIR)$(MANDIR)/man3/

# The host test: what needs a device is wrapped at link time (see it).
MR_TEST_WRAP	:= -Wl,--wrap=umn_open,--wrap=ibv_reg_mr_iova2 \
		   -Wl,--wrap=ibv_dereg_mr
MR_TEST_DEPS	:= tests/rdma/test-mr-cache.c verbs/mr_cache.c $(VERBS_HDR) \
		   $(TEST_COMMON) $(SRCS:%=src/%) $(wildcard src/*.h) \
		   include/ummunotify.h

.PHONY: check-verbs
check: check-verbs

$(O)/tests/test-mr-cache: $(MR_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(VERBS_CFLAGS) -o $@ \
		tests/rdma/test-mr-cache.c \
		verbs/mr_cache.c tests/double.c $(SRCS:%=src/%) \
		$(MR_TEST_WRAP) $(LDLIBS)

$(O)/tests/san/test-mr-cache: $(MR_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(VERBS_CFLAGS) -O1 \
		-fsanitize=address,undefined \
		-fno-sanitize-recover=all -o $@ tests/rdma/test-mr-cache.c \
		verbs/mr_cache.c tests/double.c $(SRCS:%=src/%) \
		$(MR_TEST_WRAP) $(LDLIBS)

MR_TESTS	:= $(O)/tests/test-mr-cache $(call san_tests,test-mr-cache)
check-verbs: $(VERBS_LIBS) $(MR_TESTS)
	@st=0; for t in $(MR_TESTS); do \
		$(tap) "$${t#$(O)/tests/}" $$t || st=1; \
	done; \
	$(call say_no_san,test-mr-cache) \
	$(tap) installed-verbs.sh tests/rdma/installed-verbs.sh $(O) || st=1; \
	exit $$st

# The guest test, against the built library objects as a program would be
# (the objects, not the archive: the test double uses the library's
# internals); umn_open() is wrapped, to turn invalidation off, and
# ibv_reg_mr_iova2(), to note the access flags of each MR (see the test).
RDMA_TEST_SRCS	:= tests/rdma/rdma-guest-test.c tests/rdma/rc.c \
		   tests/double.c

.PHONY: check-guest-rdma
guest-tests: $(O)/tests/rdma-guest-test

$(O)/tests/rdma-guest-test: $(RDMA_TEST_SRCS) tests/rdma/rc.h $(VERBS_HDR) \
			    $(TEST_COMMON) $(O)/libummunotify-verbs.a $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(VERBS_CFLAGS) -o $@ \
		$(RDMA_TEST_SRCS) $(O)/libummunotify-verbs.a $(OBJS) \
		-Wl,--wrap=umn_open -Wl,--wrap=ibv_reg_mr_iova2 -libverbs $(LDLIBS)

check-guest-rdma: $(O)/tests/rdma-guest-test
	@set -e; for k in $(KERNELS); do \
		echo "== rdma-guest-test on $$k"; \
		$(TOP)/tools/testing/vm-run -k $$k \
			-m $(TOP)/build/$$k/ummunotify.ko -- \
			$(CURDIR)/tests/rdma/with-rxe $<; \
	done

-include $(VERBS_OBJS:.o=.d)
endif
