#!/bin/sh
# make bench: speed and memory figures on models with SmolLM2-135M's exact
# shapes and random weights.  It prints figures and never fails on speed.
# The same figures go to bench/results.json, so runs can be compared.
#
# BENCH_TYPES and BENCH_THREADS choose the rows (default: all of them).
set -u
. bench/lib.sh
TYPES=${BENCH_TYPES:-"f32 q8_0 q4_0 q4_K_mix"}
THREADS=${BENCH_THREADS:-"1 2"}
JSON=bench/results.json

now() { date +%s.%N; }
# native_isa: the kernels llm-decode uses on this machine, as it says (--stats-json)
native_isa() {
	[ -f "$TMP/isa.gguf" ] || tools/mkmodel -o "$TMP/isa.gguf" || exit 1
	echo 1 | LLM_ISA= $D -m "$TMP/isa.gguf" -n 1 --stats-json 2>&1 >/dev/null |
		sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p'
}

for ty in $TYPES; do
	[ -f "$TMP/smollm2-135m-$ty.gguf" ] ||
		tools/mkmodel -s smollm2-135m -t "$ty" -o "$TMP/smollm2-135m-$ty.gguf" || exit 1
done
# Prompts of ordinary ids; the weights are random anyway.
prompt() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 40000 }'; }
prompt 128 >"$TMP/p128"
echo 1 >"$TMP/p1"

echo "SmolLM2-135M shapes, random weights, max_ctx 8192, $(nproc) CPUs, kernels: $(native_isa)"
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

th=$(echo $THREADS | awk '{ print $NF }')
m="$TMP/smollm2-135m-q8_0.gguf"
[ -f "$m" ] || tools/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
REF=${LLAMA_BENCH:-../shared/ref/llama-bench}
SCORE=${REF_SCORE:-../shared/ref/ref-score}
[ -x "$REF" ] || echo "llama.cpp: $REF not present, so no llama.cpp figures"

# llama_tok_s BIN MODEL ARGS...: tokens per second of llama-bench's (last) test, or nothing.
llama_tok_s() {
	lb_bin=$1 lb_model=$2
	shift 2
	"$lb_bin" -m "$lb_model" -t "$th" -o csv "$@" 2>/dev/null | tail -n 1 |
		awk -F, '{ gsub(/"/, "", $(NF - 1)); print $(NF - 1) }'
}

# refbench ARGS...: llama-bench's tokens per second for one test, 2 repetitions, or "-".
refbench() {
	if [ -x "$REF" ]; then
		llama_tok_s "$REF" "$m" -r 2 "$@" | awk '{ printf "%.1f", $1 }'
	else
		printf -- -
	fi
}

# The cache types (issue 13): bytes a position takes, decode speed as the
# context fills, the prefill of a 4000-token prompt, and peak RSS for that
# prompt and 64 generated tokens; on each instruction set the machine has.
# (AVX2 beside the best on x86-64; on AArch64 the best alone)
best=$(native_isa)
case $best in
avx*|amx) ISAS=${BENCH_ISAS:-"$best avx2"} ;;
*) ISAS=${BENCH_ISAS:-$best} ;;
esac
ISAS=$(echo $ISAS | tr ' ' '\n' | awk '!seen[$0]++' | tr '\n' ' ')
prompt 1 >"$TMP/c1"; prompt 1000 >"$TMP/c1000"; prompt 4000 >"$TMP/c4000"
echo
echo "cache types (q8_0 weights, max_ctx 8192, $th threads): decode tok/s at 0, 1000 and 4000 positions,"
echo "prefill of a 4000-token prompt, peak RSS of that prompt and 64 generated, bytes a position takes"
printf '%-10s %-11s %8s %8s %8s %10s %9s %11s %8s\n' isa cache "dec@0" "dec@1000" "dec@4000" "pre@4000" "rss MB" "bytes/pos" "vs f32"
printf ',"cache_types":[' >>"$JSON"
sep=
for isa in $ISAS; do
	for kt in f32 f16 q8_0 q4_0 q4_0/q8_0; do
		opt="--kv-type $kt"
		[ "$kt" = q4_0/q8_0 ] && opt="--kv-type-k q4_0 --kv-type-v q8_0"
		for c in 1 1000 4000; do
			n=32
			[ $c -eq 4000 ] && n=64
			LLM_ISA=$isa $D -m "$m" -t "$th" $opt -n $n --ignore-eos --greedy --stats-json \
				<"$TMP/c$c" >/dev/null 2>"$TMP/ct$c" || exit 1
		done
		awk -v isa="$isa" -v kt="$kt" -v d0="$(json decode_tok_s "$TMP/ct1")" \
		    -v d1="$(json decode_tok_s "$TMP/ct1000")" -v d4="$(json decode_tok_s "$TMP/ct4000")" \
		    -v p4="$(json prefill_tok_s "$TMP/ct4000")" -v rss="$(json peak_rss_bytes "$TMP/ct4000")" \
		    -v bpp="$(json kv_bytes_per_pos "$TMP/ct4000")" -v sep="$sep" -v json="$JSON" 'BEGIN {
			printf "%-10s %-11s %8.1f %8.1f %8.1f %10.1f %9.1f %11.0f %7.1f%%\n", isa, kt, d0, d1, d4, p4,
			    rss / 1e6, bpp, 100 * bpp / 46080
			printf "%s{\"isa\":\"%s\",\"cache\":\"%s\",\"decode_tok_s_0\":%.2f,\"decode_tok_s_1000\":%.2f,\"decode_tok_s_4000\":%.2f,\"prefill_tok_s_4000\":%.2f,\"peak_rss_bytes\":%.0f,\"bytes_per_pos\":%.1f}",
			    sep, isa, kt, d0, d1, d4, p4, rss, bpp >>json
		}'
		sep=,
	done
done
printf ']' >>"$JSON"
printf '%-10s %-11s %8s %8s %8s %10s\n' best "llama f16" "$(refbench -p 0 -n 32)" \
    "$(refbench -p 0 -n 32 -d 1000)" "$(refbench -p 0 -n 32 -d 4000)" "$(refbench -p 4000 -n 0)"
printf '%-10s %-11s %8s %8s %8s\n' best "llama q8_0" "$(refbench -p 0 -n 32 -ctk q8_0 -ctv q8_0 -fa 1)" \
    "$(refbench -p 0 -n 32 -d 1000 -ctk q8_0 -ctv q8_0 -fa 1)" \
    "$(refbench -p 0 -n 32 -d 4000 -ctk q8_0 -ctv q8_0 -fa 1)"
echo "llama: llama.cpp's llama-bench on the same file, its best kernels (llama q8_0: -ctk q8_0 -ctv q8_0 -fa 1);"
echo "bytes/pos: K and V of a position over all layers, vs f32: of the 46080 f32 takes"

# Issue 13's memory targets are at 2000 positions: kv_bytes as the run stats
# report it, the rings of the newest rows included.
prompt 2000 >"$TMP/c2000"
printf 'kv_bytes at 2000 positions:'
printf ',"kv_bytes_2000":{' >>"$JSON"
sep=
for kt in f32 f16 q8_0 q4_0 q4_0/q8_0; do
	opt="--kv-type $kt"
	[ "$kt" = q4_0/q8_0 ] && opt="--kv-type-k q4_0 --kv-type-v q8_0"
	$D -m "$m" -t "$th" $opt -n 0 --stats-json <"$TMP/c2000" >/dev/null 2>"$TMP/kv2000" || exit 1
	b=$(json kv_bytes "$TMP/kv2000")
	[ "$kt" = f32 ] && f32b=$b
	awk -v kt="$kt" -v b="$b" -v f="$f32b" 'BEGIN { printf "  %s %.2f MB (%.1f%%)", kt, b / 1e6, 100 * b / f }'
	printf '%s"%s":%s' "$sep" "$kt" "$b" >>"$JSON"
	sep=,
done
printf '}' >>"$JSON"
echo
echo "(targets: q8_0 28% of f32, q4_0 17%)"

# Issue 13's targets at 4000 positions, which single runs above leave to
# chance (they swing by a third here): alternating rounds of our decode with
# the f32 and q8_0 caches and our prefill of the 4000 tokens before it,
# against llama.cpp's decode at depth 4000 and pp4000 (its f16 cache), and
# (issue 50) our q8_0 cache's decode against llama.cpp's with its q8_0 cache.
if [ -x "$REF" ]; then
	: >"$TMP/t13"
	for r in $(seq "${BENCH_ROUNDS:-5}"); do
		$D -m "$m" -t "$th" -n 64 --ignore-eos --greedy --stats-json <"$TMP/c4000" >/dev/null 2>"$TMP/t13a" || exit 1
		$D -m "$m" -t "$th" --kv-type q8_0 -n 64 --ignore-eos --greedy --stats-json \
			<"$TMP/c4000" >/dev/null 2>"$TMP/t13b" || exit 1
		rd=$(llama_tok_s "$REF" "$m" -r 1 -p 0 -n 32 -d 4000)
		rp=$(llama_tok_s "$REF" "$m" -r 1 -p 4000 -n 0)
		rq=$(llama_tok_s "$REF" "$m" -r 1 -p 0 -n 32 -d 4000 -ctk q8_0 -ctv q8_0 -fa 1)
		echo "$(json decode_tok_s "$TMP/t13a") $(json decode_tok_s "$TMP/t13b") $(json prefill_tok_s "$TMP/t13a") ${rd:-0} ${rp:-0} ${rq:-0}" >>"$TMP/t13"
	done
	echo "issue 13's targets (best kernels, ${BENCH_ROUNDS:-5} alternating rounds against llama.cpp's f16 cache; median ratio, range)"
	awk -v json="$JSON" '
	function med(col, den,   n, i, j, t, v) { n = 0
		for (i = 1; i <= NR; i++) if (x[i, den] > 0) v[++n] = x[i, col] / x[i, den]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		lo = v[1]; hi = v[n]; return n ? (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2) : -1 }
	{ for (i = 1; i <= 6; i++) x[NR, i] = $i }
	END {
		a = med(1, 4); printf "  decode at 4000, f32 cache   %.2fx (%.2f-%.2fx), target 1.0x\n", a, lo, hi
		printf ",\"cache_targets\":{\"decode_4000_f32_ratio\":%.3f,", a >>json
		b = med(2, 4); printf "  decode at 4000, q8_0 cache  %.2fx (%.2f-%.2fx), target 1.3x\n", b, lo, hi
		printf "\"decode_4000_q8_0_ratio\":%.3f,", b >>json
		c = med(3, 5); printf "  prefill of 4000, f32 cache  %.2fx (%.2f-%.2fx), target 1.2x\n", c, lo, hi
		printf "\"prefill_4000_f32_ratio\":%.3f,", c >>json
		d = med(2, 6); printf "  decode at 4000, q8_0 both    %.2fx (%.2f-%.2fx), target 2x (issue 50)\n", d, lo, hi
		printf "\"decode_4000_q8_0_vs_llama_q8_0\":%.3f}", d >>json
	}' "$TMP/t13"
fi

# Accuracy of the cache types (issue 13): the mean |change of log-probability|
# against the f32 cache on a SmolLM2-shaped model with weights of std 0.05 and
# a fixed random 300-token stream, beside llama.cpp's own figure (ref-score,
# REF_KV); and the perplexity change on stories260K's 2000-token text
# (bench/stories260K-2000.ids, made by bench/mktext.sh).
ma="$TMP/smollm2-135m-q8_0-std05.gguf"
[ -f "$ma" ] || tools/mkmodel -s smollm2-135m -t q8_0 -w 0.05 -o "$ma" || exit 1
awk 'BEGIN { x = 12345; for (i = 0; i < 300; i++) { x = (x * 1103515245 + 12345) % 2147483648; print int(x / 65536) % 49152 } }' >"$TMP/r300"
st=../shared/models/stories260K.gguf
# meanabs A B: the mean |difference| of two columns of log-probabilities
meanabs() { paste "$1" "$2" | awk '{ d = $1 - $2; s += d < 0 ? -d : d } END { printf "%.4f", s / NR }'; }
echo
echo "accuracy against the f32 cache: mean |change of log p| (SmolLM2 shape, std 0.05, 300 random tokens),"
echo "and perplexity change on stories260K's 2000-token text"
printf '%-11s %10s %12s %14s\n' cache "mean |dlp|" "llama.cpp" "stories ppl"
$D -m "$ma" -t "$th" --score <"$TMP/r300" >"$TMP/a-f32" 2>/dev/null || exit 1
[ -x "$SCORE" ] && "$SCORE" "$ma" <"$TMP/r300" >"$TMP/ra-f32" 2>/dev/null
[ -f "$st" ] && $D -m "$st" --score <bench/stories260K-2000.ids 2>&1 >/dev/null |
	sed -n 's/.*perplexity //p' >"$TMP/s-f32"
printf ',"accuracy":[' >>"$JSON"
sep=
for kt in f16 q8_0 q4_0 q4_0/q8_0; do
	opt="--kv-type $kt"
	[ "$kt" = q4_0/q8_0 ] && opt="--kv-type-k q4_0 --kv-type-v q8_0"
	$D -m "$ma" -t "$th" $opt --score <"$TMP/r300" >"$TMP/a-kt" 2>/dev/null || exit 1
	ours=$(meanabs "$TMP/a-f32" "$TMP/a-kt")
	ref=-
	if [ -x "$SCORE" ] && [ "$kt" != q4_0/q8_0 ]; then
		REF_KV=$kt "$SCORE" "$ma" <"$TMP/r300" >"$TMP/ra-kt" 2>/dev/null && ref=$(meanabs "$TMP/ra-f32" "$TMP/ra-kt")
	fi
	ppl=-
	if [ -f "$st" ]; then
		p=$($D -m "$st" $opt --score <bench/stories260K-2000.ids 2>&1 >/dev/null | sed -n 's/.*perplexity //p')
		ppl=$(awk -v a="$p" -v b="$(cat "$TMP/s-f32")" 'BEGIN { printf "%+.3f%%", 100 * (a / b - 1) }')
	fi
	printf '%-11s %10s %12s %14s\n' "$kt" "$ours" "$ref" "$ppl"
	printf '%s{"cache":"%s","mean_abs_dlogp":%s,"llama_cpp_mean_abs_dlogp":"%s","stories_ppl_change":"%s"}' \
	    "$sep" "$kt" "$ours" "$ref" "$ppl" >>"$JSON"
	sep=,
done
printf ']' >>"$JSON"

# Accuracy of the weight types (issue 9): the same stream under the same
# random model (std 0.05) stored as f32 and as each quantized type; ours
# against our f32, llama.cpp's (ref-score) against its f32.  Q6_K's blocks
# of 256 do not fit SmolLM2's 576-wide rows: its file, as llama.cpp's
# quantizer makes one, has q6_K where rows are 1536 wide (FFN-down) and
# q8_0 elsewhere (tools/fixture.c).
echo
echo "accuracy of the weight types against the f32 model: mean |change of log p| (SmolLM2 shape, std 0.05, 300 random tokens)"
echo "(each instruction set, with the same bits: every set rounds x to 16 bits a block for every block type;"
echo " q6_K: as llama.cpp quantizes this shape, q8_0 where rows are 576 wide)"
printf '%-11s %-10s %10s %12s\n' weights isa "mean |dlp|" "llama.cpp"
wf="$TMP/smollm2-135m-f32-std05.gguf"
[ -f "$wf" ] || tools/mkmodel -s smollm2-135m -t f32 -w 0.05 -o "$wf" || exit 1
rf=no
[ -x "$SCORE" ] && "$SCORE" "$wf" <"$TMP/r300" >"$TMP/rw-f32" 2>/dev/null && rf=yes
printf ',"weight_accuracy":[' >>"$JSON"
sep=
for wt in q8_0 q6_K q4_0 q4_K_mix; do
	f="$TMP/smollm2-135m-$wt-std05.gguf"
	[ -f "$f" ] || tools/mkmodel -s smollm2-135m -t "$wt" -w 0.05 -o "$f" || exit 1
	ref=-
	[ $rf = yes ] && "$SCORE" "$f" <"$TMP/r300" >"$TMP/rw-x" 2>/dev/null && ref=$(meanabs "$TMP/rw-f32" "$TMP/rw-x")
	for isa in $ISAS; do
		LLM_ISA=$isa $D -m "$wf" -t "$th" --score <"$TMP/r300" >"$TMP/w-f32" 2>/dev/null || exit 1
		LLM_ISA=$isa $D -m "$f" -t "$th" --score <"$TMP/r300" >"$TMP/w-x" 2>/dev/null || exit 1
		ours=$(meanabs "$TMP/w-f32" "$TMP/w-x")
		printf '%-11s %-10s %10s %12s\n' "$wt" "$isa" "$ours" "$ref"
		printf '%s{"weights":"%s","isa":"%s","mean_abs_dlogp":%s,"llama_cpp_mean_abs_dlogp":"%s"}' \
		    "$sep" "$wt" "$isa" "$ours" "$ref" >>"$JSON"
		sep=,
	done
done
printf ']' >>"$JSON"
[ -f "$st" ] || echo "stories260K: $st not present, so no perplexity column"

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

# Memory against prompt length (issue 11): the peak resident set of a
# prompt of N tokens and 16 generated, at max_ctx 8192 (q8_0 weights, the
# most threads asked for): the f32 cache growing on demand, preallocated
# densely, the f16, q8_0 and q4_0 caches, and llama.cpp.
# llama-bench reports no RSS: it runs under /usr/bin/time with -p N -n 16
# -r 1, so its context is sized to the run (N + 16), with its f16 cache.
LENGTHS=${BENCH_RSS_LENGTHS:-"16 512 1024 2100 4100 8000"}
ref=1
if [ ! -x "$REF" ]; then
	ref=0
elif [ ! -x /usr/bin/time ]; then
	echo "memory: /usr/bin/time not present (Debian package time), so no llama.cpp column"
	ref=0
fi
echo
echo "memory (q8_0, max_ctx 8192, $th threads): peak RSS in MB, a prompt of N tokens and 16 generated"
printf '%7s %8s %9s %10s %9s %11s %9s %11s %8s %8s %8s %9s\n' tokens grow prealloc llama.cpp grow/ref "kv filled" \
    "grow ms" "prefill s" "f16" "q8_0" "q4_0" "q8_0/ref"
: >"$TMP/chart"
printf ',"memory":[' >>"$JSON"
sep=
for n in $LENGTHS; do
	prompt "$n" >"$TMP/pn"
	$D -m "$m" -t "$th" --ctx 8192 -n 16 --ignore-eos --greedy --stats-json <"$TMP/pn" >/dev/null 2>"$TMP/grow" || exit 1
	$D -m "$m" -t "$th" --ctx 8192 -n 16 --ignore-eos --greedy --kv-prealloc --stats-json <"$TMP/pn" \
		>/dev/null 2>"$TMP/dense" || exit 1
	for kt in f16 q8_0 q4_0; do
		$D -m "$m" -t "$th" --ctx 8192 -n 16 --ignore-eos --greedy --kv-type $kt --stats-json \
			<"$TMP/pn" >/dev/null 2>"$TMP/grow-$kt" || exit 1
	done
	rkb=0
	if [ $ref -eq 1 ]; then
		/usr/bin/time -f %M -o "$TMP/reftime" "$REF" -m "$m" -t "$th" -p "$n" -n 16 -r 1 -o csv \
			>/dev/null 2>&1 && rkb=$(tail -n 1 "$TMP/reftime")
	fi
	awk -v n="$n" -v g="$(json peak_rss_bytes "$TMP/grow")" -v d="$(json peak_rss_bytes "$TMP/dense")" \
	    -v r="$rkb" -v kv="$(json kv_resident_bytes "$TMP/grow")" -v gms="$(json kv_grow_ms "$TMP/grow")" \
	    -v ttft="$(json ttft_ms "$TMP/grow")" -v h16="$(json peak_rss_bytes "$TMP/grow-f16")" \
	    -v q8="$(json peak_rss_bytes "$TMP/grow-q8_0")" \
	    -v q4="$(json peak_rss_bytes "$TMP/grow-q4_0")" -v sep="$sep" -v json="$JSON" -v chart="$TMP/chart" 'BEGIN {
		printf "%7d %8.1f %9.1f %10s %9s %11.1f %9.1f %11.1f %8.1f %8.1f %8.1f %9s\n", n, g / 1e6, d / 1e6,
		    r ? sprintf("%.1f", r * 1024 / 1e6) : "-", r ? sprintf("%.2fx", g / (r * 1024)) : "-",
		    kv / 1e6, gms, ttft / 1e3, h16 / 1e6, q8 / 1e6, q4 / 1e6,
		    r ? sprintf("%.2fx", q8 / (r * 1024)) : "-"
		printf "%s{\"prompt_tokens\":%d,\"grow_peak_rss_bytes\":%.0f,\"prealloc_peak_rss_bytes\":%.0f,\"llama_cpp_peak_rss_bytes\":%.0f,\"kv_resident_bytes\":%.0f,\"kv_grow_ms\":%.2f,\"prefill_ms\":%.1f,\"f16_peak_rss_bytes\":%.0f,\"q8_0_peak_rss_bytes\":%.0f,\"q4_0_peak_rss_bytes\":%.0f}",
		    sep, n, g, d, r * 1024, kv, gms, ttft, h16, q8, q4 >>json
		printf "grow on demand\t%d\t%.1f\n--kv-prealloc\t%d\t%.1f\n", n, g / 1e6, n, d / 1e6 >>chart
		printf "grow, f16 cache\t%d\t%.1f\ngrow, q8_0 cache\t%d\t%.1f\ngrow, q4_0 cache\t%d\t%.1f\n",
		    n, h16 / 1e6, n, q8 / 1e6, n, q4 / 1e6 >>chart
		if (r) printf "llama.cpp (ctx N+16, f16)\t%d\t%.1f\n", n, r * 1024 / 1e6 >>chart
	}'
	sep=,
done
printf ']' >>"$JSON"
sort -s -t "$(printf '\t')" -k1,1 "$TMP/chart" | awk -f bench/chart.awk \
    -v title="Peak RSS against prompt length: SmolLM2-135M-shaped Q8_0, max_ctx 8192" \
    -v xlabel="prompt tokens (then 16 generated)" -v ylabel="peak RSS (MB)" >bench/memory.svg
echo "kv filled: the cache's resident bytes at the end; grow ms: time spent growing it; chart: bench/memory.svg"

# Against llama.cpp (issue 9), on each instruction set: decode of 64 tokens,
# prefill of 128 and 512, for each weight type, alternating the two programs
# over BENCH_ROUNDS rounds (15 here, 5 elsewhere: a single round's ratio
# ranged from 0.8x to 2.1x on one machine in one hour, five rounds'
# median moved by 0.2, and nine rounds' by 0.1 between runs), with the
# median ratio and its range.  Both warm up first (llm-decode --warmup;
# llama-bench does its own), so paging in the weights counts for
# neither.  llama.cpp picks its kernels at run time: for the AVX2 rows it
# runs from a copy of llama-bench in bench/tmp/ref-avx2 beside its AVX2
# (haswell) kernels alone.
ROUNDS=${BENCH_ROUNDS:-5}
VS_ROUNDS=${BENCH_ROUNDS:-15}
prompt 512 >"$TMP/p512"
# The multiply-add peak of as many threads (bench/fmapeak), and the FLOP a
# prompt token of N costs: 2 per weight of the 30 layers' matrices (576x576
# twice, 576x192 twice, 576x1536 three times; the output matrix runs for
# the last token only) and 2 per head dimension per earlier position for
# scores and for values (9 heads of 64, (N - 1) / 2 on average).
# peak ISA: the best of two measurements, next to the rows that use it
# (one taken while a neighbour held the machine read half the peak)
peak() {
	LLM_ISA=$1 bench/fmapeak "$th" >"$TMP/pk"
	LLM_ISA=$1 bench/fmapeak "$th" >>"$TMP/pk"
	sort -n "$TMP/pk" | tail -n 1
}
flop() { awk -v n="$1" 'BEGIN { printf "%.0f", 2 * 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 4 * 30 * 9 * 64 * (n - 1) / 2 }'; }
ref2=$(ref_avx2 llama-bench "$(dirname "$REF")")
# vs ISA TYPE TEST: one row; TEST is dec64, pp128 or pp512
vs() {
	mm="$TMP/smollm2-135m-$2.gguf"
	ref=$REF
	[ "$1" = avx2 ] && ref=$ref2
	case $3 in
	dec64) in=p1 n=64 key=decode_tok_s rargs="-p 0 -n 64" ;;
	pp128) in=p128 n=1 key=prefill_tok_s rargs="-p 128 -n 0" fl=$(flop 128) ;;
	pp512) in=p512 n=1 key=prefill_tok_s rargs="-p 512 -n 0" fl=$(flop 512) ;;
	esac
	pk=0
	[ "$3" != dec64 ] && pk=$(peak "$1")
	: >"$TMP/vs"
	# each program goes first in every other round, so that neither
	# always meets the machine as the other left it
	for r in $(seq "$VS_ROUNDS"); do
		theirs=-
		[ -x "$ref" ] && [ $((r % 2)) = 0 ] && theirs=$(llama_tok_s "$ref" "$mm" -r 1 $rargs)
		LLM_ISA=$1 $D -m "$mm" -t "$th" -n $n --warmup --ignore-eos --greedy --stats-json \
			<"$TMP/$in" >/dev/null 2>"$TMP/vs1" || return 1
		[ -x "$ref" ] && [ $((r % 2)) = 1 ] && theirs=$(llama_tok_s "$ref" "$mm" -r 1 $rargs)
		echo "$(json $key "$TMP/vs1") ${theirs:--}" >>"$TMP/vs"
	done
	sort -n -k1,1 "$TMP/vs" | awk '{ print $1 }' >"$TMP/vs-ours"
	awk '$2 != "-" { print $1 / $2 }' "$TMP/vs" | sort -n >"$TMP/vs-ratio"
	awk '$2 != "-" { print $2 }' "$TMP/vs" | sort -n >"$TMP/vs-theirs"
	awk -v isa="$1" -v ty="$2" -v t="$3" -v sep="$vsep" -v json="$JSON" -v FILES="$TMP/" -v pk="$pk" -v fl="${fl:-0}" '
	function median(f,   n, v, line) { n = 0; while ((getline line <f) > 0) v[++n] = line; close(f)
		if (!n) return -1; return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
	function lo(f,   line) { getline line <f; close(f); return line }
	function hi(f,   line, last) { while ((getline line <f) > 0) last = line; close(f); return last }
	BEGIN {
		o = median(FILES "vs-ours"); r = median(FILES "vs-theirs"); q = median(FILES "vs-ratio")
		# the share of the multiply-add peak, for prefill
		po = pk > 0 ? sprintf("%5.0f%%", 100 * o * fl / pk) : "     -"
		pr = pk > 0 && r > 0 ? sprintf("%5.0f%%", 100 * r * fl / pk) : "     -"
		if (q < 0)
			printf "%-10s %-9s %-6s %9.1f %9s %7s %15s %s %s\n", isa, ty, t, o, "-", "-", "-", po, pr
		else
			printf "%-10s %-9s %-6s %9.1f %9.1f %6.2fx %7.2f-%.2fx %s %s\n", isa, ty, t, o, r, q,
			    lo(FILES "vs-ratio"), hi(FILES "vs-ratio"), po, pr
		printf "%s{\"isa\":\"%s\",\"type\":\"%s\",\"test\":\"%s\",\"tok_s\":%.2f,\"llama_cpp_tok_s\":%.2f,\"ratio_median\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,\"pct_of_fma_peak\":%.1f}",
		    sep, isa, ty, t, o, r, q, q < 0 ? -1 : lo(FILES "vs-ratio"), q < 0 ? -1 : hi(FILES "vs-ratio"),
		    (pk > 0 ? 100 * o * fl / pk : -1) >>json
	}'
	vsep=,
}
echo
echo "against llama.cpp ($th threads, $VS_ROUNDS alternating rounds; medians, and the range of the ratio)"
printf '%-10s %-9s %-6s %9s %9s %7s %15s %6s %6s\n' isa type test "llm/s" "llama/s" ratio range "%peak" "llama"
printf ',"vs_llama_cpp":[' >>"$JSON"
vsep=
for isa in $ISAS; do
	for ty in $TYPES; do
		for t in dec64 pp128 pp512; do
			vs "$isa" "$ty" "$t" || exit 1
		done
	done
done
printf ']' >>"$JSON"
echo "%peak: prefill's multiply-adds per second (weights and attention) over bench/fmapeak's peak of $th threads, ours and llama.cpp's"
echo "(the f32 multiply-add peak: avx512vnni's q8_0 products and llama.cpp's quantized ones run as integer dot products, whose peak is higher)"

# Threads under load (issue 9): decode with the default thread count while
# one busy process per CPU competes for the cores, against the same run idle.
# stories260K (a tiny model: a few microseconds a job, so waiting matters
# most) where ../shared has it, and the SmolLM2-shaped Q8_0 model.
hog_run() {	# hog_run MODEL N: decode tok/s of N tokens, idle then loaded
	$D -m "$1" -n "$2" --ignore-eos --greedy --stats-json <"$TMP/p1" >/dev/null 2>"$TMP/idle" || return 1
	hogs=
	for i in $(seq "$(nproc)"); do
		sh -c 'while :; do :; done' &
		hogs="$hogs $!"
	done
	$D -m "$1" -n "$2" --ignore-eos --greedy --stats-json <"$TMP/p1" >/dev/null 2>"$TMP/loaded"
	kill $hogs 2>/dev/null
	wait 2>/dev/null
	awk -v i="$(json decode_tok_s "$TMP/idle")" -v l="$(json decode_tok_s "$TMP/loaded")" \
	    -v name="$3" -v sep="$hsep" -v json="$JSON" 'BEGIN {
		printf "  %-28s idle %9.1f tok/s, loaded %9.1f tok/s: %.2f of idle\n", name, i, l, l / i
		printf "%s{\"model\":\"%s\",\"idle_tok_s\":%.1f,\"loaded_tok_s\":%.1f}", sep, name, i, l >>json
	}'
	hsep=,
}
echo
echo "threads under load: decode, default threads ($(cmd/llm-decode -m "$m" -n 1 --stats-json <"$TMP/p1" 2>&1 >/dev/null | sed -n 's/.*"threads":\([0-9]*\).*/\1/p')), idle and beside one busy process per CPU"
printf ',"under_load":[' >>"$JSON"
hsep=
[ -f "$st" ] && hog_run "$st" 2000 stories260K
hog_run "$m" 64 "SmolLM2 shape, Q8_0"
printf ']' >>"$JSON"

# Windowed eviction (issue 14): a text longer than max_ctx scored with a
# window of sinks (S = 4) and without (S = 0), beside the first window's
# perplexity (the tokens before anything is evicted, the same for all)
# and the unbounded cache's (a context as long as the text).
# - stories260K at --ctx 256 on bench/tinystories.txt, nine short stories
#   in the TinyStories manner written for this bench (2933 tokens), and on
#   its own 2000-token text.  That one was sampled with an unbounded
#   cache, which therefore predicts it best: a model's own samples favour
#   the cache that made them.
# - the SmolLM2-shaped model (std 0.05) at --ctx 1024 on a stream of six
#   500-token texts it sampled from BOS, one after another, as documents
#   follow each other in a long input.
# pplrange FILE A B: the perplexity of lines A to B of a --score output
pplrange() { awk -v a="$2" -v b="$3" 'NR >= a && NR <= b { s -= $1; n++ } END { printf "%.4f", n ? exp(s / n) : 0 }' "$1"; }
# window MODEL IDS CTX NAME: the table for one model
window() {
	n=$(wc -l <"$2")
	first=$(($3 - 1))	# the scores made before anything is evicted
	$D -m "$1" -t "$th" --ctx "$3" --kv-window $(($3 - 4)) --kv-sinks 4 --score <"$2" >"$TMP/w-s4" 2>/dev/null || return 1
	$D -m "$1" -t "$th" --ctx "$3" --kv-window "$3" --kv-sinks 0 --score <"$2" >"$TMP/w-s0" 2>/dev/null || return 1
	$D -m "$1" -t "$th" --ctx "$n" --score <"$2" >"$TMP/w-all" 2>/dev/null || return 1
	echo "$4: $n tokens at --ctx $3; perplexity of the first $first scores, of the $((n - 1 - first)) after them, and of all"
	printf '  %-32s %9s %9s %9s\n' cache first rest all
	for c in "s4:sinks 4, window $(($3 - 4))" "s0:no sinks, window $3" "all:unbounded (--ctx $n)"; do
		f=${c%%:*}
		printf '  %-32s %9s %9s %9s\n' "${c#*:}" "$(pplrange "$TMP/w-$f" 1 "$first")" \
		    "$(pplrange "$TMP/w-$f" $((first + 1)) "$n")" "$(pplrange "$TMP/w-$f" 1 "$n")"
		printf '%s{"model":"%s","cache":"%s","first":%s,"rest":%s,"all":%s}' "$wsep" "$4" "$f" \
		    "$(pplrange "$TMP/w-$f" 1 "$first")" "$(pplrange "$TMP/w-$f" $((first + 1)) "$n")" \
		    "$(pplrange "$TMP/w-$f" 1 "$n")" >>"$JSON"
		wsep=,
	done
	# the mean |difference| of log p that sinks make past the first window
	tail -n +"$((first + 1))" "$TMP/w-s4" >"$TMP/w-a"; tail -n +"$((first + 1))" "$TMP/w-s0" >"$TMP/w-b"
	echo "  sinks against none, past the first window: mean |change of log p| $(meanabs "$TMP/w-a" "$TMP/w-b")"
}
echo
echo "windowed eviction: a text past max_ctx ($th threads)"
printf ',"window":[' >>"$JSON"
wsep=
if [ -f "$st" ]; then
	cmd/llm-tokenize -m "$st" <bench/tinystories.txt | tr ' ' '\n' | grep . >"$TMP/tinystories.ids"
	window "$st" "$TMP/tinystories.ids" 256 "stories260K, bench/tinystories.txt" || exit 1
	window "$st" bench/stories260K-2000.ids 256 "stories260K, its own text (sampled unbounded)" || exit 1
else
	echo "stories260K: $st not present, skipped"
fi
if [ ! -f "$TMP/stream3000" ]; then
	for seed in 1 2 3 4 5 6; do
		echo 1
		$D -m "$ma" -t "$th" --temp 1 --top-k 0 --top-p 1 --seed $seed --ignore-eos -n 499 \
			<"$TMP/p1" 2>/dev/null || exit 1
	done >"$TMP/stream3000.tmp" && mv "$TMP/stream3000.tmp" "$TMP/stream3000"
fi
window "$ma" "$TMP/stream3000" 1024 "SmolLM2 shape (std 0.05), six sampled texts" || exit 1
printf ']' >>"$JSON"

# Model families (issue 12).  The SmolLM2 shape (Q8_0) as each family,
# decode and prefill of 128: the plain llama path pays nothing for the
# others, whose extras (biases, head norms, fused views) show here.  Then
# the Qwen2.5-0.5B shape (qwen2, Q8_0, tied, vocabulary 151936) beside
# llama-bench on the same file: speed, and peak RSS (llama.cpp's under GNU's /usr/bin/time)
# (llama-bench -p 128 -n 64 -r 1).
echo
echo "families, SmolLM2 shape, q8_0, $th threads (medians of $ROUNDS rounds): decode 64 and prefill 128"
printf '%-8s %9s %9s\n' family "dec/s" "pp128/s"
printf ',"families":[' >>"$JSON"
fsep=
for fam in llama qwen2 qwen3 phi3; do
	fm="$TMP/smollm2-135m-q8_0-$fam.gguf"
	[ -f "$fm" ] || tools/mkmodel -s smollm2-135m -t q8_0 -A "$fam" -o "$fm" || exit 1
	: >"$TMP/fam"
	for r in $(seq "$ROUNDS"); do
		$D -m "$fm" -t "$th" -n 64 --warmup --ignore-eos --greedy --stats-json <"$TMP/p128" \
			>/dev/null 2>"$TMP/fam1" || exit 1
		echo "$(json decode_tok_s "$TMP/fam1") $(json prefill_tok_s "$TMP/fam1")" >>"$TMP/fam"
	done
	awk -v fam="$fam" -v sep="$fsep" -v json="$JSON" '{ d[NR] = $1; p[NR] = $2 }
	function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { dm = med(d, NR); pm = med(p, NR); printf "%-8s %9.1f %9.1f\n", fam, dm, pm
		printf "%s{\"family\":\"%s\",\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f}", sep, fam, dm, pm >>json }' "$TMP/fam"
	fsep=,
done
printf ']' >>"$JSON"
qm="$TMP/qwen2.5-0.5b-q8_0.gguf"
[ -f "$qm" ] || tools/mkmodel -s qwen2.5-0.5b -t q8_0 -o "$qm" || exit 1
echo "Qwen2.5-0.5B shape (qwen2, q8_0, tied), $th threads, $ROUNDS alternating rounds: decode 64, prefill 128, peak RSS MB"
printf '%-10s %9s %9s %9s\n' program "dec/s" "pp128/s" "rss MB"
: >"$TMP/qw"
for r in $(seq "$ROUNDS"); do
	$D -m "$qm" -t "$th" -n 64 --warmup --ignore-eos --greedy --stats-json \
		<"$TMP/p128" >/dev/null 2>"$TMP/qw1" || exit 1
	# ours from getrusage as --stats-json says it (KiB, as GNU time prints llama.cpp's)
	ours="$(json decode_tok_s "$TMP/qw1") $(json prefill_tok_s "$TMP/qw1") $(json peak_rss_bytes "$TMP/qw1" | awk '{ printf "%d", $1 / 1024 }')"
	theirs="- - -"
	if [ -x "$REF" ]; then
		/usr/bin/time -f %M -o "$TMP/qwt" "$REF" -m "$qm" -t "$th" -p 128 -n 64 -r 1 -o csv >"$TMP/qwr" 2>/dev/null &&
			theirs="$(awk -F, 'NR > 1 { gsub(/"/, "", $(NF - 1)); v[NR] = $(NF - 1) } END { print v[NR], v[NR - 1] }' "$TMP/qwr") $(tail -n 1 "$TMP/qwt")"
	fi
	echo "$ours $theirs" >>"$TMP/qw"
done
awk -v json="$JSON" '{ for (i = 1; i <= 6; i++) v[i, NR] = $i }
function med(c, n,   i, j, t, a) { for (i = 1; i <= n; i++) a[i] = v[c, i]
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
END {
	n = NR
	printf "%-10s %9.1f %9.1f %9.1f\n", "llm", med(1, n), med(2, n), med(3, n) / 1024
	if (v[4, 1] != "-") {
		printf "%-10s %9.1f %9.1f %9.1f\n", "llama.cpp", med(4, n), med(5, n), med(6, n) / 1024
		printf "%-10s %8.2fx %8.2fx %8.2fx\n", "ratio", med(1, n) / med(4, n), med(2, n) / med(5, n), med(3, n) / med(6, n)
	}
	printf ",\"qwen25_05b\":{\"decode_tok_s\":%.2f,\"prefill_tok_s\":%.2f,\"peak_rss_kb\":%d}", med(1, n), med(2, n), med(3, n) >>json
}' "$TMP/qw"

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
printf ']' >>"$JSON"

# Many prompts in one process (issue 33): bench/lines.sh, its part of the JSON too.
JSON="$JSON" sh bench/lines.sh
# What a grammar costs a token (issue 35): printed only.
sh bench/grammar.sh
# Gemma 3's shapes: memory with sliding layers, and speed (issue 36): printed only.
sh bench/gemma3.sh
# The weight types of issue 47: accuracy on llama.cpp's files, speed on Llama-3.2-1B's shape: printed only.
sh bench/weights.sh
# Mixture of experts (issue 48): Qwen3-30B-A3B's layers in Q4_K_M, speed and memory: printed only.
sh bench/moe.sh
printf '}\n' >>"$JSON"
echo "written: $JSON"
