#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Install into a scratch root and use the library as a program would:
# through pkg-config, the installed header and the versioned soname.
# Also: the shared library exports exactly libummunotify.map's symbols, each
# at the version node the map puts it in, and the static one the same
# symbols, and a shared object can take it in; a program built before 1.3
# keeps its umn_cache_create(); the shared library is installed 0644; the header's LIBUMMUNOTIFY_VERSION is pkg-config's
# version; every function has a man page; without the device
# (hidden, if this host has it), umn_open() says ENODEV.
#
# Usage: tests/installed.sh BUILD_DIR
set -eu

build=$1
lib=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/tests/stage.sh
. "$lib/tests/stage.sh"
stage "$build" stage
exports "$root/lib/libummunotify.so.1" "$root/lib/libummunotify.a" \
	"$lib/libummunotify.map"
installed_0644 "$root/lib/libummunotify.so.1"

# The exported functions but the private one, and the inline ones.
# shellcheck disable=SC2046 # one name a word
man_pages 3 $(sed -n 's/^[[:space:]]*\(umn_[a-z][a-z_]*\);$/\1/p' \
	"$lib/libummunotify.map") umn_valid umn_changed
if command -v man >/dev/null; then
	for page in "$root"/share/man/man*/*; do
		out=$(cd "$root/share/man" && LC_ALL=C MANWIDTH=80 \
		      man --warnings -l "${page#"$root"/share/man/}" 2>&1 \
		      >/dev/null) || fail "$page: man failed"
		[ -z "$out" ] || fail "$page: $out"
	done
fi

cat >"$build/consumer.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <ummunotify.h>

#if LIBUMMUNOTIFY_VERSION < LIBUMMUNOTIFY_VERSION_CODE(1, 0, 0)
#error "LIBUMMUNOTIFY_VERSION does not compare in #if"
#endif

int main(int argc, char **argv)
{
	struct umn *u;
	int ret;

	(void)argv;
	if (argc > 1) {
		printf("%d.%d.%d\n", LIBUMMUNOTIFY_VERSION >> 16,
		       (LIBUMMUNOTIFY_VERSION >> 8) & 0xff,
		       LIBUMMUNOTIFY_VERSION & 0xff);
		return 0;
	}
	ret = umn_open(&u, NULL);
	if (ret != -ENODEV) {
		printf("installed.sh: umn_open() without the device: %s, not ENODEV\n",
		       ret ? strerror(-ret) : "success");
		if (!ret)
			umn_close(u);
		return 1;
	}
	return 0;
}
C
client "$build/consumer" "$build/consumer.c" libummunotify
without_device "$build/consumer"
[ "$("$build/consumer" --version)" = "$(pkg-config --modversion libummunotify)" ] ||
	fail "LIBUMMUNOTIFY_VERSION is not pkg-config's $(pkg-config --modversion libummunotify)"
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -static -o "$build/consumer-static" "$build/consumer.c" \
	$(pkg-config --static --cflags libummunotify) \
	"$root/lib/libummunotify.a" -pthread
without_device "$build/consumer-static"
# A program built before 1.3 keeps its umn_cache_create(), which reads
# its attr, 56 bytes, and not a byte more: here the attr ends where a
# page no access is allowed to begins.
cat >"$build/consumer-1.0.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ummunotify.h>

/* struct umn_cache_attr as the 1.0 header had it. */
struct attr_1_0 {
	int (*reg)(void *arg, void *addr, size_t len, void **handle);
	void (*dereg)(void *arg, void *addr, size_t len, void *handle);
	void *arg;
	size_t max_entries, max_bytes, align;
	void (*forget)(void *arg, void *addr, size_t len, void *handle);
};

int create_1_0(struct umn *u, const struct attr_1_0 *attr,
	       struct umn_cache **c);
__asm__(".symver create_1_0, umn_cache_create@UMMUNOTIFY_1.0");

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct umn_cache *c;
	struct attr_1_0 *attr;
	char *p = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int ret;

	if (p == MAP_FAILED || mprotect(p + page, page, PROT_NONE))
		return 2;
	attr = (struct attr_1_0 *)(p + page - sizeof(*attr));
	/* No reg(): refused once read, before any handle is used. */
	ret = create_1_0(NULL, attr, &c);
	if (ret != -EINVAL) {
		printf("installed.sh: umn_cache_create@UMMUNOTIFY_1.0: %d, not -EINVAL\n",
		       ret);
		return 1;
	}
	return 0;
}
C
client "$build/consumer-1.0" "$build/consumer-1.0.c" libummunotify
"$build/consumer-1.0" ||
	fail "umn_cache_create@UMMUNOTIFY_1.0 reads past a 1.0 attr (or fails)"
# A shared object may take the archive in (a plugin that bundles it):
# no symbol versions in the archive, which its version script lacks.
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -shared -fPIC -o "$build/consumer.so" "$build/consumer.c" \
	$(pkg-config --static --cflags libummunotify) \
	"$root/lib/libummunotify.a" -pthread ||
	fail "libummunotify.a cannot be linked into a shared object"
echo "installed.sh: ok"
