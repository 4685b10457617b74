#!/bin/sh
# llm-chat: a conversation a line at a time, its cache kept between turns.
. tests/lib.sh
C="$BIN/llm-chat"

# endless: a model without a template whose end of sequence never comes
endless() {
	[ -f "$TMP/endless.gguf" ] || "$PWD/tools/mkmodel" -t f32 -E 100000 -o "$TMP/endless.gguf" >&2 ||
		fail "mkmodel"
	echo "$TMP/endless.gguf"
}

# jsonl_assert FILE EXPR: every line of FILE starting with { parses as
# JSON, d is their list, and the Python expression EXPR over d is true
jsonl_assert() {
	command -v python3 >/dev/null || fail "python3 is needed to parse JSON"
	python3 -c 'import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
if not eval("(" + sys.argv[2] + ")"):
    sys.exit("not true of the JSON lines: " + sys.argv[2])' "$1" "$2" || fail "$1: $(head -c 600 "$1")"
}

# field FILE N KEY: KEY of the N-th JSON line
field() {
	python3 -c 'import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print(d[int(sys.argv[2]) - 1][sys.argv[3]])' "$1" "$2" "$3"
}

# Each turn computes only its own tokens: the cache holds the conversation between turns.
piped_turns_reuse_the_conversation() {
	m=$(chatmodel chatml)
	printf 'Hi there\n\nHow are you?\n   \nBye\n' | "$C" -m "$m" -n 8 --seed 5 --stats-json \
		>"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(cat "$TMP/err")"
	jsonl_assert "$TMP/err" 'len(d) == 3 and [x["turn"] for x in d] == [1, 2, 3]'
	jsonl_assert "$TMP/err" 'd[0]["reused_tokens"] == 0 and all(d[i]["reused_tokens"] == d[i - 1]["conversation_tokens"] for i in (1, 2))'
	jsonl_assert "$TMP/err" 'all(x["reused_tokens"] + x["computed_tokens"] == x["conversation_tokens"] for x in d)'
	# a turn computes its message, its reply and the close (one token), nothing before
	jsonl_assert "$TMP/err" 'all(x["computed_tokens"] == x["prompt_tokens"] - x["reused_tokens"] + x["generated_tokens"] + 1 and 0 < x["generated_tokens"] <= 8 for x in d)'
	jsonl_assert "$TMP/err" 'all(x["seed"] == 5 + (d[i - 1]["conversation_tokens"] if i else 1) for i, x in enumerate(d))'
}

# The conversation is the template's rendering, each reply the ids the
# model generated: what llm-decode generates from the same ids.  Every
# family, and the ChatML templates with a system message of their own.
turns_are_the_template_and_the_model_replies() {
	for f in chatml llama3 llama2 zephyr phi3 gemma smollm2 qwen2.5 llama3.2 harmony; do
		turns_of "$f"
	done
}

turns_of() {
	m=$(chatmodel "$1")
	rm -f "$TMP/c.kv" "$TMP/replies"
	printf 'Hi there\nBye\n' | "$C" -m "$m" -n 6 --seed 9 --stats-json --kv "$TMP/c.kv" \
		>"$TMP/out" 2>"$TMP/err" || fail "$1: exit $?: $(cat "$TMP/err")"
	"$BIN/llm-kvdump" --tokens "$TMP/c.kv" >"$TMP/conv.ids" || fail "kvdump"
	p1=$(field "$TMP/err" 1 prompt_tokens) g1=$(field "$TMP/err" 1 generated_tokens)
	p2=$(field "$TMP/err" 2 prompt_tokens)
	[ "$(wc -l <"$TMP/conv.ids")" -eq "$(field "$TMP/err" 2 conversation_tokens)" ] ||
		fail "$1: the file holds $(wc -l <"$TMP/conv.ids") tokens"
	# the first turn: the whole rendering of its conversation (a default system message included)
	printf 'user\tHi there\n' | "$BIN/llm-tokenize" -m "$m" --chat >"$TMP/want" || fail "tokenize"
	head -n "$p1" "$TMP/conv.ids" | cmp -s - "$TMP/want" || fail "$1: turn 1 is not the template's"
	case $1 in
	llama3*) close='<|eot_id|>' ;; phi3|harmony) close='<|end|>' ;; gemma) close='<end_of_turn>' ;;
	llama2|zephyr) close='</s>' ;; *) close='<|im_end|>' ;;
	esac
	end=$("$BIN/llm-tokenize" -m "$m" --vocab | awk -F '\t' -v c="$close" '$3 == c { print $1 }')
	[ -n "$end" ] || fail "$1: no $close"
	# each reply is llm-decode's from the conversation before it, with the turn's seed
	for k in 1 2; do
		p=$(field "$TMP/err" $k prompt_tokens) g=$(field "$TMP/err" $k generated_tokens)
		head -n "$p" "$TMP/conv.ids" | "$BIN/llm-decode" -m "$m" -n "$g" \
			--seed "$(field "$TMP/err" $k seed)" >"$TMP/dec" || fail "llm-decode"
		sed -n "$((p + 1)),$((p + g))p" "$TMP/conv.ids" | cmp -s - "$TMP/dec" ||
			fail "$1: reply $k differs from llm-decode's"
		sed -n "$((p + g + 1))p" "$TMP/conv.ids" | grep -qx "$end" || fail "$1: turn $k is not closed"
		"$BIN/llm-tokenize" -m "$m" -d <"$TMP/dec" >>"$TMP/replies"
	done
	# harmony shows a reply's final channel alone (a random model names none: an empty line)
	[ "$1" = harmony ] && printf '\n\n' >"$TMP/replies"
	cmp -s "$TMP/out" "$TMP/replies" || fail "$1: the replies' text: $(cat "$TMP/out")"
	# the second turn goes on as the whole rendering of the conversation does after a reply
	# (after the closes before it: the user's and the reply's, and the default system
	# message's; Llama 2's user turn has none)
	case $1 in llama2) k=1 ;; smollm2|qwen2.5|llama3.2|harmony) k=3 ;; *) k=2 ;; esac
	printf 'user\tHi there\nassistant\t\nuser\tBye\n' | "$BIN/llm-tokenize" -m "$m" --chat |
		awk -v e="$end" -v k=$k 'n >= k { print } $0 == e { n++ }' >"$TMP/want"
	sed -n "$((p1 + g1 + 2)),${p2}p" "$TMP/conv.ids" | cmp -s - "$TMP/want" ||
		fail "$1: turn 2 is not the template's"
}

# A conversation kept in a file and resumed gives the bytes of one that never stopped.
resume_is_the_same_conversation() {
	m=$(chatmodel chatml)
	rm -f "$TMP/a.kv" "$TMP/b.kv"
	printf 'One\nTwo\nThree\n' | "$C" -m "$m" -n 7 --seed 2 --kv "$TMP/a.kv" >"$TMP/a" 2>"$TMP/err" ||
		fail "exit $?: $(cat "$TMP/err")"
	printf 'One\nTwo\n' | "$C" -m "$m" -n 7 --seed 2 --kv "$TMP/b.kv" >"$TMP/b" || fail "exit $?"
	n=$("$BIN/llm-kvdump" --tokens "$TMP/b.kv" | wc -l)
	printf 'Three\n' | "$C" -m "$m" -n 7 --seed 2 --kv "$TMP/b.kv" --stats-json >>"$TMP/b" \
		2>"$TMP/err" || fail "resume: exit $?: $(cat "$TMP/err")"
	cmp -s "$TMP/a" "$TMP/b" || fail "the replies differ"
	cmp -s "$TMP/a.kv" "$TMP/b.kv" || fail "the files differ"
	# read in place, all but the last token, whose logits the file does not hold
	jsonl_assert "$TMP/err" "d[0]['reused_tokens'] == $n - 1 and d[0]['kv_shared_bytes'] > 0"
	# the same --system again is accepted; another is refused, the file as it was
	rm -f "$TMP/s.kv"
	printf 'One\n' | "$C" -m "$m" -n 3 --system 'Be kind.' --kv "$TMP/s.kv" >/dev/null || fail "system"
	printf 'Two\n' | "$C" -m "$m" -n 3 --system 'Be kind.' --kv "$TMP/s.kv" >/dev/null ||
		fail "the same --system was refused"
	cp "$TMP/s.kv" "$TMP/s0.kv"
	printf 'Two\n' | "$C" -m "$m" -n 3 --system 'Be rude.' --kv "$TMP/s.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q 'another system message' "$TMP/err" || fail "another --system: $(cat "$TMP/err")"
	cmp -s "$TMP/s.kv" "$TMP/s0.kv" || fail "the file changed"
}

# No template: each line continues the text, and says so.
a_model_without_a_template_continues_the_text() {
	m=$(tiny f32)
	rm -f "$TMP/p.kv"
	printf 'Once upon\na time\n' | "$C" -m "$m" -n 5 --seed 4 --stats-json --kv "$TMP/p.kv" \
		>"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(cat "$TMP/err")"
	grep -q 'no chat template: each line continues the text' "$TMP/err" || fail "no notice"
	"$BIN/llm-tokenize" -m "$m" 'Once upon' >"$TMP/want"
	"$BIN/llm-decode" -m "$m" -n 5 --seed 5 <"$TMP/want" >>"$TMP/want" || fail "decode"
	"$BIN/llm-tokenize" -m "$m" --no-bos 'a time' >>"$TMP/want"
	"$BIN/llm-kvdump" --tokens "$TMP/p.kv" | head -n "$(wc -l <"$TMP/want")" | cmp -s - "$TMP/want" ||
		fail "the conversation is not the text and the replies"
	printf 'x\n' | "$C" -m "$m" --system 'Be brief.' >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q 'no chat template' "$TMP/err" || fail "--system without a template"
	# -q says nothing
	printf 'x\n' | "$C" -m "$m" -q -n 2 >/dev/null 2>"$TMP/err" || fail "exit $?"
	[ ! -s "$TMP/err" ] || fail "-q: $(cat "$TMP/err")"
}

# reap PID: its exit status in rc, waiting 60 s at most (then it is killed, and the test fails)
reap() {
	k=0
	while kill -0 "$1" 2>/dev/null && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
	if kill -0 "$1" 2>/dev/null; then
		kill -KILL "$1"
		wait "$1"
		fail "pid $1 did not end"
	fi
	wait "$1"
	rc=$?
}

# SIGINT stops the reply and the session goes on; at the prompt, or SIGTERM, it ends.
# (A shell's background job starts with SIGINT ignored, which llm-chat keeps: env restores it.)
signals_stop_the_reply_not_the_session() {
	m=$(endless)
	rm -f "$TMP/in" "$TMP/sig.kv"
	mkfifo "$TMP/in" || fail "mkfifo"
	env --default-signal=INT "$C" -m "$m" -q --kv-window 32 --kv "$TMP/sig.kv" --stats-json \
		<"$TMP/in" >"$TMP/out" 2>"$TMP/err" &
	pid=$!
	exec 3>"$TMP/in"
	echo 'Once' >&3
	sleep 0.5
	kill -INT $pid
	# the turn closes and the next line is read; it too is stopped
	i=0
	while [ "$(grep -c '^{' "$TMP/err")" -lt 1 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	echo 'Twice' >&3
	sleep 0.5
	kill -INT $pid
	while [ "$(grep -c '^{' "$TMP/err")" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
	exec 3>&-
	reap $pid
	[ $rc -eq 0 ] || fail "exit $rc: $(grep -v '^{' "$TMP/err")"
	jsonl_assert "$TMP/err" 'len(d) == 2 and all(x["end"] == "interrupt" and x["generated_tokens"] > 0 for x in d)'
	[ "$("$BIN/llm-kvdump" --tokens "$TMP/sig.kv" | wc -l)" -eq "$(field "$TMP/err" 2 conversation_tokens)" ] ||
		fail "the file is not the whole conversation"
	# SIGINT while waiting for a line: 130
	env --default-signal=INT "$C" -m "$m" -q <"$TMP/in" >/dev/null 2>"$TMP/err" &
	pid=$!
	exec 3>"$TMP/in"
	sleep 0.3
	kill -INT $pid
	reap $pid
	exec 3>&-
	[ $rc -eq 130 ] || fail "SIGINT at the prompt: exit $rc"
	# SIGTERM in a reply: the turn is closed and saved, then 143
	rm -f "$TMP/term.kv"
	"$C" -m "$m" -q --kv-window 32 --kv "$TMP/term.kv" --stats-json <"$TMP/in" >/dev/null 2>"$TMP/err" &
	pid=$!
	exec 3>"$TMP/in"
	echo 'Once' >&3
	sleep 0.5
	kill -TERM $pid
	reap $pid
	exec 3>&-
	[ $rc -eq 143 ] || fail "SIGTERM: exit $rc"
	[ "$("$BIN/llm-kvdump" --tokens "$TMP/term.kv" | wc -l)" -eq "$(field "$TMP/err" 1 conversation_tokens)" ] ||
		fail "SIGTERM: the turn was not saved"
}

# A turn that does not fit is refused with an empty line; the conversation goes on.
a_turn_that_does_not_fit_is_refused() {
	m=$(chatmodel chatml)
	long=$(seq 1 60 | tr '\n' ' ')
	# a fixed seed: a reply drawn from the clock could hold a newline, and shift the lines
	printf 'Hi\n%s\nBye\n' "$long" | "$C" -m "$m" -n 3 --seed 1 --ctx 128 --stats-json >"$TMP/out" 2>"$TMP/err"
	[ $? -eq 1 ] || fail "exit $?"
	grep -q 'turn 2: .* do not fit the context of 128' "$TMP/err" || fail "$(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/out")" -ge 3 ] && [ "$(sed -n 2p "$TMP/out")" = "" ] || fail "output: $(cat "$TMP/out")"
	jsonl_assert "$TMP/err" 'len(d) == 2 and d[1]["reused_tokens"] == d[0]["conversation_tokens"]'
	# a reply that reaches the context's end is cut, and said to be
	printf 'Hi\n' | "$C" -m "$(endless)" -q --ctx 40 --stats-json >"$TMP/out" 2>"$TMP/err" ||
		fail "exit $?"
	grep -q 'the reply was cut where the context of 40 ends' "$TMP/err" || fail "$(cat "$TMP/err")"
	jsonl_assert "$TMP/err" 'd[0]["end"] == "context" and d[0]["conversation_tokens"] == 40'
}

# Bad options, files and templates: one line, the right status, no file harmed.
errors_are_named() {
	m=$(chatmodel chatml)
	for args in "--template nope" "-m $m x" "-m $m --kv -" "-m $m --kv-sinks 2" "-m $m --greedy --temp 1" "-m $m -n 0"; do
		echo hi | "$C" $args >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "$args: not a usage error: $(cat "$TMP/err")"
		[ "$(wc -l <"$TMP/err")" -ge 1 ] && grep -q -e '^llm-chat: ' -e '^usage: ' "$TMP/err" || fail "$args: $(cat "$TMP/err")"
	done
	echo hi | "$C" -m "$m" --template llama3 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q 'needs the control token' "$TMP/err" || fail "llama3 on chatml: $(cat "$TMP/err")"
	# a damaged file is refused and kept
	rm -f "$TMP/d.kv" "$TMP/e.kv"
	printf 'Hi\n' | "$C" -m "$m" -n 3 --kv "$TMP/d.kv" >/dev/null || fail "exit $?"
	printf 'x' | dd of="$TMP/d.kv" bs=1 seek=60 conv=notrunc 2>/dev/null
	cp "$TMP/d.kv" "$TMP/d0.kv"
	printf 'Bye\n' | "$C" -m "$m" -n 3 --kv "$TMP/d.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "d.kv: " "$TMP/err" || fail "damaged file: $(cat "$TMP/err")"
	cmp -s "$TMP/d.kv" "$TMP/d0.kv" || fail "the damaged file was changed"
	# another model's conversation, another cache type
	printf 'Hi\n' | "$C" -m "$m" -n 3 --kv "$TMP/e.kv" >/dev/null || fail "exit $?"
	printf 'Bye\n' | "$C" -m "$(chatmodel llama3)" --kv "$TMP/e.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "another model" "$TMP/err" || fail "another model: $(cat "$TMP/err")"
	printf 'Bye\n' | "$C" -m "$m" --kv-type q8_0 --kv "$TMP/e.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "kv-type" "$TMP/err" || fail "another type: $(cat "$TMP/err")"
	# a file that cannot be written is refused before any work
	printf 'Bye\n' | "$C" -m "$m" --kv "$TMP/no/such/dir.kv" >"$TMP/out" 2>"$TMP/err"
	[ $? -eq 1 ] && [ ! -s "$TMP/out" ] || fail "unwritable --kv: $(cat "$TMP/err")"
	# the reader goes away: 141, quietly, the turn saved
	rm -f "$TMP/p.kv"
	printf 'Hi\n' | "$C" -m "$(endless)" -q --kv-window 32 --kv "$TMP/p.kv" 2>"$TMP/err" | head -c 1 >/dev/null
	[ -s "$TMP/p.kv" ] && [ ! -s "$TMP/err" ] || fail "closed stdout: $(cat "$TMP/err")"
	"$C" -h | grep -q 'usage: llm-chat' || fail "-h"
}

# The cache types, a window: a conversation in each is its own, and resumes.
cache_types_and_windows_resume() {
	m=$(chatmodel chatml)
	for o in "--kv-type f16" "--kv-type q8_0" "--kv-type q4_0" "--kv-window 48 --kv-sinks 4"; do
		rm -f "$TMP/t.kv" "$TMP/u.kv"
		printf 'One\nTwo\nThree\n' | "$C" -m "$m" -n 12 --seed 1 $o --kv "$TMP/t.kv" >"$TMP/a" 2>"$TMP/err" ||
			fail "$o: exit $?: $(cat "$TMP/err")"
		printf 'One\n' | "$C" -m "$m" -n 12 --seed 1 $o --kv "$TMP/u.kv" >"$TMP/b" || fail "$o: exit $?"
		# resumed without repeating the options: they come from the file
		printf 'Two\nThree\n' | "$C" -m "$m" -n 12 --seed 1 --kv "$TMP/u.kv" >>"$TMP/b" 2>"$TMP/err" ||
			fail "$o: resume: exit $?: $(cat "$TMP/err")"
		cmp -s "$TMP/a" "$TMP/b" || fail "$o: a resumed conversation differs"
		cmp -s "$TMP/t.kv" "$TMP/u.kv" || fail "$o: the files differ"
	done
}

t piped_turns_reuse_the_conversation
t turns_are_the_template_and_the_model_replies
t resume_is_the_same_conversation
t a_model_without_a_template_continues_the_text
t signals_stop_the_reply_not_the_session
t a_turn_that_does_not_fit_is_refused
t errors_are_named
t cache_types_and_windows_resume
