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
	"$PWD/tools/mkmodel" -t q8_0 -S 7 -o "$TMP/other.gguf" || fail "exit $?"
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
	json_assert "$TMP/json" 'd["positions"] == 100 and len(d["per_layer"]) == 3 and
		d["per_layer"][0]["k"]["rms"] > 0 and "window" not in d'
	"$S" --layer 2 --json "$TMP/s.kv" >"$TMP/json2" || fail "--layer 2 exit"
	json_assert "$TMP/json2" '[x["layer"] for x in d["per_layer"]] == [2]'
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
	grep -q -- "--pos: position 10 is out of range (0-9)" "$TMP/err" || fail "$(cat "$TMP/err")"
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

# wait_lines FILE N: wait up to 20 s for FILE to have N lines.
wait_lines() {
	i=0
	while [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -lt "$2" ] && [ $i -lt 200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ $i -lt 200 ] || fail "$1 never reached $2 lines"
}

closed_stdout_stops_quietly_and_saves_the_snapshot() {
	m=$(tiny f32)
	rm -f "$TMP/pipe.kv" "$TMP/head.kv" "$TMP/rc"
	# The reader is gone before the first token is written: EPIPE, not SIGPIPE.
	{ sleep 1; echo "1 40 41 42" | "$D" -m "$m" --greedy --ignore-eos -n 100 \
		--kv-out "$TMP/pipe.kv" 2>"$TMP/err"; echo $? >"$TMP/rc"; } | true
	[ "$(cat "$TMP/rc")" -eq 141 ] || fail "exit $(cat "$TMP/rc")"
	[ ! -s "$TMP/err" ] || fail "not quiet: $(cat "$TMP/err")"
	[ "$("$K" --tokens "$TMP/pipe.kv" | tr '\n' ' ')" = "1 40 41 42 " ] ||
		fail "saved $("$K" --tokens "$TMP/pipe.kv" | tr '\n' ' ')"
	# And as a user writes it: whatever head took, the cache holds its tokens.
	echo "1 40 41 42" | "$D" -m "$m" --greedy --ignore-eos -n 400 --kv-out "$TMP/head.kv" |
		head -n 2 >"$TMP/two"
	[ "$(wc -l <"$TMP/two")" -eq 2 ] || fail "head got $(wc -l <"$TMP/two") lines"
	"$K" --tokens "$TMP/head.kv" | sed -n 5,6p | cmp - "$TMP/two" || fail "the snapshot lacks the tokens read"
}

# interrupted SIGNAL: a long generation stopped by SIGNAL saves what it computed.
interrupted() {
	m=$(tiny f32)
	rm -f "$TMP/$1.kv" "$TMP/$1.out"
	echo "1 40 41 42" | env --default-signal=INT "$D" -m "$m" --greedy --ignore-eos \
		-n 60000 --ctx 65536 --kv-out "$TMP/$1.kv" >"$TMP/$1.out" 2>"$TMP/$1.err" &
	pid=$!
	wait_lines "$TMP/$1.out" 20
	kill -s "$1" $pid
	wait $pid
	echo $?
}

sigterm_during_generation_saves_every_token_emitted() {
	rc=$(interrupted TERM)
	[ "$rc" -eq 143 ] || fail "exit $rc: $(cat "$TMP/TERM.err")"
	grep -q "^llm-decode: stopped by Terminated after 4 of 4 prompt tokens computed and [0-9]* generated; the cache was saved$" \
		"$TMP/TERM.err" || fail "$(cat "$TMP/TERM.err")"
	n=$(wc -l <"$TMP/TERM.out")
	[ "$n" -ge 20 ] && [ "$n" -lt 60000 ] || fail "$n tokens"
	# Every emitted token was fed back before the run stopped: the cache holds them all,
	# bitwise as a run that computes the same tokens from scratch.
	{ echo "1 40 41 42"; cat "$TMP/TERM.out"; } >"$TMP/all"
	"$K" --tokens "$TMP/TERM.kv" | tr '\n' ' ' >"$TMP/saved"
	tr -s ' \n' '  ' <"$TMP/all" | cmp - "$TMP/saved" || fail "saved tokens differ"
	rm -f "$TMP/scratch.kv"
	"$D" -m "$(tiny f32)" -n 0 --ctx 65536 --kv-out "$TMP/scratch.kv" <"$TMP/all" || fail "scratch"
	cmp "$TMP/TERM.kv" "$TMP/scratch.kv" || fail "the saved cache differs from scratch"
}

sigint_during_prefill_saves_the_batches_done() {
	m=$(tiny f32)
	rm -f "$TMP/INT.kv"
	# 30000 tokens take minutes (attention over a long prompt is quadratic),
	# so the signal comes during the prefill on any machine; the run stops
	# at the end of the batch it is in
	seq 1 30000 | awk '{ print $1 % 300 + 3 }' >"$TMP/long"
	env --default-signal=INT "$D" -m "$m" -n 5 --ctx 32768 --kv-out "$TMP/INT.kv" \
		<"$TMP/long" >"$TMP/INT.out" 2>"$TMP/INT.err" &
	pid=$!
	sleep 0.5
	kill -s INT $pid
	wait $pid
	rc=$?
	[ $rc -eq 130 ] || fail "exit $rc: $(cat "$TMP/INT.err")"
	[ ! -s "$TMP/INT.out" ] || fail "generated during the prefill"
	n=$("$K" --tokens "$TMP/INT.kv" | wc -l)
	# whole batches of 64, a prefix of the prompt
	[ "$n" -gt 0 ] && [ "$n" -lt 30000 ] && [ $((n % 64)) -eq 0 ] || fail "$n positions saved"
	# the message says how far the prompt went, not "0 generated" alone
	grep -q "^llm-decode: stopped by Interrupt after $n of 30000 prompt tokens computed and 0 generated; the cache was saved$" \
		"$TMP/INT.err" || fail "$(cat "$TMP/INT.err")"
	head -n "$n" "$TMP/long" | cmp - "$("$K" --tokens "$TMP/INT.kv" >"$TMP/INT.tok"; echo "$TMP/INT.tok")" ||
		fail "the saved tokens are not a prefix of the prompt"
	# resuming from it computes only what follows
	head -n $((n + 10)) "$TMP/long" >"$TMP/more"
	"$D" -m "$m" -n 0 --ctx 32768 --kv-in "$TMP/INT.kv" --stats-json <"$TMP/more" 2>"$TMP/js" >/dev/null ||
		fail "resume: $(cat "$TMP/js")"
	grep -q "\"reused_tokens\":$n,\"computed_tokens\":10," "$TMP/js" || fail "$(cat "$TMP/js")"
}

two_writers_of_one_snapshot_leave_a_whole_file() {
	m=$(tiny f32)
	seq 1 1000 | awk '{ print $1 % 300 + 3 }' >"$TMP/pa"
	seq 1 900 | awk '{ print $1 % 290 + 5 }' >"$TMP/pb"
	rm -f "$TMP/a.kv" "$TMP/b.kv" "$TMP/both.kv"
	"$D" -m "$m" -n 0 --ctx 1024 --kv-out "$TMP/a.kv" <"$TMP/pa" || fail "a"
	"$D" -m "$m" -n 0 --ctx 1024 --kv-out "$TMP/b.kv" <"$TMP/pb" || fail "b"
	for round in 1 2 3; do
		"$D" -m "$m" -n 0 --ctx 1024 --kv-out "$TMP/both.kv" <"$TMP/pa" &
		p1=$!
		"$D" -m "$m" -n 0 --ctx 1024 --kv-out "$TMP/both.kv" <"$TMP/pb" &
		p2=$!
		wait $p1 || fail "round $round: first writer"
		wait $p2 || fail "round $round: second writer"
		"$S" "$TMP/both.kv" >/dev/null || fail "round $round: not a valid snapshot"
		cmp -s "$TMP/both.kv" "$TMP/a.kv" || cmp -s "$TMP/both.kv" "$TMP/b.kv" ||
			fail "round $round: neither writer's snapshot"
	done
	! ls -a "$TMP" | grep -q '\.tmp-' || fail "temporary file left"
}

kvstat_layer_shows_only_that_layer_even_in_svg() {
	m=$(tiny f32)
	seq 1 10 | "$D" -m "$m" -n 1 --kv-out "$TMP/l.kv" >/dev/null || fail "exit $?"
	# damage layer 1's V block (10 positions x 32 floats: one 4 KiB page per block)
	printf 'X' | dd of="$TMP/l.kv" bs=1 seek=$((4096 + 3 * 4096 + 7)) conv=notrunc 2>/dev/null
	"$S" "$TMP/l.kv" >/dev/null 2>"$TMP/err"; [ $? -eq 1 ] || fail "damage not seen"
	grep -q "layer 1: V block checksum mismatch" "$TMP/err" || fail "$(cat "$TMP/err")"
	rm -f "$TMP/l.svg"
	"$S" --layer 0 --svg "$TMP/l.svg" "$TMP/l.kv" >/dev/null || fail "--layer 0"
	# one layer label in each of the K and V panels, and only layer 0's cells
	[ "$(grep -c 'text-anchor="end">[0-9]*</text>' "$TMP/l.svg")" -eq 2 ] ||
		fail "$(grep -c 'text-anchor="end">' "$TMP/l.svg") layer labels"
	! grep -q 'text-anchor="end">[12]</text>' "$TMP/l.svg" || fail "unverified layers drawn"
}

kvdump_refuses_conflicting_and_bad_selections() {
	m=$(tiny f32)
	seq 1 10 | "$D" -m "$m" -n 1 --kv-out "$TMP/c2.kv" >/dev/null || fail "exit $?"
	"$K" --k --v "$TMP/c2.kv" >/dev/null 2>"$TMP/err"; [ $? -eq 2 ] || fail "--k --v accepted"
	grep -q "^llm-kvdump: --k and --v conflict" "$TMP/err" || fail "$(cat "$TMP/err")"
	for bad in x 1- -1 1-2-3 3x 99999999999; do
		"$K" --pos "$bad" "$TMP/c2.kv" >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "--pos $bad accepted"
		grep -q "^llm-kvdump: --pos: '$bad': expected a position" "$TMP/err" || fail "$(cat "$TMP/err")"
	done
	"$K" --pos 2-9 --k --layer 2 "$TMP/c2.kv" | tail -n +2 | wc -l | grep -qx 256 || fail "--pos 2-9"
	# the tokens belong to no layer, store, position range or head
	for o in "--layer 1" --k --v "--pos 2" "--head 0"; do
		# shellcheck disable=SC2086
		"$K" --tokens $o "$TMP/c2.kv" >"$TMP/out" 2>"$TMP/err"
		[ $? -eq 2 ] || fail "--tokens $o accepted: $(head -c 80 "$TMP/out")"
		grep -q "^llm-kvdump: --tokens and --" "$TMP/err" || fail "$(cat "$TMP/err")"
	done
}

cache_types_resume_and_show_in_the_tools() {
	m=$(tiny q8_0)
	seq 1 70 >"$TMP/p70"
	for ty in f16 q8_0 q4_0; do
		rm -f "$TMP/$ty.kv" "$TMP/$ty-scratch.kv"
		"$D" -m "$m" --kv-type $ty --greedy --ignore-eos -n 20 --kv-out "$TMP/$ty.kv" <"$TMP/p70" >"$TMP/$ty.t1" ||
			fail "$ty: exit $?"
		{ cat "$TMP/p70" "$TMP/$ty.t1"; echo "5 6 7"; } >"$TMP/$ty.p2"
		"$D" -m "$m" --kv-type $ty --greedy --ignore-eos -n 10 --kv-in "$TMP/$ty.kv" --stats-json \
			<"$TMP/$ty.p2" >"$TMP/$ty.r2" 2>"$TMP/$ty.s2" || fail "$ty: resume: $(cat "$TMP/$ty.s2")"
		"$D" -m "$m" --kv-type $ty --greedy --ignore-eos -n 10 <"$TMP/$ty.p2" | cmp - "$TMP/$ty.r2" ||
			fail "$ty: resumed ids differ from scratch"
		grep -q "\"kv_type_k\":\"$ty\",\"kv_type_v\":\"$ty\"" "$TMP/$ty.s2" || fail "$(cat "$TMP/$ty.s2")"
		"$S" "$TMP/$ty.kv" | grep -q "^element type  $ty$" || fail "$ty: llm-kvstat"
		"$S" --json "$TMP/$ty.kv" | grep -q "\"k_type\":\"$ty\",\"v_type\":\"$ty\"" || fail "$ty: json"
		# the values llm-kvdump shows are those of an f32 run, to the type's precision
		"$K" --layer 2 --v --pos 10 "$TMP/$ty.kv" | tail -n +2 | cut -f6 >"$TMP/$ty.vals"
	done
	"$D" -m "$m" --greedy --ignore-eos -n 20 --kv-out "$TMP/f32.kv" <"$TMP/p70" >/dev/null || fail "f32"
	"$K" --layer 2 --v --pos 10 "$TMP/f32.kv" | tail -n +2 | cut -f6 >"$TMP/f32.vals"
	for ty in f16:0.002 q8_0:0.03 q4_0:0.3; do
		paste "$TMP/f32.vals" "$TMP/${ty%:*}.vals" | awk -v lim="${ty#*:}" -v ty="${ty%:*}" '
			{ d = $1 - $2; e += d * d; s += $1 * $1 }
			END { r = sqrt(e / s); if (!(r <= lim) || NR != 32) { print ty ": relative error " r; exit 1 } }' ||
			fail "llm-kvdump values"
	done
	# another type than the snapshot's is refused, naming both
	"$D" -m "$m" --kv-type q8_0 -n 1 --kv-in "$TMP/f16.kv" <"$TMP/f16.p2" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "a f16 snapshot resumed into q8_0"
	grep -q "snapshot's cache is k f16 v f16, this run's k q8_0 v q8_0" "$TMP/err" || fail "$(cat "$TMP/err")"
	# per position, q8_0 takes about a quarter of f32 and q4_0 about a seventh
	"$S" "$TMP/q8_0.kv" | grep -q "^per position  204 bytes (K and V, all layers; f32 takes 768)$" ||
		fail "q8_0: $("$S" "$TMP/q8_0.kv" | grep '^per position')"
	"$S" "$TMP/q4_0.kv" | grep -q "^per position  114 bytes" ||
		fail "q4_0: $("$S" "$TMP/q4_0.kv" | grep '^per position')"
}

cache_type_options_are_checked() {
	m=$(tiny f32)
	echo 1 | "$D" -m "$m" --kv-type q5_0 -n 1 2>"$TMP/err" >/dev/null; [ $? -eq 2 ] || fail "q5_0 accepted"
	grep -q "^llm-decode: --kv-type: 'q5_0': expected f32, f16, q8_0 or q4_0$" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --kv-type q8_0 --kv-type-v f16 -n 1 2>"$TMP/err" >/dev/null
	[ $? -eq 2 ] || fail "--kv-type with --kv-type-v accepted"
	echo 1 | "$D" -m "$m" --kv-type-k q4_0 --kv-type-v q8_0 -n 1 --stats-json 2>"$TMP/err" >/dev/null ||
		fail "mixed types: $(cat "$TMP/err")"
	grep -q '"kv_type_k":"q4_0","kv_type_v":"q8_0"' "$TMP/err" || fail "$(cat "$TMP/err")"
}

# The header sizes and positions table that llm-kv(5) gives each version
# are those the writer writes: each version's file is read against the
# page's claims, parsed from its rows.
man_page_versions_match_the_writer() {
	m=$(tiny f32)
	page="$PWD/man/llm-kv.5"
	# "128 (versions 1 and 2) or 160 (versions 3 to 5)": lines "size first last"
	sed -n 's/^\.It 12 Ta 4 Ta header_size Ta //p' "$page" |
		awk '{ gsub(/ or /, "\n"); print }' | sed -n -E 's/^([0-9]*) \(versions ([0-9]*) (and|to) ([0-9]*)\)$/\1 \2 \4/p' \
		>"$TMP/sizes"
	[ "$(wc -l <"$TMP/sizes")" -eq 2 ] || fail "header_size row not understood: $(cat "$TMP/sizes")"
	pos=$(sed -n 's/^\.It positions Ta positions_offset Ta .*, versions \([0-9]*\) to \([0-9]*\) only$/\1 \2/p' "$page")
	[ -n "$pos" ] || fail "positions row not understood"
	for opts in "" "--kv-type q8_0" "--ctx 64 --kv-window 40" "--kv-type f16" "--kv-type q4_0"; do
		# shellcheck disable=SC2086
		echo 1 2 3 | "$D" -m "$m" -n 50 --greedy --ignore-eos $opts --kv-out "$TMP/v.kv" >/dev/null ||
			fail "$opts: exit $?"
		set -- $(od -An -tu4 -j8 -N8 "$TMP/v.kv")
		v=$1 h=$2
		awk -v v="$v" -v h="$h" '$2 <= v && v <= $3 { ok = $1 == h; found = 1 }
			END { exit !(found && ok) }' "$TMP/sizes" ||
			fail "$opts: version $v has a $h-byte header, not what llm-kv(5) says: $(cat "$TMP/sizes")"
		# positions_offset (at 144) is written exactly in the versions the page names
		set -- $pos
		if [ "$v" -ge "$1" ] && [ "$v" -le "$2" ]; then
			p=$(od -An -tu8 -j144 -N8 "$TMP/v.kv" | tr -d ' ')
			[ "$p" -eq $((h + 4 * $(od -An -tu4 -j36 -N4 "$TMP/v.kv"))) ] ||
				fail "$opts: version $v: positions_offset $p"
		fi
		echo "$v" >>"$TMP/versions"
	done
	[ "$(sort -u "$TMP/versions" | tr '\n' ' ')" = "1 2 3 4 5 " ] ||
		fail "versions written: $(sort -u "$TMP/versions" | tr '\n' ' ')"
}

# --svg - writes the SVG alone to standard output, never a file named "-";
# --raw refuses a terminal.
svg_to_stdout_and_raw_to_a_terminal() {
	m=$(tiny f32)
	seq 1 50 | "$D" -m "$m" -n 1 --kv-out "$TMP/d.kv" >/dev/null || fail "exit $?"
	rm -f "$TMP/-"
	(cd "$TMP" && "$S" --svg - d.kv >out.svg) || fail "--svg - exit $?"
	[ ! -e "$TMP/-" ] || fail "a file named - was written"
	python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg"), r.tag' \
		"$TMP/out.svg" || fail "stdout is not one SVG document: $(head -c 200 "$TMP/out.svg")"
	"$S" --svg - --json "$TMP/d.kv" >/dev/null 2>"$TMP/err"; [ $? -eq 2 ] || fail "--svg - --json accepted"
	grep -q "conflict" "$TMP/err" || fail "$(cat "$TMP/err")"
	# a terminal on standard output, by script(1)
	command -v script >/dev/null || skip "script(1) is needed for a terminal"
	script -qec "$K --raw $TMP/d.kv; echo status \$?" /dev/null >"$TMP/tty" 2>&1
	grep -q "status 2" "$TMP/tty" && grep -q "redirect standard output" "$TMP/tty" ||
		fail "--raw on a terminal: $(cat "$TMP/tty")"
	"$K" --raw "$TMP/d.kv" | wc -c >"$TMP/n" || fail "--raw to a pipe"
	[ "$(cat "$TMP/n")" -eq $((50 * 3 * 2 * 32 * 4)) ] || fail "--raw bytes $(cat "$TMP/n")"
}

t resumed_runs_generate_the_same_ids_as_scratch
t snapshot_of_another_model_is_refused
t failed_write_leaves_the_old_snapshot
t context_overflow_still_saves_the_snapshot
t kvstat_prints_summary_rows_json_and_svg
t kvdump_slices_tsv_raw_and_tokens
t kvdump_tokens_show_the_text_a_cache_holds
t damaged_snapshot_is_a_one_line_error
t closed_stdout_stops_quietly_and_saves_the_snapshot
t sigterm_during_generation_saves_every_token_emitted
t sigint_during_prefill_saves_the_batches_done
t two_writers_of_one_snapshot_leave_a_whole_file
t kvstat_layer_shows_only_that_layer_even_in_svg
t kvdump_refuses_conflicting_and_bad_selections
t cache_types_resume_and_show_in_the_tools
t cache_type_options_are_checked
t man_page_versions_match_the_writer
t svg_to_stdout_and_raw_to_a_terminal
