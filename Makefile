# SPDX-License-Identifier: GPL-2.0
#
# make            module for every installed kernel with headers (or KDIR=),
#                 selftests and tools
# make check      every test, in QEMU guests; ends with "N passed, N failed"
# make check-arm64  the module, libraries and tests built for arm64 and run
#                 in arm64 guests (TCG) of Debian 12's 6.1 and
#                 trixie-backports' newest 7.x arm64 kernels; make check's
#                 last part is its 6.1 guest, reduced
#                 (UMMUNOTIFY_ARM64_LEAVE_OUT=1, which run-checks sets
#                 there): without libfabric's and UCX's tests
# make debug-check  the host checks and the 7.x debug kernel's (SERIES=)
# make demo       a registration cache catching an munmap, in a guest
# make fuzz       the fuzzer (selftests/ummunotify/fuzz.c) in a guest of the
#                 debug kernel, or of KERNEL= (a release or a build
#                 directory), for SECONDS= (default 600) from SEED= (default
#                 a random one; every round prints what replays it)
# make bench      benchmarks in a guest per kernel: tables, build/bench/
#                 results.json and bench.svg
# make install    module, <linux/ummunotify.h>, the libraries, umnstat, the
#                 udev rule and modules-load.d entry (DESTDIR=, PREFIX=,
#                 LIBDIR=, INCLUDEDIR=, BINDIR=, MANDIR=; VERBS=no, OFI=no,
#                 UCX=no: without libummunotify-verbs, -ofi or -ucx, see
#                 lib/have.mk).  Each part alone: install-modules,
#                 install-headers, install-lib, install-tools, install-boot
# make install-dkms  the module's source and dkms.conf in
#                 /usr/src/ummunotify-VERSION, for "dkms install", and
#                 dkms-install-all there, to build it for every kernel
# make deb, make rpm  the Debian packages, the RPMs, built from the
#                 committed tree (make dist: its tarball) in build/packages/

# The release.  dkms.conf takes it from here; debian/changelog and
# ummunotify.spec must say the same (tools/testing/packages checks).
VERSION	:= 1.4.0

TOP	:= $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
B	:= $(TOP)/build
PREFIX	?= /usr/local
BINDIR	?= $(PREFIX)/bin
INCLUDEDIR ?= $(PREFIX)/include
MANDIR	?= $(PREFIX)/share/man
# Where udev and systemd-modules-load (and Debian's kmod init script) look.
UDEVRULESDIR ?= $(or $(shell pkg-config --variable=udevdir udev 2>/dev/null),/lib/udev)/rules.d
MODULESLOADDIR ?= $(or $(shell pkg-config --variable=modulesloaddir systemd 2>/dev/null),/usr/lib/modules-load.d)

# The kernels to build for: every one with headers, the host's and those
# tools/testing/setup-host.sh installs in chroots of their own releases
# (bookworm-backports' 6.12, bullseye's 5.10, trixie-backports' 7.x),
# whose kbuild runs there (tools/testing/kbuild).  KDIR= picks one tree instead, for example the
# debug kernel that tools/testing/debug-kernel prints.  HOST_KERNELS are
# the host's own, which "make install" installs for.
ifdef KDIR
KERNELS := $(shell cat $(KDIR)/include/config/kernel.release)
HOST_KERNELS := $(KERNELS)
kbuild = $(TOP)/tools/testing/kbuild $(KDIR)
kdir = $(KDIR)
else
KERNELS := $(shell $(TOP)/tools/testing/kbuild --list)
# Series "make check" must find among KERNELS, unless KERNELS is given
# ("7": the 7.x that trixie-backports' linux-image-amd64 points at).
CHECK_SERIES := 5.10 6.1 6.12 7
HOST_KERNELS := $(notdir $(patsubst %/build,%,$(wildcard /lib/modules/*/build)))
kbuild = $(TOP)/tools/testing/kbuild $(1)
kdir = /lib/modules/$(1)/build
endif

MODULE_FILES := Kbuild drivers/ummunotify/Kbuild \
		$(wildcard drivers/ummunotify/*.[ch])
MODULE_DEPS := $(MODULE_FILES) include/uapi/linux/ummunotify.h

CFLAGS	?= -O2 -g
CFLAGS	+= -Wall -Wextra -I$(TOP)/include/uapi

.PHONY: all modules lib selftests tools umnstat check check-arm64 debug-check demo fuzz \
	bench clean install install-modules install-headers install-lib \
	install-tools install-boot install-dkms dist deb rpm version
all: modules lib selftests tools

# Kbuild writes objects beside the sources, so each kernel gets its own
# tree of links to them under build/<release>/.  A kernel rebuilt under
# the same release (the debug kernel, for one) has a new Module.symvers.
# A chroot's headers are not at kdir on the host; a new kernel there comes
# with a new release.
define kernel_module
$(B)/$(1)/ummunotify.ko: $(MODULE_DEPS) $(wildcard $(call kdir,$(1))/Module.symvers)
	@mkdir -p $(B)/$(1)/tree/drivers/ummunotify
	@$$(foreach f,$(MODULE_FILES),ln -sfn $(TOP)/$$(f) $(B)/$(1)/tree/$$(f);)
	@ln -sfn $(TOP)/include $(B)/$(1)/tree/include
	+$(call kbuild,$(1)) M=$(B)/$(1)/tree W=1 UMN_VERSION=$(VERSION) modules
	cp $(B)/$(1)/tree/drivers/ummunotify/ummunotify.ko $$@
modules: $(B)/$(1)/ummunotify.ko
endef
$(foreach k,$(KERNELS),$(eval $(call kernel_module,$(k))))

lib:
	$(MAKE) -C lib O=$(B)/lib all guest-tests

selftests:
	$(MAKE) -C selftests/ummunotify O=$(B)/selftests

# The demo runs on libummunotify's cache; where libummunotify-verbs is
# built (VERBS=), also on it, with the RDMA test's queue pairs
# (lib/tests/rdma/rc.c).
include lib/have.mk
HAVE_VERBS := $(call have,VERBS,infiniband/verbs.h)
DEMO_SRCS := tools/ummunotify-demo.c
DEMO_CFLAGS := -I$(TOP)/lib/include
DEMO_LIBS := $(B)/lib/libummunotify.a -pthread
ifeq ($(HAVE_VERBS),y)
DEMO_SRCS += lib/tests/rdma/rc.c
DEMO_CFLAGS += -DUMN_HAVE_VERBS -I$(TOP)/lib/verbs/include \
	       -I$(TOP)/lib/tests/rdma
DEMO_LIBS := $(B)/lib/libummunotify-verbs.a $(DEMO_LIBS) -libverbs
endif

TOOLS := $(B)/tools/ummunotify-demo $(B)/tools/umnstat
tools: $(TOOLS)
$(B)/tools/ummunotify-demo: $(DEMO_SRCS) lib
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(DEMO_CFLAGS) -o $@ \
		$(DEMO_SRCS) $(DEMO_LIBS)

umnstat: $(B)/tools/umnstat
$(B)/tools/umnstat: tools/umnstat/umnstat.c lib/ofi/include/ummunotify-ofi.h \
		include/uapi/linux/ummunotify.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -I$(TOP)/lib/ofi/include -o $@ $<

# The modules are built by run-checks, one kernel at a time, so that one
# that does not build fails that kernel's checks, not all of them; the
# programs too fail a check, so that every kernel's line still comes.
check:
	@$(MAKE) --no-print-directory lib selftests tools; \
	UMMUNOTIFY_PROGRAMS_BUILT=$$? \
	UMMUNOTIFY_SERIES="$(if $(filter file,$(origin KERNELS)),$(CHECK_SERIES))" \
		tools/testing/run-checks $(KERNELS)

# Everything for arm64 is built in the arm64 systems (tools/testing/
# arm64-root: Debian 12's, and Debian 13's for the 7.x module), in
# build/arm64/, by run-checks, which sets them up first.
check-arm64:
	tools/testing/run-checks --arm64

# The host checks and the debug kernel of SERIES (default 7, the newest
# 7.x, built in the trixie chroot): not in "make check", whose CI time a
# second debug kernel would take past its budget (see the README).
debug-check: lib selftests tools
	UMMUNOTIFY_DEBUG_KERNELS="$(or $(SERIES),7)" UMMUNOTIFY_NO_PACKAGES=1 \
		UMMUNOTIFY_NO_ARM64=1 \
		tools/testing/run-checks

demo: modules tools
	tools/testing/vm-run -k $(firstword $(HOST_KERNELS)) \
		-m $(B)/$(firstword $(HOST_KERNELS))/ummunotify.ko \
		-- lib/tests/rdma/with-rxe $(B)/tools/ummunotify-demo

FUZZ_SECONDS := $(or $(SECONDS),600)
fuzz: selftests
	+@set -e; \
	kernel='$(KERNEL)'; [ -n "$$kernel" ] || kernel=$$(tools/testing/debug-kernel); \
	case $$kernel in \
	*/*) krel=$$(cat "$$kernel/include/config/kernel.release"); \
	     $(MAKE) KDIR="$$kernel" modules ;; \
	*) krel=$$kernel; $(MAKE) modules ;; \
	esac; \
	tools/testing/vm-run -t $$(($(FUZZ_SECONDS) + 900)) -k "$$kernel" \
		-m $(B)/$$krel/ummunotify.ko -- \
		$(B)/selftests/fuzz -t $(FUZZ_SECONDS) $(if $(SEED),-s $(SEED))

# The kernels of Debian 12 and its backports, whose results are logged.
bench:
	tools/bench/run $(filter 6.1.% 6.12.%,$(KERNELS))

install: install-modules install-headers install-lib install-tools \
	 install-boot

install-modules: modules
	@for k in $(HOST_KERNELS); do \
		$(MAKE) -C $(call kdir,$$k) M=$(B)/$$k/tree \
			INSTALL_MOD_PATH=$(DESTDIR) INSTALL_MOD_DIR=extra \
			modules_install || exit; \
	done

install-headers:
	install -D -m 644 include/uapi/linux/ummunotify.h \
		$(DESTDIR)$(INCLUDEDIR)/linux/ummunotify.h

install-lib:
	$(MAKE) -C lib O=$(B)/lib DESTDIR=$(DESTDIR) PREFIX=$(PREFIX) \
		INCLUDEDIR=$(INCLUDEDIR) MANDIR=$(MANDIR) install

install-tools: $(B)/tools/umnstat
	install -D -m 755 $(B)/tools/umnstat $(DESTDIR)$(BINDIR)/umnstat
	install -D -m 644 tools/umnstat/umnstat.8 \
		$(DESTDIR)$(MANDIR)/man8/umnstat.8

# The device has no fixed minor, so that opening /dev/ummunotify cannot
# load the module: it is loaded at boot instead.
install-boot:
	install -D -m 644 tools/udev/60-ummunotify.rules \
		$(DESTDIR)$(UDEVRULESDIR)/60-ummunotify.rules
	install -D -m 644 tools/modules-load.d/ummunotify.conf \
		$(DESTDIR)$(MODULESLOADDIR)/ummunotify.conf

# What Kbuild needs, whatever the files are called; /usr/src is DKMS's.
DKMS_SRC := $(DESTDIR)/usr/src/ummunotify-$(VERSION)
install-dkms:
	@for f in $(MODULE_DEPS); do \
		install -D -m 644 $$f $(DKMS_SRC)/$$f || exit; \
	done
	sed 's/#MODULE_VERSION#/$(VERSION)/' dkms.conf >$(DKMS_SRC)/dkms.conf
	chmod 644 $(DKMS_SRC)/dkms.conf
	install -m 755 tools/dkms-install-all $(DKMS_SRC)/dkms-install-all

# Packages are built from what is committed, as from a release tarball.
PKG := $(B)/packages
TARBALL := $(PKG)/ummunotify-$(VERSION).tar.gz
dist:
	@mkdir -p $(PKG)
	@git -C $(TOP) diff --quiet HEAD || \
		echo "dist: uncommitted changes are not in the tarball" >&2
	git -C $(TOP) archive --prefix=ummunotify-$(VERSION)/ -o $(TARBALL) HEAD

# The source package too, so that lintian checks it.
deb: dist
	rm -rf $(PKG)/deb
	mkdir -p $(PKG)/deb
	tar -xzf $(TARBALL) -C $(PKG)/deb
	cd $(PKG)/deb/ummunotify-$(VERSION) && dpkg-buildpackage -us -uc

# On a system whose packages are not RPMs (Debian), rpmbuild cannot see
# that the BuildRequires are installed.  RPMBUILD_FLAGS=--nocheck, say.
rpm: dist
	rm -rf $(PKG)/rpm
	mkdir -p $(PKG)/rpm
	tar -xzf $(TARBALL) -O ummunotify-$(VERSION)/ummunotify.spec \
		>$(PKG)/rpm/ummunotify.spec
	rpmbuild -bb $(if $(wildcard /var/lib/dpkg/status),--nodeps) \
		$(RPMBUILD_FLAGS) --define '_topdir $(PKG)/rpm' \
		--define '_sourcedir $(PKG)' $(PKG)/rpm/ummunotify.spec

# The release, for scripts that build the module themselves (run-checks).
version:
	@echo $(VERSION)

clean:
	rm -rf $(B)
