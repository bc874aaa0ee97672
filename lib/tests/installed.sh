#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Install into a scratch root and use the library as a program would:
# through pkg-config, the installed header and the versioned soname.
# Also: the shared library exports exactly libummunotify.map's symbols, each
# at the version node the map puts it in, and the static one the same
# symbols; the shared library is installed 0644; the header's LIBUMMUNOTIFY_VERSION is
# pkg-config's version; every function has a man page.
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
	/* A build host without the module, or whose rule keeps its user out. */
	if (ret == -ENODEV || ret == -EACCES || ret == -EPERM) {
		printf("installed.sh: no device for this user here, as umn_open() says: %s\n",
		       strerror(-ret));
		return 0;
	}
	if (ret)
		return 1;
	printf("installed.sh: device with features %#x\n", umn_features(u));
	return umn_close(u);
}
C
client "$build/consumer" "$build/consumer.c" libummunotify
"$build/consumer"
[ "$("$build/consumer" --version)" = "$(pkg-config --modversion libummunotify)" ] ||
	fail "LIBUMMUNOTIFY_VERSION is not pkg-config's $(pkg-config --modversion libummunotify)"
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -static -o "$build/consumer-static" "$build/consumer.c" \
	$(pkg-config --static --cflags libummunotify) \
	"$root/lib/libummunotify.a" -pthread
"$build/consumer-static"
echo "installed.sh: ok"
