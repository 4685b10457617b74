#!/bin/sh
# The weight types against llama.cpp's own files (issue 47): llama.cpp's
# quantizer (../shared/ref/llama-quantize) makes Q3_K_S/M/L, IQ4_NL and
# IQ4_XS files from a random F32 model of SmolLM2's width (576: most
# rows fall back to q4_0, q5_0, q5_1, iq4_nl as in real downloads of
# such models, ffn_down's 1536 keep the type), a Q2_K file from one 256
# wide (at 576 a Q2_K file holds no q2_K), an MXFP4_MOE file (mxfp4
# experts, the rest q8_0, as gpt-oss's) from a gpt-oss one (issue 48),
# and an F32 copy of each that holds ggml's dequantization of every
# tensor.  Then:
#   - tools/wdigest expands every tensor of the file to the very floats
#     of the copy (the reference dequantization is ggml's, bit for bit);
#   - llm-decode --score of the file agrees with ref-score of the copy as
#     F32 models do (mean |d log p| <= 5e-3; 1.8e-3 to 2.1e-3 measured):
#     the weights llm reads are exactly llama.cpp's;
#   - against ref-score of the file itself, within the K-quants' distance
#     (<= 0.2; about 0.11 measured: llama.cpp rounds activations to 8
#     bits), and no further from the F32 original than llama.cpp is.
# Skips without ../shared/ref.
. tests/lib.sh
D="$BIN/llm-decode"
REF="$SHARED/ref"

# meanabs A B: mean |a - b| of two files of numbers, line by line
meanabs() {
	paste "$1" "$2" | awk '{ d = $1 - $2; s += d < 0 ? -d : d; n++ } END { if (n) printf "%.6f\n", s / n; else print "nan" }'
}

prepare() {
	[ -x "$REF/llama-quantize" ] && [ -x "$REF/ref-score" ] || skip "$REF/llama-quantize or ref-score not present"
	[ -f "$TMP/f32.gguf" ] && [ -f "$TMP/small-f32.gguf" ] && [ -f "$TMP/oss-f32.gguf" ] && return 0
	"$PWD/tools/mkmodel" -s smollm2-135m -L 2 -v 2048 -w 0.05 -t f32 -o "$TMP/f32.gguf" || fail "mkmodel"
	"$PWD/tools/mkmodel" -s small -v 2048 -w 0.05 -t f32 -o "$TMP/small-f32.gguf" || fail "mkmodel"
	"$PWD/tools/mkmodel" -s small -A gpt-oss -v 2048 -w 0.05 -t f32 -o "$TMP/oss-f32.gguf" || fail "mkmodel"
	awk 'BEGIN { x = 11; for (i = 0; i < 200; i++) { x = (x * 1103515245 + 12345) % 2147483648; print int(x / 65536) % 2048 } }' \
		>"$TMP/ids"
	for m in f32 small-f32 oss-f32; do
		"$REF/ref-score" "$TMP/$m.gguf" <"$TMP/ids" >"$TMP/ref-$m" 2>/dev/null || fail "ref-score $m"
		"$D" -m "$TMP/$m.gguf" --score <"$TMP/ids" >"$TMP/ours-$m" || fail "llm-decode $m"
	done
}

# quantized TYPE WANT FROM: the file of TYPE made from FROM.gguf, which must hold tensors of type WANT, and its F32 copy
quantized() {
	f="$TMP/$1.gguf"
	"$REF/llama-quantize" "$TMP/$3.gguf" "$f" "$1" 2 >"$TMP/$1.log" 2>&1 || fail "llama-quantize $1: $(tail -n 3 "$TMP/$1.log")"
	"$REF/llama-quantize" --allow-requantize "$f" "$TMP/$1-f32.gguf" F32 2 >>"$TMP/$1.log" 2>&1 ||
		fail "llama-quantize $1 to F32: $(tail -n 3 "$TMP/$1.log")"
	"$PWD/tools/wdigest" "$f" >"$TMP/$1.wd" || fail "wdigest $1"
	grep -q " $2 " "$TMP/$1.wd" || fail "$1 holds no $2 tensor: $(awk '{ print $2 }' "$TMP/$1.wd" | sort -u | tr '\n' ' ')"
}

files_of_llama_cpps_quantizer_read_as_ggml_reads_them() {
	prepare
	for spec in Q3_K_S:q3_K:f32 Q3_K_M:q4_K:f32 Q3_K_L:q5_K:f32 IQ4_NL:iq4_nl:f32 IQ4_XS:iq4_xs:f32 \
	    Q2_K:q2_K:small-f32 MXFP4_MOE:mxfp4:oss-f32; do
		ty=${spec%%:*} from=${spec##*:} want=${spec#*:}
		quantized "$ty" "${want%%:*}" "$from"
		"$PWD/tools/wdigest" "$TMP/$ty-f32.gguf" >"$TMP/$ty-f32.wd" || fail "wdigest $ty F32"
		awk '{ print $1, $3 }' "$TMP/$ty.wd" | sort >"$TMP/a"
		awk '{ print $1, $3 }' "$TMP/$ty-f32.wd" | sort >"$TMP/b"
		[ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b" ||
			fail "$ty: tensors that llm expands to other floats than ggml: $(comm -3 "$TMP/a" "$TMP/b" | awk '{ print $1 }' | sort -u | tr '\n' ' ')"
		"$D" -m "$TMP/$ty.gguf" --score <"$TMP/ids" >"$TMP/ours-$ty" || fail "$ty: llm-decode exited $?"
		"$REF/ref-score" "$TMP/$ty-f32.gguf" <"$TMP/ids" >"$TMP/refcopy-$ty" 2>/dev/null || fail "ref-score $ty F32"
		"$REF/ref-score" "$TMP/$ty.gguf" <"$TMP/ids" >"$TMP/ref-$ty" 2>/dev/null || fail "ref-score $ty"
		[ "$(wc -l <"$TMP/ours-$ty")" -eq 199 ] || fail "$ty: $(wc -l <"$TMP/ours-$ty") log-probabilities"
		copy=$(meanabs "$TMP/ours-$ty" "$TMP/refcopy-$ty")
		file=$(meanabs "$TMP/ours-$ty" "$TMP/ref-$ty")
		ours=$(meanabs "$TMP/ours-$ty" "$TMP/ours-$from")
		theirs=$(meanabs "$TMP/ref-$ty" "$TMP/ref-$from")
		echo "$ty: against llama.cpp on its F32 copy $copy, on the file $file; from F32: ours $ours, llama.cpp's $theirs"
		awk -v c="$copy" -v f="$file" -v o="$ours" -v t="$theirs" \
		    'BEGIN { exit !(c <= 5e-3 && f <= 0.2 && o <= t * 1.05 + 1e-3) }' ||
			fail "$ty: out of bounds (copy <= 5e-3, file <= 0.2, ours <= llama.cpp's from F32)"
	done
}

# A TQ1_0 (ternary) file: a type this build does not know, refused by tensor.
types_not_read_are_refused_by_tensor() {
	prepare
	"$REF/llama-quantize" "$TMP/small-f32.gguf" "$TMP/tq1.gguf" TQ1_0 2 >"$TMP/tq1.log" 2>&1 || fail "llama-quantize TQ1_0"
	echo 1 2 | "$D" -m "$TMP/tq1.gguf" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "exit status"
	grep -q "^llm-decode: $TMP/tq1.gguf: tensor [a-z0-9_.]*: unknown type 34$" "$TMP/err" ||
		fail "$(cat "$TMP/err")"
}

t files_of_llama_cpps_quantizer_read_as_ggml_reads_them
t types_not_read_are_refused_by_tensor
