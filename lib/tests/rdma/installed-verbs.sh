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
# shellcheck source=lib/tests/stage.sh
. "$lib/tests/stage.sh"
stage "$build" stage-verbs
exports "$root/lib/libummunotify-verbs.so.1" \
	"$root/lib/libummunotify-verbs.a" "$lib/verbs/libummunotify-verbs.map"
installed_0644 "$root/lib/libummunotify-verbs.so.1"
# shellcheck disable=SC2046 # one name a word
man_pages 3 $(sed -n 's/^[[:space:]]*\(umn_[a-z_]*\);$/\1/p' \
	"$lib/verbs/libummunotify-verbs.map")

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
client "$build/consumer-verbs" "$build/consumer-verbs.c" libummunotify-verbs
without_device "$build/consumer-verbs"
# libibverbs loads its providers with dlopen(): static, only our two.
# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
${CC:-cc} -o "$build/consumer-verbs-static" "$build/consumer-verbs.c" \
	$(pkg-config --cflags libummunotify-verbs) \
	"$root/lib/libummunotify-verbs.a" "$root/lib/libummunotify.a" \
	-libverbs -pthread
without_device "$build/consumer-verbs-static"
echo "installed-verbs.sh: ok"
