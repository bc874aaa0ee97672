#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Run the ummunotify test programs, normally in a guest with the module
# loaded:
#   tools/testing/vm-run -k KREL -m build/KREL/ummunotify.ko -- \
#       selftests/ummunotify/run_tests.sh
# Runs every *_test program the Makefile built, in $UMMUNOTIFY_TEST_BIN or
# by default the directory it builds into, and passes their TAP output
# through unchanged.  Exits 4 (the kselftest skip code) without
# /dev/ummunotify, 1 if any program fails or none is built, else 0.

ksft_skip=4
here=$(cd "$(dirname "$0")" && pwd)
bin=${UMMUNOTIFY_TEST_BIN:-$here/../../build/selftests}

if [ ! -c /dev/ummunotify ]; then
	echo "# SKIP: no /dev/ummunotify (is the module loaded?)"
	exit $ksft_skip
fi

ran=0
failed=0
for test in "$bin"/*_test; do
	[ -x "$test" ] || continue
	ran=$((ran + 1))
	echo "# selftests: ummunotify: ${test##*/}"
	"$test"
	status=$?
	if [ $status -ne 0 ] && [ $status -ne $ksft_skip ]; then
		echo "# ${test##*/}: exit status $status"
		failed=$((failed + 1))
	fi
done

echo "# ummunotify: $ran test programs, $failed failed"
[ $ran -gt 0 ] && [ $failed -eq 0 ]
