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
stage=$build/stage
rm -rf "$stage"
make -s -C "$lib" O="$build" install DESTDIR="$stage" PREFIX=/opt/umn \
	>/dev/null

fail() { echo "installed.sh: $*" >&2; exit 1; }

want=$(sed -n 's/^[[:space:]]*\(umn[a-z_]*\);$/\1/p' "$lib/libummunotify.map" |
	sort)
versioned=$(awk '/^UMMUNOTIFY_[0-9.]* {/ { node = $1 }
	/^[[:space:]]*umn[a-z_]*;$/ { sub(/;/, ""); print $1 "@@" node }' \
	"$lib/libummunotify.map" | sort)
have=$(nm -D --defined-only "$stage/opt/umn/lib/libummunotify.so.1" |
	awk '$3 ~ /^umn/ { print $3 }' | sort)
[ "$have" = "$versioned" ] ||
	fail "exported symbols differ from libummunotify.map: $have"
have=$(nm -g --defined-only "$stage/opt/umn/lib/libummunotify.a" |
	awk 'NF == 3 { print $3 }' | sort)
[ "$have" = "$want" ] ||
	fail "libummunotify.a's global symbols differ from libummunotify.map: $have"
mode=$(stat -L -c %a "$stage/opt/umn/lib/libummunotify.so.1")
[ "$mode" = 644 ] || fail "libummunotify.so.1 installed $mode, not 644"

# The exported functions but the private one, and the inline ones.
for f in $(echo "$want" | grep -v '^umn__') umn_valid umn_changed; do
	[ -e "$stage/opt/umn/share/man/man3/$f.3" ] || fail "no man page for $f"
done
if command -v man >/dev/null; then
	for page in "$stage"/opt/umn/share/man/man*/*; do
		out=$(cd "$stage/opt/umn/share/man" && LC_ALL=C MANWIDTH=80 \
		      man --warnings -l "${page#"$stage"/opt/umn/share/man/}" 2>&1 \
		      >/dev/null) || fail "$page: man failed"
		[ -z "$out" ] || fail "$page: $out"
	done
fi

cat >"$build/consumer.c" <<'C'
#include <errno.h>
#include <stdio.h>
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
	if (ret == -ENODEV) {
		puts("installed.sh: no device here, as umn_open() says");
		return 0;
	}
	if (ret)
		return 1;
	printf("installed.sh: device with features %#x\n", umn_features(u));
	return umn_close(u);
}
C
export PKG_CONFIG_PATH="$stage/opt/umn/lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$stage"
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -Wall -Wextra -Werror -o "$build/consumer" "$build/consumer.c" \
	$(pkg-config --cflags --libs libummunotify) \
	-Wl,-rpath,"$stage/opt/umn/lib"
"$build/consumer"
[ "$("$build/consumer" --version)" = "$(pkg-config --modversion libummunotify)" ] ||
	fail "LIBUMMUNOTIFY_VERSION is not pkg-config's $(pkg-config --modversion libummunotify)"
${CC:-cc} -static -o "$build/consumer-static" "$build/consumer.c" \
	$(pkg-config --static --cflags libummunotify) \
	"$stage/opt/umn/lib/libummunotify.a" -pthread
"$build/consumer-static"
echo "installed.sh: ok"
