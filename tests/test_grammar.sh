#!/bin/sh
# llm-decode --grammar: generation constrained to a GBNF grammar.
. tests/lib.sh
D="$BIN/llm-decode"
T="$BIN/llm-tokenize"

# Each grammar beside a Python regular expression for the same language,
# written by hand: the outputs are checked by Python's re, not the engine.
# " ;; " stands for a newline in a grammar.
cat >"$TMP/cases" <<'EOF'
root ::= ("yes" | "no") "."	(yes|no)\.
root ::= [0-9]{3} "-" [0-9]{2,4}	[0-9]{3}-[0-9]{2,4}
root ::= "The " [a-z]{1,8} " is " ("big" | "small") "."	The [a-z]{1,8} is (big|small)\.
root ::= item ("," item){0,3}  # a comment ;; item ::= [a-c] | "(" [0-9] ")"	([a-c]|\([0-9]\))(,([a-c]|\([0-9]\))){0,3}
root ::= "\"" [^"\n]{0,10} "\""	"[^"\n]{0,10}"
root ::= "<" .{3} ">"	<(.|\n){3}>
root ::= "\u00e9t\u00e9" | "\xfcber" | "caf\u00e9"	(été|über|café)
root ::= [A-Z] [a-z]? [a-z]? "!"+ ("?"{2})?	[A-Z][a-z]?[a-z]?!+(\?\?)?
root ::= ( [x]* )* "."	x*\.
root ::= ( "a"? )+ "b"	a*b
root ::= ( "a"* ){2,5} "b" ( "c" | "d"? )*	a*b[cd]*
EOF

# gen MODEL SEED GRAMMAR: the text generated under the grammar
gen() {
	"$T" -m "$1" 'Once upon a time' | "$D" -m "$1" --grammar "$3" -n 60 --seed "$2" >"$TMP/ids" ||
		fail "seed $2: exit $?: $3"
	"$T" -m "$1" -d -n <"$TMP/ids"
}

# check_model MODEL: every case's outputs, 8 seeds each, match its regular
# expression (one Python judges them all: it takes a third of a second to start)
check_model() {
	m=$1
	: >"$TMP/queue"
	k=0 c=0
	while IFS='	' read -r g re; do
		c=$((c + 1))
		g=$(printf '%s' "$g" | awk '{ gsub(/ ;; /, "\n"); print }')
		for seed in 1 2 3 4 5 6 7 8; do
			k=$((k + 1))
			gen "$m" $seed "$g" >"$TMP/out.$k"
			printf '%s\t%s\tcase %s, seed %s\n' "$TMP/out.$k" "$re" $c $seed >>"$TMP/queue"
		done
	done <"$TMP/cases"
	[ $k -eq $(($(wc -l <"$TMP/cases") * 8)) ] || fail "$k outputs"
	python3 - "$TMP/queue" <<'PYEOF' || fail "$m: outputs outside their language"
import re, sys
bad = 0
for line in open(sys.argv[1], encoding="utf-8"):
    f, r, what = line.rstrip("\n").split("\t", 2)
    t = open(f, encoding="utf-8").read()
    if not re.fullmatch(r, t):
        print("%s: %r does not match %s" % (what, t, r))
        bad += 1
sys.exit(bad > 0)
PYEOF
}

outputs_are_in_the_language_on_a_random_model() {
	command -v python3 >/dev/null || fail "python3 is needed"
	check_model "$(tiny q8_0)"
	# and with a vocabulary of SmolLM2's size (its pieces random)
	[ -f "$TMP/v49152.gguf" ] || "$PWD/tools/mkmodel" -t q8_0 -v 49152 -o "$TMP/v49152.gguf" >&2 ||
		fail "mkmodel"
	check_model "$TMP/v49152.gguf"
}

outputs_are_in_the_language_on_stories260K() {
	need "$SHARED/models/stories260K.gguf"
	command -v python3 >/dev/null || fail "python3 is needed"
	check_model "$SHARED/models/stories260K.gguf"
}

# Greedy stays deterministic, a seed reproducible, under a grammar.
grammar_runs_are_reproducible() {
	m=$(tiny f32)
	g='root ::= [a-z]{5,20} " " [0-9]+ "."'
	gen "$m" 7 "$g" >"$TMP/a"
	gen "$m" 7 "$g" >"$TMP/b"
	cmp -s "$TMP/a" "$TMP/b" || fail "a seed gave two texts"
	printf '%s\n' "$g" >"$TMP/g.gbnf"
	"$T" -m "$m" 'x' | "$D" -m "$m" --grammar-file "$TMP/g.gbnf" -n 40 --greedy >"$TMP/c" || fail "exit $?"
	"$T" -m "$m" 'x' | "$D" -m "$m" --grammar "$g" -n 40 --greedy >"$TMP/d" || fail "exit $?"
	cmp -s "$TMP/c" "$TMP/d" && [ -s "$TMP/c" ] || fail "--grammar-file and --grammar differ"
}

# --stats-json's grammar_ms: the grammar's time, above 0 under one (and
# less than the whole run's), 0 without.
stats_say_the_grammars_time() {
	m=$(tiny f32)
	echo 1 | "$D" -m "$m" -n 40 --seed 3 --grammar 'root ::= [a-z ]{5,60} "."' --stats-json 2>"$TMP/with" >/dev/null ||
		fail "exit $?"
	echo 1 | "$D" -m "$m" -n 40 --seed 3 --stats-json 2>"$TMP/without" >/dev/null || fail "exit $?"
	python3 - "$TMP/with" "$TMP/without" <<'EOF' || fail "$(cat "$TMP/with" "$TMP/without")"
import json, sys
w = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
o = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
run_ms = 1000 * w["generated_tokens"] / w["decode_tok_s"] + w["ttft_ms"]
sys.exit(not (0 < w["grammar_ms"] < run_ms and o["grammar_ms"] == 0))
EOF
}

# A grammar too ambiguous to follow (after the x, every run of a's is read
# in a thousand ways, each a stack) fails at the a, exit 1, with one line saying so;
# the x before it stays written, scored, or in its --lines line.
too_ambiguous_grammars_fail_where_they_are() {
	m=$(tiny f32)
	g='root ::= "x" (("a"?){0,50}){0,50}'
	msg='--grammar: the grammar is too ambiguous: a character of the text meets more than 16384 stacks'
	echo 1 | "$D" -m "$m" --grammar "$g" -n 20 --seed 1 >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "exit $rc: $(cat "$TMP/err")"
	[ "$(cat "$TMP/err")" = "llm-decode: $msg" ] || fail "$(cat "$TMP/err")"
	[ "$("$T" -m "$m" -d -n <"$TMP/out")" = x ] || fail "not x: $(cat "$TMP/out")"
	# scored: the x's tokens, then the a fails
	"$T" -m "$m" 'xaa' >"$TMP/ids"
	nx=$(($("$T" -m "$m" 'x' | wc -l) - 1))
	"$D" -m "$m" --score --grammar "$g" <"$TMP/ids" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "--score: exit $rc: $(cat "$TMP/err")"
	[ "$(cat "$TMP/err")" = "llm-decode: $msg" ] || fail "--score: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/out")" -eq "$nx" ] && ! grep -q inf "$TMP/out" || fail "--score: $(cat "$TMP/out")"
	# --lines: the x alone is a start; the xaa line fails, its x's tokens scored
	{ echo 1; tr '\n' ' ' <"$TMP/ids"; echo; } | "$D" -m "$m" --score --lines --grammar "$g" >"$TMP/out" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "--lines: exit $rc: $(cat "$TMP/err")"
	[ "$(cat "$TMP/err")" = "llm-decode: stdin: line 2: $msg ($nx tokens scored)" ] || fail "--lines: $(cat "$TMP/err")"
	[ "$(sed -n 1p "$TMP/out" | cut -d ' ' -f 4)" = start ] && [ "$(sed -n 2p "$TMP/out" | cut -d ' ' -f 2,4)" = "$nx" ] ||
		fail "--lines: $(cat "$TMP/out")"
}

# Bad grammars: exit 2, one line naming the place, before any token.
bad_grammars_are_usage_errors() {
	m=$(tiny f32)
	while IFS='	' read -r g want; do
		g=$(printf '%s' "$g" | awk '{ gsub(/ ;; /, "\n"); print }')
		echo 1 | "$D" -m "$m" --grammar "$g" >"$TMP/out" 2>"$TMP/err"
		rc=$?
		[ $rc -eq 2 ] || fail "exit $rc for: $g"
		[ ! -s "$TMP/out" ] || fail "tokens for: $g"
		[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "not one line: $(cat "$TMP/err")"
		grep -qF -- "llm-decode: --grammar: $want" "$TMP/err" || fail "$g: $(cat "$TMP/err")"
	done <<'EOF'
root ::= foo	1:10: undefined rule 'foo'
root ::= "a	1:10: a string that does not end
x ::= "a"	no rule named root
root ::= root "a" | "b"	rule 'root' is left-recursive
root ::= x ;; x ::= ("a"?)* x | "b"	rule 'x' is left-recursive
root ::= ("a"? root "b")? "c"	rule 'root' is left-recursive
root ::= "a" root	the grammar's language is empty
root ::= [b-a]	1:10: a range whose end is before its start
root ::= "a"{2,1}	1:13: a repetition whose maximum is below its minimum
root ::= "a" )	1:14: a ')' with no group open
root ::= "a" ;;  | "b"	2:2: expected a rule name
root ::= []	1:10: an empty character class matches nothing
root ::= "a"{1001}	1:14: a repetition bound above 1000
root ::= "\q"	1:11: unknown escape
root ::= * "a"	1:10: a repetition of nothing
root "a"	1:6: expected ::=
root ::= "a" ;; root ::= "b"	2:1: rule 'root' is defined twice
root ::= "a" x{0}	undefined rule 'x'
EOF
	echo 1 | "$D" -m "$m" --grammar-file "$TMP/none.gbnf" 2>"$TMP/err"
	[ $? -eq 2 ] && grep -q 'none.gbnf: No such file' "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --grammar 'root ::= "a"' --embed 2>"$TMP/err"
	[ $? -eq 2 ] || fail "--embed: $(cat "$TMP/err")"
}

# --score --grammar: texts that are sentences, starts of one, and not,
# judged by hand; the last line and the exit status say which.
scores_under_a_grammar_say_how_the_text_stands() {
	m=$(tiny f32)
	while IFS='	' read -r g text want rc_want; do
		"$T" -m "$m" "$text" | "$D" -m "$m" --score --grammar "$g" >"$TMP/out" 2>"$TMP/err"
		rc=$?
		[ $rc -eq "$rc_want" ] || fail "$g on '$text': exit $rc, not $rc_want: $(cat "$TMP/err")"
		case "$(tail -n 1 "$TMP/out")" in
		"grammar: $want"*) ;;
		*) fail "$g on '$text': $(tail -n 1 "$TMP/out")" ;;
		esac
		# a line a token scored, then the last
		[ "$(($("$T" -m "$m" "$text" | wc -l) ))" -eq "$(wc -l <"$TMP/out")" ] || fail "lines: $(cat "$TMP/out")"
	done <<'EOF2'
root ::= ("yes" | "no") ", " [a-z ]{3,30} "."	yes, it is big.	whole	0
root ::= ("yes" | "no") ", " [a-z ]{3,30} "."	no, it	start	3
root ::= ("yes" | "no") ", " [a-z ]{3,30} "."	maybe so.	left at token	4
root ::= [0-9]+ ("." [0-9]+)?	3.25	whole	0
root ::= [0-9]+ ("." [0-9]+)?	3.	start	3
root ::= [0-9]+ ("." [0-9]+)?	3.x	left at token	4
root ::= ( "a"? )+ "b"	aab	whole	0
root ::= ( "a"? )+ "b"	aaa	start	3
root ::= ( "a"? )+ "b"	abb	left at token	4
root ::= ( [x]* )*	xxxx	whole	0
EOF2
	"$T" -m "$m" 'yes, It' | "$D" -m "$m" --score --grammar 'root ::= "yes, " [a-z]+' >"$TMP/out" 2>"$TMP/err"
	grep -q 'stdin: token [0-9]* (id [0-9]*): the grammar does not allow it' "$TMP/err" || fail "$(cat "$TMP/err")"
	grep -q '^-inf$' "$TMP/out" || fail "no -inf: $(cat "$TMP/out")"
}

# --score --lines --grammar: a line a stream, its sum, count and
# perplexity as alone, and how it stands (whole, start, left:K as the
# last line alone says); the exit status is the worst line's.
score_lines_are_their_solo_scores() {
	m=$(tiny f32)
	g='root ::= ("yes" | "no") ", " [a-z ]{3,30} "."'
	: >"$TMP/ql"
	: >"$TMP/want"
	for text in 'yes, it is big.' 'no, it' 'maybe so.' 'no, a cat sat.' 'yes, X'; do
		"$T" -m "$m" -- "$text" >"$TMP/ids"
		tr '\n' ' ' <"$TMP/ids" >>"$TMP/ql"
		echo >>"$TMP/ql"
		"$D" -m "$m" --score --grammar "$g" <"$TMP/ids" >"$TMP/solo" 2>/dev/null
		sed '$d' "$TMP/solo" | awk -v last="$(tail -n 1 "$TMP/solo")" '
			{ s += $1; n++ }
			END { sub(/^grammar: /, "", last); sub(/left at token /, "left:", last); print s, n, last }' >>"$TMP/want"
	done
	"$D" -m "$m" --score --lines -P 3 --grammar "$g" <"$TMP/ql" >"$TMP/got" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 4 ] || fail "exit $rc: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/got")" -eq 5 ] || fail "$(cat "$TMP/got")"
	paste -d ' ' "$TMP/got" "$TMP/want" | awk '
		{ d = $1 - $5; if (d < 0) d = -d }
		$1 != $5 && !(d <= 1e-4 * $2) || $2 != $6 || $4 != $7 { print "differs: " $0; bad = 1 }
		END { exit bad }' || fail "$(cat "$TMP/got")"
	grep -q ' whole$' "$TMP/got" && grep -q ' start$' "$TMP/got" && grep -q ' left:[0-9]*$' "$TMP/got" ||
		fail "$(cat "$TMP/got")"
	# the worst: a start only gives 3, all whole 0, a bad line 1
	sed -n '1p;2p' "$TMP/ql" | "$D" -m "$m" --score --lines --grammar "$g" >/dev/null 2>&1
	[ $? -eq 3 ] || fail "a start: not 3"
	sed -n '1p;4p' "$TMP/ql" | "$D" -m "$m" --score --lines --grammar "$g" >/dev/null 2>&1
	[ $? -eq 0 ] || fail "all whole: not 0"
	{ sed -n 3p "$TMP/ql"; echo 'x y'; } | "$D" -m "$m" --score --lines --grammar "$g" >"$TMP/got" 2>/dev/null
	[ $? -eq 1 ] && [ "$(sed -n 2p "$TMP/got")" = "" ] || fail "a bad line: $(cat "$TMP/got")"
}

# What a grammar generates it scores as a sentence, every token at least
# as likely as unconstrained (the mask only takes mass away from others).
generated_text_scores_whole() {
	command -v python3 >/dev/null || fail "python3 is needed"
	m=$(tiny q8_0)
	g='root ::= "{" "\"n\":" ("0" | [1-9] [0-9]{0,2}) ", \"s\": \"" [a-z]{2,12} "\"}"'
	for seed in 1 2 3 4; do
		echo 1 >"$TMP/ids"
		echo 1 | "$D" -m "$m" --grammar "$g" -n 80 --seed $seed >>"$TMP/ids" || fail "exit $?"
		"$D" -m "$m" --score --grammar "$g" <"$TMP/ids" >"$TMP/c" 2>/dev/null || fail "seed $seed: exit $?: $(tail -n 1 "$TMP/c")"
		"$D" -m "$m" --score <"$TMP/ids" >"$TMP/u" 2>/dev/null || fail "exit $?"
		"$T" -m "$m" -d -n <"$TMP/ids" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert set(d) == {"n", "s"}' ||
			fail "seed $seed: not the JSON"
		sed '$d' "$TMP/c" | paste - "$TMP/u" | awk '$1 + 1e-5 < $2 || $1 != $1 { print; bad = 1 } END { exit bad }' ||
			fail "seed $seed: a constrained score below the unconstrained one"
	done
}

# --kv-in: the grammar starts at the first token generated, as without
# the snapshot; the same alone and in --lines.
resumed_runs_start_the_grammar_at_the_first_token() {
	m=$(tiny q8_0)
	g='root ::= [0-9]{2,5} ("." [0-9]+)? " " [a-z]{1,9}'
	"$T" -m "$m" 'Once upon a time, in a small town,' >"$TMP/p.ids"
	"$D" -m "$m" -n 0 --kv-out "$TMP/p.kv" <"$TMP/p.ids" || fail "exit $?"
	"$D" -m "$m" --grammar "$g" -n 30 --seed 3 <"$TMP/p.ids" >"$TMP/a" || fail "exit $?"
	"$D" -m "$m" --grammar "$g" -n 30 --seed 3 --kv-in "$TMP/p.kv" --stats-json <"$TMP/p.ids" \
		>"$TMP/b" 2>"$TMP/st" || fail "exit $?"
	grep -q '"reused_tokens":[1-9]' "$TMP/st" || fail "nothing reused: $(cat "$TMP/st")"
	[ -s "$TMP/a" ] && cmp -s "$TMP/a" "$TMP/b" || fail "resumed: $(tr '\n' ' ' <"$TMP/b")"
	{ tr '\n' ' ' <"$TMP/p.ids"; echo; } >"$TMP/q"
	"$D" -m "$m" --lines --grammar "$g" -n 30 --seed 3 --kv-in "$TMP/p.kv" <"$TMP/q" >"$TMP/c" || fail "exit $?"
	[ "$(cat "$TMP/c")" = "$(tr '\n' ' ' <"$TMP/a" | sed 's/ $//')" ] || fail "--lines: $(cat "$TMP/c")"
}

# --lines: each line has its own grammar state, and its output is its solo run's.
lines_keep_their_own_grammar_state() {
	for m in "$(tiny q8_0)" "$(tiny f32)"; do
		: >"$TMP/qs"
		for text in 'Once upon' 'a big dog' 'x' 'the cat sat on the mat' 'yes'; do
			"$T" -m "$m" "$text" | tr '\n' ' ' >>"$TMP/qs"
			echo >>"$TMP/qs"
		done
		for g in 'root ::= ("yes" | "no") ", " [a-z ]{3,30} "."' 'root ::= [0-9]{2,5} ("." [0-9]+)?'; do
			for seed in 1 2; do
				: >"$TMP/solo"
				while read -r q; do
					printf '%s\n' $q | "$D" -m "$m" --grammar "$g" -n 30 --seed $seed |
						tr '\n' ' ' | sed 's/ $//' >>"$TMP/solo"
					echo >>"$TMP/solo"
				done <"$TMP/qs"
				for p in 1 3; do
					"$D" -m "$m" --lines -P $p --grammar "$g" -n 30 --seed $seed <"$TMP/qs" >"$TMP/lines" ||
						fail "exit $?"
					cmp -s "$TMP/solo" "$TMP/lines" || fail "-P $p, seed $seed, $g: $(cat "$TMP/lines")"
				done
			done
		done
	done
}

# bench/json.gbnf: what completes parses as JSON (Python's json, not the engine), the rest is a start of it.
json_outputs_parse() {
	command -v python3 >/dev/null || fail "python3 is needed"
	m=$(tiny q8_0)
	whole=0
	for seed in 1 2 3 4 5 6 7 8 9 10; do
		echo 1 >"$TMP/ids"
		echo 1 | "$D" -m "$m" --grammar-file bench/json.gbnf -n 120 --seed $seed >>"$TMP/ids" || fail "exit $?"
		"$D" -m "$m" --score --grammar-file bench/json.gbnf <"$TMP/ids" >"$TMP/s" 2>/dev/null
		rc=$?
		"$T" -m "$m" -d -n <"$TMP/ids" >"$TMP/text"
		case $rc in
		0)	whole=$((whole + 1))
			python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/text" ||
				fail "seed $seed: not JSON: $(cat "$TMP/text")" ;;
		3)	# cut by -n: some completion of it parses
			head -c 1 "$TMP/text" | grep -q '{' || fail "seed $seed: $(cat "$TMP/text")" ;;
		*)	fail "seed $seed: exit $rc: $(tail -n 1 "$TMP/s")" ;;
		esac
	done
	[ $whole -gt 0 ] || fail "no output completed"
}

t too_ambiguous_grammars_fail_where_they_are
t json_outputs_parse
t lines_keep_their_own_grammar_state
t resumed_runs_start_the_grammar_at_the_first_token
t scores_under_a_grammar_say_how_the_text_stands
t generated_text_scores_whole
t score_lines_are_their_solo_scores
t outputs_are_in_the_language_on_a_random_model
t outputs_are_in_the_language_on_stories260K
t grammar_runs_are_reproducible
t stats_say_the_grammars_time
t bad_grammars_are_usage_errors
