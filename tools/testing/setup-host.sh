#!/bin/sh
# Install what building and testing ummunotify needs on Debian 12: the
# headers of the host's 6.1 on the host, and in chroots of their own
# releases (see lib/roots.sh) bookworm-backports' 6.12, the 5.10 of
# bullseye and the newest 7.x of trixie-backports, with the compilers their
# headers need.  The kernels' images are unpacked in the chroots, never
# installed on the host: an installed image would become the host's
# default boot entry.  The chroots' suites use the URI of the machine's own
# Debian source, so no mirror is named here; the host's apt sources stay
# as they are.  --arm64, for the arm64 guests (run by run-checks' arm64
# checks, make check's last part and make check-arm64, where these are
# missing, and by packages --arm64): QEMU's aarch64 system emulator and
# qemu-user with its binfmt_misc entry, which arm64-root's mmdebstrap and
# builds there use; the host stays single-arch.
#
# Usage: tools/testing/setup-host.sh [--arm64]   (--arm64: those alone)
set -eu

testing=$(cd "$(dirname "$0")" && pwd -P)
# shellcheck source-path=SCRIPTDIR source=lib/cache.sh
. "$testing/lib/cache.sh"
# shellcheck source-path=SCRIPTDIR source=lib/roots.sh
. "$testing/lib/roots.sh"
# shellcheck source-path=SCRIPTDIR source=lib/debian.sh
. "$testing/lib/debian.sh"

# Root installs packages; anyone else asks sudo for it.
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null ||
		{ echo "setup-host: run as root (no sudo here)" >&2; exit 1; }
	exec sudo "$0" --via-sudo "$@"
fi
via_sudo=
[ "${1:-}" != --via-sudo ] || { via_sudo=1; shift; }
arm64_only=
[ "${1:-}" != --arm64 ] || arm64_only=1

uri=$(debian_uri /)
[ -n "$uri" ] || { echo "setup-host: no bookworm apt source found" >&2; exit 1; }
key=/usr/share/keyrings/debian-archive-keyring.gpg

export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes

# The arm64 guests' emulators, and qemu-user's aarch64 entry in
# binfmt_misc, whose file system a container may lack mounted (the
# entry's F flag lets chroots use it).
arm64_host() {
	arm64_packages="qemu-system-arm qemu-user-static binfmt-support arch-test mmdebstrap"
	# grep -c prints 0 and fails when none is installed, which set -e
	# must not take for an error.
	# shellcheck disable=SC2086 # one word per package
	installed=$(dpkg-query -W -f '${Status}\n' $arm64_packages 2>/dev/null |
		{ grep -cx 'install ok installed' || :; })
	# shellcheck disable=SC2086
	if [ "$installed" != "$(echo $arm64_packages | wc -w)" ]; then
		apt-get update -qq
		# shellcheck disable=SC2086
		apt-get install -y -qq --no-install-recommends $arm64_packages >/dev/null
	fi
	[ -e /proc/sys/fs/binfmt_misc/status ] ||
		mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
	[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] ||
		update-binfmts --enable qemu-aarch64
	[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] ||
		{ echo "setup-host: no qemu-aarch64 binfmt entry" >&2; exit 1; }
}
if [ -n "$arm64_only" ]; then
	arm64_host
	echo "setup-host: ready for arm64 guests"
	exit 0
fi

apt-get update -qq

# 6.1's headers pull no image (6.12's would: they are in the chroot).
# socat is the shell of vm-run's peer guest (lib/tests/ofi/two-rxe).
# MPICH installs beside Open MPI, whose mpirun and mpicc stay the default
# alternatives (priority 50 to MPICH's 40); check-ofi uses mpiexec.mpich.
apt-get install -y -qq --no-install-recommends \
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils zstd \
	qemu-system-x86 debootstrap socat \
	linux-headers-amd64 linux-source-6.1 \
	sparse coccinelle pkg-config gcc-multilib \
	rdma-core ibverbs-utils libibverbs-dev ibverbs-providers iproute2 \
	libfabric-dev libfabric-bin openmpi-bin libopenmpi-dev libucx-dev \
	mpich libmpich-dev \
	gnuplot-nox python3 \
	dpkg-dev debhelper dh-dkms dkms fakeroot lintian devscripts blhc rpm \
	>/dev/null
# trixie-root makes the Debian 13 system of the libfabric 2.1 tests,
# debian-root the Debian 12 system the packages are installed into.
apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null

# The 6.1 debug kernel that make check tests (see run-checks) builds from
# here on, ten to sixteen minutes of both cores, while the chroots below
# are made, which mostly waits on the network: make check then finds it
# built.  Not when run through sudo: the user's make check keeps a cache
# of its own (lib/cache.sh), and sudo drops the variables that choose
# the debug kernels.  In a process group of its own, stopped if
# setup-host fails or is stopped; its failure is make check's to report.
debug_kernel=
debug_log=$(cache_root)/debug-kernel-setup.log
case " ${UMMUNOTIFY_DEBUG_KERNELS-6.1} " in
*" 6.1 "*)
	if [ -z "${UMMUNOTIFY_NO_DEBUG_KERNEL:-}$via_sudo" ]; then
		setsid "$testing/debug-kernel" 6.1 >/dev/null 2>"$debug_log" &
		debug_kernel=$!
		trap 'kill -s TERM -- "-$debug_kernel" 2>/dev/null || :' EXIT
		trap 'exit 130' INT
		trap 'exit 143' TERM
	fi
	;;
esac
# Run "apt-get ARGS" (a download) in ROOT, or with ROOT "host -- ROOT" on
# the host, in an empty ROOT/var/cache/ummunotify-debs, where the packages
# land.
# Usage: fetch_debs [host --] ROOT ARGS...
fetch_debs() {
	fetch_in=in_root
	[ "$1" != host ] || { fetch_in=; shift 2; }
	fetch_root=$1
	shift
	rm -rf "$fetch_root/var/cache/ummunotify-debs"
	mkdir -p "$fetch_root/var/cache/ummunotify-debs"
	if [ -n "$fetch_in" ]; then
		in_root "$fetch_root" '' /bin/sh -c 'cd /var/cache/ummunotify-debs &&
			exec apt-get -qq -o APT::Sandbox::User=root "$@"' fetch_debs "$@"
	else
		(cd "$fetch_root/var/cache/ummunotify-debs" &&
			exec apt-get -qq -o APT::Sandbox::User=root "$@")
	fi
}

# Unpack the packages fetch_debs fetched into ROOT there, then depmod KREL.
# Not dpkg -x: it would replace the merged /usr's /lib symlink.
# Usage: unpack_debs ROOT KREL
unpack_debs() {
	for deb in "$1"/var/cache/ummunotify-debs/*.deb; do
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$1" --keep-directory-symlink
	done
	rm -rf "$1/var/cache/ummunotify-debs"
	in_root "$1" '' depmod "$2"
}

# SUITE's chroot, made once, then brought up to date with the newest
# kernel its linux-image-amd64 points at (in KSUITE, SUITE itself or its
# backports): its headers installed there, with the toolchain and kernel-doc's
# perl and python3 for W=1 and sparse; its image and modules unpacked there
# for vm-run.  Older kernels (those with headers) go.  Prints the kernel
# release.
# Usage: kernel_root SUITE KSUITE
kernel_root() {
	suite=$1 ksuite=$2
	root=$(root_of "$suite")

	if [ ! -e "$root/.debootstrapped" ]; then
		rm -rf "$root"
		mkdir -p "${root%/*}"
		debootstrap --variant=minbase --keyring="$key" "$suite" "$root" "$uri" \
			>"$root.log" 2>&1 ||
			{ echo "setup-host: debootstrap $suite failed, see $root.log" >&2; exit 1; }
		touch "$root/.debootstrapped"
	fi
	printf 'deb %s %s main\n' "$uri" "$suite" >"$root/etc/apt/sources.list"
	[ "$ksuite" = "$suite" ] ||
		printf 'deb %s %s main\n' "$uri" "$ksuite" >>"$root/etc/apt/sources.list"
	in_root "$root" '' apt-get update -qq
	image=$(in_root "$root" '' apt-cache show "linux-image-amd64/$ksuite" |
		sed -n 's/^Depends: //p' | head -n1 | tr ',' '\n' |
		sed -n 's/^ *\(linux-image-[0-9][^ ]*\).*/\1/p')
	[ -n "$image" ] || { echo "setup-host: no kernel in $ksuite" >&2; exit 1; }
	krel=${image#linux-image-}
	# 6.12's headers depend on its image, which comes with them, without
	# an initramfs (INITRD=No).
	in_root "$root" '' env INITRD=No apt-get install -y -qq \
		--no-install-recommends -t "$ksuite" build-essential sparse perl \
		python3 kmod "linux-headers-$krel" >/dev/null
	in_root "$root" '' apt-get autoremove -y -qq --purge >/dev/null
	# Other images are unpacked, not installed: nothing boots the chroot,
	# and installing would pull initramfs-tools nobody uses.  7.x images
	# are split into linux-binary, linux-modules and linux-base packages.
	if ! image_of "$root" "$krel" >/dev/null; then
		parts=$(in_root "$root" '' apt-cache show "$image/$ksuite" |
			sed -n 's/^Depends: //p' | head -n1 | tr '|' ',' | tr ',' '\n' |
			sed -n "s|^ *\(linux-[a-z]*-$krel\)\( .*\)\{0,1\}\$|\1/$ksuite|p")
		# shellcheck disable=SC2086 # one word per package
		fetch_debs "$root" download "$image/$ksuite" $parts
		unpack_debs "$root" "$krel"
	fi
	for old in "$root"/lib/modules/*/build; do
		old=${old%/build}
		[ "${old##*/}" != "$krel" ] || continue
		rm -rf "$old" "$root"/boot/*-"${old##*/}"
	done
	echo "$krel"
}

# The image of the host's 6.1 kernel (the newest with headers on the host),
# from the host's apt sources, unpacked in ROOT, the bookworm chroot: the
# host's own /boot may hold another (an older ABI, the cloud flavour).
# Older 6.1 images there go.  Prints the kernel release.
# Usage: host_image ROOT
host_image() {
	root=$1
	krel=$(printf '%s\n' /lib/modules/6.1.*/build | sed 's|^/lib/modules/||; s|/build$||' |
		sort -V | tail -n 1)
	[ -e "/lib/modules/$krel/build" ] ||
		{ echo "setup-host: no 6.1 headers on the host" >&2; exit 1; }
	if ! image_of "$root" "$krel" >/dev/null; then
		fetch_debs host -- "$root" download "linux-image-$krel"
		unpack_debs "$root" "$krel"
	fi
	for old in "$root"/lib/modules/6.1.*; do
		[ "${old##*/}" != "$krel" ] || continue
		rm -rf "$old" "$root"/boot/*-"${old##*/}"
	done
	echo "$krel"
}

# Sparse for a 7.x kernel's C=2.  Its Makefile checks the checker with
# scripts/checker-valid.sh, which Debian's linux-kbuild-7.x package lacks
# (linux-source-7.x has it), on __typeof_unqual__, which trixie's sparse
# 0.6.4 cannot parse: sid's sparse can, and needs only libc, so its binary
# alone goes to the chroot's /usr/local/bin, fetched with an apt
# configuration of its own.  linux-source-7.x is also what debug-kernel 7
# builds, with the packages a kernel build needs.
# Usage: sparse_for_7 ROOT KREL
sparse_for_7() {
	root=$1 krel=$2
	source=linux-source-${krel%.*}
	in_root "$root" '' apt-get install -y -qq --no-install-recommends \
		-t trixie-backports "$source" bc bison flex libelf-dev libssl-dev \
		cpio xz-utils zstd >/dev/null
	scripts=$root/lib/modules/$krel/build/scripts
	if [ ! -e "$scripts/checker-valid.sh" ]; then
		tar -xJf "$root/usr/src/$source.tar.xz" -O \
			"$source/scripts/checker-valid.sh" >"$scripts/checker-valid.sh"
		chmod 755 "$scripts/checker-valid.sh"
	fi
	if [ ! -x "$root/usr/local/bin/sparse" ]; then
		mkdir -p "$root/etc/apt/ummunotify-sid/lists/partial"
		printf 'deb %s sid main\n' "$uri" >"$root/etc/apt/ummunotify-sid/sources.list"
		sid="-o Dir::Etc::sourcelist=/etc/apt/ummunotify-sid/sources.list"
		sid="$sid -o Dir::Etc::sourceparts=-"
		sid="$sid -o Dir::State::Lists=/etc/apt/ummunotify-sid/lists"
		# sid's Release files are valid a week; a mirror may be older.
		sid="$sid -o Acquire::Check-Valid-Until=false"
		# shellcheck disable=SC2086 # the options split
		in_root "$root" '' apt-get -qq $sid update
		# shellcheck disable=SC2086
		fetch_debs "$root" $sid download sparse/sid
		dpkg-deb --fsys-tarfile "$root"/var/cache/ummunotify-debs/sparse_*.deb |
			tar -x -O ./usr/bin/sparse >"$root/usr/local/bin/sparse"
		chmod 755 "$root/usr/local/bin/sparse"
		rm -rf "$root/var/cache/ummunotify-debs"
	fi
	# Built for sid's C library, which may move past trixie's.
	in_root "$root" '' /usr/local/bin/sparse --version >/dev/null || {
		echo "setup-host: sid's sparse does not run in $root" >&2
		exit 1
	}
}

krel_12=$(kernel_root bookworm bookworm-backports)
krel_6=$(host_image "$(root_of bookworm)")
# The guests' busybox (lib/roots.sh's static_busybox).
in_root "$(root_of bookworm)" '' apt-get install -y -qq --no-install-recommends \
	busybox-static >/dev/null
krel_5=$(kernel_root bullseye bullseye)
krel_7=$(kernel_root trixie trixie-backports)
sparse_for_7 "$(root_of trixie)" "$krel_7"
# Where kbuild's in_root mounts this repository in the chroots, made here
# as root: whoever builds there as themselves cannot make it.
top=${testing%/tools/testing}
for suite in bookworm bullseye trixie; do
	mkdir -p "$(root_of "$suite")$top"
done
if [ -n "$debug_kernel" ]; then
	wait "$debug_kernel" ||
		echo "setup-host: the 6.1 debug kernel did not build (see $debug_log); make check says why" >&2
	trap - EXIT INT TERM
fi
echo "setup-host: ready: $krel_5, $krel_6, $krel_12 and $krel_7 in $(cache_root)/roots"
