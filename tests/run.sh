#!/bin/sh
# Run every test (or those named) and count.  Each test prints "PASS:
# name", "FAIL: name" or "SKIP: name: why"; a test program that crashes
# counts as a failure.
#
# LLM_TEST_JOBS=N runs N test programs at a time (make check-asan runs 2:
# its programs spend most of their time on one core), each in a directory
# of its own under tests/tmp, and prints their outputs in order at the end.
# Usage: sh tests/run.sh [tests/test_X ...] (from the project root, after make testbin).
set -u
root="$PWD/tests/tmp"
export LLM_TEST_TMP="$root"
export LLM_SHARED="${LLM_SHARED:-$PWD/../shared}"
jobs=${LLM_TEST_JOBS:-1}
rm -rf "$root"
mkdir -p "$root/log"
results="$root/results"
: >"$results"

[ $# -gt 0 ] || set -- tests/test_*

# run_one T: run test T, its stdout, stderr, status and seconds into $root/log/NAME.*
run_one() {
	case "$1" in
	*.sh) cmd="sh $1" ;;
	*) cmd="$1" ;;
	esac
	log="$root/log/$(basename "$1")"
	start=$(date +%s)
	$cmd >"$log.out" 2>"$log.err"
	echo $? >"$log.rc"
	echo $(($(date +%s) - start)) >"$log.time"
}

# report T: print what run_one kept of test T, and count it
report() {
	log="$root/log/$(basename "$1")"
	rc=$(cat "$log.rc")
	echo "# $1: $(cat "$log.time") s"
	cat "$log.out" >>"$results"
	cat "$log.out"
	if grep -q '^FAIL' "$log.out" || [ "$rc" -ne 0 ]; then
		sed 's/^/    /' "$log.err"
		grep -q '^FAIL' "$log.out" ||
			echo "FAIL: $1 exited with status $rc" | tee -a "$results"
	fi
}

# the programs to run (sources and ones not built left out)
list=
for t in "$@"; do
	case "$t" in
	*.c|*.h) continue ;;
	*.sh) ;;
	*) [ -x "$t" ] || continue ;;
	esac
	list="$list $t"
done

if [ "$jobs" -le 1 ]; then
	for t in $list; do
		echo "== $t"
		run_one "$t"
		report "$t"
	done
else
	# each of the workers takes the next program no other has claimed (mkdir is
	# atomic), the second from the end of the list
	rev=
	for t in $list; do rev="$t $rev"; done
	k=0
	while [ $k -lt "$jobs" ]; do
		order=$list
		[ $k -eq 1 ] && order=$rev
		(for t in $order; do
			n=$(basename "$t")
			mkdir "$root/claim.$n" 2>/dev/null || continue
			export LLM_TEST_TMP="$root/$n.d"
			mkdir -p "$LLM_TEST_TMP"
			run_one "$t"
		done) &
		k=$((k + 1))
	done
	wait
	for t in $list; do
		echo "== $t"
		report "$t"
	done
fi

pass=$(grep -c '^PASS' "$results")
fail=$(grep -c '^FAIL' "$results")
skip=$(grep -c '^SKIP' "$results")
echo
grep '^SKIP' "$results"
grep '^FAIL' "$results"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
