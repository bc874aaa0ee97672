#!/bin/sh
# Install what building and testing ummunotify needs on Debian 12.
# The backports suite (for the 6.12 kernel) is added with the URI of the
# machine's own Debian source, so no mirror is named here.
set -eu

# Root installs packages; anyone else asks sudo for it.
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null ||
		{ echo "setup-host: run as root (no sudo here)" >&2; exit 1; }
	exec sudo "$0" "$@"
fi

# shellcheck source-path=SCRIPTDIR source=lib/debian.sh
. "$(dirname "$0")/lib/debian.sh"

bpo=/etc/apt/sources.list.d/ummunotify-backports.sources
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	uri=$(debian_uri)
	[ -n "$uri" ] || { echo "setup-host: no bookworm apt source found" >&2; exit 1; }
	key=/usr/share/keyrings/debian-archive-keyring.gpg
	printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s\n' \
		"$uri" "$key" > "$bpo"
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq

# The 6.12 kernel the backports meta-packages point at.
bpo_image=$(bpo_dep linux-image-amd64)
bpo_headers=$(bpo_dep linux-headers-amd64)
if [ -z "$bpo_image" ] || [ -z "$bpo_headers" ]; then
	echo "setup-host: no kernel in bookworm-backports" >&2
	exit 1
fi

apt-get install -y -qq --no-install-recommends \
	build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils zstd \
	qemu-system-x86 busybox-static \
	linux-image-amd64 linux-headers-amd64 linux-source-6.1 \
	sparse coccinelle pkg-config gcc-multilib \
	rdma-core ibverbs-utils libibverbs-dev ibverbs-providers iproute2 \
	libfabric-dev libfabric-bin openmpi-bin libopenmpi-dev \
	gnuplot-nox python3 \
	dpkg-dev debhelper dh-dkms dkms fakeroot lintian devscripts blhc rpm \
	>/dev/null
apt-get install -y -qq --no-install-recommends -t bookworm-backports \
	"$bpo_image" "$bpo_headers" >/dev/null
# trixie-root makes the Debian 13 system of the libfabric 2.1 tests,
# debian-root the Debian 12 system the packages are installed into.
apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
echo "setup-host: ready: $bpo_image and the 6.1 kernel"
