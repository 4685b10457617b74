# lib.sh: helpers for the shell tests.  Source it; each test is a
# function, run with `t name` so its outcome is printed and counted.
set -u
BIN="$PWD/cmd"
TMP="${LLM_TEST_TMP:-$PWD/tests/tmp}/$(basename "$0" .sh)"
SHARED="${LLM_SHARED:-$PWD/../shared}"
mkdir -p "$TMP"

# t NAME: run function NAME; it fails by returning non-zero, or skips by
# printing "skip: why" and returning 77.
t() {
	out=$("$1" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		echo "PASS: $1"
	elif [ $rc -eq 77 ]; then
		echo "SKIP: $1: $(printf '%s\n' "$out" | sed -n 's/^skip: //p' | head -n 1)"
	else
		echo "FAIL: $1"
		printf '%s\n' "$out" | sed 's/^/    /' >&2
	fi
}

fail() { echo "$*"; return 1; }

# tiny TYPE: path of the tiny fixture model of that type, made once.
tiny() {
	[ -f "$TMP/tiny-$1.gguf" ] || "$PWD/tests/mkmodel" -t "$1" -o "$TMP/tiny-$1.gguf"
	echo "$TMP/tiny-$1.gguf"
}
