#!/bin/sh
# llm-tokenize from the command line.
. tests/lib.sh
T="$BIN/llm-tokenize"
SPM="$SHARED/vocab/ggml-vocab-llama-spm.gguf"
STAR="$SHARED/vocab/ggml-vocab-starcoder.gguf"
STORIES="$SHARED/models/stories260K.gguf"


stories260K_prompt_matches_reference_ids() {
	need "$STORIES"
	want=$(sed -n 's/^prompt_ids\t//p' "$SHARED/models/stories260K.ref")
	got=$("$T" -m "$STORIES" 'Once upon a time' | tr '\n' ' ' | sed 's/ $//')
	[ "$got" = "$want" ] || fail "got '$got', want '$want'"
}

arguments_join_with_spaces_and_stdin_is_read_whole() {
	m=$(tiny f32)
	a=$("$T" -m "$m" 'the day' 'was' | tr '\n' ' ')
	b=$(printf 'the day was' | "$T" -m "$m" | tr '\n' ' ')
	[ "$a" = "$b" ] || fail "args '$a' vs stdin '$b'"
	c=$(printf 'the day\nwas' | "$T" -m "$m" | tr '\n' ' ')
	[ "$a" != "$c" ] || fail "the newline was lost"
}

bos_and_eos_follow_the_model_and_the_flags() {
	need "$SPM" "$STAR"
	[ "$("$T" -m "$SPM" hi | head -n 1)" = 1 ] || fail "SentencePiece adds BOS by default"
	[ "$("$T" -m "$SPM" --no-bos hi | head -n 1)" != 1 ] || fail "--no-bos"
	[ "$("$T" -m "$SPM" --eos hi | tail -n 1)" = 2 ] || fail "--eos"
	[ "$("$T" -m "$STAR" hi | wc -l)" -eq 1 ] || fail "BPE adds no BOS by default"
	[ "$("$T" -m "$STAR" --bos hi | head -n 1)" = 0 ] || fail "--bos"
}

special_tokens_parse_only_with_special() {
	need "$STAR"
	[ "$("$T" -m "$STAR" --special '<fim_prefix>x' | tr '\n' ' ')" = "1 125 " ] ||
		fail "with --special: $("$T" -m "$STAR" --special '<fim_prefix>x' | tr '\n' ' ')"
	[ "$("$T" -m "$STAR" '<fim_prefix>x' | wc -l)" -gt 2 ] || fail "without --special it is text"
	# The text of a control token comes back only with -d --special.
	[ "$(echo 1 125 | "$T" -m "$STAR" -d)" = "x" ] || fail "-d shows a control token"
	[ "$(echo 1 125 | "$T" -m "$STAR" -d --special)" = "<fim_prefix>x" ] || fail "-d --special"
}

decode_round_trips_text() {
	need "$SPM" "$STAR"
	printf 'Hello, world!\n  indented \xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80\n' >"$TMP/text"
	"$T" -m "$SPM" <"$TMP/text" | "$T" -m "$SPM" -d >"$TMP/back" || fail "exit $?"
	cmp "$TMP/text" "$TMP/back" || fail "text changed"
	"$T" -m "$STAR" <"$TMP/text" | "$T" -m "$STAR" -d | cmp - "$TMP/text" || fail "starcoder"
}

invalid_utf8_does_not_crash() {
	m=$(tiny f32)
	printf 'a\377\376b\300' >"$TMP/bad"
	"$T" -m "$m" <"$TMP/bad" >"$TMP/ids" || fail "exit $?"
	"$T" -m "$m" -d -n <"$TMP/ids" | cmp - "$TMP/bad" || fail "bytes not kept"
}

decode_rejects_bad_ids_by_name() {
	m=$(tiny f32)
	echo "5 99999" | "$T" -m "$m" -d >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "accepted"
	grep -q "^llm-tokenize: stdin: token 1 ('99999'): id out of range" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo "5 x" | "$T" -m "$m" -d >/dev/null 2>&1
	[ $? -eq 1 ] || fail "non-numeric accepted"
}

decode_streams_before_input_ends() {
	need "$SPM"
	rm -f "$TMP/fifo" "$TMP/stream"
	mkfifo "$TMP/fifo" || fail "exit $?"
	"$T" -m "$SPM" -d <"$TMP/fifo" >"$TMP/stream" &
	pid=$!
	exec 3>"$TMP/fifo"
	# "▁Hello" then the first two bytes of "€": only "Hello" may appear.
	echo "15043 229 133" >&3
	i=0
	while [ ! -s "$TMP/stream" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	out=$(cat "$TMP/stream")
	echo 175 >&3	# the last byte of "€"
	exec 3>&-
	wait $pid
	[ "$out" = "Hello" ] || fail "while input was open: '$out'"
	[ "$(cat "$TMP/stream")" = "Hello€" ] || fail "at the end: '$(cat "$TMP/stream")'"
}

vocab_lists_every_token() {
	need "$SPM"
	"$T" -m "$SPM" --vocab >"$TMP/vocab" || fail "exit $?"
	[ "$(wc -l <"$TMP/vocab")" -eq 32000 ] || fail "$(wc -l <"$TMP/vocab") lines"
	[ "$(sed -n 2p "$TMP/vocab")" = "$(printf '1\tcontrol\t<s>')" ] || fail "line 2: $(sed -n 2p "$TMP/vocab")"
	[ "$(sed -n 4p "$TMP/vocab")" = "$(printf '3\tbyte\t<0x00>')" ] || fail "line 4"
	awk -F'\t' 'NF != 3 { exit 1 }' "$TMP/vocab" || fail "a line without three fields"
}

usage_and_errors() {
	"$T" -h | grep -q '^usage: llm-tokenize -m MODEL' || fail "-h"
	"$T" 2>/dev/null; [ $? -eq 2 ] || fail "no -m"
	"$T" -m x -d extra 2>/dev/null; [ $? -eq 2 ] || fail "-d with text"
	"$T" -m "$TMP/none" hi 2>"$TMP/err"; [ $? -eq 1 ] || fail "missing file"
	grep -q "^llm-tokenize: $TMP/none: No such file or directory$" "$TMP/err" || fail "$(cat "$TMP/err")"
	# A GGUF with no tokenizer in it
	printf 'GGUF\003\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' >"$TMP/empty.gguf"
	"$T" -m "$TMP/empty.gguf" hi 2>"$TMP/err"; [ $? -eq 1 ] || fail "no tokenizer accepted"
	grep -q "tokenizer.ggml.model is missing" "$TMP/err" || fail "$(cat "$TMP/err")"
}

# One standard input: the model from it (-m -) takes the text as
# arguments; text, ids or a conversation on stdin too is a usage error.
model_on_stdin_leaves_no_room_for_text() {
	m=$(tiny q8_0)
	"$T" -m - Hello <"$m" >"$TMP/a" || fail "-m - with text as arguments: exit $?"
	"$T" -m "$m" Hello | cmp - "$TMP/a" || fail "the ids differ"
	for o in "" -d --chat; do
		# shellcheck disable=SC2086
		"$T" -m - $o <"$m" >"$TMP/out" 2>"$TMP/err"
		[ $? -eq 2 ] || fail "-m - $o: not a usage error: $(cat "$TMP/out")"
		grep -q "^llm-tokenize: -m -: the model and the" "$TMP/err" || fail "$(cat "$TMP/err")"
		[ ! -s "$TMP/out" ] || fail "-m - $o wrote $(cat "$TMP/out")"
	done
}

# The newline that ends standard input's last line is not text (echo's,
# an editor's); -d ends its text with one, so a shell's prompt comes after
# it.  --keep-newline and -n say otherwise.  A text ending in one newline
# goes round unchanged.
newlines_at_the_ends_are_a_users() {
	need "$STORIES"
	a=$(echo 'Once upon a time' | "$T" -m "$STORIES" | tr '\n' ' ')
	b=$("$T" -m "$STORIES" 'Once upon a time' | tr '\n' ' ')
	[ "$a" = "$b" ] || fail "echo's newline was tokenized: '$a' against '$b'"
	k=$(echo 'Once upon a time' | "$T" -m "$STORIES" --keep-newline | wc -l)
	[ "$k" -gt "$(echo "$b" | wc -w)" ] || fail "--keep-newline kept nothing"
	printf 'a\r\n' | "$T" -m "$STORIES" | tr '\n' ' ' >"$TMP/crlf"
	[ "$(cat "$TMP/crlf")" = "$("$T" -m "$STORIES" a | tr '\n' ' ')" ] || fail "CRLF: $(cat "$TMP/crlf")"
	echo "$b" | "$T" -m "$STORIES" -d >"$TMP/text"
	printf 'Once upon a time\n' | cmp - "$TMP/text" || fail "-d: $(od -c "$TMP/text")"
	echo "$b" | "$T" -m "$STORIES" -d -n | cmp - "$(printf 'Once upon a time' >"$TMP/nonl"; echo "$TMP/nonl")" ||
		fail "-d -n"
	[ "$("$T" -m "$STORIES" -d </dev/null | od -An -c | tr -d ' ')" = '\n' ] || fail "nothing: not an empty line"
	printf 'One line.\nAnd another.\n' >"$TMP/two"
	"$T" -m "$STORIES" <"$TMP/two" | "$T" -m "$STORIES" -d | cmp - "$TMP/two" || fail "the round trip"
	for o in "-n" "--keep-newline -d"; do
		# shellcheck disable=SC2086
		echo x | "$T" -m "$STORIES" $o >/dev/null 2>&1
		[ $? -eq 2 ] || fail "$o: not a usage error"
	done
}

t stories260K_prompt_matches_reference_ids
t arguments_join_with_spaces_and_stdin_is_read_whole
t bos_and_eos_follow_the_model_and_the_flags
t special_tokens_parse_only_with_special
t decode_round_trips_text
t invalid_utf8_does_not_crash
t decode_rejects_bad_ids_by_name
t decode_streams_before_input_ends
t vocab_lists_every_token
t usage_and_errors
t model_on_stdin_leaves_no_room_for_text
t newlines_at_the_ends_are_a_users
