#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-ofi as a site installs it and a program uses it: installed
# into a scratch root under PREFIX=/opt/umn, found through pkg-config,
# linked shared and static.  Also: the shared library exports exactly
# libummunotify-ofi.map's symbols, all at UMMUNOTIFY_OFI_1.0, the static
# one the map's umn_* symbols; the provider is a link, in the prefix, to
# the library; every function has a man page.  Without the device (hidden,
# if this host has it), libfabric loads the provider, which says once that
# it did not import the monitor (in libfabric's log, or whatever the log
# level when FI_MR_CACHE_MONITOR=ummunotify asked for it), and does not
# register: fi_info lists no ummunotify.  The package test's guests check the provider on the device.
#
# Usage: tests/ofi/installed-ofi.sh BUILD_DIR
set -eu

build=$1
lib=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib/tests/stage.sh
. "$lib/tests/stage.sh"
stage "$build" stage-ofi
map=$lib/ofi/libummunotify-ofi.map
exports "$root/lib/libummunotify-ofi.so.1" "$root/lib/libummunotify-ofi.a" \
	"$map"
installed_0644 "$root/lib/libummunotify-ofi.so.1"
prov=$root/lib/libfabric/libummunotify-fi.so
[ "$(readlink "$prov")" = ../libummunotify-ofi.so.1 ] ||
	fail "$prov is not a link to ../libummunotify-ofi.so.1"
# shellcheck disable=SC2046 # one name a word
man_pages 3 $(sed -n 's/^[[:space:]]*\(umn_[a-z_]*\);$/\1/p' "$map")
man_pages 7 ummunotify-ofi

cat >"$build/consumer-ofi.c" <<'C'
#include <stdio.h>
#include <rdma/fabric.h>
#include <ummunotify-ofi.h>

/* Prints what umn_ofi_import() returned, then initialises libfabric. */
int main(void)
{
	struct umn_ofi_stats s;
	struct fi_info *info = NULL;
	int ret = umn_ofi_import();

	umn_ofi_stats(&s, sizeof(s));
	printf("import %d, imported %d\n", ret, s.imported);
	fflush(stdout);
	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);
	return 0;
}
C
# It calls libfabric itself, so it names it too.
client "$build/consumer-ofi" "$build/consumer-ofi.c" libummunotify-ofi libfabric
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -o "$build/consumer-ofi-static" "$build/consumer-ofi.c" \
	$(pkg-config --cflags libummunotify-ofi) \
	"$root/lib/libummunotify-ofi.a" "$root/lib/libummunotify.a" \
	$(pkg-config --libs libfabric) -pthread ||
	fail "cannot link the static library"
# Naming one of libfabric's monitors keeps it, silently, before the
# device is looked at: EPERM (1).
out=$(FI_MR_CACHE_MONITOR=memhooks FI_PROVIDER_PATH=$root/lib/libfabric \
	without_device "$build/consumer-ofi" 2>&1) ||
	fail "the program failed: $out"
[ "$out" = "import -1, imported 0" ] ||
	fail "FI_MR_CACHE_MONITOR=memhooks, yet: $out"

# No device: ENODEV (19).
[ "$(without_device "$build/consumer-ofi-static")" = "import -19, imported 0" ] ||
	fail "the static program did not see ENODEV"

# The provider, from the installed directory, without the device: silent
# as a provider is (every rank of every program would say it), one line
# in libfabric's log at level warn, and no registration.  A device that
# is there but denied (EACCES, EPERM) it says on stderr at any level: an
# unprivileged host cannot make such a node, so that is not checked here.
out=$(FI_PROVIDER_PATH=$root/lib/libfabric without_device \
	"$build/consumer-ofi" 2>&1) || fail "the program failed: $out"
[ "$out" = "import -19, imported 0" ] ||
	fail "expected no word about the missing device, got: $out"
out=$(FI_LOG_LEVEL=warn FI_PROVIDER_PATH=$root/lib/libfabric without_device \
	"$build/consumer-ofi" 2>&1) || fail "the program failed: $out"
[ "$(echo "$out" | grep -c 'ummunotify:mr:.*<warn> the ummunotify memory monitor is not imported (no /dev/ummunotify)')" = 1 ] ||
	fail "expected one warning about the missing device, got: $out"
command -v fi_info >/dev/null || fail "no fi_info (libfabric-bin) to list the providers"
# A program that does not link the library (fi_info) loads the provider,
# installed and from the build tree, without LD_LIBRARY_PATH: its run
# path finds libummunotify.so.1.  It then says that it did not import the
# monitor; before, dlopen() failed, and libfabric said nothing.
for dir in "$root/lib/libfabric" "$build/ofi"; do
	out=$(LD_LIBRARY_PATH='' FI_PROVIDER_PATH=$dir FI_LOG_LEVEL=info \
		without_device fi_info -l 2>&1 >/dev/null) || true
	echo "$out" | grep -q 'ummunotify:mr:.*not imported (no /dev/ummunotify)' ||
		fail "libfabric did not load the provider from $dir: no word from it"
done
# A program with libfabric.a linked in statically loads the provider,
# whose DT_NEEDED brings in libfabric.so.1, a second libfabric: the
# import would go there, where no cache of the program's looks.  The
# provider says so (FI_LOG_LEVEL) and stays out.  libfabric.a's own
# dependencies are linked as the files the loader finds (no -dev links).
cat >"$build/static-libfabric.c" <<'C'
#include <rdma/fabric.h>

int main(void)
{
	struct fi_info *info = NULL;

	fi_getinfo(FI_VERSION(1, 13), NULL, NULL, 0, NULL, &info);
	fi_freeinfo(info);
	return 0;
}
C
libdir=$(PKG_CONFIG_SYSROOT_DIR='' pkg-config --variable=libdir libfabric)
# Fedora and RHEL ship no libfabric.a: said, not failed (the RPM %check
# runs this).
if [ ! -e "$libdir/libfabric.a" ]; then
	echo "skip - installed-ofi.sh: a program with libfabric linked statically (no $libdir/libfabric.a)"
else
	set -- "$libdir/libfabric.a"
	for l in $(PKG_CONFIG_SYSROOT_DIR='' pkg-config --static --libs-only-l libfabric); do
		[ "$l" = -lfabric ] && continue
		f=$l
		for c in "$libdir/lib${l#-l}.so" "$libdir/lib${l#-l}.so".*; do
			[ -e "$c" ] && { f=$c; break; }
		done
		set -- "$@" "$f"
	done
	${CC:-cc} -o "$build/static-libfabric" "$build/static-libfabric.c" "$@" ||
		fail "cannot link a program with libfabric.a"
	out=$(FI_LOG_LEVEL=warn FI_PROVIDER_PATH=$root/lib/libfabric without_device \
		"$build/static-libfabric" 2>&1) || fail "the program failed: $out"
	echo "$out" | grep -q 'not imported: the libfabric in .*static-libfabric loaded the provider, which imports into another one' ||
		fail "libfabric.a loaded the provider, which did not say so: $out"
fi

# Its parameter is libfabric's, which fi_info -e lists.
FI_PROVIDER_PATH=$root/lib/libfabric without_device fi_info -e 2>/dev/null |
	grep -q '^# FI_UMMUNOTIFY_MAX_WATCHES: Integer' ||
	fail "fi_info -e does not list FI_UMMUNOTIFY_MAX_WATCHES"
list=$(FI_PROVIDER_PATH=$root/lib/libfabric without_device fi_info -l \
	2>/dev/null) || true
case $list in
*ummunotify*) fail "fi_info -l lists ummunotify with nothing imported" ;;
esac
# Asked for by name, it says so, whatever the log level; a name libfabric
# does not know (a typo) leaves libfabric's default, which is this
# monitor: it tries, silently.
out=$(FI_MR_CACHE_MONITOR=ummunotify FI_PROVIDER_PATH=$root/lib/libfabric \
	without_device "$build/consumer-ofi" 2>&1) ||
	fail "the program failed: $out"
case $out in
*"FI_MR_CACHE_MONITOR=ummunotify, but the ummunotify memory monitor is not imported (no /dev/ummunotify)"*) ;;
*) fail "FI_MR_CACHE_MONITOR=ummunotify without a device, yet: $out" ;;
esac
out=$(FI_MR_CACHE_MONITOR=memhook FI_PROVIDER_PATH=$root/lib/libfabric \
	without_device "$build/consumer-ofi" 2>&1) ||
	fail "the program failed: $out"
[ "$out" = "import -19, imported 0" ] ||
	fail "FI_MR_CACHE_MONITOR=memhook (a typo), yet: $out"
echo "installed-ofi.sh: ok"
