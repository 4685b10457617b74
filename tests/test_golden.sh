#!/bin/sh
# Results stay the same, bit for bit, across changes to the library:
# --score output, generated ids, embeddings and snapshot files of fixed
# streams, for every cache type (f32, f16, q8_0, q4_0, mixed K/V,
# windowed) and three weight types (F32, Q8_0, a K-quant mix), on every
# instruction set this processor has, are compared with the SHA-256
# sums in tests/golden.sha256, recorded by the code before the redesign
# of the model/cache boundary (issue 32).
#
#   sh tests/test_golden.sh            check (as make check runs it)
#   sh tests/test_golden.sh record     rewrite the sums of the sets this
#                                      processor has (only when a change
#                                      of results is intended and said)
#
# The sums are those of one build: the compiler named on the file's first
# line, with config.mk's flags.  Another compiler may contract
# multiply-adds differently, so its build skips, as does make check-asan
# (LLM_GOLDEN=skip: -O1, and slow).
. tests/lib.sh
D="$BIN/llm-decode"
GOLD="$PWD/tests/golden.sha256"
MODE=${1:-check}

# A fixed stream of n ids in 1..319, the same with every awk.
stream() {
	awk -v n="$1" 'BEGIN { x = 7; for (i = 0; i < n; i++) { x = (x * 75 + 74) % 65537;
		printf "%d%s", 1 + x % 319, i + 1 < n ? " " : "\n" } }'
}

model() {	# model SHAPE TYPE: a fixture, made once
	f="$TMP/$1-$2.gguf"
	[ -f "$f" ] || "$PWD/tools/mkmodel" -s "$1" -t "$2" -c 2048 -o "$f" >&2 || fail "mkmodel $1 $2"
	echo "$f"
}

sum() { sha256sum <"$1" | cut -c1-64; }

# The cache configurations, NAME:OPTIONS (options joined by commas).
CACHES="f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0
kq8vq4:--kv-type-k,q8_0,--kv-type-v,q4_0 kf16vq8:--kv-type-k,f16,--kv-type-v,q8_0
kq4vf32:--kv-type-k,q4_0 kf32vf16:--kv-type-v,f16
winf32:--ctx,128,--kv-window,96 winq8:--kv-type,q8_0,--ctx,128,--kv-window,64,--kv-sinks,4
winq4f16:--kv-type-k,q4_0,--kv-type-v,f16,--ctx,160,--kv-window,100"
LONG_CACHES="f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0
winq8:--kv-type,q8_0,--ctx,512,--kv-window,400"

# One ISA: every case's "ISA/case sum" line on stdout.
cases() {
	isa=$1
	export LLM_ISA=$isa
	stream 300 >"$TMP/s300"
	stream 1600 >"$TMP/s1600"
	head -c 600 "$TMP/s300" | sed 's/ [0-9]*$//' >"$TMP/s150"
	for m in small:f32 small:q8_0 small:q4_K_mix tiny:f32; do
		f=$(model "${m%%:*}" "${m#*:}")
		for c in $CACHES; do
			name=${c%%:*} opts=$(echo "${c#*:}" | tr ',' ' ')
			# shellcheck disable=SC2086
			"$D" -m "$f" -t 2 -q --score $opts --kv-out "$TMP/k.kv" <"$TMP/s300" >"$TMP/o" ||
				fail "$isa $m $name: score exit $?"
			echo "$isa/$m/$name/score $(sum "$TMP/o")"
			echo "$isa/$m/$name/score.kv $(sum "$TMP/k.kv")"
			# token by token from one id, then a resume of a prefix
			# shellcheck disable=SC2086
			echo 1 | "$D" -m "$f" -t 1 -q --greedy --ignore-eos -n 200 $opts >"$TMP/o" ||
				fail "$isa $m $name: decode exit $?"
			echo "$isa/$m/$name/decode $(sum "$TMP/o")"
			# shellcheck disable=SC2086
			"$D" -m "$f" -q -n 0 $opts --kv-out "$TMP/p.kv" <"$TMP/s150" >/dev/null ||
				fail "$isa $m $name: prefix exit $?"
			# shellcheck disable=SC2086
			"$D" -m "$f" -t 2 -q --greedy --ignore-eos -n 16 $opts --kv-in "$TMP/p.kv" \
				--kv-out "$TMP/r.kv" <"$TMP/s300" >"$TMP/o" || fail "$isa $m $name: resume exit $?"
			echo "$isa/$m/$name/resume $(sum "$TMP/o")"
			echo "$isa/$m/$name/resume.kv $(sum "$TMP/r.kv")"
		done
		"$D" -m "$f" -t 2 --embed <"$TMP/s300" >"$TMP/o" || fail "$isa $m: embed exit $?"
		echo "$isa/$m/embed $(sum "$TMP/o")"
	done
	# long prompts: decode steps whose attention is split among the threads
	for m in small:f32 small:q8_0; do
		f=$(model "${m%%:*}" "${m#*:}")
		for c in $LONG_CACHES; do
			name=${c%%:*} opts=$(echo "${c#*:}" | tr ',' ' ')
			# shellcheck disable=SC2086
			"$D" -m "$f" -t 2 -q --greedy --ignore-eos -n 24 $opts <"$TMP/s1600" >"$TMP/o" ||
				fail "$isa $m $name: long exit $?"
			echo "$isa/$m/$name/long $(sum "$TMP/o")"
		done
	done
}

# What llm-decode --stats-json says of KEY (isa, compiler).
build() {
	echo 1 | "$D" -m "$(model tiny f32)" -n 1 --stats-json 2>&1 >/dev/null |
		sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"
}

# The instruction sets this processor has, as llm-decode reports them.
isas() {
	for isa in scalar avx2 avx512 avx512vnni amx; do
		got=$(echo 1 | LLM_ISA=$isa "$D" -m "$(model tiny f32)" -n 1 --stats-json 2>&1 >/dev/null |
			sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')
		[ "$got" = "$isa" ] && echo "$isa"
	done
}

results_are_bitwise_those_recorded() {
	[ "${LLM_GOLDEN:-}" = skip ] && skip "LLM_GOLDEN=skip: a build with other flags (the sums are the default build's)"
	need "$GOLD"
	cc=$(build compiler)
	[ "# compiler $cc" = "$(head -n 1 "$GOLD")" ] ||
		skip "built by $cc; the sums are those of a build by $(head -n 1 "$GOLD" | cut -c12-)"
	have=$(isas)
	[ -n "$have" ] || fail "no instruction set reported"
	for isa in $have; do
		grep -q "^$isa/" "$GOLD" || { echo "no sums recorded for $isa"; continue; }
		cases "$isa" >"$TMP/got.$isa" || fail "cases $isa"
		grep "^$isa/" "$GOLD" >"$TMP/want.$isa"
		LC_ALL=C sort "$TMP/got.$isa" | diff "$TMP/want.$isa" - >"$TMP/diff.$isa" ||
			fail "$isa: results differ from tests/golden.sha256:
$(cat "$TMP/diff.$isa")"
	done
}

if [ "$MODE" = record ]; then
	have=$(isas)
	[ -n "$have" ] || { echo "no instruction set reported" >&2; exit 1; }
	cc=$(build compiler)
	if [ -f "$GOLD" ] && [ "# compiler $cc" != "$(head -n 1 "$GOLD")" ]; then
		echo "built by $cc, not $(head -n 1 "$GOLD" | cut -c12-): record with that" >&2
		exit 1
	fi
	: >"$TMP/new"
	[ -f "$GOLD" ] && for isa in scalar avx2 avx512 avx512vnni amx; do
		echo "$have" | grep -qx "$isa" || grep "^$isa/" "$GOLD" >>"$TMP/new" || :
	done
	for isa in $have; do
		cases "$isa" >>"$TMP/new" || exit 1
	done
	{ echo "# compiler $cc"; LC_ALL=C sort "$TMP/new"; } >"$GOLD"
	echo "recorded $(wc -l <"$GOLD") sums for: $have"
	exit 0
fi

t results_are_bitwise_those_recorded
