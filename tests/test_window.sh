#!/bin/sh
# Windowed eviction from the command line: --kv-window W --kv-sinks S.
. tests/lib.sh
D="$BIN/llm-decode"
S="$BIN/llm-kvstat"
K="$BIN/llm-kvdump"
STORIES="$SHARED/models/stories260K.gguf"

# json KEY FILE: the number of "KEY": in a --stats-json line.
json() {
	sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2"
}

# The issue's proof: 4 x max_ctx tokens, S = 4, W = max_ctx - 4, constant memory.
window_generates_four_times_max_ctx() {
	need "$STORIES"
	echo 1 | "$D" -m "$STORIES" --ctx 256 --kv-sinks 4 --kv-window 252 -n 1024 --greedy \
		--ignore-eos --stats-json >"$TMP/long" 2>"$TMP/long.js" || fail "exit $?: $(cat "$TMP/long.js")"
	[ "$(wc -l <"$TMP/long")" -eq 1024 ] || fail "$(wc -l <"$TMP/long") tokens, not 1024"
	grep -q "context full" "$TMP/long.js" && fail "context full"
	echo 1 | "$D" -m "$STORIES" --ctx 256 --kv-sinks 4 --kv-window 252 -n 300 --greedy \
		--ignore-eos --stats-json >"$TMP/short" 2>"$TMP/short.js" || fail "exit $?"
	# 256 slots of 5 layers x 32 floats x K and V
	[ "$(json kv_bytes "$TMP/long.js")" = 327680 ] || fail "kv_bytes $(json kv_bytes "$TMP/long.js")"
	[ "$(json kv_bytes "$TMP/short.js")" = 327680 ] || fail "kv_bytes $(json kv_bytes "$TMP/short.js")"
	# 1024 positions were run (the prompt and 1023 generated): the last saw 4 + 252
	[ "$(json kv_evicted "$TMP/long.js")" = 768 ] || fail "evicted $(json kv_evicted "$TMP/long.js")"
	head -n 300 "$TMP/long" | cmp -s - "$TMP/short" || fail "the first 300 tokens differ"
}

window_works_for_every_cache_type() {
	m=$(tiny q8_0)
	for ty in f32 f16 q8_0 q4_0; do
		for n in 200 512; do
			echo 1 | "$D" -m "$m" --ctx 128 --kv-type $ty --kv-window 96 -n $n --greedy \
				--ignore-eos --stats-json >"$TMP/$ty.$n" 2>"$TMP/$ty.$n.js" ||
				fail "$ty: exit $?: $(cat "$TMP/$ty.$n.js")"
			[ "$(wc -l <"$TMP/$ty.$n")" -eq $n ] || fail "$ty: $(wc -l <"$TMP/$ty.$n") tokens"
		done
		a=$(json kv_bytes "$TMP/$ty.200.js") b=$(json kv_bytes "$TMP/$ty.512.js")
		[ -n "$a" ] && [ "$a" = "$b" ] || fail "$ty: kv_bytes $a after 200, $b after 512"
		head -n 200 "$TMP/$ty.512" | cmp -s - "$TMP/$ty.200" || fail "$ty: prefixes differ"
	done
}

# Without --kv-window nothing changes: the same tokens, the same error at max_ctx.
no_window_stops_at_max_ctx_as_before() {
	m=$(tiny q8_0)
	echo 1 | "$D" -m "$m" --ctx 64 -n 100 --greedy --ignore-eos >"$TMP/plain" 2>"$TMP/err"
	[ $? -eq 1 ] || fail "plain run past max_ctx exited $?"
	[ "$(cat "$TMP/err")" = "llm-decode: $m: context full: position 64 is past max_ctx 64 (64 tokens generated)" ] ||
		fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --ctx 64 --kv-window 60 -n 100 --greedy --ignore-eos >"$TMP/win" ||
		fail "windowed run exited $?"
	[ "$(wc -l <"$TMP/win")" -eq 100 ] || fail "$(wc -l <"$TMP/win") windowed tokens"
	# before the window slides, it is the plain cache
	head -n 64 "$TMP/win" >"$TMP/win64"
	cmp -s "$TMP/plain" "$TMP/win64" || fail "the tokens before the window slides differ"
}

# resumed TYPE MODEL CTX W: save after 250 tokens, resume for 150 more, compare with 400 at once.
resumed() {
	echo 1 | "$D" -m "$2" --ctx "$3" --kv-window "$4" --kv-type "$1" -n 400 --greedy \
		--ignore-eos >"$TMP/all" || fail "$1: exit $?"
	echo 1 | "$D" -m "$2" --ctx "$3" --kv-window "$4" --kv-type "$1" -n 250 --greedy \
		--ignore-eos --kv-out "$TMP/w.kv" >"$TMP/first" || fail "$1: exit $?"
	{ echo 1; cat "$TMP/first"; } >"$TMP/p2"
	"$D" -m "$2" --ctx "$3" --kv-window "$4" --kv-type "$1" -n 150 --greedy --ignore-eos \
		--kv-in "$TMP/w.kv" --stats-json <"$TMP/p2" >"$TMP/rest" 2>"$TMP/js" ||
		fail "$1: resume: $(cat "$TMP/js")"
	[ "$(json reused_tokens "$TMP/js")" = 250 ] || fail "$1: reused $(json reused_tokens "$TMP/js")"
	cat "$TMP/first" "$TMP/rest" | cmp -s - "$TMP/all" || fail "$1: resumed differs from uninterrupted"
}

windowed_resume_equals_uninterrupted() {
	for ty in f32 f16 q8_0 q4_0; do
		resumed $ty "$(tiny q8_0)" 128 100
	done
	[ -f "$STORIES" ] || return 0
	resumed f32 "$STORIES" 128 124
	resumed q8_0 "$STORIES" 128 96
}

kvstat_and_kvdump_show_the_window() {
	m=$(tiny q8_0)
	echo 1 | "$D" -m "$m" --ctx 128 --kv-window 100 --kv-sinks 4 -n 300 --greedy --ignore-eos \
		--kv-out "$TMP/s.kv" >/dev/null || fail "exit $?"
	"$S" "$TMP/s.kv" >"$TMP/stat" || fail "kvstat exit $?"
	grep -q "^version       3$" "$TMP/stat" || fail "$(cat "$TMP/stat")"
	# 300 positions: sinks 0-3 and 200-299 (the last 100), 196 evicted
	grep -q "^window        4 sinks and the newest 100 positions: 104 live rows (sinks 0-3, window 200-299), 196 evicted$" \
		"$TMP/stat" || fail "$(cat "$TMP/stat")"
	"$S" --json "$TMP/s.kv" >"$TMP/json" || fail "kvstat --json exit $?"
	json_assert "$TMP/json" 'd["sinks"] == 4 and d["window"] == 100 and d["rows"] == 104 and
		d["live_rows"] == 104 and d["evicted"] == 196 and d["window_first"] == 200 and
		[x["layer"] for x in d["per_layer"]] == [0, 1, 2] and d["per_layer"][0]["k"]["rms"] > 0'
	"$S" --svg "$TMP/s.svg" "$TMP/s.kv" >/dev/null || fail "kvstat --svg exit $?"
	grep -q ">  sinks 0-3, left of the red line; the window from 200</tspan>" "$TMP/s.svg" &&
		grep -q 'stroke="red"' "$TMP/s.svg" || fail "the SVG does not mark the sinks and the window"
	# no two labels on one spot: each text's (x, y) is its own, and the ticks name positions held
	python3 -c 'import sys, re
svg = open(sys.argv[1]).read()
spots = re.findall(r"<text x=\"([0-9.]+)\" y=\"([0-9]+)\"", svg)
assert len(spots) == len(set(spots)), "labels share a spot"
ticks = [int(t) for t in re.findall(r"text-anchor=\"middle\">([0-9]+)</text>", svg)]
assert all(t <= 3 or 200 <= t <= 300 for t in ticks), ticks
assert ticks == sorted(ticks[:len(ticks) // 2]) * 2, ticks' "$TMP/s.svg" || fail "the SVG's labels"
	# kvdump: rows by their own positions; an evicted one is an error
	"$K" --k --layer 0 --head 0 "$TMP/s.kv" | awk 'NR > 1 { print $3 }' | uniq >"$TMP/pos" ||
		fail "kvdump exit $?"
	{ seq 0 3; seq 200 299; } | cmp -s - "$TMP/pos" || fail "positions: $(tr '\n' ' ' <"$TMP/pos")"
	"$K" --pos 10 "$TMP/s.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "an evicted position was dumped"
	grep -q "^llm-kvdump: $TMP/s.kv: --pos: positions 10-10 are evicted from the window (4 sinks, then positions 200-299)$" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
	"$K" --pos 3-201 --layer 1 --v "$TMP/s.kv" | awk 'NR > 1 { print $3 }' | uniq | tr '\n' ' ' >"$TMP/sel"
	[ "$(cat "$TMP/sel")" = "3 200 201 " ] || fail "--pos 3-201 gave $(cat "$TMP/sel")"
	[ "$("$K" --tokens "$TMP/s.kv" | wc -l)" -eq 300 ] || fail "not every token is recorded"
}

window_options_are_checked() {
	m=$(tiny q8_0)
	echo 1 | "$D" -m "$m" --kv-sinks 4 -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 2 ] || fail "--kv-sinks alone accepted"
	grep -q "^llm-decode: --kv-sinks needs --kv-window" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --ctx 128 --kv-window 126 --kv-sinks 4 -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 2 ] || fail "a window past max_ctx accepted"
	grep -q "^llm-decode: --kv-window 126 --kv-sinks 4: 4 sinks and a window of 126 do not fit max_ctx 128$" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --kv-type q4_0 --kv-window 16 -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 2 ] || fail "a window shorter than a key group accepted"
	grep -q "less than the 32 positions of a group (k q4_0 v q4_0)" "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --kv-type-v f16 --kv-window 16 -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 2 ] || fail "a window shorter than an f16 tail's group accepted"
	grep -q "less than the 32 positions of a group (k f32 v f16)" "$TMP/err" || fail "$(cat "$TMP/err")"
	for bad in 0 -1 x; do
		echo 1 | "$D" -m "$m" --kv-window "$bad" -n 1 >/dev/null 2>&1
		[ $? -eq 2 ] || fail "--kv-window $bad accepted"
	done
	echo 1 | "$D" -m "$m" --ctx 128 --kv-window 100 -n 150 --ignore-eos --kv-out "$TMP/o.kv" >/dev/null ||
		fail "exit $?"
	echo 1 | "$D" -m "$m" --ctx 128 --kv-window 90 -n 1 --kv-in "$TMP/o.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "another window resumed"
	grep -q "the snapshot's window is 4 sinks and 100 positions, this run's 4 and 90" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
	# without --kv-window, the snapshot's window is taken (issue 34)
	echo 1 | "$D" -m "$m" --ctx 128 -n 1 -q --kv-in "$TMP/o.kv" --stats-json >/dev/null 2>"$TMP/js" ||
		fail "a windowed snapshot without --kv-window: $(cat "$TMP/js")"
	json_assert "$TMP/js" "d['kv_window'] == 100 and d['kv_sinks'] == 4"
}

# --score reads a stream longer than max_ctx with a window, and stops without one.
score_past_max_ctx_with_a_window() {
	m=$(tiny q8_0)
	awk 'BEGIN { for (i = 0; i < 400; i++) print (i * 37 + 11) % 200 }' >"$TMP/ids"
	"$D" -m "$m" --ctx 128 --kv-window 100 --score <"$TMP/ids" >"$TMP/lp" 2>"$TMP/err" ||
		fail "exit $?: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/lp")" -eq 399 ] || fail "$(wc -l <"$TMP/lp") scores"
	grep -q "^scored 399 tokens, perplexity [0-9]" "$TMP/err" || fail "$(cat "$TMP/err")"
	"$D" -m "$m" --ctx 128 --score <"$TMP/ids" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "scoring past max_ctx without a window exited $?"
}

t window_generates_four_times_max_ctx
t window_works_for_every_cache_type
t no_window_stops_at_max_ctx_as_before
t windowed_resume_equals_uninterrupted
t kvstat_and_kvdump_show_the_window
t window_options_are_checked
t score_past_max_ctx_with_a_window
