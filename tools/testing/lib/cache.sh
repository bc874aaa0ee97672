# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Sourced by debug-kernel, vm-run and the scripts that make guests' systems.  Kernel builds, initramfs images and the
# KVM probe result live outside the repository, so that a fresh clone or a
# "git clean" does not throw away a twelve-minute kernel build.

# Where the cache may be: $UMMUNOTIFY_CACHE, else a system-wide directory,
# else the user's cache when the system one is not writable.
cache_places="${UMMUNOTIFY_CACHE:-/var/cache/ummunotify}
${XDG_CACHE_HOME:-$HOME/.cache}/ummunotify"

# Print the cache root, creating it.
cache_root() {
	(
	IFS='
'
	for dir in $cache_places; do
		if mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; then
			echo "$dir"
			exit 0
		fi
	done
	echo "no writable cache directory" >&2
	exit 1
	)
}

# Hold, until the caller exits, the lock that makes guests and kernel builds
# run one at a time: each keeps both cores busy, and two at once under TCG
# take more than twice as long and trip the guest's RCU stall detector.
cpu_lock() {
	exec 8>"$(cache_root)/cpu.lock"
	if ! flock -n 8; then
		echo "${0##*/}: waiting for another guest or kernel build" >&2
		flock 8
	fi
}

# Hold DIR, a cached system its maker printed, until the caller exits or
# closes FD: a shared lock on its .made (there once it is whole), which
# any number of runs hold at once and cache_remove will not remove a
# system under.  Fails if DIR was removed, or made again, before it was
# held.
# Usage: cache_hold FD DIR
cache_hold() {
	# shellcheck disable=SC3013 # dash's test has -ef, as bash's
	if [ -e "$2/.made" ] && eval "exec $1<\"\$2/.made\"" &&
	   flock -s "$1" && [ "$2/.made" -ef "/dev/fd/$1" ]; then
		return 0
	fi
	echo "${0##*/}: $2 was removed before it could be held: run again" >&2
	return 1
}

# Remove the cached systems DIR... that mmdebstrap made, but those a run
# holds (cache_hold), which are left, saying so.  One it was killed while
# making still has its /proc, /sys and /dev/pts mounted: those are
# unmounted first, and rm stays on the system's own file system should one
# not be, so it never walks into the host's.
cache_remove() {
	for dir; do
		dir=${dir%/}
		(
		if [ -e "$dir/.made" ]; then
			exec 7<"$dir/.made"
			flock -xn 7 || { echo "${0##*/}: $dir is in use, left" >&2; exit 0; }
		fi
		awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' \
			/proc/self/mountinfo | sort -r |
			while read -r mnt; do umount -l "$mnt" || :; done
		rm -rf --one-file-system "$dir"
		)
	done
}
