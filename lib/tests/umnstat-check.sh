# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# shellcheck shell=bash
#
# umnstat --check of a real process, for check-ofi and check-ucx, which
# source this: they give it $build (the build tree), $program_seconds (a
# program's bound) and result (a TAP line).
#
# umnstat_check WANT PATTERN NAME PROGRAM ARGS...: PROGRAM runs until it
# stops itself (SIGSTOP) in the state to look at; umnstat --check of it
# must then exit WANT and print a line PATTERN (grep -E) matches.  Each
# verdict is one a site would be given, from /proc alone.
umnstat_check() {
	local want=$1 pattern=$2 name="umnstat --check: $3" pid state i
	local out status why=

	shift 3
	"$@" >&2 &
	pid=$!
	for ((i = 0; i < 10 * program_seconds; i++)); do
		state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
		[ "$state" = T ] || [ -z "$state" ] && break
		sleep 0.1
	done
	if [ "$state" = T ]; then
		out=$("$build/tools/umnstat" --check "$pid" 2>&1)
		status=$?
		echo "$out" >&2
		if [ "$status" != "$want" ]; then
			why="exit $status, expected $want"
		elif ! grep -Eq "$pattern" <<<"$out"; then
			why="no line matching: $pattern"
		fi
		kill -CONT "$pid"
	else
		why="the program did not stop itself (state ${state:-gone})"
	fi
	for ((i = 0; i < 300 && $(kill -0 "$pid" 2>/dev/null; echo $?) == 0; i++)); do
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	[ -z "$why" ]
	result $? "$name" "$why"
}
