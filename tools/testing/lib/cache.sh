# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Sourced by debug-kernel, vm-run and the scripts that make guests'
# systems.  Kernel builds, initramfs images and the KVM probe result live
# outside the repository, so that a fresh clone or a "git clean" does not
# throw away a twelve-minute kernel build.

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

# Hold FILE's lock (made if missing) on file descriptor FD until the
# caller exits or closes FD, saying what it waits for (WHAT) while another
# holds it.  Opened for reading, which flock needs no more than: a lock
# file root made (arm64-root, through sudo) serves users too.
# Usage: lock_wait FD FILE WHAT
lock_wait() {
	[ -e "$2" ] || : >>"$2"
	eval "exec $1<\"\$2\""
	if ! flock -n "$1"; then
		echo "${0##*/}: waiting for $3" >&2
		flock "$1"
	fi
}

# Hold, until the caller exits or cpu_unlock, the lock that makes guests
# and kernel builds run one at a time: each keeps both cores busy, and two
# at once under TCG take more than twice as long and trip the guest's RCU
# stall detector.
cpu_lock() {
	lock_wait 8 "$(cache_root)/cpu.lock" "another guest or kernel build"
}

# Let cpu_lock go before running what takes it itself (vm-run): the
# child's own open of the file would wait for this process's hold for
# ever.
cpu_unlock() {
	exec 8<&-
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

# Run CMD without the descriptors 3 to 9, which the scripts here keep
# their locks on: mmdebstrap gives apt the lowest free descriptor for
# dpkg's hook, which dash reads as one digit ("cat >&11" is a syntax
# error there), so a caller holding too many makes it fail.  The locks
# stay held: the caller keeps its descriptors.
without_locks() {
	"$@" 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-
}
