#!/bin/sh
# Snapshots from the command line: llm-decode --kv-in/--kv-out, llm-kvstat, llm-kvdump.
. tests/lib.sh
D="$BIN/llm-decode"
S="$BIN/llm-kvstat"
K="$BIN/llm-kvdump"

resumed_runs_generate_the_same_ids_as_scratch() {
	m=$(tiny q8_0)
	echo "1 40 41 42" | "$D" -m "$m" --greedy --ignore-eos -n 30 --kv-out "$TMP/c.kv" >"$TMP/t1" || fail "exit $?"
	# turn 2: everything so far plus new user tokens, resumed from the same file
	{ echo "1 40 41 42"; cat "$TMP/t1"; echo "7 8 9"; } >"$TMP/p2"
	"$D" -m "$m" --greedy --ignore-eos -n 30 --kv-in "$TMP/c.kv" --kv-out "$TMP/c.kv" \
		--stats-json <"$TMP/p2" >"$TMP/r2" 2>"$TMP/s2" || fail "resume: $(cat "$TMP/s2")"
	"$D" -m "$m" --greedy --ignore-eos -n 30 --kv-out "$TMP/f2.kv" <"$TMP/p2" >"$TMP/f2" || fail "exit $?"
	cmp "$TMP/r2" "$TMP/f2" || fail "turn 2 differs from scratch"
	# the ids of a random model hardly depend on attention; the caches do
	cmp "$TMP/c.kv" "$TMP/f2.kv" || fail "the resumed cache differs from scratch"
	# 4 prompt tokens + 29 generated tokens were fed in turn 1
	grep -q '"reused_tokens":33,"computed_tokens":33' "$TMP/s2" || fail "$(cat "$TMP/s2")"
	# turn 3
	{ cat "$TMP/p2" "$TMP/r2"; echo 11; } >"$TMP/p3"
	"$D" -m "$m" --greedy --ignore-eos -n 10 --kv-in "$TMP/c.kv" <"$TMP/p3" >"$TMP/r3" || fail "exit $?"
	"$D" -m "$m" --greedy --ignore-eos -n 10 <"$TMP/p3" | cmp - "$TMP/r3" || fail "turn 3 differs"
	# the stored tokens are exactly what was fed
	"$K" --tokens "$TMP/c.kv" >"$TMP/tok"
	{ tr ' ' '\n' <"$TMP/p2" | grep .; head -n 29 "$TMP/r2"; } | cmp - "$TMP/tok" || fail "stored tokens"
}

snapshot_of_another_model_is_refused() {
	m=$(tiny q8_0)
	"$PWD/tests/mkmodel" -t q8_0 -S 7 -o "$TMP/other.gguf" || fail "exit $?"
	echo "1 2 3" | "$D" -m "$m" -n 2 --kv-out "$TMP/x.kv" >/dev/null || fail "exit $?"
	echo "1 2 3" | "$D" -m "$TMP/other.gguf" -n 2 --kv-in "$TMP/x.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "accepted"
	grep -q "^llm-decode: $TMP/x.kv: snapshot was made with a different model" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo "1 2 3" | "$D" -m "$(tiny f32)" -n 2 --kv-in "$TMP/x.kv" >/dev/null 2>&1
	[ $? -eq 1 ] || fail "f32 model accepted a q8_0 snapshot"
}

failed_write_leaves_the_old_snapshot() {
	m=$(tiny f32)
	echo "1 2 3" | "$D" -m "$m" -n 2 --kv-out "$TMP/keep.kv" >/dev/null || fail "exit $?"
	cp "$TMP/keep.kv" "$TMP/keep.orig"
	# a 16 KiB file size limit makes the bigger write fail part way
	(ulimit -f 32; seq 1 200 | "$D" -m "$m" -n 2 --kv-out "$TMP/keep.kv" >/dev/null 2>"$TMP/err")
	[ $? -eq 1 ] || fail "exit status"
	grep -q "keep.kv: File too large" "$TMP/err" || fail "$(cat "$TMP/err")"
	cmp "$TMP/keep.kv" "$TMP/keep.orig" || fail "old snapshot changed"
	! ls -a "$TMP" | grep -q '\.tmp-' || fail "temporary file left"
}

context_overflow_still_saves_the_snapshot() {
	m=$(tiny f32)
	echo "1 2 3" | "$D" -m "$m" --greedy --ignore-eos -n 50 --ctx 20 --kv-out "$TMP/full.kv" >"$TMP/out" 2>/dev/null
	[ $? -eq 1 ] || fail "no overflow"
	[ "$("$K" --tokens "$TMP/full.kv" | wc -l)" -eq 20 ] || fail "$("$K" --tokens "$TMP/full.kv" | wc -l) positions saved"
}

kvstat_prints_summary_rows_json_and_svg() {
	m=$(tiny f32)
	seq 1 100 | "$D" -m "$m" -n 1 --ctx 400 --kv-out "$TMP/s.kv" >/dev/null || fail "exit $?"
	"$S" "$TMP/s.kv" >"$TMP/out" || fail "exit"
	grep -q '^positions     100$' "$TMP/out" || fail "positions"
	grep -q '^layers        3$' "$TMP/out" || fail "layers"
	grep -q '^dense max_ctx 307200 bytes' "$TMP/out" || fail "dense bytes: $(grep dense "$TMP/out")"
	[ "$(grep -c '^    [0-2]  ' "$TMP/out")" -eq 3 ] || fail "per-layer rows"
	"$S" --json "$TMP/s.kv" >"$TMP/json" || fail "json exit"
	grep -q '"positions":100' "$TMP/json" || fail "json positions"
	if command -v python3 >/dev/null; then
		python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d["per_layer"]) == 3; assert d["per_layer"][0]["k"]["rms"] > 0' <"$TMP/json" || fail "json"
	fi
	"$S" --layer 2 --json "$TMP/s.kv" | grep -q '"per_layer":\[{"layer":2,' || fail "--layer"
	"$S" --layer 3 "$TMP/s.kv" 2>"$TMP/err"; [ $? -eq 1 ] || fail "--layer 3 accepted"
	grep -q "out of range (0-2)" "$TMP/err" || fail "$(cat "$TMP/err")"
	"$S" --svg "$TMP/s.svg" "$TMP/s.kv" >/dev/null || fail "svg exit"
	head -c 5 "$TMP/s.svg" | grep -q '<?xml' || fail "svg header"
	grep -q '>layer</text>' "$TMP/s.svg" && grep -q '>position</text>' "$TMP/s.svg" || fail "axes"
	[ "$(grep -c '<rect' "$TMP/s.svg")" -ge 600 ] || fail "cells"
	if command -v python3 >/dev/null; then
		python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$TMP/s.svg" || fail "svg is not well-formed"
	fi
}

kvdump_slices_tsv_raw_and_tokens() {
	m=$(tiny f32)
	seq 1 10 | "$D" -m "$m" -n 1 --kv-out "$TMP/d.kv" >/dev/null || fail "exit $?"
	"$K" --layer 1 --k --pos 2-4 --head 1 "$TMP/d.kv" >"$TMP/tsv" || fail "exit"
	[ "$(head -n 1 "$TMP/tsv")" = "$(printf 'layer\tkv\tpos\thead\tdim\tvalue')" ] || fail "header"
	# 3 positions x head_dim 16
	[ "$(wc -l <"$TMP/tsv")" -eq 49 ] || fail "$(wc -l <"$TMP/tsv") lines"
	awk -F'\t' 'NR > 1 && ($1 != 1 || $2 != "k" || $3 < 2 || $3 > 4 || $4 != 1) { exit 1 }' "$TMP/tsv" || fail "selection"
	"$K" --layer 0 --v --raw "$TMP/d.kv" >"$TMP/raw" || fail "raw exit"
	[ "$(wc -c <"$TMP/raw")" -eq $((10 * 32 * 4)) ] || fail "raw size $(wc -c <"$TMP/raw")"
	# the raw floats are the TSV values
	first=$("$K" --layer 0 --v --pos 0 "$TMP/d.kv" | sed -n 2p | cut -f6)
	raw=$(od -An -tf4 -N4 "$TMP/raw" | tr -d ' ')
	awk -v a="$first" -v b="$raw" 'BEGIN { exit !(a - b < 1e-6 && b - a < 1e-6) }' || fail "raw $raw vs tsv $first"
	[ "$("$K" --tokens "$TMP/d.kv" | tr '\n' ' ')" = "1 2 3 4 5 6 7 8 9 10 " ] || fail "tokens"
	"$K" --pos 10 "$TMP/d.kv" 2>"$TMP/err"; [ $? -eq 1 ] || fail "--pos 10 accepted"
	grep -q -- "--pos 10 is out of range (0-9)" "$TMP/err" || fail "$(cat "$TMP/err")"
	"$K" --head 2 "$TMP/d.kv" 2>"$TMP/err"; [ $? -eq 1 ] || fail "--head 2 accepted"
	grep -q "out of range (0-1)" "$TMP/err" || fail "$(cat "$TMP/err")"
	"$K" --pos 5-2 "$TMP/d.kv" 2>/dev/null; [ $? -eq 2 ] || fail "--pos 5-2"
}

kvdump_tokens_show_the_text_a_cache_holds() {
	m="$SHARED/models/stories260K.gguf"
	need "$m"
	"$BIN/llm-tokenize" -m "$m" 'Once upon a time' | "$D" -m "$m" --greedy -n 8 --kv-out "$TMP/st.kv" >/dev/null || fail "exit $?"
	text=$("$K" --tokens "$TMP/st.kv" | "$BIN/llm-tokenize" -m "$m" -d)
	# 8 tokens generated, ", there was a little gir" "l": the last was never fed back
	[ "$text" = "Once upon a time, there was a little gir" ] || fail "'$text'"
}

damaged_snapshot_is_a_one_line_error() {
	m=$(tiny f32)
	seq 1 10 | "$D" -m "$m" -n 1 --kv-out "$TMP/g.kv" >/dev/null || fail "exit $?"
	head -c 5000 "$TMP/g.kv" >"$TMP/cut.kv"
	for tool in "$S" "$K" "$K --tokens"; do
		$tool "$TMP/cut.kv" >/dev/null 2>"$TMP/err"
		[ $? -eq 1 ] || fail "$tool accepted a truncated file"
		[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$tool: $(cat "$TMP/err")"
	done
	echo 1 | "$D" -m "$m" -n 1 --kv-in "$TMP/cut.kv" 2>"$TMP/err" >/dev/null
	[ $? -eq 1 ] && grep -q "truncated" "$TMP/err" || fail "llm-decode: $(cat "$TMP/err")"
}

t resumed_runs_generate_the_same_ids_as_scratch
t snapshot_of_another_model_is_refused
t failed_write_leaves_the_old_snapshot
t context_overflow_still_saves_the_snapshot
t kvstat_prints_summary_rows_json_and_svg
t kvdump_slices_tsv_raw_and_tokens
t kvdump_tokens_show_the_text_a_cache_holds
t damaged_snapshot_is_a_one_line_error
