#!/bin/sh
# The model families against llama.cpp: llm-decode --score beside
# ../shared/ref/ref-score (llama.cpp's log-probabilities, f32 cache) on
# random-weight models of each family, written by tests/mkmodel, with f32
# weights (llama.cpp rounds activations to 8 bits for quantized ones).
. tests/lib.sh
D="$BIN/llm-decode"
REF="$SHARED/ref/ref-score"

# family NAME MKMODEL-OPTIONS...: the mean |difference of log p| over 300 tokens, at most 1e-3
family() {
	name=$1
	shift
	"$PWD/tests/mkmodel" "$@" -o "$TMP/$name.gguf" || fail "mkmodel $*"
	awk 'BEGIN { x = 7; for (i = 0; i < 300; i++) { x = (x * 1103515245 + 12345) % 2147483648; print int(x / 65536) % 320 } }' \
		>"$TMP/ids"
	"$D" -m "$TMP/$name.gguf" --score <"$TMP/ids" >"$TMP/ours" 2>/dev/null || fail "$name: llm-decode exited $?"
	"$REF" "$TMP/$name.gguf" <"$TMP/ids" >"$TMP/ref" 2>"$TMP/ref.err" ||
		fail "$name: ref-score exited $?: $(tail -n 2 "$TMP/ref.err")"
	[ "$(wc -l <"$TMP/ours")" -eq 299 ] && [ "$(wc -l <"$TMP/ref")" -eq 299 ] || fail "$name: line counts"
	paste "$TMP/ours" "$TMP/ref" | awk -v name="$name" '{ d = $1 - $2; s += d < 0 ? -d : d }
		END { m = s / NR; printf "%s: mean |dlogp| %.6f\n", name, m; exit !(m <= 1e-3) }' ||
		fail "$name differs from llama.cpp"
}

families_match_llama_cpp() {
	[ -x "$REF" ] || skip "$REF not present"
	family llama
	family llama3-rope-freqs -R
	family qwen2 -A qwen2
	family qwen3 -A qwen3
	family phi3 -A phi3
}

unknown_families_and_unused_tensors_are_errors() {
	"$PWD/tests/mkmodel" -A mamba -o "$TMP/mamba.gguf" || fail "mkmodel"
	echo 1 | "$D" -m "$TMP/mamba.gguf" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "an unknown architecture exited $?"
	grep -q "^llm-decode: $TMP/mamba.gguf: architecture 'mamba' is not supported (llama, qwen2, qwen3 and phi3 are)$" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
}

t families_match_llama_cpp
t unknown_families_and_unused_tensors_are_errors
