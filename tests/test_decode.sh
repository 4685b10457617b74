#!/bin/sh
# llm-decode from the command line, as a user runs it.
. tests/lib.sh
D="$BIN/llm-decode"

stories260K_reproduces_reference_ids() {
	m="$SHARED/models/stories260K.gguf"
	ref="$SHARED/models/stories260K.ref"
	need "$m" "$ref"
	prompt=$(sed -n 's/^prompt_ids\t//p' "$ref")
	sed -n 's/^greedy_ids\t//p' "$ref" | tr ' ' '\n' >"$TMP/want"
	[ "$(wc -l <"$TMP/want")" -eq 250 ] || fail "reference has no 250 ids"
	for th in 1 2; do
		echo "$prompt" | "$D" -m "$m" --greedy --ignore-eos -n 250 -t $th >"$TMP/got" ||
			fail "exit $?"
		cmp "$TMP/want" "$TMP/got" || fail "threads $th: ids differ from reference"
	done
}

grow_on_demand_and_prealloc_give_identical_ids() {
	m=$(tiny q8_0)
	echo 1 | "$D" -m "$m" --greedy --ignore-eos -n 320 --stats-json --kv-out "$TMP/a.kv" \
		>"$TMP/a" 2>"$TMP/a.err" || fail "exit $?"
	echo 1 | "$D" -m "$m" --greedy --ignore-eos -n 320 --kv-prealloc --stats-json --kv-out "$TMP/b.kv" \
		>"$TMP/b" 2>"$TMP/b.err" || fail "exit $?"
	[ "$(wc -l <"$TMP/a")" -eq 320 ] || fail "$(wc -l <"$TMP/a") ids"
	cmp "$TMP/a" "$TMP/b" || fail "ids differ"
	# The ids of a random model hardly depend on attention; the caches do.
	cmp "$TMP/a.kv" "$TMP/b.kv" || fail "the grown and dense caches differ"
	grep -q '"kv_capacity":512' "$TMP/a.err" || fail "grown capacity: $(cat "$TMP/a.err")"
	# tiny: 3 layers x 32 kv_dim x 4 bytes x 2 (K, V) per position
	grep -q '"kv_bytes":393216,' "$TMP/a.err" || fail "grown bytes: $(cat "$TMP/a.err")"
	# resident: the 320 positions written (3 layers x 128 bytes x 2), in whole pages
	res=$(sed -n 's/.*"kv_resident_bytes":\([0-9]*\).*/\1/p' "$TMP/a.err")
	[ "$res" -ge 245760 ] && [ "$res" -le $((245760 + 6 * 4096)) ] || fail "resident $res"
	grep -q '"kv_bytes":393216,' "$TMP/b.err" || fail "dense bytes: $(cat "$TMP/b.err")"
	echo 1 | "$D" -m "$m" --greedy -n 3 --ctx 300 --kv-prealloc --stats-json 2>&1 >/dev/null |
		grep -q '"kv_bytes":230400,.*"kv_capacity":300' || fail "prealloc of --ctx 300"
}

# A run whose end is known (its prompt and -n within the context) grows
# once before its first pass, to the capacity the doubling would reach:
# no rows move, and only the pages written are resident.  One whose end
# is past the context grows as it goes, moving rows.
a_known_run_grows_once() {
	m=$(tiny q8_0)
	echo 1 | "$D" -m "$m" --greedy --ignore-eos -n 300 --stats-json >"$TMP/a" 2>"$TMP/a.js" || fail "exit $?"
	# resident: 301 positions of 3 layers x 128 bytes x 2 (K, V), in whole pages, not 512
	json_assert "$TMP/a.js" "d['kv_capacity'] == 512 and d['kv_moved_bytes'] == 0 and \
	    231168 <= d['kv_resident_bytes'] <= 231168 + 6 * 4096 and d['generated_tokens'] == 300"
	echo 1 | "$D" -m "$m" --greedy --ignore-eos -n 300 --ctx 200 --stats-json >"$TMP/b" 2>"$TMP/b.err"
	[ $? -eq 1 ] || fail "past the context: not exit 1"
	head -n 1 "$TMP/b.err" >"$TMP/b.js"
	json_assert "$TMP/b.js" "d['kv_capacity'] == 200 and d['kv_moved_bytes'] > 0"
	head -n 200 "$TMP/a" | cmp -s - "$TMP/b" || fail "the ids differ: $(wc -l <"$TMP/b")"
}

context_overflow_exits_nonzero_after_emitting_tokens() {
	m=$(tiny f32)
	# 5 prompt tokens fill positions 0-4; each further token needs a position,
	# so --ctx 20 gives 16 tokens and the 17th cannot be computed.
	echo "1 5 9 13 17" | "$D" -m "$m" --greedy --ignore-eos -n 50 --ctx 20 >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "exit $rc"
	[ "$(wc -l <"$TMP/out")" -eq 16 ] || fail "$(wc -l <"$TMP/out") tokens emitted"
	[ "$(cat "$TMP/err")" = "llm-decode: $m: context full: position 20 is past max_ctx 20 (16 tokens generated)" ] ||
		fail "message: $(cat "$TMP/err")"
	# The tokens emitted are those of a run with room to spare.
	echo "1 5 9 13 17" | "$D" -m "$m" --greedy --ignore-eos -n 16 >"$TMP/want"
	cmp "$TMP/want" "$TMP/out" || fail "emitted tokens differ"
}

prompt_longer_than_context_is_refused() {
	m=$(tiny f32)
	seq 1 30 | "$D" -m "$m" --ctx 20 >"$TMP/out" 2>"$TMP/err"
	[ $? -eq 1 ] || fail "exit"
	[ ! -s "$TMP/out" ] || fail "output"
	grep -q '30 prompt tokens do not fit max_ctx 20' "$TMP/err" || fail "$(cat "$TMP/err")"
}

bad_token_ids_are_named_with_position() {
	m=$(tiny f32)
	printf '1 2\n abc 4' | "$D" -m "$m" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "non-numeric accepted"
	grep -q "^llm-decode: stdin: token 2 ('abc'): not a decimal token id$" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
	printf '1 320' | "$D" -m "$m" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "out of range accepted"
	grep -q "token 1 ('320'): id out of range (vocabulary has 320 ids, 0-319)" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
	printf '99999999999999999999' | "$D" -m "$m" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "huge accepted"
	printf -- '-1' | "$D" -m "$m" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "negative accepted"
}

score_prints_log_probs_and_perplexity() {
	m=$(tiny f32)
	echo "1 40 41 42 43 44" | "$D" -m "$m" --score >"$TMP/out" 2>"$TMP/err" || fail "exit $?"
	[ "$(wc -l <"$TMP/out")" -eq 5 ] || fail "$(wc -l <"$TMP/out") scores"
	awk '$1 > 0 || $1 !~ /^-?[0-9]+\.[0-9]+$/ { exit 1 }' "$TMP/out" || fail "bad score: $(cat "$TMP/out")"
	grep -Eq '^scored 5 tokens, perplexity [0-9.]+$' "$TMP/err" || fail "$(cat "$TMP/err")"
	# perplexity = exp(-mean log p)
	want=$(awk '{ s += $1 } END { printf "%.2f", exp(-s / NR) }' "$TMP/out")
	got=$(sed -n 's/.*perplexity //p' "$TMP/err" | awk '{ printf "%.2f", $1 }')
	[ "$want" = "$got" ] || fail "perplexity $got, want $want"
}

score_does_not_depend_on_batch_boundaries() {
	m=$(tiny q8_0)
	# 150 tokens run as batches of 64, 64 and 21; a 71-token prefix as 64 and 6
	seq 100 249 | "$D" -m "$m" --score >"$TMP/all" 2>/dev/null || fail "exit $?"
	seq 100 170 | "$D" -m "$m" --score >"$TMP/prefix" 2>/dev/null || fail "exit $?"
	[ "$(wc -l <"$TMP/all")" -eq 149 ] || fail "$(wc -l <"$TMP/all") scores"
	head -n 70 "$TMP/all" | cmp - "$TMP/prefix" || fail "the prefix scores differ"
}

stops_at_eos_unless_ignore_eos() {
	echo 1 | "$D" -m "$(tiny f32)" --greedy --ignore-eos -n 40 >"$TMP/free"
	# Make a model whose EOS is the 6th token greedy decoding produces.
	eos=$(sed -n 6p "$TMP/free")
	first=$(grep -n "^$eos\$" "$TMP/free" | head -n 1 | cut -d: -f1)
	"$PWD/tools/mkmodel" -t f32 -E "$eos" -o "$TMP/eos.gguf" || fail "exit $?"
	echo 1 | "$D" -m "$TMP/eos.gguf" --greedy -n 40 >"$TMP/out" || fail "exit $?"
	head -n $((first - 1)) "$TMP/free" | cmp - "$TMP/out" || fail "did not stop before EOS $eos"
	echo 1 | "$D" -m "$TMP/eos.gguf" --greedy --ignore-eos -n 40 | cmp - "$TMP/free" ||
		fail "--ignore-eos did not run on"
	# Llama 3's end of turn and end of message stop it too
	for end in T M; do
		"$PWD/tools/mkmodel" -t f32 -$end "$eos" -o "$TMP/end$end.gguf" || fail "exit $?"
		echo 1 | "$D" -m "$TMP/end$end.gguf" --greedy -n 40 >"$TMP/out" || fail "exit $?"
		head -n $((first - 1)) "$TMP/free" | cmp -s - "$TMP/out" || fail "did not stop before -$end $eos"
	done
}

sampling_is_reproducible_for_a_seed() {
	m=$(tiny f32)
	echo 1 | "$D" -m "$m" --temp 1.5 --top-k 100 --top-p 0.98 --seed 7 -n 40 --ignore-eos >"$TMP/a"
	echo 1 | "$D" -m "$m" --temp 1.5 --top-k 100 --top-p 0.98 --seed 7 -n 40 --ignore-eos -t 1 >"$TMP/b"
	echo 1 | "$D" -m "$m" --temp 1.5 --top-k 100 --top-p 0.98 --seed 8 -n 40 --ignore-eos >"$TMP/c"
	[ "$(wc -l <"$TMP/a")" -eq 40 ] || fail "count"
	cmp "$TMP/a" "$TMP/b" || fail "same seed differs"
	! cmp -s "$TMP/a" "$TMP/c" || fail "seeds 7 and 8 gave the same 40 tokens"
	# top-k 1 is greedy whatever the seed, and so is top-p 0
	echo 1 | "$D" -m "$m" --greedy -n 20 --ignore-eos >"$TMP/greedy"
	echo 1 | "$D" -m "$m" --top-k 1 --seed 3 -n 20 --ignore-eos | cmp - "$TMP/greedy" ||
		fail "top-k 1 is not greedy"
	echo 1 | "$D" -m "$m" --temp 2 --top-k 0 --top-p 0 --seed 3 -n 20 --ignore-eos |
		cmp - "$TMP/greedy" || fail "top-p 0 is not greedy"
}

conflicting_options_are_refused() {
	m=$(tiny f32)
	for opt in "--temp 1" "--top-k 5" "--top-p 0.5"; do
		echo 1 | "$D" -m "$m" --greedy $opt -n 2 >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "--greedy $opt accepted"
		grep -q "^llm-decode: --greedy and ${opt% *} conflict" "$TMP/err" || fail "$(cat "$TMP/err")"
	done
	echo 1 | "$D" -m "$m" --greedy --seed 4 -n 2 >/dev/null || fail "--greedy --seed refused"
}

stats_json_is_one_line_with_the_keys() {
	echo "1 2 3" | "$D" -m "$(tiny q8_0)" -n 4 --ignore-eos --stats-json >/dev/null 2>"$TMP/err" || fail "exit $?"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$(cat "$TMP/err")"
	for k in prompt_tokens generated_tokens ttft_ms prefill_tok_s decode_tok_s \
	    kv_bytes kv_resident_bytes kv_grow_ms kv_moved_bytes kv_capacity max_ctx peak_rss_bytes; do
		grep -q "\"$k\":[0-9]" "$TMP/err" || fail "no $k: $(cat "$TMP/err")"
	done
	grep -q '"prompt_tokens":3,"generated_tokens":4,' "$TMP/err" || fail "$(cat "$TMP/err")"
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys; json.load(sys.stdin)' <"$TMP/err" || fail "not JSON"
	fi
	echo 1 | "$D" -m "$(tiny q8_0)" -n 2 --stats 2>&1 >/dev/null | grep -q 'tok/s' || fail "--stats"
}

usage_and_bad_files() {
	"$D" -h >"$TMP/out" 2>&1; [ $? -eq 0 ] || fail "-h exit"
	grep -q '^usage: llm-decode -m MODEL' "$TMP/out" || fail "-h text"
	"$D" </dev/null 2>/dev/null; [ $? -eq 2 ] || fail "no -m"
	"$D" -m x -n lots </dev/null 2>"$TMP/err"; [ $? -eq 2 ] || fail "-n lots"
	grep -q "^llm-decode: -n: 'lots'" "$TMP/err" || fail "$(cat "$TMP/err")"
	"$D" -m "$TMP/none.gguf" </dev/null 2>"$TMP/err"; [ $? -eq 1 ] || fail "missing file"
	grep -q "^llm-decode: $TMP/none.gguf: No such file or directory$" "$TMP/err" || fail "$(cat "$TMP/err")"
	head -c 1000 "$(tiny f32)" >"$TMP/cut.gguf"
	echo 1 | "$D" -m "$TMP/cut.gguf" 2>"$TMP/err"; [ $? -eq 1 ] || fail "truncated"
	grep -q "^llm-decode: $TMP/cut.gguf: .*past end of file$" "$TMP/err" || fail "$(cat "$TMP/err")"
}

empty_prompt_starts_from_bos() {
	m=$(tiny f32)
	"$D" -m "$m" --greedy -n 5 --ignore-eos </dev/null >"$TMP/a" || fail "exit"
	echo 1 | "$D" -m "$m" --greedy -n 5 --ignore-eos | cmp - "$TMP/a" || fail "differs from BOS prompt"
}

# --warmup runs the prompt's first batch on a scratch cache first: the output and the cache are the same.
warmup_changes_nothing_but_the_clock() {
	m=$(tiny q8_0)
	echo "1 5 9" | "$D" -m "$m" -n 20 --greedy --ignore-eos --kv-out "$TMP/a.kv" >"$TMP/a" || fail "exit $?"
	echo "1 5 9" | "$D" -m "$m" -n 20 --greedy --ignore-eos --warmup --kv-out "$TMP/b.kv" \
		--stats-json >"$TMP/b" 2>"$TMP/js" || fail "exit $?"
	cmp -s "$TMP/a" "$TMP/b" || fail "the tokens differ"
	cmp -s "$TMP/a.kv" "$TMP/b.kv" || fail "the caches differ"
	grep -q '"computed_tokens":22,' "$TMP/js" || fail "$(cat "$TMP/js")"
	# a prompt longer than a batch, a quantized cache and a window
	seq 3 200 | "$D" -m "$m" -n 8 --greedy --ignore-eos --kv-type q4_0 --kv-window 96 >"$TMP/a" || fail "exit $?"
	seq 3 200 | "$D" -m "$m" -n 8 --greedy --ignore-eos --kv-type q4_0 --kv-window 96 --warmup >"$TMP/b" ||
		fail "exit $?"
	cmp -s "$TMP/a" "$TMP/b" || fail "the tokens differ with a long prompt"
}

# The stats say only what was measured: no rate for one token, no seed
# for a greedy run; a score of fewer than two tokens has no perplexity,
# and a vast one prints in six significant digits (issue 34).
stats_and_score_lines_say_only_what_was_measured() {
	m=$(tiny f32)
	echo 1 | "$D" -m "$m" -n 1 --greedy --stats 2>"$TMP/err" >/dev/null || fail "exit $?"
	grep -q ' 1 generated, ttft' "$TMP/err" || fail "one token: $(cat "$TMP/err")"
	! grep -q 'seed' "$TMP/err" || fail "greedy printed a seed: $(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" -n 3 --seed 5 --stats 2>"$TMP/err" >/dev/null || fail "exit $?"
	grep -q ' 3 generated at [0-9.]* tok/s' "$TMP/err" && grep -q ', seed 5$' "$TMP/err" ||
		fail "three tokens: $(cat "$TMP/err")"
	echo 5 | "$D" -m "$m" --score 2>"$TMP/err" >"$TMP/out" || fail "exit $?"
	[ "$(cat "$TMP/err")" = "scored 0 tokens" ] || fail "one token scored: $(cat "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "scores for one token"
	# a model whose logits are wild: a perplexity far past 1e6
	"$PWD/tools/mkmodel" -w 2 -o "$TMP/wild.gguf" || fail "mkmodel"
	seq 1 40 | "$D" -m "$TMP/wild.gguf" --score 2>"$TMP/err" >/dev/null || fail "exit $?"
	p=$(sed -n 's/^scored 39 tokens, perplexity //p' "$TMP/err")
	[ -n "$p" ] && [ ${#p} -le 12 ] || fail "perplexity '$p': $(cat "$TMP/err")"
	awk -v p="$p" 'BEGIN { exit !(p + 0 > 1) }' || fail "perplexity '$p' does not parse"
}

# A snapshot that cannot be written is refused before any work: a missing
# directory, a directory, one we may not write in.  Nothing is generated.
doomed_kv_out_is_refused_before_the_work() {
	m=$(tiny q8_0)
	for o in "$TMP/no/such/dir/s.kv" "$TMP"; do
		echo 1 2 3 | "$D" -m "$m" -n 5 --kv-out "$o" >"$TMP/out" 2>"$TMP/err"
		[ $? -eq 1 ] || fail "$o: exit status"
		[ ! -s "$TMP/out" ] || fail "$o: tokens were generated: $(cat "$TMP/out")"
		grep -q "^llm-decode: $o: " "$TMP/err" || fail "$o: $(cat "$TMP/err")"
		[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$o: $(cat "$TMP/err")"
	done
	grep -q 'is a directory' "$TMP/err" || fail "$(cat "$TMP/err")"
	ls -a "$TMP" | grep -q '\.tmp-' && fail "a temporary file was left"
	# the check leaves nothing behind where it can write
	echo 1 2 3 | "$D" -m "$m" -n 5 --kv-out "$TMP/ok.kv" >/dev/null || fail "exit $?"
	[ -s "$TMP/ok.kv" ] || fail "no snapshot"
	return 0
}

# Rough edges a new user met (issue 34): each message says what is wrong
# and what to do; a contradiction is a usage error.
messages_say_what_to_do() {
	m=$(tiny q8_0)
	"$D" -m "$m" "Once upon a time" </dev/null >/dev/null 2>"$TMP/err"
	[ $? -eq 2 ] || fail "a stray argument: exit status"
	grep -q "^llm-decode: 'Once upon a time': .*token ids on standard input" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
	# getopt's own messages carry the tool's name, not the path typed
	"$BIN/../cmd/llm-decode" --bogus 2>&1 | head -n 1 | grep -q "^llm-decode: unrecognized option '--bogus'" ||
		fail "$("$BIN/../cmd/llm-decode" --bogus 2>&1 | head -n 1)"
	"$BIN/../cmd/llm-tokenize" -Z 2>&1 | head -n 1 | grep -q "^llm-tokenize: invalid option" || fail "tokenize -Z"
	echo 1 | "$D" -m "$m" -n 1 --ctx 4096 2>&1 >/dev/null | grep -q "^llm-decode: warning: --ctx 4096 is beyond" ||
		fail "--ctx: no warning: prefix"
	for o in "-n 5" --greedy "--seed 3" "--temp 1" --ignore-eos; do
		# shellcheck disable=SC2086
		echo 1 2 3 | "$D" -m "$m" --score $o >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "--score $o is not a usage error"
		grep -q "^llm-decode: --score and" "$TMP/err" || fail "$(cat "$TMP/err")"
	done
}

# A resume takes the cache's types and window from the snapshot; a
# conflicting --kv-type is an error; one that reuses nothing says why.
resume_takes_the_snapshots_cache() {
	m=$(tiny q8_0)
	echo 1 2 3 4 5 6 7 8 | "$D" -m "$m" -n 4 --greedy --kv-type q8_0 --kv-out "$TMP/q8.kv" >"$TMP/a" ||
		fail "save"
	{ echo 1 2 3 4 5 6 7 8; cat "$TMP/a"; echo 9; } >"$TMP/more"
	"$D" -m "$m" -n 4 --greedy --kv-in "$TMP/q8.kv" --stats-json <"$TMP/more" >"$TMP/b" 2>"$TMP/js" ||
		fail "resume without --kv-type: $(cat "$TMP/js")"
	json_assert "$TMP/js" "d['kv_type_k'] == 'q8_0' and d['kv_type_v'] == 'q8_0' and d['reused_tokens'] > 0"
	"$D" -m "$m" -n 4 --greedy --kv-type q8_0 <"$TMP/more" | cmp - "$TMP/b" || fail "resumed ids differ"
	"$D" -m "$m" -n 4 --greedy --kv-in "$TMP/q8.kv" --kv-type-v f32 <"$TMP/more" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "a conflicting type: exit status"
	grep -q "cache is k q8_0 v q8_0, this run's k q8_0 v f32" "$TMP/err" || fail "$(cat "$TMP/err")"
	# the stats count reused tokens apart from those computed
	"$D" -m "$m" -n 2 --kv-in "$TMP/q8.kv" --stats <"$TMP/more" 2>&1 >/dev/null |
		grep -q "prompt tokens ([0-9]* reused, [0-9]* computed at" || fail "stats label"
	# nothing reused: said without --stats, and why; -q quiet
	echo 9 9 9 | "$D" -m "$m" -n 1 --kv-in "$TMP/q8.kv" 2>"$TMP/err" >/dev/null || fail "exit $?"
	grep -q "^llm-decode: $TMP/q8.kv: nothing reused: the input's first token is not the snapshot's" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
	echo 9 9 9 | "$D" -m "$m" -n 1 -q --kv-in "$TMP/q8.kv" 2>"$TMP/err" >/dev/null || fail "exit $?"
	[ ! -s "$TMP/err" ] || fail "-q: $(cat "$TMP/err")"
	# a windowed snapshot: the window too
	echo 1 2 3 | "$D" -m "$m" -n 100 --ignore-eos --greedy --ctx 128 --kv-window 64 --kv-out "$TMP/w.kv" \
		>"$TMP/w" || fail "windowed save"
	{ echo 1 2 3; cat "$TMP/w"; echo 5; } | "$D" -m "$m" -n 1 --ctx 128 --kv-in "$TMP/w.kv" --stats-json \
		2>"$TMP/js" >/dev/null || fail "windowed resume: $(cat "$TMP/js")"
	json_assert "$TMP/js" "d['kv_window'] == 64 and d['kv_sinks'] == 4 and d['reused_tokens'] > 64"
}

t stories260K_reproduces_reference_ids
t grow_on_demand_and_prealloc_give_identical_ids
t a_known_run_grows_once
t context_overflow_exits_nonzero_after_emitting_tokens
t prompt_longer_than_context_is_refused
t bad_token_ids_are_named_with_position
t score_prints_log_probs_and_perplexity
t score_does_not_depend_on_batch_boundaries
t stops_at_eos_unless_ignore_eos
t sampling_is_reproducible_for_a_seed
t stats_json_is_one_line_with_the_keys
t conflicting_options_are_refused
t usage_and_bad_files
t empty_prompt_starts_from_bos
t warmup_changes_nothing_but_the_clock
t stats_and_score_lines_say_only_what_was_measured
t doomed_kv_out_is_refused_before_the_work
t messages_say_what_to_do
t resume_takes_the_snapshots_cache
