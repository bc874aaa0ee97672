# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2154 # cache_places is lib/cache.sh's
# Sourced after lib/cache.sh.  The kernels the guests boot live in minimal
# chroots of their releases, made by setup-host.sh under
# $(cache_root)/roots/SUITE (bullseye's 5.10, trixie-backports' 7.x, and
# in the bookworm one bookworm-backports' 6.12 and the image of the host's
# 6.1): headers that need their release's compiler (or, 6.12's, pull an
# image) are installed there, and vm-run boots the images with their
# modules.  No image is installed on the host, so what it boots stays
# its own.  A kernel in a chroot is preferred to the host's of the same
# release: the host's may be left over from an older set-up.

# Print the root of SUITE's chroot (it may not exist yet).
root_of() {
	echo "$(cache_root)/roots/$1"
}

# Print "KREL ROOT" for every kernel whose headers are installed, by
# version, ROOT being the chroot's directory (whose build links may be
# absolute, to be followed inside the chroot) or, for the host's, "/".
# Creates nothing.
list_kernels() {
	(
	IFS='
'
	for r_place in $cache_places; do
		for r_build in "$r_place"/roots/*/lib/modules/*/build; do
			echo "$r_build"
		done
	done
	for r_build in /lib/modules/*/build; do
		[ ! -e "$r_build/Makefile" ] || echo "$r_build"
	done
	) | while read -r r_build; do
		r_krel=${r_build%/build}
		r_krel=${r_krel##*/}
		case $r_build in
		/lib/modules/*)
			echo "$r_krel /"
			continue ;;
		esac
		r_root=${r_build%/lib/modules/*}
		r_target=$(readlink "$r_build") || continue
		case $r_target in
		/*) r_target=$r_root$r_target ;;
		*) r_target=${r_build%/build}/$r_target ;;
		esac
		[ ! -e "$r_target/Makefile" ] || echo "$r_krel $r_root"
	done | sort -V -u -k1,1		# the first of a release: a chroot's
}

# Print the image of KREL installed in ROOT: /boot/vmlinuz-KREL, or where
# Debian packages it since 6.17, /lib/modules/KREL/vmlinuz; or fail.
# Usage: image_of ROOT KREL
image_of() {
	for r_image in "${1%/}/boot/vmlinuz-$2" "${1%/}/lib/modules/$2/vmlinuz"; do
		[ ! -e "$r_image" ] || { echo "$r_image"; return 0; }
	done
	return 1
}

# Print the root (a chroot, else /) that KREL's image is installed in, or
# fail.
root_of_image() {
	(
	IFS='
'
	for r_place in $cache_places; do
		for r_root in "$r_place"/roots/*; do
			! image_of "$r_root" "$1" >/dev/null || { echo "$r_root"; exit 0; }
		done
	done
	image_of / "$1" >/dev/null && echo /
	)
}

# Print the static busybox the guests' initramfs holds, the bookworm
# chroot's: setup-host.sh installs busybox-static there, not on the host,
# where it would replace busybox and make the host's initramfs again.  Or
# fail.
static_busybox() {
	(
	IFS='
'
	for r_place in $cache_places; do
		[ ! -x "$r_place/roots/bookworm/bin/busybox" ] ||
			{ echo "$r_place/roots/bookworm/bin/busybox"; exit 0; }
	done
	exit 1
	)
}

# Print the root that KREL's headers are installed in, or fail.
root_of_kernel() {
	list_kernels | awk -v k="$1" '$1 == k { print $2; found = 1; exit }
		END { exit !found }'
}

# Run CMD in ROOT, in the caller's directory if ROOT has it (else in /),
# with the host's /dev and /proc and with DIRS (a colon-separated list,
# maybe empty: the repository, a kernel tree, wherever CMD reads and
# writes) at their host paths.  A private mount namespace (as root, or as
# the caller mapped to root in a user namespace) keeps these mounts from
# outliving CMD.  A directory ROOT lacks is made there, which only its
# owner can do: for the repository, the script that made a system root
# owns makes it (setup-host.sh, arm64-root).
# Usage: in_root ROOT DIRS CMD [ARGS...]
in_root() {
	r_ns='--mount --propagation private'
	[ "$(id -u)" = 0 ] || r_ns="--map-root-user $r_ns"
	# shellcheck disable=SC2016,SC2086 # the inner shell expands; $r_ns splits
	unshare $r_ns -- /bin/sh -euc '
		root=$1 dirs=$2
		shift 2
		mount --rbind /dev "$root/dev"
		mount --rbind /proc "$root/proc"
		IFS=:
		for dir in $dirs; do
			[ -d "$root$dir" ] || mkdir -p "$root$dir" || {
				echo "in_root: no $dir in $root to mount it on, and only root can make it there" >&2
				exit 1
			}
			mount --bind "$dir" "$root$dir"
		done
		unset IFS
		exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$PWD" "$@"
	' in_root "$@"
}
