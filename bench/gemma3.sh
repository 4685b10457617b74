#!/bin/sh
# Gemma 3 (issue 36), part of make bench; prints, never fails on speed.
# Random weights with gemma-3-270m's and gemma-3-1b's shapes (Q8_0, the
# 262144-token vocabulary, windows of 512 on five layers of six):
#
# - memory: peak RSS and kv_bytes after a prompt of N positions and 16
#   generated, the cache keeping per layer what it attends to, beside a
#   cache that keeps every position in every layer (its bytes,
#   kv_bytes_per_pos x (N + 16), and the peak RSS it would give: ours less
#   our cache plus it) and llama.cpp (llama-bench -p N -n 16 under
#   /usr/bin/time, its context sized to the run, its f16 cache with its
#   own windows);
# - speed on gemma-3-270m's shape: decode of 64 and prefill of 128,
#   alternating with llama-bench over BENCH_ROUNDS rounds, medians.
#
# BENCH_GEMMA_LENGTHS (default "1000 8000 32000") and BENCH_GEMMA_SHAPES
# (default "gemma3-270m gemma3-1b") choose the rows; 32000 positions on
# gemma-3-1b's shape take minutes on two cores.
. bench/lib.sh
REF=${REF:-../shared/ref/llama-bench}
ROUNDS=${BENCH_ROUNDS:-5}
prompt() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 200000 }'; }
ref=1
[ -x "$REF" ] && [ -x /usr/bin/time ] || ref=0

echo
echo "gemma3 memory (Q8_0 weights, $th threads): a prompt of N positions and 16 generated; MB"
printf '%-12s %6s %9s %9s %9s %10s %10s %9s\n' shape N "peak RSS" "all pos" llama.cpp "kv_bytes" "kv all pos" "kv ratio"
for shape in ${BENCH_GEMMA_SHAPES:-gemma3-270m gemma3-1b}; do
	m="$TMP/$shape-q8_0.gguf"
	[ -f "$m" ] || tools/mkmodel -s "$shape" -t q8_0 -o "$m" || exit 1
	for n in ${BENCH_GEMMA_LENGTHS:-1000 8000 32000}; do
		prompt "$n" >"$TMP/gp"
		ctx=$((n + 16))
		$D -m "$m" -t "$th" --ctx $ctx -n 16 --ignore-eos --greedy \
			--stats-json <"$TMP/gp" >/dev/null 2>"$TMP/gg" || exit 1
		rkb=0
		[ $ref -eq 1 ] && /usr/bin/time -f %M -o "$TMP/grt" "$REF" -m "$m" -t "$th" -p "$n" -n 16 -r 1 \
			-o csv >/dev/null 2>&1 && rkb=$(tail -n 1 "$TMP/grt")
		awk -v s="$shape" -v n="$n" -v g="$(json peak_rss_bytes "$TMP/gg")" -v ctx=$ctx \
		    -v r="$rkb" -v kv="$(json kv_bytes "$TMP/gg")" -v pp="$(json kv_bytes_per_pos "$TMP/gg")" 'BEGIN {
			kd = pp * ctx; d = g - kv + kd
			printf "%-12s %6d %9.1f %9.1f %9s %10.1f %10.1f %8.2fx\n", s, n, g / 1e6, d / 1e6,
			    r ? sprintf("%.1f", r * 1024 / 1e6) : "-", kv / 1e6, kd / 1e6, kd / kv }'
	done
done
echo "all pos: a cache of every position in every layer (its bytes, and our peak RSS with it); kv ratio: its bytes / ours"

m="$TMP/gemma3-270m-q8_0.gguf"
[ -f "$m" ] || tools/mkmodel -s gemma3-270m -t q8_0 -o "$m" || exit 1
prompt 128 >"$TMP/gp"
: >"$TMP/gs"
for r in $(seq "$ROUNDS"); do
	$D -m "$m" -t "$th" -n 64 --warmup --ignore-eos --greedy --stats-json <"$TMP/gp" >/dev/null 2>"$TMP/gg" ||
		exit 1
	theirs="- -"
	[ -x "$REF" ] && "$REF" -m "$m" -t "$th" -p 128 -n 64 -r 1 -o csv >"$TMP/gr" 2>/dev/null &&
		theirs=$(llama_pair "$TMP/gr")
	echo "$(json decode_tok_s "$TMP/gg") $(json prefill_tok_s "$TMP/gg") $theirs" >>"$TMP/gs"
done
echo
echo "gemma3-270m speed (Q8_0, $th threads, $ROUNDS alternating rounds, medians): tok/s"
medians "$TMP/gs" | awk '{
	printf "%-10s %9s %9s\n", "", "decode", "prefill"
	printf "%-10s %9.1f %9.1f\n", "llm", $1, $2
	if ($3 != "-") {
		printf "%-10s %9.1f %9.1f\n", "llama.cpp", $3, $4
		printf "%-10s %8.2fx %8.2fx\n", "ratio", $1 / $3, $2 / $4
	}
}'
