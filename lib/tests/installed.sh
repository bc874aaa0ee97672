#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Install into a scratch root and use the library as a program would:
# through pkg-config, the installed header and the versioned soname.
# Also: the shared library exports exactly libummunotify.map's symbols, all
# at UMMUNOTIFY_1.0, and every function has a man page.
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
have=$(nm -D --defined-only "$stage/opt/umn/lib/libummunotify.so.1" |
	awk '$3 ~ /^umn/ { print $3 }' | sort)
[ "$have" = "$(echo "$want" | sed 's/$/@@UMMUNOTIFY_1.0/')" ] ||
	fail "exported symbols differ from libummunotify.map: $have"

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

int main(void)
{
	struct umn *u;
	int ret = umn_open(&u, NULL);

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
${CC:-cc} -static -o "$build/consumer-static" "$build/consumer.c" \
	$(pkg-config --static --cflags libummunotify) \
	"$stage/opt/umn/lib/libummunotify.a" -pthread
"$build/consumer-static"
echo "installed.sh: ok"
