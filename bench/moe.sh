#!/bin/sh
# Mixture of experts (issue 48), part of make bench; prints, never fails on
# speed.  Random weights with the real layer shapes, BENCH_MOE_LAYERS of
# them (default 4, so that the files fit the machine and its time):
#
# - Qwen3-30B-A3B's (dim 2048, 32 heads / 4 KV heads of 128, 128 experts
#   of 768, 8 a token): a Q8_0 file that tools/mkmodel writes, made Q4_K_M
#   by llama.cpp's quantizer (mkmodel's q4_K without it);
# - gpt-oss-20b's (dim 2880, 64 heads / 8 KV heads of 64, 32 experts of
#   2880, 4 a token, o200k's 201088 tokens): mkmodel's mxfp4, the experts
#   mxfp4 and the rest q8_0, as llama.cpp's MXFP4_MOE makes them.
#
# For each:
# - speed: decode of 64 and prefill of 128, alternating with llama-bench
#   over BENCH_ROUNDS rounds, medians;
# - decode against the bandwidth bound of the bytes a token reads (the
#   router and its experts a layer, attention, the output), bench/membw
#   with as many threads;
# - memory after 64 generated tokens: resident bytes against the file,
#   and the experts each layer used.
. bench/lib.sh
SHARED=${SHARED:-../shared/ref}
ROUNDS=${BENCH_ROUNDS:-3}
L=${BENCH_MOE_LAYERS:-4}
prompt() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 150000 }'; }

# rows NAME MODEL EXPERTS: the speed, bound and memory rows of one file
rows() {
	name=$1 m=$2 experts=$3
	echo
	echo "$name: $L layers, ${m##*/} ($th threads, $ROUNDS alternating rounds, medians): tok/s"
	printf '%-10s %9s %9s %9s %9s %7s %7s %8s\n' isa decode llama prefill llama "dec x" "pre x" "of bound"
	: >"$TMP/ms"
	for r in $(seq "$ROUNDS"); do
		$D -m "$m" -t "$th" -n 64 --warmup --ignore-eos --greedy --stats-json <"$TMP/mp" >/dev/null \
			2>"$TMP/mg" || exit 1
		theirs="- -"
		[ -x "$SHARED/llama-bench" ] && "$SHARED/llama-bench" -m "$m" -t "$th" -p 128 -n 64 -r 1 -o csv \
			>"$TMP/mr" 2>/dev/null && theirs=$(llama_pair "$TMP/mr")
		echo "$(json decode_tok_s "$TMP/mg") $(json prefill_tok_s "$TMP/mg") $theirs" >>"$TMP/ms"
	done
	wb=$(json weight_bytes "$TMP/mg")
	bw=$(bench/membw "$th" "$wb")
	medians "$TMP/ms" | awk -v isa="$(sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p' "$TMP/mg")" -v wb="$wb" -v bw="$bw" '{
		bound = 100 * $1 / (bw / wb)
		if ($3 == "-")
			printf "%-10s %9.1f %9s %9.1f %9s %7s %7s %7.0f%%\n", isa, $1, "-", $2, "-", "-", "-", bound
		else
			printf "%-10s %9.1f %9.1f %9.1f %9.1f %6.2fx %6.2fx %7.0f%%\n", isa, $1, $3, $2, $4,
			    $1 / $3, $2 / $4, bound
	}'
	awk -v f="$(wc -c <"$m")" -v rss="$(json rss_bytes "$TMP/mg")" -v wb="$wb" -v e="$experts" \
	    -v used="$(sed -n 's/.*"experts_used":\[\([0-9,]*\)\].*/\1/p' "$TMP/mg")" 'BEGIN {
		printf "after 128 prompt and 64 generated tokens: resident %.0f MB of a %.0f MB file; a token reads %.0f MB; experts used by layer (of %d): %s\n",
		    rss / 1e6, f / 1e6, wb / 1e6, e, used
	}'
}

src="$TMP/qwen3-30b-a3b-${L}l-q8_0.gguf"
m="$TMP/qwen3-30b-a3b-${L}l-Q4_K_M.gguf"
if [ ! -f "$m" ]; then
	if [ -x "$SHARED/llama-quantize" ]; then
		[ -f "$src" ] || tools/mkmodel -s qwen3-30b-a3b -L "$L" -t q8_0 -o "$src" || exit 1
		"$SHARED/llama-quantize" --allow-requantize "$src" "$m" Q4_K_M "$th" >/dev/null 2>&1 || exit 1
		rm -f "$src"
	else
		m="$TMP/qwen3-30b-a3b-${L}l-q4_K.gguf"
		[ -f "$m" ] || tools/mkmodel -s qwen3-30b-a3b -L "$L" -t q4_K -o "$m" || exit 1
	fi
fi
oss="$TMP/gpt-oss-20b-${L}l-mxfp4.gguf"
[ -f "$oss" ] || tools/mkmodel -s gpt-oss-20b -L "$L" -t mxfp4 -o "$oss" || exit 1
prompt 128 >"$TMP/mp"
rows qwen3moe "$m" 128
rows gpt-oss "$oss" 32
echo "llama: llama-bench on the same file; of bound: decode against bench/membw over the bytes a token reads"
