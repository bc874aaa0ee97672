#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-verbs as a program uses it: installed into a scratch root,
# found through pkg-config, linked shared and static.  Also: the shared
# library exports exactly libummunotify-verbs.map's symbols, all at
# UMMUNOTIFY_VERBS_1.0, the static one the same symbols, the shared one is
# installed 0644, and every function has a man page.  The program
# runs with no RDMA device on the host: it stops at ibv_alloc_pd().
#
# Usage: tests/rdma/installed-verbs.sh BUILD_DIR
set -eu

build=$1
lib=$(cd "$(dirname "$0")/../.." && pwd)
stage=$build/stage-verbs
root=$stage/opt/umn
rm -rf "$stage"
make -s -C "$lib" O="$build" install DESTDIR="$stage" PREFIX=/opt/umn \
	>/dev/null

fail() { echo "installed-verbs.sh: $*" >&2; exit 1; }

want=$(sed -n 's/^[[:space:]]*\(umn[a-z_]*\);$/\1/p' \
	"$lib/verbs/libummunotify-verbs.map" | sort)
have=$(nm -D --defined-only "$root/lib/libummunotify-verbs.so.1" |
	awk '$3 ~ /^umn/ { print $3 }' | sort)
[ "$have" = "$(echo "$want" | sed 's/$/@@UMMUNOTIFY_VERBS_1.0/')" ] ||
	fail "exported symbols differ from libummunotify-verbs.map: $have"
have=$(nm -g --defined-only "$root/lib/libummunotify-verbs.a" |
	awk 'NF == 3 { print $3 }' | sort)
[ "$have" = "$want" ] ||
	fail "libummunotify-verbs.a's global symbols differ from the map: $have"
mode=$(stat -L -c %a "$root/lib/libummunotify-verbs.so.1")
[ "$mode" = 644 ] || fail "libummunotify-verbs.so.1 installed $mode, not 644"
for f in $want; do
	[ -e "$root/share/man/man3/$f.3" ] || fail "no man page for $f"
done

cat >"$build/consumer-verbs.c" <<'C'
#include <stdio.h>
#include <ummunotify-verbs.h>

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct umn_mr_cache *cache;
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	if (!list || !list[0] || !(ctx = ibv_open_device(list[0])) ||
	    !(pd = ibv_alloc_pd(ctx))) {
		puts("installed-verbs.sh: no RDMA device here");
		return 0;
	}
	cache = umn_mr_cache_create(pd, NULL);
	if (!cache)
		perror("installed-verbs.sh: umn_mr_cache_create");
	umn_mr_cache_destroy(cache);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
C
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$stage"
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -Wall -Wextra -Werror -o "$build/consumer-verbs" \
	"$build/consumer-verbs.c" \
	$(pkg-config --cflags --libs libummunotify-verbs)
LD_LIBRARY_PATH="$root/lib" "$build/consumer-verbs"
# libibverbs loads its providers with dlopen(): static, only our two.
# shellcheck disable=SC2046
${CC:-cc} -o "$build/consumer-verbs-static" "$build/consumer-verbs.c" \
	$(pkg-config --cflags libummunotify-verbs) \
	"$root/lib/libummunotify-verbs.a" "$root/lib/libummunotify.a" \
	-libverbs -pthread
"$build/consumer-verbs-static"
echo "installed-verbs.sh: ok"
