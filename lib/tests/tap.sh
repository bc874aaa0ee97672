#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#
# One host test, one result: run CMD, then say "ok - NAME" or
# "not ok - NAME (exit N)", the lines tools/testing/run-checks counts,
# and exit as CMD did.
#
# Usage: tests/tap.sh NAME CMD [ARG]...
name=$1
shift
echo "== $name"
"$@"
status=$?
if [ "$status" = 0 ]; then
	echo "ok - $name"
else
	echo "not ok - $name (exit $status)"
fi
exit "$status"
