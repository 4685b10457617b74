#!/bin/sh
# Run every test (or those named) and count.  Each test prints "PASS:
# name", "FAIL: name" or "SKIP: name: why"; a test program that crashes
# counts as a failure.
# Usage: sh tests/run.sh [tests/test_X ...] (from the project root, after make testbin).
set -u
export LLM_TEST_TMP="$PWD/tests/tmp"
export LLM_SHARED="${LLM_SHARED:-$PWD/../shared}"
rm -rf "$LLM_TEST_TMP"
mkdir -p "$LLM_TEST_TMP"
results="$LLM_TEST_TMP/results"
: >"$results"

[ $# -gt 0 ] || set -- tests/test_*
for t in "$@"; do
	case "$t" in
	*.c|*.h) continue ;;
	*.sh) cmd="sh $t" ;;
	*) [ -x "$t" ] || continue; cmd="$t" ;;
	esac
	echo "== $t"
	start=$(date +%s)
	$cmd >"$LLM_TEST_TMP/out" 2>"$LLM_TEST_TMP/err"
	rc=$?
	echo "# $t: $(($(date +%s) - start)) s"
	cat "$LLM_TEST_TMP/out" >>"$results"
	cat "$LLM_TEST_TMP/out"
	if grep -q '^FAIL' "$LLM_TEST_TMP/out" || [ $rc -ne 0 ]; then
		sed 's/^/    /' "$LLM_TEST_TMP/err"
		grep -q '^FAIL' "$LLM_TEST_TMP/out" ||
			echo "FAIL: $t exited with status $rc" | tee -a "$results"
	fi
done

pass=$(grep -c '^PASS' "$results")
fail=$(grep -c '^FAIL' "$results")
skip=$(grep -c '^SKIP' "$results")
echo
grep '^SKIP' "$results"
grep '^FAIL' "$results"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
