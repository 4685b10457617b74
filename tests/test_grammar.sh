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
EOF

# gen MODEL SEED GRAMMAR: the text generated under the grammar
gen() {
	"$T" -m "$1" 'Once upon a time' | "$D" -m "$1" --grammar "$3" -n 60 --seed "$2" >"$TMP/ids" ||
		fail "seed $2: exit $?: $3"
	"$T" -m "$1" -d -n <"$TMP/ids"
}

check_model() {
	m=$1
	while IFS='	' read -r g re; do
		g=$(printf '%s' "$g" | sed 's/ ;; /\n/g')
		for seed in 1 2 3 4 5 6 7 8; do
			gen "$m" $seed "$g" >"$TMP/out"
			python3 -c 'import re, sys
t = open(sys.argv[1], encoding="utf-8").read()
if not re.fullmatch(sys.argv[2], t):
    sys.exit("%r does not match %s" % (t, sys.argv[2]))' "$TMP/out" "$re" ||
				fail "seed $seed: $g"
		done
	done <"$TMP/cases"
}

outputs_are_in_the_language_on_a_random_model() {
	command -v python3 >/dev/null || fail "python3 is needed"
	check_model "$(tiny q8_0)"
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

# Bad grammars: exit 2, one line naming the place, before any token.
bad_grammars_are_usage_errors() {
	m=$(tiny f32)
	while IFS='	' read -r g want; do
		g=$(printf '%s' "$g" | sed 's/ ;; /\n/g')
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
root ::= ("a"?)*	rule 'root' is left-recursive: a group or repetition
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
EOF
	echo 1 | "$D" -m "$m" --grammar-file "$TMP/none.gbnf" 2>"$TMP/err"
	[ $? -eq 2 ] && grep -q 'none.gbnf: No such file' "$TMP/err" || fail "$(cat "$TMP/err")"
	echo 1 | "$D" -m "$m" --grammar 'root ::= "a"' --lines 2>"$TMP/err"
	[ $? -eq 2 ] || fail "--lines: $(cat "$TMP/err")"
}

t outputs_are_in_the_language_on_a_random_model
t outputs_are_in_the_language_on_stories260K
t grammar_runs_are_reproducible
t bad_grammars_are_usage_errors
