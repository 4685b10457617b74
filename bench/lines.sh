#!/bin/sh
# bench/lines.sh: many prompts in one process (issue 33), as make bench
# runs it after the rest (or alone: sh bench/lines.sh).  It prints figures
# and never fails on speed; with JSON=FILE it appends its part there.
#
# - Per kernel set (the machine's own, and under it avx512vnni and avx2,
#   or dotprod and neon), on the SmolLM2-135M-shaped Q8_0 model with 2
#   threads: the batch, 16 prompts of 128 tokens with 64 generated each
#   (llm-decode --lines -P 16), against llama-batched-bench at 16
#   sequences with the same kind of kernels (its best for the AVX-512
#   sets: it has no AMX kernels; its haswell kernels alone for avx2) and
#   against plain llm-decode run on the prompts one after another; decode
#   steps of 16 against prefill of 128; and one stream (decode of 64
#   after 128) against the bandwidth bound, bench/membw's read rate with
#   as many threads over the bytes a token reads.  Medians of alternating
#   rounds, with their ranges.
# - The curve: decode steps alone (prompts of 4 tokens, 64 generated) for
#   -P 1, 4, 16 and 32, against prefill of a 128-token prompt in the same
#   rounds, their multiply-adds a second and the machine's f32 peak,
#   beside llama-batched-bench's decode rate.
# - Sharing: 16 lines resumed from one 2000-position f32 snapshot, their
#   private memory (RssAnon) against the snapshot's size; one plain
#   resume's; and the time to the first token of resumes of 100, 1000 and
#   4000 positions.
set -u
. bench/lib.sh
TH=$th
ROUNDS=${BENCH_ROUNDS:-3}
REF=${LLAMA_BATCHED_BENCH:-../shared/ref/llama-batched-bench}
JSON=${JSON:-}
now() { date +%s.%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# prompts N LEN: N lines of LEN ids in 1000..40999, each line its own
prompts() {
	awk -v n="$1" -v len="$2" 'BEGIN { for (i = 0; i < n; i++) { s = ""
		for (j = 0; j < len; j++) s = s (j ? " " : "") 1000 + (i * 104729 + j * 7919) % 40000
		print s } }'
}
[ -x bench/fmapeak ] || make -s bench/fmapeak || exit 1
m="$TMP/smollm2-135m-q8_0.gguf"
[ -f "$m" ] || tools/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
mf="$TMP/smollm2-135m-f32-8k.gguf"
[ -f "$mf" ] || tools/mkmodel -s smollm2-135m -t f32 -c 8192 -o "$mf" || exit 1
have_ref=0
[ -x "$REF" ] && have_ref=1
# ref_table PROGRAM NPL: llama-batched-bench's rows for 128-token prompts and 64 generated
ref_table() {
	"$1" -m "$m" -c 16384 -b 2048 -ub 512 -npp 128 -ntg 64 -npl "$2" -t $TH 2>/dev/null |
		awk -F'|' 'NF > 10 && $2 + 0 > 0 { gsub(/ /, ""); print $4, $7, $9, $11 }'	# B S_PP S_TG S
}

echo
echo "many prompts (issue 33): SmolLM2-135M shape, q8_0, $TH threads, $(sh -c "echo 1 | $D -m $m -n 1 --stats-json 2>&1 >/dev/null" | sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')"
prompts 16 128 >"$TMP/l16x128"
# per kernel set: the native one and those under it (LLM_ISA): avx512vnni under amx, and avx2;
# on AArch64 dotprod under i8mm, and neon
isa=$(sh -c "echo 1 | $D -m $m -n 1 --stats-json 2>&1 >/dev/null" | sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')
case $isa in
amx) lower="avx512vnni avx2" ;;
avx512*) lower=avx2 ;;
i8mm) lower="dotprod neon" ;;
dotprod) lower=neon ;;
*) lower= ;;
esac
prompts 1 128 >"$TMP/l1x128"
prompts 16 4 >"$TMP/l16x4"
ref2=$(ref_avx2 llama-batched-bench "$(dirname "$REF")")
# range FILE COLUMN: "median [min-max]" of a column
range() { awk -v c="$2" '{ print $c }' "$1" | sort -n | awk '{ v[NR] = $1 }
	END { printf "%.2f [%.2f-%.2f]", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo "  per kernel set, $ROUNDS alternating rounds, medians [ranges]:"
printf '  %-11s %9s %9s %19s %8s %19s %19s\n' set "batch/s" llama.cpp "batch x llama.cpp" "x plain" \
    "steps16/prefill128" "1 stream/bound"
[ -n "$JSON" ] && printf ',"lines_sets":[' >>"$JSON"
sep=
for set in $isa $lower; do
	ref=-
	case $set in
	avx2) [ -n "$ref2" ] && ref=$ref2 ;;
	avx512*|amx) [ $have_ref -eq 1 ] && ref=$REF ;;
	esac
	: >"$TMP/set"
	for r in $(seq "$ROUNDS"); do
		theirs=-
		[ "$ref" != - ] && [ $((r % 2)) = 0 ] && theirs=$(ref_table "$ref" 16 | awk '{ print $4 }')
		LLM_ISA=$set $D -m "$m" -t $TH --lines -P 16 -n 64 --ignore-eos --greedy -q --stats-json \
			<"$TMP/l16x128" >/dev/null 2>"$TMP/lb" || exit 1
		[ "$ref" != - ] && [ $((r % 2)) = 1 ] && theirs=$(ref_table "$ref" 16 | awk '{ print $4 }')
		LLM_ISA=$set $D -m "$m" -t $TH --lines -P 16 -n 64 --ignore-eos --greedy -q --stats-json \
			<"$TMP/l16x4" >/dev/null 2>"$TMP/ls16" || exit 1
		LLM_ISA=$set $D -m "$m" -t $TH -n 1 --warmup --greedy --stats-json <"$TMP/l1x128" >/dev/null \
			2>"$TMP/lp" || exit 1
		LLM_ISA=$set $D -m "$m" -t $TH -n 64 --warmup --ignore-eos --greedy --stats-json <"$TMP/l1x128" \
			>/dev/null 2>"$TMP/l1s" || exit 1
		wb=$(json weight_bytes "$TMP/l1s")
		bw=$(bench/membw $TH "$wb")
		# batch tok/s, its seconds, llama.cpp's, their ratio, steps of 16, prefill, ratio, one stream, bound, fraction
		echo "$(json total_tok_s "$TMP/lb") $(json seconds "$TMP/lb") ${theirs:--} \
		    $(json generated_tok_s "$TMP/ls16") $(json prefill_tok_s "$TMP/lp") $(json decode_tok_s "$TMP/l1s") \
		    $wb $bw" | awk '{ printf "%s %s %s %s %s %s %s %s %s %s\n", $1, $2, $3, $3 == "-" ? "-" : $1 / $3,
		    $4, $5, $4 / $5, $6, $8 / $7, $6 / ($8 / $7) }' >>"$TMP/set"
	done
	t0=$(now)
	while IFS= read -r l; do
		echo "$l" | LLM_ISA=$set $D -m "$m" -t $TH -n 64 --ignore-eos --greedy -q >/dev/null || exit 1
	done <"$TMP/l16x128"
	t1=$(now)
	med=$(medians "$TMP/set")
	vs=-
	[ "$ref" != - ] && vs=$(awk '$4 != "-"' "$TMP/set" >"$TMP/set2" && range "$TMP/set2" 4)
	echo "$med" | awk -v set="$set" -v vs="$vs" -v seq="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
	    -v st="$(range "$TMP/set" 7)" -v one="$(range "$TMP/set" 10)" '{
		printf "  %-11s %9.1f %9s %19s %7.2fx %19s %19s\n", set, $1, $3 == "-" ? "-" : sprintf("%.1f", $3), vs,
		    seq / $2, st, one }'
	[ -n "$JSON" ] && echo "$med" | awk -v set="$set" -v sep="$sep" -v seq="$(awk -v a="$t0" -v b="$t1" \
	    'BEGIN { print b - a }')" '{
		printf "%s{\"isa\":\"%s\",\"batch_tok_s\":%s,\"batch_seconds\":%s,\"llama_cpp_tok_s\":%s,", sep, set, $1,
		    $2, $3 == "-" ? "null" : $3
		printf "\"vs_llama_cpp\":%s,\"sequential_seconds\":%s,\"steps16_tok_s\":%s,\"prefill128_tok_s\":%s,",
		    $4 == "-" ? "null" : $4, seq, $5, $6
		printf "\"steps16_over_prefill\":%s,\"one_stream_tok_s\":%s,\"bound_tok_s\":%s,\"fraction_of_bound\":%s}",
		    $7, $8, $9, $10 }' >>"$JSON"
	sep=,
done
[ -n "$JSON" ] && printf ']' >>"$JSON"
echo "  batch x llama.cpp: llama-batched-bench's total at 16 with its own kernels of that kind (haswell's alone"
echo "  for avx2; its best for the AVX-512 sets); x plain: 16 plain runs one after another over the batch's time;"
echo "  1 stream/bound: decode of 64 after 128 over bench/membw's rate ($TH threads) / the bytes a token reads"

# the curve: decode steps of P sequences, against prefill of 128, in alternating rounds
prompts 32 4 >"$TMP/l32x4"
: >"$TMP/pp"
for p in 1 4 16 32; do : >"$TMP/dc$p"; done
for r in $(seq "$ROUNDS"); do
	$D -m "$m" -t $TH -n 1 --warmup --greedy --stats-json <"$TMP/l1x128" >/dev/null 2>"$TMP/pp1" || exit 1
	json prefill_tok_s "$TMP/pp1" >>"$TMP/pp"
	for p in 1 4 16 32; do
		head -n "$p" "$TMP/l32x4" | $D -m "$m" -t $TH --lines -P "$p" -n 64 --ignore-eos --greedy -q \
			--stats-json >/dev/null 2>"$TMP/dcrun" || exit 1
		json generated_tok_s "$TMP/dcrun" >>"$TMP/dc$p"
	done
done
pp=$(median <"$TMP/pp")
peak=$(bench/fmapeak $TH 2>/dev/null | tail -n 1)
[ $have_ref -eq 1 ] && ref_table "$REF" 1,4,16,32 >"$TMP/refcurve"
echo "  decode steps alone (prompts of 4, 64 generated), against prefill of 128 here ($(printf '%.0f' "$pp") tok/s):"
printf '  %4s %10s %10s %8s %8s %11s\n' P "dec tok/s" "/prefill" "GMAC/s" "%peak" "llama.cpp"
[ -n "$JSON" ] && printf ',"lines":{"prefill128_tok_s":%.1f,"curve":[' "$pp" >>"$JSON"
sep=
for p in 1 4 16 32; do
	d=$(median <"$TMP/dc$p")
	rt=$(awk -v p="$p" '$1 == p { print $3 }' "$TMP/refcurve" 2>/dev/null)
	# a multiply-add a weight of the 30 layers and the output matrix, a token
	awk -v p="$p" -v d="$d" -v pp="$pp" -v pk="${peak:-0}" -v rt="${rt:-}" 'BEGIN {
		mac = 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) + 49152 * 576
		printf "  %4d %10.1f %9.2fx %8.1f %7.0f%% %11s\n", p, d, d / pp, d * mac / 1e9,
		    (pk > 0 ? 100 * d * 2 * mac / pk : 0), (rt == "" ? "-" : rt)
	}'
	[ -n "$JSON" ] && printf '%s{"parallel":%d,"decode_tok_s":%s,"llama_cpp_decode_tok_s":%s}' "$sep" "$p" "$d" \
		"${rt:-null}" >>"$JSON"
	sep=,
done
[ -n "$JSON" ] && printf ']' >>"$JSON"
echo "  %peak: against bench/fmapeak's f32 multiply-add peak of $TH threads; q8_0's products run as 16-bit"
echo "  integer dot products (avx512vnni) or tile multiplies (amx), whose peaks are higher, so 100% is no wall"

# sharing one snapshot
prompts 1 4000 | tr ' ' '\n' >"$TMP/s4000"
head -n 2000 "$TMP/s4000" >"$TMP/s2000"
$D -m "$mf" -t $TH -n 0 -q --kv-out "$TMP/s2000.kv" <"$TMP/s2000" || exit 1
size=$(wc -c <"$TMP/s2000.kv")
prefix=$(tr '\n' ' ' <"$TMP/s2000")
for i in $(seq 16); do echo "$prefix $((100 + i)) $((200 + i)) 7 8"; done >"$TMP/l16shared"
$D -m "$mf" -t $TH --lines -n 16 --ignore-eos --greedy -q --kv-in "$TMP/s2000.kv" --stats-json \
	<"$TMP/l16shared" >/dev/null 2>"$TMP/sh16" || exit 1
{ cat "$TMP/s2000"; echo 5 6 7; } | $D -m "$mf" -t $TH -n 16 --ignore-eos --greedy -q --kv-in "$TMP/s2000.kv" \
	--stats-json >/dev/null 2>"$TMP/sh1" || exit 1
awk -v s="$size" -v a16="$(json rss_anon_bytes "$TMP/sh16")" -v a1="$(json rss_anon_bytes "$TMP/sh1")" \
    -v kv="$(json kv_resident_bytes "$TMP/sh1")" 'BEGIN {
	printf "  16 lines resumed from one 2000-position f32 snapshot (%.1f MB): %.1f MB private (RssAnon), %.2fx its size\n",
	    s / 1e6, a16 / 1e6, a16 / s
	printf "  one plain resume: %.1f MB private, its cache %.2f MB resident\n", a1 / 1e6, kv / 1e6
}'
printf '  a resume (f32, 4 new tokens, 1 generated), median of %d: the whole run, and its first token after loading:\n ' "$ROUNDS"
[ -n "$JSON" ] && printf ',"sharing":{"snapshot_bytes":%s,"lines16_rss_anon_bytes":%s,"one_rss_anon_bytes":%s,"resume":{' \
	"$size" "$(json rss_anon_bytes "$TMP/sh16")" "$(json rss_anon_bytes "$TMP/sh1")" >>"$JSON"
sep=
for n in 100 1000 4000; do
	head -n "$n" "$TMP/s4000" >"$TMP/sn"
	$D -m "$mf" -t $TH -n 0 -q --kv-out "$TMP/sn.kv" <"$TMP/sn" || exit 1
	: >"$TMP/tt"
	: >"$TMP/tw"
	{ cat "$TMP/sn"; echo 5 6 7 8; } >"$TMP/sn4"
	for r in $(seq "$ROUNDS"); do
		t0=$(now)
		$D -m "$mf" -t $TH -n 1 -q --kv-in "$TMP/sn.kv" --stats-json <"$TMP/sn4" >/dev/null 2>"$TMP/tt1" ||
			exit 1
		t1=$(now)
		json ttft_ms "$TMP/tt1" >>"$TMP/tt"
		awk -v a="$t0" -v b="$t1" 'BEGIN { print (b - a) * 1e3 }' >>"$TMP/tw"
	done
	t=$(median <"$TMP/tt")
	w=$(median <"$TMP/tw")
	printf ' %d positions %.0f ms, %.1f ms;' "$n" "$w" "$t"
	[ -n "$JSON" ] && printf '%s"%d":{"run_ms":%s,"ttft_ms":%s}' "$sep" "$n" "$w" "$t" >>"$JSON"
	sep=,
done
echo
[ -n "$JSON" ] && printf '}}}' >>"$JSON"
exit 0
