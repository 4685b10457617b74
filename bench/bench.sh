#!/bin/sh
# make bench: speed and memory figures on models with SmolLM2-135M's exact
# shapes and random weights.  It prints figures and never fails on speed.
# The same figures go to bench/results.json, so runs can be compared.
#
# BENCH_TYPES and BENCH_THREADS choose the rows (default: all of them).
set -u
TMP=bench/tmp
mkdir -p "$TMP"
D=cmd/llm-decode
TYPES=${BENCH_TYPES:-"f32 q8_0 q4_0 q4_K_mix"}
THREADS=${BENCH_THREADS:-"1 2"}
JSON=bench/results.json

# json KEY FILE: a number from a --stats-json line
json() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }
now() { date +%s.%N; }

for ty in $TYPES; do
	[ -f "$TMP/smollm2-135m-$ty.gguf" ] ||
		tests/mkmodel -s smollm2-135m -t "$ty" -o "$TMP/smollm2-135m-$ty.gguf" || exit 1
done
# Prompts of ordinary ids; the weights are random anyway.
prompt() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 40000 }'; }
prompt 128 >"$TMP/p128"
echo 1 >"$TMP/p1"

echo "SmolLM2-135M shapes, random weights, max_ctx 8192, $(nproc) CPUs, kernels: $(LLM_ISA= tests/test_quant 2>/dev/null | sed -n 's/^# kernels checked: scalar to //p')"
echo "decode: 64 tokens after a 128-token prompt; prefill: that prompt; rss and kv: a 1-token prompt and 16 tokens"
echo
printf '%-9s %3s %9s %9s %8s %8s %10s %9s %7s %9s\n' type thr "decode/s" "prefill/s" "ttft ms" "rss MB" "kv bytes" "bound/s" "%bound" "dense MB"
printf '{"model":"smollm2-135m-shaped, random weights","max_ctx":8192,"rows":[' >"$JSON"
sep=
for ty in $TYPES; do
	m="$TMP/smollm2-135m-$ty.gguf"
	for th in $THREADS; do
		$D -m "$m" -t "$th" -n 64 --ignore-eos --greedy --stats-json <"$TMP/p128" >/dev/null 2>"$TMP/speed" || exit 1
		$D -m "$m" -t "$th" -n 16 --ignore-eos --greedy --stats-json <"$TMP/p1" >/dev/null 2>"$TMP/mem" || exit 1
		$D -m "$m" -t "$th" -n 16 --ignore-eos --greedy --kv-prealloc --stats-json <"$TMP/p1" >/dev/null 2>"$TMP/dense" || exit 1
		wb=$(json weight_bytes "$TMP/speed")
		# the bandwidth probe reads as many bytes as a decode step, with as many threads
		bw=$(bench/membw "$th" "$wb")
		awk -v ty="$ty" -v th="$th" -v bw="$bw" -v wb="$wb" -v sep="$sep" \
		    -v dec="$(json decode_tok_s "$TMP/speed")" -v pre="$(json prefill_tok_s "$TMP/speed")" \
		    -v ttft="$(json ttft_ms "$TMP/speed")" -v rss="$(json peak_rss_bytes "$TMP/mem")" \
		    -v kv="$(json kv_bytes "$TMP/mem")" -v drss="$(json peak_rss_bytes "$TMP/dense")" \
		    -v json="$JSON" 'BEGIN {
			bound = bw / wb
			printf "%-9s %3d %9.1f %9.1f %8.1f %8.1f %10.0f %9.1f %6.0f%% %9.1f\n",
			    ty, th, dec, pre, ttft, rss / 1e6, kv, bound, 100 * dec / bound, drss / 1e6
			printf "%s{\"type\":\"%s\",\"threads\":%d,\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f,\"ttft_ms\":%.2f,\"peak_rss_bytes\":%.0f,\"kv_bytes\":%.0f,\"weight_bytes_per_token\":%.0f,\"read_bandwidth_bytes_s\":%.0f,\"bound_tok_s\":%.2f,\"decode_pct_of_bound\":%.1f,\"prealloc_peak_rss_bytes\":%.0f}",
			    sep, ty, th, dec, pre, ttft, rss, kv, wb, bw, bound, 100 * dec / bound, drss >>json
		}'
		sep=,
	done
done
printf ']' >>"$JSON"
echo "bound/s: read bandwidth measured by bench/membw over the weight bytes a token reads; dense MB: peak RSS with --kv-prealloc"

# Attention: decode speed as the context fills (q8_0, the most threads asked for).
th=$(echo $THREADS | awk '{ print $NF }')
m="$TMP/smollm2-135m-q8_0.gguf"
[ -f "$m" ] || tests/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
echo
printf 'attention (q8_0, %d threads): decode tok/s with' "$th"
printf ',"attention":[' >>"$JSON"
sep=
for ctx in 1 1000 4000; do
	prompt $ctx >"$TMP/pctx"
	$D -m "$m" -t "$th" -n 32 --ignore-eos --greedy --stats-json <"$TMP/pctx" >/dev/null 2>"$TMP/att" || exit 1
	printf ' %d positions: %.1f,' "$((ctx - 1))" "$(json decode_tok_s "$TMP/att")"
	printf '%s{"context":%d,"decode_tok_s":%s}' "$sep" "$((ctx - 1))" "$(json decode_tok_s "$TMP/att")" >>"$JSON"
	sep=,
done
printf ']' >>"$JSON"
echo

# Snapshots: a 2000-token context saved, then the time to the first new
# token when resuming with 16 new tokens, against recomputing all 2016.
prompt 2000 >"$TMP/ctx2000"
{ cat "$TMP/ctx2000"; awk 'BEGIN { for (i = 0; i < 16; i++) print 500 + i }'; } >"$TMP/ctx2016"
$D -m "$m" -t "$th" -n 0 --kv-out "$TMP/ctx.kv" <"$TMP/ctx2000" >/dev/null || exit 1
$D -m "$m" -t "$th" -n 1 --greedy --kv-in "$TMP/ctx.kv" --stats-json <"$TMP/ctx2016" >/dev/null 2>"$TMP/resume" || exit 1
$D -m "$m" -t "$th" -n 1 --greedy --stats-json <"$TMP/ctx2016" >/dev/null 2>"$TMP/scratch" || exit 1
size=$(wc -c <"$TMP/ctx.kv")
# write: a run that loads nothing and saves the whole context, less the same run without saving
t0=$(now); $D -m "$m" -t "$th" -n 0 --kv-in "$TMP/ctx.kv" <"$TMP/ctx2000" >/dev/null; t1=$(now)
t2=$(now); $D -m "$m" -t "$th" -n 0 --kv-in "$TMP/ctx.kv" --kv-out "$TMP/ctx2.kv" <"$TMP/ctx2000" >/dev/null; t3=$(now)
t4=$(now); cmd/llm-kvstat "$TMP/ctx.kv" >/dev/null; t5=$(now)
awk -v r="$(json ttft_ms "$TMP/resume")" -v s="$(json ttft_ms "$TMP/scratch")" -v size="$size" \
    -v w="$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { print (d - c) - (b - a) }')" \
    -v rd="$(awk -v a="$t4" -v b="$t5" 'BEGIN { print b - a }')" -v th="$th" -v json="$JSON" 'BEGIN {
	printf "resume (q8_0, %d threads, 2000-token snapshot of %.1f MB, 16 new tokens): first token %.1f ms resumed, %.1f ms recomputed: %.0fx faster\n", th, size / 1e6, r, s, s / r
	printf "snapshot write %.0f MB/s (temporary file, fsync, rename); read and check (llm-kvstat) %.0f MB/s\n", size / 1e6 / w, size / 1e6 / rd
	printf ",\"resume\":{\"snapshot_bytes\":%.0f,\"ttft_resumed_ms\":%.2f,\"ttft_recomputed_ms\":%.2f,\"speedup\":%.1f,\"write_mb_s\":%.0f,\"read_mb_s\":%.0f}", size, r, s, s / r, size / 1e6 / w, size / 1e6 / rd >>json
}'

# Memory against prompt length: the peak resident set of a prompt of N
# tokens and 16 generated, at max_ctx 8192 (q8_0, the most threads asked
# for): the cache growing on demand, preallocated densely, and llama.cpp.
# llama-bench reports no RSS: it runs under /usr/bin/time with -p N -n 16
# -r 1, so its context is sized to the run (N + 16), with its f16 cache.
LENGTHS=${BENCH_RSS_LENGTHS:-"16 512 1024 2100 4100 8000"}
REF=${LLAMA_BENCH:-../shared/ref/llama-bench}
ref=1
if [ ! -x "$REF" ]; then
	echo "memory: $REF not present, so no llama.cpp column"
	ref=0
elif [ ! -x /usr/bin/time ]; then
	echo "memory: /usr/bin/time not present (Debian package time), so no llama.cpp column"
	ref=0
fi
echo
echo "memory (q8_0, max_ctx 8192, $th threads): peak RSS in MB, a prompt of N tokens and 16 generated"
printf '%7s %8s %9s %10s %9s %11s %9s %11s\n' tokens grow prealloc llama.cpp grow/ref "kv filled" "grow ms" "prefill s"
: >"$TMP/chart"
printf ',"memory":[' >>"$JSON"
sep=
for n in $LENGTHS; do
	prompt "$n" >"$TMP/pn"
	$D -m "$m" -t "$th" --ctx 8192 -n 16 --ignore-eos --greedy --stats-json <"$TMP/pn" >/dev/null 2>"$TMP/grow" || exit 1
	$D -m "$m" -t "$th" --ctx 8192 -n 16 --ignore-eos --greedy --kv-prealloc --stats-json <"$TMP/pn" \
		>/dev/null 2>"$TMP/dense" || exit 1
	rkb=0
	if [ $ref -eq 1 ]; then
		/usr/bin/time -f %M -o "$TMP/reftime" "$REF" -m "$m" -t "$th" -p "$n" -n 16 -r 1 -o csv \
			>/dev/null 2>&1 && rkb=$(tail -n 1 "$TMP/reftime")
	fi
	awk -v n="$n" -v g="$(json peak_rss_bytes "$TMP/grow")" -v d="$(json peak_rss_bytes "$TMP/dense")" \
	    -v r="$rkb" -v kv="$(json kv_resident_bytes "$TMP/grow")" -v gms="$(json kv_grow_ms "$TMP/grow")" \
	    -v ttft="$(json ttft_ms "$TMP/grow")" -v sep="$sep" -v json="$JSON" -v chart="$TMP/chart" 'BEGIN {
		printf "%7d %8.1f %9.1f %10s %9s %11.1f %9.1f %11.1f\n", n, g / 1e6, d / 1e6,
		    r ? sprintf("%.1f", r * 1024 / 1e6) : "-", r ? sprintf("%.2fx", g / (r * 1024)) : "-",
		    kv / 1e6, gms, ttft / 1e3
		printf "%s{\"prompt_tokens\":%d,\"grow_peak_rss_bytes\":%.0f,\"prealloc_peak_rss_bytes\":%.0f,\"llama_cpp_peak_rss_bytes\":%.0f,\"kv_resident_bytes\":%.0f,\"kv_grow_ms\":%.2f,\"prefill_ms\":%.1f}",
		    sep, n, g, d, r * 1024, kv, gms, ttft >>json
		printf "grow on demand\t%d\t%.1f\n--kv-prealloc\t%d\t%.1f\n", n, g / 1e6, n, d / 1e6 >>chart
		if (r) printf "llama.cpp (ctx N+16, f16)\t%d\t%.1f\n", n, r * 1024 / 1e6 >>chart
	}'
	sep=,
done
printf ']' >>"$JSON"
sort -s -t "$(printf '\t')" -k1,1 "$TMP/chart" | awk -f bench/chart.awk \
    -v title="Peak RSS against prompt length: SmolLM2-135M-shaped Q8_0, max_ctx 8192" \
    -v xlabel="prompt tokens (then 16 generated)" -v ylabel="peak RSS (MB)" >bench/memory.svg
echo "kv filled: the cache's resident bytes at the end; grow ms: time spent growing it; chart: bench/memory.svg"

# Tokenizer throughput on 1 MB of mixed English and code (this project's
# sources and pages), for the vocabularies ../shared provides.
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do
	cat README.md lib/*.c man/*
done | head -c 1048576 >"$TMP/text-1mb"
printf ',"tokenizer":[' >>"$JSON"
sep=
for v in starcoder llama-spm; do
	f=../shared/vocab/ggml-vocab-$v.gguf
	if [ ! -f "$f" ]; then
		echo "tokenizer $v: skipped, $f not present"
		continue
	fi
	t0=$(now); cmd/llm-tokenize -m "$f" <"$TMP/text-1mb" >/dev/null; t1=$(now)
	awk -v v="$v" -v a="$t0" -v b="$t1" -v sep="$sep" -v json="$JSON" 'BEGIN {
		printf "tokenizer %-10s %6.1f MB/s (1 MB of English and C, including loading the vocabulary)\n", v, 1.048576 / (b - a)
		printf "%s{\"vocab\":\"%s\",\"mb_s\":%.2f}", sep, v, 1.048576 / (b - a) >>json
	}'
	sep=,
done
printf ']}\n' >>"$JSON"
echo "written: $JSON"
