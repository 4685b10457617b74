#!/bin/sh
# The model families against llama.cpp.  tests/ref/FAMILY.logp holds
# llama.cpp's log-probabilities of tests/ref/stream.ids under each
# family's random model (made by tests/mkref.sh, `make check-ref`, with
# ../shared/ref/ref-score); llm-decode --score must agree within
# llama.cpp's own arithmetic noise: mean |difference| <= 2e-3 (f32
# weights).  A misread detail of a family shows as 1e-2 or more.
. tests/lib.sh
D="$BIN/llm-decode"

# family NAME MKMODEL-OPTIONS...: the same model, scored, against the committed figures
family() {
	name=$1
	shift
	"$PWD/tools/mkmodel" -s small "$@" -o "$TMP/$name.gguf" || fail "mkmodel $*"
	"$D" -m "$TMP/$name.gguf" --score <tests/ref/stream.ids >"$TMP/ours" 2>/dev/null ||
		fail "$name: llm-decode exited $?"
	[ "$(wc -l <"$TMP/ours")" -eq "$(wc -l <tests/ref/$name.logp)" ] || fail "$name: line counts"
	paste "$TMP/ours" tests/ref/$name.logp | awk -v name="$name" '{ d = $1 - $2; s += d < 0 ? -d : d }
		END { m = s / NR; printf "%s: mean |dlogp| %.6f against llama.cpp\n", name, m; exit !(m <= 2e-3) }' ||
		fail "$name differs from llama.cpp"
}

families_match_llama_cpp() {
	family llama
	family llama3 -R
	family qwen2 -A qwen2
	family qwen3 -A qwen3
	family qwen3moe -A qwen3moe
	family phi3 -A phi3
	family gemma3 -A gemma3
	family gpt-oss -A gpt-oss
	# gpt-oss-20b's YaRN: llama.cpp rounds the ramp's ends, we do not (lib/rope.h): 6e-5 apart, 1.5e-5 rounded
	family gpt-oss-yarn -A gpt-oss -Y
}

# The committed figures are still llama.cpp's: where ../shared has ref-score, ask it again.
committed_figures_are_llama_cpps() {
	[ -x "$SHARED/ref/ref-score" ] || skip "$SHARED/ref/ref-score not present"
	"$PWD/tools/mkmodel" -s small -A qwen3 -o "$TMP/q3.gguf" || fail "mkmodel"
	"$SHARED/ref/ref-score" "$TMP/q3.gguf" <tests/ref/stream.ids 2>/dev/null | cmp -s - tests/ref/qwen3.logp ||
		fail "ref-score no longer gives tests/ref/qwen3.logp: run make check-ref"
}

unknown_families_and_unused_tensors_are_errors() {
	"$PWD/tools/mkmodel" -A mamba -o "$TMP/mamba.gguf" || fail "mkmodel"
	echo 1 | "$D" -m "$TMP/mamba.gguf" -n 1 >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] || fail "an unknown architecture exited $?"
	grep -q "^llm-decode: $TMP/mamba.gguf: architecture 'mamba' is not supported (llama, qwen2, qwen3, qwen3moe, phi3, gemma3 and gpt-oss are)$" \
		"$TMP/err" || fail "$(cat "$TMP/err")"
}

# The cache, its types, snapshots and weight types work for every family unchanged.
families_resume_and_quantize_like_llama() {
	for fam in qwen2 qwen3 qwen3moe phi3 gpt-oss; do
		"$PWD/tools/mkmodel" -A $fam -t q8_0 -o "$TMP/$fam-q8.gguf" || fail "mkmodel"
		m="$TMP/$fam-q8.gguf"
		echo "1 40 41 42" | "$D" -m "$m" --greedy --ignore-eos -n 60 --kv-type q8_0 >"$TMP/all" ||
			fail "$fam: exit $?"
		echo "1 40 41 42" | "$D" -m "$m" --greedy --ignore-eos -n 30 --kv-type q8_0 \
			--kv-out "$TMP/$fam.kv" >"$TMP/first" || fail "$fam: exit $?"
		{ echo "1 40 41 42"; cat "$TMP/first"; } | "$D" -m "$m" --greedy --ignore-eos -n 30 \
			--kv-type q8_0 --kv-in "$TMP/$fam.kv" >"$TMP/rest" || fail "$fam: resume exited $?"
		cat "$TMP/first" "$TMP/rest" | cmp -s - "$TMP/all" || fail "$fam: resumed differs"
	done
	# a snapshot of one family is refused by another with the same shapes
	"$PWD/tools/mkmodel" -A qwen2 -t q8_0 -o "$TMP/q2.gguf" && "$PWD/tools/mkmodel" -t q8_0 -o "$TMP/ll.gguf" ||
		fail "mkmodel"
	echo 1 | "$D" -m "$TMP/q2.gguf" -n 0 --kv-out "$TMP/q2.kv" || fail "exit $?"
	echo 1 2 | "$D" -m "$TMP/ll.gguf" -n 1 --kv-in "$TMP/q2.kv" >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "different model" "$TMP/err" || fail "$(cat "$TMP/err")"
}

# A routed FFN's run says which experts each layer used, and what is resident against the file
experts_used_are_reported() {
	"$PWD/tools/mkmodel" -A qwen3moe -o "$TMP/moe.gguf" || fail "mkmodel"
	echo 1 | "$D" -m "$TMP/moe.gguf" -n 1 --greedy --stats-json >/dev/null 2>"$TMP/one" || fail "exit $?"
	json_assert "$TMP/one" 'd["experts"] == 8 and d["experts_per_token"] == 2 and d["experts_used"] == [2, 2, 2]'
	echo "1 2 3 4 5 6 7 8" | "$D" -m "$TMP/moe.gguf" -n 32 --greedy --ignore-eos --stats-json >/dev/null \
		2>"$TMP/many" || fail "exit $?"
	json_assert "$TMP/many" 'len(d["experts_used"]) == 3 and all(2 < n <= 8 for n in d["experts_used"]) and
	    d["rss_bytes"] > 0 and 0 < d["weight_bytes"] < '"$(wc -c <"$TMP/moe.gguf")"
	echo 1 | "$D" -m "$TMP/moe.gguf" -n 1 --stats 2>&1 >/dev/null |
		grep -q '^llm-decode: experts used of 8 by layer: 2 2 2; rss [0-9]* bytes, the file [0-9]*, a token reads [0-9]*$' ||
		fail "--stats: $(echo 1 | "$D" -m "$TMP/moe.gguf" -n 1 --stats 2>&1 >/dev/null)"
	"$PWD/tools/mkmodel" -A qwen3 -o "$TMP/dense.gguf" || fail "mkmodel"
	echo 1 | "$D" -m "$TMP/dense.gguf" -n 1 --stats-json >/dev/null 2>"$TMP/dense" || fail "exit $?"
	json_assert "$TMP/dense" '"experts" not in d and "experts_used" not in d and d["rss_bytes"] > 0'
}

t families_match_llama_cpp
t experts_used_are_reported
t families_resume_and_quantize_like_llama
t committed_figures_are_llama_cpps
t unknown_families_and_unused_tensors_are_errors
