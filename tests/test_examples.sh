#!/bin/sh
# The scripts in examples/ run as a user would run them.
. tests/lib.sh

demo_runs() {
	sh examples/demo.sh >"$TMP/demo" 2>&1 || fail "exit $?: $(tail -n 3 "$TMP/demo")"
	grep -q '^prompt: Once upon a time$' "$TMP/demo" || fail "no prompt line"
	grep -q 'generated at' "$TMP/demo" || fail "no stats"
}

demo_runs_with_a_random_model_when_no_model_is_found() {
	# Point the demo away from ../shared by running a copy of it elsewhere.
	mkdir -p "$TMP/proj/examples" "$TMP/proj/cmd" "$TMP/proj/tests"
	cp examples/demo.sh "$TMP/proj/examples/"
	cp cmd/llm-decode cmd/llm-tokenize "$TMP/proj/cmd/"
	cp tests/mkmodel "$TMP/proj/tests/"
	(cd "$TMP/proj" && sh examples/demo.sh) >"$TMP/rdemo" 2>&1 || fail "exit: $(tail -n 3 "$TMP/rdemo")"
	grep -q 'random' "$TMP/rdemo" || fail "does not say the text is random"
}

chat_demo_resumes_and_forks() {
	sh examples/chat-demo.sh >"$TMP/chat" 2>&1 || fail "exit $?: $(tail -n 5 "$TMP/chat")"
	# turn 1 computes everything; turns 2, 3 and the fork reuse the snapshot
	[ "$(grep -c 'reused 0 tokens' "$TMP/chat")" -eq 1 ] || fail "$(grep reused "$TMP/chat")"
	[ "$(grep -c 'reused [1-9][0-9]* tokens' "$TMP/chat")" -eq 3 ] || fail "$(grep reused "$TMP/chat")"
	grep -q '^a: ' "$TMP/chat" && grep -q '^b: ' "$TMP/chat" || fail "no snapshot contents"
}

# With a chat template, the turns go through llm-tokenize --chat and still resume.
chat_demo_uses_the_models_template() {
	"$PWD/tests/mkmodel" -C chatml -o "$TMP/chatml.gguf" || fail "mkmodel"
	LLM_MODEL="$TMP/chatml.gguf" sh examples/chat-demo.sh >"$TMP/chat" 2>&1 ||
		fail "exit $?: $(tail -n 5 "$TMP/chat")"
	[ "$(grep -ac 'reused [1-9][0-9]* tokens' "$TMP/chat")" -eq 3 ] || fail "$(grep -a reused "$TMP/chat")"
	grep -aq '^a: user Once upon a time, a cat' "$TMP/chat" || fail "$(grep -a '^a: ' "$TMP/chat")"
}

t demo_runs
t chat_demo_uses_the_models_template
t demo_runs_with_a_random_model_when_no_model_is_found
t chat_demo_resumes_and_forks
