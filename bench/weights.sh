#!/bin/sh
# The weight types of issue 47 (Q2_K, Q3_K, IQ4_NL, IQ4_XS), part of make
# bench; prints, never fails on speed.
#
# - accuracy, on files that llama.cpp's quantizer makes from a random F32
#   model of SmolLM2's shape (std 0.05; 576-wide rows fall back to q4_0,
#   q5_0, q5_1 and iq4_nl as in real downloads): bits a weight, mean
#   |d log p| over 300 random tokens of llm against llama.cpp on the same
#   file, of each against the F32 original, and of llm on the file against
#   llama.cpp on an F32 copy holding ggml's dequantization (the weights
#   alone: it is as small as two F32 runs agree); Q2_K on two layers of
#   Llama-3.2-1B's shape (at 576 wide a Q2_K file holds no q2_K);
# - speed on Llama-3.2-1B's shape (2048 wide: no fallbacks), files that
#   tools/mkmodel writes in each type: decode of 64 tokens and prefill of
#   128, alternating with llama-bench over BENCH_ROUNDS rounds, medians,
#   with the best kernels, and with AVX2's against llama.cpp's AVX2
#   kernels alone (its programs beside libggml-cpu-haswell.so only).
#
# BENCH_WEIGHT_TYPES (default "q2_K q3_K iq4_nl iq4_xs") chooses the speed rows.
. bench/lib.sh
SHARED=${SHARED:-../shared/ref}
ROUNDS=${BENCH_ROUNDS:-3}

echo
if [ -x "$SHARED/llama-quantize" ] && [ -x "$SHARED/ref-score" ]; then
	echo "weight types from llama.cpp's quantizer (SmolLM2 shape, std 0.05, 300 random tokens): mean |d log p|"
	printf '%-8s %6s %10s %10s %10s %12s\n' file bits/w "vs llama" "llm-f32" "llama-f32" "vs ggml f32"
	wf="$TMP/smollm2-135m-f32-std05.gguf"
	[ -f "$wf" ] || tools/mkmodel -s smollm2-135m -t f32 -w 0.05 -o "$wf" || exit 1
	awk 'BEGIN { srand(7); for (i = 0; i < 300; i++) print int(rand() * 49152) }' >"$TMP/wr300"
	"$SHARED/ref-score" "$wf" <"$TMP/wr300" >"$TMP/wl-f32" 2>/dev/null
	$D -m "$wf" -t "$th" --score <"$TMP/wr300" >"$TMP/wo-f32" 2>/dev/null || exit 1
	wf2="$TMP/llama3.2-1b-2l-f32-std05.gguf"
	[ -f "$wf2" ] || tools/mkmodel -s llama3.2-1b -L 2 -v 49152 -t f32 -w 0.05 -o "$wf2" || exit 1
	"$SHARED/ref-score" "$wf2" <"$TMP/wr300" >"$TMP/wl-f32-2" 2>/dev/null
	$D -m "$wf2" -t "$th" --score <"$TMP/wr300" >"$TMP/wo-f32-2" 2>/dev/null || exit 1
	for q in Q3_K_S Q3_K_M Q3_K_L IQ4_NL IQ4_XS Q2_K; do
		src=$wf sfx=
		[ $q = Q2_K ] && src=$wf2 sfx=-2
		n=$(($(wc -c <"$src") / 4))
		f="${src%-f32-std05.gguf}-$q.gguf"
		[ -f "$f" ] || "$SHARED/llama-quantize" "$src" "$f" $q "$th" >/dev/null 2>&1 || exit 1
		[ -f "$f.f32" ] || "$SHARED/llama-quantize" --allow-requantize "$f" "$f.f32" F32 "$th" >/dev/null 2>&1 || exit 1
		$D -m "$f" -t "$th" --score <"$TMP/wr300" >"$TMP/wo" 2>/dev/null || exit 1
		"$SHARED/ref-score" "$f" <"$TMP/wr300" >"$TMP/wl" 2>/dev/null
		"$SHARED/ref-score" "$f.f32" <"$TMP/wr300" >"$TMP/wc" 2>/dev/null
		printf '%-8s %6.2f %10s %10s %10s %12s\n' $q "$(echo "$(wc -c <"$f") $n" | awk '{ print 8 * $1 / $2 }')" \
		    "$(meanabs "$TMP/wo" "$TMP/wl")" "$(meanabs "$TMP/wo" "$TMP/wo-f32$sfx")" \
		    "$(meanabs "$TMP/wl" "$TMP/wl-f32$sfx")" "$(meanabs "$TMP/wo" "$TMP/wc")"
	done
	echo "bits/w: the file's bits over its parameters (embeddings q8_0, norms f32 included); Q2_K: 2 layers of Llama-3.2-1B's shape"
else
	echo "weight types: $SHARED/llama-quantize or ref-score not present, so no accuracy rows"
fi

# llama.cpp with its AVX2 kernels alone
ref2=$(ref_avx2 llama-bench "$SHARED")
best=$(echo 1 | LLM_ISA= $D -m "$TMP/smollm2-135m-f32-std05.gguf" -n 1 --stats-json 2>&1 >/dev/null |
	sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')
prompt() { awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print 1000 + (i * 7919) % 120000 }'; }
prompt 128 >"$TMP/wp"
echo
echo "weight types on Llama-3.2-1B's shape ($th threads, $ROUNDS alternating rounds, medians): tok/s"
printf '%-7s %-10s %9s %9s %9s %9s %7s %7s\n' type isa decode llama prefill llama "dec x" "pre x"
for ty in ${BENCH_WEIGHT_TYPES:-q2_K q3_K iq4_nl iq4_xs}; do
	m="$TMP/llama3.2-1b-$ty.gguf"
	[ -f "$m" ] || tools/mkmodel -s llama3.2-1b -t "$ty" -o "$m" || exit 1
	for isa in $best avx2; do
		case $isa in avx2) R=$ref2 ;; *) R="$SHARED/llama-bench" ;; esac
		case $best in avx*|amx) ;; *) [ $isa = avx2 ] && continue ;; esac
		: >"$TMP/ws"
		for r in $(seq "$ROUNDS"); do
			LLM_ISA=$isa $D -m "$m" -t "$th" -n 64 --warmup --ignore-eos --greedy --stats-json <"$TMP/wp" \
			    >/dev/null 2>"$TMP/wg" || exit 1
			theirs="- -"
			[ -x "$R" ] && "$R" -m "$m" -t "$th" -p 128 -n 64 -r 1 -o csv >"$TMP/wr" 2>/dev/null &&
				theirs=$(llama_pair "$TMP/wr")
			echo "$(json decode_tok_s "$TMP/wg") $(json prefill_tok_s "$TMP/wg") $theirs" >>"$TMP/ws"
		done
		medians "$TMP/ws" | awk -v ty="$ty" -v isa="$isa" '{
			if ($3 == "-")
				printf "%-7s %-10s %9.1f %9s %9.1f %9s\n", ty, isa, $1, "-", $2, "-"
			else
				printf "%-7s %-10s %9.1f %9.1f %9.1f %9.1f %6.2fx %6.2fx\n", ty, isa, $1, $3, $2, $4,
				    $1 / $3, $2 / $4
		}'
	done
done
echo "llama: llama-bench on the same file, its best kernels (avx2 rows: its AVX2 kernels alone)"
