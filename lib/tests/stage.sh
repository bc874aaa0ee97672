# shellcheck shell=sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# Sourced by the installed*.sh tests, with $lib the library's source
# directory: the libraries as a site installs them, into a scratch root
# under PREFIX=/opt/umn, and a client built against them.
#
#   stage BUILD_DIR NAME       "make install" into BUILD_DIR/NAME; sets
#                              $stage and $root (the prefix in it), and
#                              points pkg-config, the linker and the loader
#                              at it
#   exports SO ARCHIVE MAP     SO exports exactly MAP's symbols, each at its
#                              version nodes (the newest the default);
#                              ARCHIVE (unless "") defines MAP's umn_* ones
#                              and no other global symbol
#   installed_0644 FILE        FILE (a shared library) is installed 0644
#   man_pages SECTION NAME...  each NAME has a man page in SECTION
#   client OUT SRC MODULE...   SRC built, warning-free, against the
#                              installed pkg-config MODULEs
#   without_device CMD...      CMD where /dev/ummunotify does not exist,
#                              whether or not this host has it
#   fail MESSAGE               the test fails, saying why

fail() {
	echo "${0##*/}: $*" >&2
	exit 1
}

# shellcheck disable=SC2154 # $lib is the sourcing test's
stage() {
	stage=$1/$2
	root=$stage/opt/umn
	rm -rf "$stage"
	make -s -C "$lib" O="$1" install DESTDIR="$stage" PREFIX=/opt/umn \
		>/dev/null || fail "make install DESTDIR=$stage failed"
	export PKG_CONFIG_PATH="$root/lib/pkgconfig"
	export PKG_CONFIG_SYSROOT_DIR="$stage"
	# Where the loader finds the libraries outside /usr, for the
	# programs and for what libfabric loads with dlopen().
	export LD_LIBRARY_PATH="$root/lib"
}

exports() {
	# A name in several nodes has its newest as the default (@@), and
	# keeps the older ones for the programs built against them (@).
	versioned=$(awk '/^[A-Z][A-Z0-9_.]* {/ { node = $1 }
		/^[[:space:]]*[a-z][a-z_]*;$/ {
			sub(/;/, "")
			if ($1 in newest)
				print $1 "@" newest[$1]
			newest[$1] = node
		}
		END { for (name in newest) print name "@@" newest[name] }' \
		"$3" | sort)
	have=$(nm -D --defined-only "$1" | awk '$2 == "T" { print $3 }' | sort)
	[ "$have" = "$versioned" ] ||
		fail "${1##*/}'s exported symbols differ from ${3##*/}: $have"
	[ -n "$2" ] || return 0
	have=$(nm -g --defined-only "$2" | awk 'NF == 3 { print $3 }' | sort)
	[ "$have" = "$(echo "$versioned" | sed -n 's/^\(umn[a-z_]*\)@@.*/\1/p')" ] ||
		fail "${2##*/}'s global symbols differ from ${3##*/}'s umn_ ones: $have"
}

installed_0644() {
	mode=$(stat -L -c %a "$1")
	[ "$mode" = 644 ] || fail "${1##*/} installed $mode, not 644"
}

man_pages() {
	section=$1
	shift
	for f; do
		[ -e "$root/share/man/man$section/$f.$section" ] ||
			fail "no man page for $f"
	done
}

client() {
	out=$1 src=$2
	shift 2
	# shellcheck disable=SC2046 # word splitting of pkg-config output wanted
	${CC:-cc} -Wall -Wextra -Werror -o "$out" "$src" \
		$(pkg-config --cflags --libs "$@") ||
		fail "cannot build $src against the installed $*"
}

# A package build's tests must not depend on the build host's device: CMD
# runs in a mount namespace (of a user namespace, which needs no privilege)
# whose /dev has the host's entries but ummunotify, on a tmpfs mounted on
# $stage/dev.  Where user namespaces are forbidden (a container's seccomp
# profile), a host without the device runs CMD as it is, and one with it
# cannot run the checks.
# shellcheck disable=SC2016 # expanded by the namespace's shell
hide_device='dev=$1
shift
mount -t tmpfs -o mode=755 tmpfs "$dev"
for f in /dev/*; do
	n=${f#/dev/}
	if [ "$n" = ummunotify ]; then
		continue
	elif [ -L "$f" ]; then
		cp -P "$f" "$dev/$n"
	elif [ -d "$f" ]; then
		mkdir "$dev/$n" && mount --rbind "$f" "$dev/$n"
	else
		: >"$dev/$n" && mount --bind "$f" "$dev/$n"
	fi
done
mount --rbind "$dev" /dev
exec "$@"'

# shellcheck disable=SC2154 # $stage is stage()'s
without_device() {
	if unshare --user --map-root-user --mount true 2>/dev/null; then
		mkdir -p "$stage/dev"
		unshare --user --map-root-user --mount sh -ec "$hide_device" \
			sh "$stage/dev" "$@"
	elif [ ! -e /dev/ummunotify ]; then
		"$@"
	else
		fail "cannot hide this host's /dev/ummunotify without user namespaces (unshare -rm): run these checks elsewhere, or build with DEB_BUILD_OPTIONS=nocheck"
	fi
}
