# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Sourced by setup-host.sh and debian-root: the machine's own Debian archive,
# so that no mirror is named in the repository.

# Print the URI of the machine's bookworm apt source.  cat, not awk's own
# file arguments: mawk stops at the first file missing (an empty
# sources.list.d, as the installer leaves it).
debian_uri() {
	cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
		awk '
		/^URIs:/ { u = $2 }
		/^Suites:/ && / bookworm( |$)/ && u != "" { print u; exit }
		/^deb[ \t]/ && $0 ~ / bookworm( |$)/ {
			for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit }
		}' | head -n1
}

# Print the package the bookworm-backports meta-package $1 depends on (the
# 6.12 kernel's, for linux-image-amd64), per the machine's apt lists; with
# more arguments, per those of the system the command they make runs in
# (bpo_dep linux-image-amd64 chroot DIR).
bpo_dep() {
	bpo_pkg=$1
	shift
	"$@" apt-cache show "$bpo_pkg/bookworm-backports" 2>/dev/null |
		sed -n 's/^Depends: \([^ ,]*\).*/\1/p' | head -n1
}
