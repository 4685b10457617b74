# lib.sh: helpers for the shell tests.  Source it; each test is a
# function, run with `t name` so its outcome is printed and counted.
set -u
BIN="$PWD/cmd"
TMP="${LLM_TEST_TMP:-$PWD/tests/tmp}/$(basename "$0" .sh)"
SHARED="${LLM_SHARED:-$PWD/../shared}"
mkdir -p "$TMP"

# python3 is the interpreter itself, found once: a version manager's shim
# (pyenv's) takes a third of a second a call, and the tests make hundreds.
if [ -z "${LLM_PYTHON:-}" ] && command -v python3 >/dev/null 2>&1; then
	LLM_PYTHON=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || LLM_PYTHON=
	export LLM_PYTHON
fi
[ -n "${LLM_PYTHON:-}" ] && [ -x "$LLM_PYTHON" ] && python3() { "$LLM_PYTHON" "$@"; }

# t NAME: run function NAME in a subshell.  It passes if it returns 0,
# skips if it calls skip, and fails if it returns anything else or if
# any check called fail, even from a pipeline or a nested subshell:
# fail leaves a mark that t reads, so no later command can hide it.
t() {
	rm -f "$TMP/.failed"
	out=$("$1" 2>&1)
	rc=$?
	if [ -e "$TMP/.failed" ] || { [ $rc -ne 0 ] && [ $rc -ne 77 ]; }; then
		echo "FAIL: $1"
		printf '%s\n' "$out" | sed 's/^/    /' >&2
	elif [ $rc -eq 77 ]; then
		echo "SKIP: $1: $(printf '%s\n' "$out" | sed -n 's/^skip: //p' | head -n 1)"
	else
		echo "PASS: $1"
	fi
	rm -f "$TMP/.failed"
}

# fail MESSAGE: the check failed; the test stops here.
fail() {
	echo "$*"
	: >>"$TMP/.failed"
	exit 1
}

# skip WHY: the test cannot run here (call it before any check).
skip() {
	echo "skip: $*"
	exit 77
}

# need FILE...: skip unless every FILE exists.
need() {
	for f in "$@"; do
		[ -f "$f" ] || skip "$f not present"
	done
}

# tiny TYPE: path of the tiny fixture model of that type, made once.
tiny() {
	[ -f "$TMP/tiny-$1.gguf" ] || "$PWD/tools/mkmodel" -t "$1" -o "$TMP/tiny-$1.gguf" >&2 ||
		fail "mkmodel -t $1"
	echo "$TMP/tiny-$1.gguf"
}

# chatmodel FAMILY: path of a tiny random model whose vocabulary and
# tokenizer.chat_template are the family's (mkmodel -C), made once.
chatmodel() {
	[ -f "$TMP/chat-$1.gguf" ] || "$PWD/tools/mkmodel" -C "$1" -o "$TMP/chat-$1.gguf" >&2 ||
		fail "mkmodel -C $1"
	echo "$TMP/chat-$1.gguf"
}

# json_assert FILE EXPR: FILE parses as one JSON value d, and the Python
# expression EXPR over d is true.  Structured output is checked by
# parsing it, never by grepping for a substring (.ci/run installs python3).
json_assert() {
	command -v python3 >/dev/null || fail "python3 is needed to parse JSON"
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
if not eval("(" + sys.argv[2] + ")"):
    sys.exit("not true of the JSON: " + sys.argv[2])' "$1" "$2" || fail "$1: $(head -c 400 "$1")"
}
