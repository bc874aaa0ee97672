#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# libummunotify-ucx as a site installs it: into a scratch root under
# PREFIX=/opt/umn; it exports exactly libummunotify-ucx.map's symbols, each
# at its node's version, and every function has a man page.  A UCP program
# built against the installed pkg-config file, where /dev/ummunotify does
# not exist (hidden, if this host has it): UCX gets its own hooks back,
# said once at UCX_LOG_LEVEL=info and not at all at UCX's default level.
# The guests' check-ucx tests it on the device.
#
# Usage: tests/ucx/installed-ucx.sh BUILD_DIR
set -eu

build=$1
lib=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=lib/tests/stage.sh
. "$lib/tests/stage.sh"
stage "$build" stage-ucx
map=$lib/ucx/libummunotify-ucx.map
exports "$root/lib/libummunotify-ucx.so.1" "" "$map"
installed_0644 "$root/lib/libummunotify-ucx.so.1"
man_pages 3 umn_ucx_status
man_pages 7 ummunotify-ucx

cat >"$build/consumer-ucx.c" <<'C'
#include <stdio.h>
#include <ucp/api/ucp.h>
#include <ummunotify-ucx.h>

/* A UCP context, whose registration cache calls the library first. */
int main(void)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG,
	};
	struct umn_ucx_status s;
	ucp_context_h context;

	if (ucp_init(&params, NULL, &context) != UCS_OK)
		return 1;
	umn_ucx_status(&s, sizeof(s));
	printf("state %u, error %d, UCX %u.%u\n", s.state, s.error,
	       s.ucx_version[0], s.ucx_version[1]);
	ucp_cleanup(context);
	return 0;
}
C
client "$build/consumer-ucx" "$build/consumer-ucx.c" libummunotify-ucx ucx
# No device: UMN_UCX_NO_DEVICE (2), ENODEV (19), UCX_TLS kept to what
# any host has.  Another UCX than 1.13 and 1.18: refused (3), said at any
# level.
for level in info ''; do
	out=$(UCX_TLS=self,tcp UCX_LOG_LEVEL=${level:-warn} \
	      UCX_MEM_MMAP_HOOK_MODE=none without_device \
	      "$build/consumer-ucx" 2>&1) || fail "the program failed: $out"
	case $out in
	*"state 2, error 19, UCX 1.1"[38]*) ;;
	*"is not a release this library supports (1.13, 1.18)"*"state 3, error 0, UCX "*)
		continue ;;
	*) fail "without the device, yet: $out" ;;
	esac
	said=$(echo "$out" | grep -c '^ummunotify-ucx\[[0-9]*\]: /dev/ummunotify: No such device: UCX uses its own memory hooks$' || true)
	[ "$said" = "$([ -n "$level" ] && echo 1 || echo 0)" ] ||
		fail "at UCX_LOG_LEVEL=${level:-warn}, said $said times: $out"
done
echo "installed-ucx.sh: ok"
