#!/bin/sh
# bench/grammar.sh: what a grammar costs a token (issue 35), as make bench
# runs it (or alone: sh bench/grammar.sh).  Prints, never fails on speed.
#
# On the SmolLM2-135M-shaped Q8_0 model (49152 tokens, random weights and
# pieces: the project's own fixture) with 2 threads: 128 tokens generated
# from a 16-token prompt, unconstrained, under bench/json.gbnf, and under
# a record grammar (what a JSON schema of a name, an age and tags
# becomes), in alternating rounds, medians of decode tok/s.  The mask's
# cost a token is the difference of the times a token.
set -u
TMP=bench/tmp
mkdir -p "$TMP"
D=cmd/llm-decode
ROUNDS=${BENCH_ROUNDS:-3}
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { sed -n 's/.*"decode_tok_s":\([0-9.e+-]*\).*/\1/p' "$1"; }
m="$TMP/smollm2-135m-q8_0.gguf"
[ -f "$m" ] || tools/mkmodel -s smollm2-135m -t q8_0 -o "$m" || exit 1
cat >"$TMP/record.gbnf" <<'G'
root ::= "{" ws "\"name\":" ws str "," ws "\"age\":" ws ("0" | [1-9] [0-9]{0,2}) "," ws "\"tags\":" ws "[" ws (str ("," ws str){0,7})? ws "]" ws "}"
str  ::= "\"" [^"\\\x00-\x1f]{0,40} "\""
ws   ::= [ \n]{0,4}
G
seq 100 115 >"$TMP/g.ids"
for i in $(seq 1 "$ROUNDS"); do
	for kind in free json record; do
		case $kind in
		free) g= ;;
		json) g="--grammar-file bench/json.gbnf" ;;
		record) g="--grammar-file $TMP/record.gbnf" ;;
		esac
		$D -m "$m" -t 2 -n 128 --ignore-eos --seed $i $g --stats-json <"$TMP/g.ids" \
			>/dev/null 2>"$TMP/g.$kind" || { echo "grammar: $kind failed" >&2; exit 1; }
		rate "$TMP/g.$kind" >>"$TMP/g.$kind.rates"
	done
done
free=$(median <"$TMP/g.free.rates")
for kind in json record; do
	r=$(median <"$TMP/g.$kind.rates")
	awk -v k="$kind" -v r="$r" -v f="$free" 'BEGIN {
		printf "grammar: %-6s %7.1f tok/s against %.1f unconstrained: %.2fx, the mask %.3f ms a token\n",
		    k, r, f, r / f, 1000 / r - 1000 / f }'
done
rm -f "$TMP"/g.*.rates
echo "grammar: llama.cpp's own, from issue 35 (no tool in ../shared/ref times its grammar sampler): json.gbnf 0.64x, 3.6 ms a token"
