#!/bin/sh
# Gemma 3 from the tools: sliding layers that keep only their window,
# snapshots of them (llm-kv(5) version 6) resumed bitwise, and what
# llm-kvstat and llm-kvdump show of them.  The forward pass itself is
# checked against the reference in test_model and against llama.cpp in
# test_families.
. tests/lib.sh
D="$BIN/llm-decode"
M="$TMP/g3.gguf"
# 7 layers: 0-4 and 6 slide with a window of 48, 5 is global
"$PWD/tools/mkmodel" -s small -A gemma3 -o "$M" || fail "mkmodel"

json_assert() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
		"$1" "$2" || fail "$2: $(head -c 600 "$1")"
}

# 154 positions, past every type's ring (79 slots for f32, 64 for the others), then 150 more.
resume_past_the_windows_equals_uninterrupted() {
	for kt in f32 f16 q8_0 q4_0; do
		echo "1 40 41 42" | "$D" -m "$M" --greedy --ignore-eos -n 300 --kv-type $kt >"$TMP/all" ||
			fail "$kt: exit $?"
		echo "1 40 41 42" | "$D" -m "$M" --greedy --ignore-eos -n 150 --kv-type $kt \
			--kv-out "$TMP/$kt.kv" >"$TMP/first" || fail "$kt: exit $?"
		{ echo "1 40 41 42"; cat "$TMP/first"; } | "$D" -m "$M" --greedy --ignore-eos -n 150 \
			--kv-type $kt --kv-in "$TMP/$kt.kv" --stats >"$TMP/rest" 2>"$TMP/err" ||
			fail "$kt: resume exited $?: $(cat "$TMP/err")"
		cat "$TMP/first" "$TMP/rest" | cmp -s - "$TMP/all" || fail "$kt: resumed differs"
		grep -q "153 reused" "$TMP/err" || fail "$kt: not reused: $(cat "$TMP/err")"
		grep -q "kv sliding layers: the newest 48 positions" "$TMP/err" || fail "$kt: $(cat "$TMP/err")"
		[ "$(od -An -tu4 -j8 -N4 "$TMP/$kt.kv" | tr -d ' ')" = 6 ] || fail "$kt: not version 6"
	done
}

kvstat_shows_each_layers_window() {
	"$BIN/llm-kvstat" --json "$TMP/f32.kv" >"$TMP/json" || fail "exit $?"
	json_assert "$TMP/json" '(d["version"] == 6 and d["positions"] == 153 and d["sliding_window"] == 48 and
		d["sliding_layers"] == [0, 1, 2, 3, 4, 6] and d["sliding_live_rows"] == 48 and
		[x["window"] for x in d["per_layer"]] == [48, 48, 48, 48, 48, 0, 48] and
		[x["live_rows"] for x in d["per_layer"]] == [48, 48, 48, 48, 48, 153, 48] and
		"window" not in d)'
	"$BIN/llm-kvstat" "$TMP/f32.kv" >"$TMP/table" || fail "exit $?"
	grep -q "^sliding       layers 0,1,2,3,4,6 keep the newest 48 positions: 48 live rows (105-152), 105 evicted$" \
		"$TMP/table" || fail "$(cat "$TMP/table")"
	awk '$1 == 5 { g = $NF } $1 == 0 { s = $NF } END { exit !(g == "global" && s == 48) }' "$TMP/table" ||
		fail "the window column: $(cat "$TMP/table")"
}

# The SVG draws a sliding layer's cells only where it holds positions: 48 of 153.
svg_draws_only_what_each_layer_holds() {
	"$BIN/llm-kvstat" --svg - "$TMP/f32.kv" >"$TMP/s.svg" || fail "exit $?"
	python3 - "$TMP/s.svg" <<'EOF' || fail "the SVG's cells"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
cells = {}
for g in ET.parse(sys.argv[1]).getroot().iter(ns + "g"):
    for r in g.iter(ns + "rect"):
        y = int(r.get("y"))
        cells[y] = cells.get(y, 0) + 1
rows = sorted(cells)[:7]  # the K panel's seven layers, 10 apart
counts = [cells[y] for y in rows]
sys.exit(0 if counts == [48, 48, 48, 48, 48, 153, 48] else print(counts) or 1)
EOF
}

kvdump_refuses_what_a_layer_no_longer_holds() {
	"$BIN/llm-kvdump" --layer 0 --pos 10 "$TMP/f32.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "exit $?"
	grep -qx "llm-kvdump: $TMP/f32.kv: --pos: positions 10-10 are evicted from layer 0's sliding window (positions 105-152)" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
	"$BIN/llm-kvdump" --layer 5 --pos 10 --head 0 "$TMP/f32.kv" >"$TMP/g" || fail "the global layer: exit $?"
	[ "$(awk 'NR > 1 { print $3 }' "$TMP/g" | sort -u)" = 10 ] || fail "$(head -3 "$TMP/g")"
	"$BIN/llm-kvdump" --layer 0 --pos 100-104 "$TMP/f32.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "rows the ring keeps but the layer no longer reads: exit $?"
	# a range partly held: each layer gives what it holds
	"$BIN/llm-kvdump" --k --pos 100-110 --head 0 "$TMP/f32.kv" >"$TMP/r" || fail "exit $?"
	awk 'NR > 1 && $5 == 0 { n[$1]++ } END { for (l = 0; l < 7; l++) printf "%d ", n[l] }' "$TMP/r" >"$TMP/n"
	[ "$(cat "$TMP/n")" = "6 6 6 6 6 11 6 " ] || fail "positions per layer: $(cat "$TMP/n")"
}

# --kv-window windows the global layer, past --ctx; the sliding ones keep theirs.
global_window_runs_past_ctx() {
	echo "1 40 41 42" | "$D" -m "$M" --greedy --ignore-eos -n 400 --ctx 128 --kv-window 100 \
		--stats-json >"$TMP/out" 2>"$TMP/err" || fail "exit $?: $(cat "$TMP/err")"
	[ "$(wc -w <"$TMP/out")" -eq 400 ] || fail "$(wc -w <"$TMP/out") tokens"
	tail -n 1 "$TMP/err" >"$TMP/json"
	json_assert "$TMP/json" 'd["kv_window"] == 100 and d["kv_sliding_window"] == 48 and d["kv_evicted"] == 299'
}

# A window shorter than a group of quantized keys is refused, saying so.
short_window_and_quantized_keys() {
	"$PWD/tools/mkmodel" -s small -A gemma3 -W 16 -o "$TMP/w16.gguf" || fail "mkmodel"
	echo "1 2 3" | "$D" -m "$TMP/w16.gguf" -n 2 --kv-type q8_0 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "exit $?"
	grep -qx "llm-decode: kv: a sliding window of 16 positions is less than the 32 of a group of k q8_0 v q8_0" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
	echo "1 2 3" | "$D" -m "$TMP/w16.gguf" -n 40 --ignore-eos >/dev/null || fail "f32: exit $?"
}

t resume_past_the_windows_equals_uninterrupted
t kvstat_shows_each_layers_window
t svg_draws_only_what_each_layer_holds
t kvdump_refuses_what_a_layer_no_longer_holds
t global_window_runs_past_ctx
t short_window_and_quantized_keys
