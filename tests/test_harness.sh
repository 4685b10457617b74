#!/bin/sh
# The shell harness itself: a failed check must fail its test wherever
# it happens, and nothing after it may turn it into a pass or a skip.
. tests/lib.sh

first_check_fails() { false || fail "first"; true; }
check_in_a_pipeline_fails() { echo x | { read -r _; false || fail "piped"; }; true; }
check_in_a_subshell_fails() { (false || fail "nested"); true; }
skip_after_a_failed_check_fails() { (false || fail "before the skip"); skip "late"; }
nonzero_return_fails() { return 3; }
all_checks_pass() { true || fail "never"; [ 1 -eq 1 ] || fail "never"; }
skips_with_its_reason() { skip "no such thing"; }

# outcome NAME: the line t prints for NAME, its details thrown away.
outcome() { t "$1" 2>/dev/null; }

# These checks print their own result: they must not rely on the fail
# they are testing.
bad=""
for f in first_check_fails check_in_a_pipeline_fails check_in_a_subshell_fails \
    skip_after_a_failed_check_fails nonzero_return_fails; do
	got=$(outcome $f)
	[ "$got" = "FAIL: $f" ] || bad="$bad $f('$got')"
done
got=$(outcome all_checks_pass)
[ "$got" = "PASS: all_checks_pass" ] || bad="$bad pass('$got')"
got=$(outcome skips_with_its_reason)
[ "$got" = "SKIP: skips_with_its_reason: no such thing" ] || bad="$bad skip('$got')"
if [ -z "$bad" ]; then
	echo "PASS: harness_reports_each_outcome"
else
	echo "FAIL: harness_reports_each_outcome"
	echo "    wrong outcomes:$bad" >&2
fi

err=$(t first_check_fails 2>&1 >/dev/null)
if [ "$err" = "    first" ]; then
	echo "PASS: failure_details_go_to_stderr"
else
	echo "FAIL: failure_details_go_to_stderr"
	echo "    '$err'" >&2
fi
