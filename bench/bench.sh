#!/bin/sh
# make bench: speed and memory figures on a model with SmolLM2-135M's
# exact shapes and random weights.  It prints figures; it never fails
# on speed.  The table is also written to bench/results.json.
set -u
TMP=bench/tmp
mkdir -p "$TMP"
D=cmd/llm-decode
TYPES=${BENCH_TYPES:-"f32 q8_0"}
THREADS=${BENCH_THREADS:-"1 2"}
PROMPT=128
GEN=16

for ty in $TYPES; do
	[ -f "$TMP/smollm2-135m-$ty.gguf" ] ||
		tests/mkmodel -s smollm2-135m -t "$ty" -o "$TMP/smollm2-135m-$ty.gguf" || exit 1
done
# A 128-token prompt of ordinary ids; the weights are random anyway.
awk -v n=$PROMPT 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 40000 }' >"$TMP/prompt"

for th in $THREADS; do
	bw=$(bench/membw "$th")
	echo "$th $bw" >>"$TMP/bw.$$"
done

# json KEY FILE: a number from a --stats-json line
json() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }

printf '%-6s %3s %9s %9s %8s %9s %10s %9s %7s %12s\n' type thr "decode/s" "prefill/s" "ttft ms" "rss MB" "kv bytes" "bound/s" "%bound" "rss prealloc"
echo '{"model":"smollm2-135m-shaped, random weights","prompt_tokens":'$PROMPT',"generated_tokens":'$GEN',"max_ctx":8192,"rows":[' >bench/results.json
sep=
for ty in $TYPES; do
	m="$TMP/smollm2-135m-$ty.gguf"
	for th in $THREADS; do
		$D -m "$m" -t "$th" -n $GEN --ignore-eos --greedy --stats-json <"$TMP/prompt" >/dev/null 2>"$TMP/s" || exit 1
		$D -m "$m" -t "$th" -n $GEN --ignore-eos --greedy --kv-prealloc --stats-json <"$TMP/prompt" >/dev/null 2>"$TMP/p" || exit 1
		bw=$(awk -v t="$th" '$1 == t { print $2 }' "$TMP/bw.$$")
		awk -v ty="$ty" -v th="$th" -v bw="$bw" \
		    -v dec="$(json decode_tok_s "$TMP/s")" -v pre="$(json prefill_tok_s "$TMP/s")" \
		    -v ttft="$(json ttft_ms "$TMP/s")" -v rss="$(json peak_rss_bytes "$TMP/s")" \
		    -v kv="$(json kv_bytes "$TMP/s")" -v wb="$(json weight_bytes "$TMP/s")" \
		    -v prss="$(json peak_rss_bytes "$TMP/p")" -v sep="$sep" '
		BEGIN {
			bound = bw / wb
			printf "%-6s %3d %9.1f %9.1f %8.1f %9.1f %10d %9.1f %6.0f%% %12.1f\n",
			    ty, th, dec, pre, ttft, rss / 1e6, kv, bound, 100 * dec / bound, prss / 1e6
			printf "%s{\"type\":\"%s\",\"threads\":%d,\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f,\"ttft_ms\":%.2f,\"peak_rss_bytes\":%d,\"kv_bytes\":%d,\"weight_bytes_per_token\":%d,\"read_bandwidth_bytes_s\":%d,\"bound_tok_s\":%.2f,\"decode_pct_of_bound\":%.1f,\"prealloc_peak_rss_bytes\":%d}\n",
			    sep, ty, th, dec, pre, ttft, rss, kv, wb, bw, bound, 100 * dec / bound, prss >>"bench/results.json"
		}'
		sep=,
	done
done
echo ']}' >>bench/results.json
rm -f "$TMP/bw.$$"
echo "bound/s = measured read bandwidth / weight bytes read per token; rss prealloc = the same run with --kv-prealloc"
echo "written: bench/results.json"

# Tokenizer throughput on 1 MB of mixed English and code (this project's
# own sources and pages), for the vocabularies ../shared provides.
echo
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
	cat README.md lib/*.c man/*
done | head -c 1048576 >"$TMP/text-1mb"
for v in starcoder llama-spm; do
	f=../shared/vocab/ggml-vocab-$v.gguf
	if [ ! -f "$f" ]; then
		echo "tokenizer $v: skipped, $f not present"
		continue
	fi
	awk -v f="$f" -v t="$TMP/text-1mb" 'BEGIN {
		cmd = "date +%s.%N"
		cmd | getline t0; close(cmd)
		system("cmd/llm-tokenize -m " f " <" t " >/dev/null")
		cmd | getline t1; close(cmd)
		printf "tokenizer %-10s %6.1f MB/s (1 MB, including loading the vocabulary)\n", "'$v'", 1.048576 / (t1 - t0)
	}'
done

# Snapshots: build a 2000-token context, save it, then compare the time to
# the first new token when resuming with 16 new tokens against recomputing
# all 2016 tokens; and the snapshot write and read rates.
if [ -z "${BENCH_SKIP_RESUME:-}" ]; then
	m="$TMP/smollm2-135m-q8_0.gguf"
	[ -f "$m" ] || tests/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
	awk 'BEGIN { for (i = 0; i < 2000; i++) print 1000 + (i * 7919) % 40000 }' >"$TMP/ctx2000"
	{ cat "$TMP/ctx2000"; awk 'BEGIN { for (i = 0; i < 16; i++) print 500 + i }'; } >"$TMP/ctx2016"
	cmd/llm-decode -m "$m" -n 0 --kv-out "$TMP/ctx.kv" --stats-json <"$TMP/ctx2000" >/dev/null 2>"$TMP/build" || exit 1
	sync
	cmd/llm-decode -m "$m" -n 1 --greedy --kv-in "$TMP/ctx.kv" --stats-json <"$TMP/ctx2016" >/dev/null 2>"$TMP/resume" || exit 1
	cmd/llm-decode -m "$m" -n 1 --greedy --stats-json <"$TMP/ctx2016" >/dev/null 2>"$TMP/scratch" || exit 1
	size=$(wc -c <"$TMP/ctx.kv")
	# write and read rates, timed around the library calls by llm-decode's own clock
	t0=$(date +%s.%N); cmd/llm-decode -m "$m" -n 0 --kv-in "$TMP/ctx.kv" --kv-out "$TMP/ctx2.kv" <"$TMP/ctx2000" >/dev/null 2>&1; t1=$(date +%s.%N)
	t2=$(date +%s.%N); cmd/llm-kvstat "$TMP/ctx.kv" >/dev/null; t3=$(date +%s.%N)
	awk -v r="$(json ttft_ms "$TMP/resume")" -v s="$(json ttft_ms "$TMP/scratch")" \
	    -v reused="$(json reused_tokens "$TMP/resume")" -v size="$size" \
	    -v w="$(echo "$t1 - $t0" | bc 2>/dev/null || awk -v a="$t1" -v b="$t0" 'BEGIN{print a-b}')" \
	    -v rd="$(awk -v a="$t3" -v b="$t2" 'BEGIN{print a-b}')" 'BEGIN {
		printf "\nresume (q8_0, 2 threads): 2000-token snapshot of %.1f MB, 16 new tokens\n", size / 1e6
		printf "  time to first token: resumed %.1f ms (%d reused), recomputed %.1f ms: %.0fx faster\n", r, reused, s, s / r
		printf "  snapshot load+rewrite+save run: %.2f s; llm-kvstat read and check: %.0f MB/s\n", w, size / 1e6 / rd
	}'
fi
