# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
# Sourced by setup-host.sh and debian-root: the machine's own Debian archive,
# so that no mirror is named in the repository.

# Print the URI of the machine's apt source of SUITE (default bookworm)
# (under ROOT, default /), from deb822 stanzas (*.sources: fields in any order, "Enabled: no"
# ones skipped) or one-line entries (sources.list, *.list).  A
# mirror+file: source (Debian's cloud images) names a file of mirrors:
# its first one is printed, for debootstrap and the chroots, which cannot
# read the host's file.  Each file is read by cat, and followed by an empty
# line so that stanzas of two files never join: mawk stops at the first
# file missing (an empty sources.list.d, as the installer leaves it).
# Usage: debian_uri [ROOT [SUITE]]
debian_uri() {
	du_root=${1:-} du_suite=${2:-bookworm}
	du_uri=$(
		for du_f in "$du_root"/etc/apt/sources.list.d/*.sources; do
			[ ! -f "$du_f" ] || { cat "$du_f"; echo; }
		done | awk -v suite="$du_suite" 'BEGIN { RS = "" }
		{
			uri = ""; deb = 0; found = 0; enabled = 1
			n = split($0, line, "\n")
			for (i = 1; i <= n; i++) {
				if (line[i] ~ /^#/ || !match(line[i], /^[^ \t:]+:/))
					continue
				# Field names and Types, Suites and Enabled
				# in any case; a URI as it is.
				field = tolower(substr(line[i], 1, RLENGTH - 1))
				value = " " substr(line[i], RLENGTH + 1) " "
				if (field == "uris" && split(value, uris, " "))
					uri = uris[1]
				value = tolower(value)
				gsub(/\t/, " ", value)
				if (field == "types" && value ~ /[ \t]deb[ \t]/)
					deb = 1
				if (field == "suites" && index(value, " " suite " "))
					found = 1
				if (field == "enabled" && value ~ /[ \t]no[ \t]/)
					enabled = 0
			}
			if (uri != "" && deb && found && enabled) { print uri; exit }
		}'
		cat "$du_root"/etc/apt/sources.list "$du_root"/etc/apt/sources.list.d/*.list \
			2>/dev/null | awk -v suite="$du_suite" '
		/^deb[ \t]/ {
			sub(/\[[^]]*\]/, "")
			if ($3 == suite) { print $2; exit }
		}')
	du_uri=${du_uri%%"
"*}
	case $du_uri in
	mirror+file:*)
		du_list=${du_uri#mirror+file:}
		du_list=$du_root/${du_list#"${du_list%%[!/]*}"}
		du_uri=$(sed -n 's/^[ \t]*\([^# \t][^ \t]*\).*/\1/p' "$du_list" 2>/dev/null |
			head -n1)
		;;
	esac
	echo "$du_uri"
}

# Print the package the bookworm-backports meta-package $1 depends on (the
# 6.12 kernel's, for linux-image-amd64), per the apt lists of the system
# that the command the other arguments make runs apt-cache in
# (bpo_dep linux-image-amd64 chroot DIR).
bpo_dep() {
	bpo_pkg=$1
	shift
	"$@" apt-cache show "$bpo_pkg/bookworm-backports" 2>/dev/null |
		sed -n 's/^Depends: \([^ ,]*\).*/\1/p' | head -n1
}
