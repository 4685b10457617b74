#!/bin/sh
# bench/grammar.sh: what a grammar costs a token (issue 35), as make bench
# runs it (or alone: sh bench/grammar.sh).  Prints, never fails on speed.
#
# On the SmolLM2-135M-shaped Q8_0 model with random weights and a real
# 49152-token vocabulary (StarCoder's, SmolLM2's kind, from
# ../shared/vocab, copied by mkmodel -V; else the fixture's random
# pieces), 2 threads: 128 tokens generated from a 16-token prompt,
# unconstrained, under bench/json.gbnf, under a record schema (a name, an
# age, tags), and under the same record with its strings and tags bounded
# (maxLength 40, maxItems 8: each count is a state of its own), in
# alternating rounds, medians of decode tok/s.  The grammar's cost a token
# is llm-decode's own count (--stats-json's grammar_ms over the tokens
# generated), and beside it the difference of the times a token, which the
# machine's drift blurs.  Random weights write strings that
# run to their bounds, which real text seldom does: the bounded row is the
# worst case.
set -u
TMP=bench/tmp
mkdir -p "$TMP"
D=cmd/llm-decode
ROUNDS=${BENCH_ROUNDS:-3}
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { sed -n 's/.*"decode_tok_s":\([0-9.e+-]*\).*/\1/p' "$1"; }
# the grammar's own time a generated token (llm-decode's grammar_ms): steadier than the rates' difference
mask() { sed -n 's/.*"generated_tokens":\([0-9]*\).*"grammar_ms":\([0-9.e+-]*\).*/\2 \1/p' "$1" | awk '{ print $1 / $2 }'; }
V=${LLM_SHARED:-../shared}/vocab/ggml-vocab-starcoder.gguf
if [ -f "$V" ]; then
	m="$TMP/smollm2-135m-q8_0-starcoder.gguf"
	[ -f "$m" ] || tools/mkmodel -s smollm2-135m -t q8_0 -V "$V" -o "$m" || exit 1
	vocab="StarCoder's vocabulary"
else
	m="$TMP/smollm2-135m-q8_0.gguf"
	[ -f "$m" ] || tools/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
	vocab="random pieces ($V is absent)"
fi
cat >"$TMP/record.json" <<'S'
{"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
 "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"]}
S
cat >"$TMP/bounded.json" <<'S'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
 "tags": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 8}},
 "required": ["name", "age", "tags"]}
S
seq 100 115 >"$TMP/g.ids"
kinds="free json record bounded"
for i in $(seq 1 "$ROUNDS"); do
	for kind in $kinds; do
		case $kind in
		free) g= ;;
		json) g="--grammar-file bench/json.gbnf" ;;
		*) g="--json-schema @$TMP/$kind.json" ;;
		esac
		$D -m "$m" -t 2 -n 128 --ignore-eos --seed $i $g --stats-json <"$TMP/g.ids" \
			>/dev/null 2>"$TMP/g.$kind" || { echo "grammar: $kind failed" >&2; exit 1; }
		rate "$TMP/g.$kind" >>"$TMP/g.$kind.rates"
		mask "$TMP/g.$kind" >>"$TMP/g.$kind.masks"
	done
done
echo "grammar: on $vocab, median of $ROUNDS alternating rounds"
free=$(median <"$TMP/g.free.rates")
for kind in json record bounded; do
	r=$(median <"$TMP/g.$kind.rates")
	g=$(median <"$TMP/g.$kind.masks")
	awk -v k="$kind" -v r="$r" -v f="$free" -v g="$g" 'BEGIN {
		printf "grammar: %-7s %7.1f tok/s against %.1f unconstrained: %.2fx, the grammar %.3f ms a token (%.3f by the rates)\n",
		    k, r, f, r / f, g, 1000 / r - 1000 / f }'
done
rm -f "$TMP"/g.*.rates "$TMP"/g.*.masks
echo "grammar: llama.cpp's own, from issue 35 (no tool in ../shared/ref times its grammar sampler): json.gbnf 0.64x, 3.6 ms a token"
