# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Sourced by debug-kernel and vm-run.  Kernel builds, initramfs images and the
# KVM probe result live outside the repository, so that a fresh clone or a
# "git clean" does not throw away a twelve-minute kernel build.

# Print the cache root, creating it: $UMMUNOTIFY_CACHE, else a system-wide
# directory, else the user's cache when the system one is not writable.
cache_root() {
	for dir in "${UMMUNOTIFY_CACHE:-/var/cache/ummunotify}" \
		   "${XDG_CACHE_HOME:-$HOME/.cache}/ummunotify"; do
		if mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then
			echo "$dir"
			return 0
		fi
	done
	echo "no writable cache directory" >&2
	return 1
}
