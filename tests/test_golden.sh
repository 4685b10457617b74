#!/bin/sh
# One result on every machine.  --score output, generated ids,
# embeddings and snapshot files of fixed streams, for every cache type
# (f32, f16, q8_0, q4_0, mixed K/V, windowed) and three weight types
# (F32, Q8_0, a K-quant mix), are the same bytes:
#   - on every instruction set this processor has, as the portable set
#     writes them (compared byte for byte, so a failure names the set,
#     the case and the first byte that differs);
#   - as the SHA-256 sums in tests/golden.sha256 say, one set of sums for
#     every set (kernels.c's rules make the portable C the specification);
#   - from a build by the other compiler (clang for a gcc build, gcc for
#     clang's), where it is installed: its best set on every case, its
#     portable set on a part of them (take).
#
#   sh tests/test_golden.sh            check (as make check runs it)
#   sh tests/test_golden.sh record     rewrite the sums from the portable
#                                      set (only when a change of results
#                                      is intended and said)
#
# LLM_GOLDEN=quick takes a part of the cases (three weight types, four
# caches, no long prompts), for machines that are slow to run them all:
# tests/cross.sh's emulated AArch64.  Its sums are checked against those
# lines of the recorded ones.
#
# make check-asan skips them all (LLM_GOLDEN=skip: slow under the
# sanitizers); test_quant compares every set's kernels there.  A snapshot
# written under any set and resumed under any other gives the bits of
# computing everything again.
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

# SHA-256: coreutils' sha256sum, or Perl's shasum where there is none (macOS)
if command -v sha256sum >/dev/null 2>&1; then
	sum() { sha256sum <"$1" | cut -c1-64; }
else
	sum() { shasum -a 256 <"$1" | cut -c1-64; }
fi

# The cache configurations, NAME:OPTIONS (options joined by commas).
CACHES="f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0
kq8vq4:--kv-type-k,q8_0,--kv-type-v,q4_0 kf16vq8:--kv-type-k,f16,--kv-type-v,q8_0
kq4vf32:--kv-type-k,q4_0 kf32vf16:--kv-type-v,f16
winf32:--ctx,128,--kv-window,96 winq8:--kv-type,q8_0,--ctx,128,--kv-window,64,--kv-sinks,4
winq4f16:--kv-type-k,q4_0,--kv-type-v,f16,--ctx,160,--kv-window,100"
LONG_CACHES="f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0
winq8:--kv-type,q8_0,--ctx,512,--kv-window,400"
MODELS="small:f32 small:q8_0 small:q4_K_mix tiny:f32"
LONG_MODELS="small:f32 small:q8_0"
if [ "${LLM_GOLDEN:-}" = quick ]; then
	CACHES="f32: q8_0:--kv-type,q8_0 kq4vf32:--kv-type-k,q4_0 winq8:--kv-type,q8_0,--ctx,128,--kv-window,64,--kv-sinks,4"
	MODELS="small:f32 small:q8_0 small:q4_K_mix"
	LONG_MODELS=
fi

# take MODEL CACHE: whether cases runs the model with the cache.  With
# SUBSET=other, the other compiler's portable set: its C is the same C,
# and the portable set is slow (a third of the test's time), so every
# cache on the Q8_0 model and the plain f32 cache on the others.
take() {
	[ "${SUBSET:-}" != other ] || [ "$1" = small:q8_0 ] || [ "$2" = f32 ]
}

# cases DECODE ISA DIR: every case's output into DIR/CASE (its name with
# / as _), and "CASE sum" lines on stdout.
cases() {
	dec=$1 isa=$2 dir=$3
	export LLM_ISA=$isa
	mkdir -p "$dir"
	stream 300 >"$TMP/s300"
	stream 1600 >"$TMP/s1600"
	head -c 600 "$TMP/s300" | sed 's/ [0-9]*$//' >"$TMP/s150"
	for m in $MODELS; do
		f=$(model "${m%%:*}" "${m#*:}")
		for c in $CACHES; do
			name=${c%%:*} opts=$(echo "${c#*:}" | tr ',' ' ') o="$dir/$m.$name"
			take "$m" "$name" || continue
			# shellcheck disable=SC2086
			"$dec" -m "$f" -t 2 -q --score $opts --kv-out "$o.score.kv" <"$TMP/s300" >"$o.score" ||
				fail "$isa $m $name: score exit $?"
			# token by token from one id, then a resume of a prefix
			# shellcheck disable=SC2086
			echo 1 | "$dec" -m "$f" -t 1 -q --greedy --ignore-eos -n 200 $opts >"$o.decode" ||
				fail "$isa $m $name: decode exit $?"
			# shellcheck disable=SC2086
			"$dec" -m "$f" -q -n 0 $opts --kv-out "$TMP/p.kv" <"$TMP/s150" >/dev/null ||
				fail "$isa $m $name: prefix exit $?"
			# shellcheck disable=SC2086
			"$dec" -m "$f" -t 2 -q --greedy --ignore-eos -n 16 $opts --kv-in "$TMP/p.kv" \
				--kv-out "$o.resume.kv" <"$TMP/s300" >"$o.resume" || fail "$isa $m $name: resume exit $?"
			for k in score score.kv decode resume resume.kv; do
				echo "$m/$name/$k $(sum "$o.$k")"
			done
		done
		"$dec" -m "$f" -t 2 --embed <"$TMP/s300" >"$dir/$m.embed" || fail "$isa $m: embed exit $?"
		echo "$m/embed $(sum "$dir/$m.embed")"
	done
	# long prompts: decode steps whose attention is split among the threads
	for m in $LONG_MODELS; do
		f=$(model "${m%%:*}" "${m#*:}")
		for c in $LONG_CACHES; do
			name=${c%%:*} opts=$(echo "${c#*:}" | tr ',' ' ')
			take "$m" "$name" || continue
			# shellcheck disable=SC2086
			"$dec" -m "$f" -t 2 -q --greedy --ignore-eos -n 24 $opts <"$TMP/s1600" >"$dir/$m.$name.long" ||
				fail "$isa $m $name: long exit $?"
			echo "$m/$name/long $(sum "$dir/$m.$name.long")"
		done
	done
}

# What DECODE --stats-json says of KEY (isa, compiler), under LLM_ISA=ISA.
report() {
	echo 1 | LLM_ISA=$3 "$1" -m "$(model tiny f32)" -n 1 --stats-json 2>&1 >/dev/null |
		sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p"
}

# The instruction sets this processor has, as DECODE reports them.
isas() {
	for isa in scalar avx2 avx512 avx512vnni amx neon dotprod i8mm; do
		[ "$(report "$1" isa "$isa")" = "$isa" ] && echo "$isa"
	done
}

# portable: the portable set's outputs and sums, made once.
portable() {
	[ -f "$TMP/sums.scalar" ] || cases "$D" scalar "$TMP/out.scalar" | LC_ALL=C sort >"$TMP/sums.scalar" ||
		fail "cases scalar"
}

every_set_writes_the_portable_sets_bytes() {
	[ "${LLM_GOLDEN:-}" = skip ] && skip "LLM_GOLDEN=skip: a sanitizer build (test_quant checks the kernels there)"
	portable
	have=$(isas "$D")
	[ -n "$have" ] || fail "no instruction set reported"
	n=0
	for isa in $have; do
		[ "$isa" = scalar ] && continue
		cases "$D" "$isa" "$TMP/out.$isa" >/dev/null || fail "cases $isa"
		for f in "$TMP/out.scalar"/*; do
			c=$(basename "$f")
			cmp "$f" "$TMP/out.$isa/$c" >"$TMP/cmp" 2>&1 ||
				fail "$isa: $c differs from the portable set's: $(cat "$TMP/cmp")"
			n=$((n + 1))
		done
	done
	[ "$n" -gt 0 ] || skip "only the portable set here"
	echo "# $n outputs compared over: $have"
}

results_are_bitwise_those_recorded() {
	[ "${LLM_GOLDEN:-}" = skip ] && skip "LLM_GOLDEN=skip: a sanitizer build"
	need "$GOLD"
	portable
	# quick: the recorded lines of the cases it takes
	grep -v '^#' "$GOLD" | if [ "${LLM_GOLDEN:-}" = quick ]; then
		awk 'NR == FNR { take[$1]; next } $1 in take' "$TMP/sums.scalar" -
	else
		cat
	fi | diff - "$TMP/sums.scalar" >"$TMP/diff" ||
		fail "$(grep -c '^>' "$TMP/diff") of the portable set's results differ from tests/golden.sha256:
$(head -n 20 "$TMP/diff")"
}

# The other compiler's build of this tree, in $TMP/other; its name on stdout, or skip.
other_build() {
	cc=$(report "$D" compiler scalar)
	case "$cc" in
	gcc*) other=clang ;;
	*) other=gcc ;;
	esac
	command -v "$other" >/dev/null 2>&1 || skip "no $other here to build with (this build is $cc's)"
	rm -rf "$TMP/other" && mkdir -p "$TMP/other" || fail "mkdir"
	cp -R Makefile config.mk lib cmd tools "$TMP/other" || fail "copy the tree"
	# a copy made from a built tree: its objects are the other compiler's to make
	find "$TMP/other" -name '*.o' -exec rm -f {} + 2>/dev/null
	rm -f "$TMP/other/lib/libllm.a"
	(cd "$TMP/other" && make -j2 CC="$other" lib/libllm.a cmd/llm-decode >"$TMP/other.log" 2>&1) ||
		fail "make CC=$other: $(tail -n 5 "$TMP/other.log")"
	echo "$other"
}

the_other_compiler_gives_the_same_bits() {
	[ "${LLM_GOLDEN:-}" = skip ] && skip "LLM_GOLDEN=skip: a sanitizer build"
	[ "${LLM_CROSS:-}" ] && skip "LLM_CROSS: a build for another machine (tests/cross.sh builds with each compiler)"
	other=$(other_build) || exit $?
	portable
	# the best set this processor has, every case, and the portable set, a part of them
	# (take), built by the other compiler
	best=$(isas "$TMP/other/cmd/llm-decode" | tail -n 1)
	for isa in $best $([ "$best" != scalar ] && echo scalar); do
		SUBSET=
		[ "$isa" = scalar ] && [ "$best" != scalar ] && SUBSET=other
		cases "$TMP/other/cmd/llm-decode" "$isa" "$TMP/other.$isa" | LC_ALL=C sort >"$TMP/sums.other" ||
			fail "cases $other $isa"
		# the portable set's lines of the cases run (all of them, but for the subset)
		awk -v all="$([ -z "$SUBSET" ] && echo 1)" 'NR == FNR { take[$1]; next } all || $1 in take' \
		    "$TMP/sums.other" "$TMP/sums.scalar" | diff - "$TMP/sums.other" >"$TMP/diff" ||
			fail "$other's build, $isa: $(grep -c '^[<>]' "$TMP/diff") results differ from this build's portable set:
$(head -n 20 "$TMP/diff")"
		[ "$(wc -l <"$TMP/sums.other")" -ge 30 ] || fail "$other's build, $isa: $(wc -l <"$TMP/sums.other") results"
		echo "# $other's build, $isa: $(wc -l <"$TMP/sums.other") results the same"
	done
	SUBSET=
}

# A snapshot written under one set, resumed under another, gives the bits
# of computing everything under the second: the same ids, the same file.
a_snapshot_resumes_alike_under_every_set() {
	[ "${LLM_GOLDEN:-}" = skip ] && skip "LLM_GOLDEN=skip: a sanitizer build"
	have=$(isas "$D")
	[ "$(echo "$have" | wc -l)" -gt 1 ] || skip "only the portable set here"
	stream 300 >"$TMP/s300"
	head -c 600 "$TMP/s300" | sed 's/ [0-9]*$//' >"$TMP/s150"
	models="small:q8_0 small:q4_K_mix" caches='"" "--kv-type q8_0" "--kv-type-k q4_0 --kv-type-v f16"'
	[ "${LLM_GOLDEN:-}" = quick ] && models=small:q4_K_mix caches='"" "--kv-type-k q4_0 --kv-type-v f16"'
	for m in $models; do
		f=$(model "${m%%:*}" "${m#*:}")
		eval "set -- $caches"
		for opts in "$@"; do
			for w in $have; do
				# shellcheck disable=SC2086
				LLM_ISA=$w "$D" -m "$f" -q -n 0 $opts --kv-out "$TMP/x-$w.kv" <"$TMP/s150" >/dev/null ||
					fail "$w: prefix exit $?"
			done
			for r in $have; do
				# shellcheck disable=SC2086
				LLM_ISA=$r "$D" -m "$f" -t 2 -q --greedy --ignore-eos -n 16 $opts \
					--kv-out "$TMP/all.kv" <"$TMP/s300" >"$TMP/all" || fail "$r: exit $?"
				for w in $have; do
					cmp -s "$TMP/x-$w.kv" "$TMP/x-$r.kv" || fail "$m $opts: the prefix's snapshot differs under $w and $r"
					# shellcheck disable=SC2086
					LLM_ISA=$r "$D" -m "$f" -t 2 -q --greedy --ignore-eos -n 16 $opts --kv-in "$TMP/x-$w.kv" \
						--kv-out "$TMP/res.kv" <"$TMP/s300" >"$TMP/res" || fail "$r from $w: exit $?"
					cmp -s "$TMP/res" "$TMP/all" ||
						fail "$m $opts: written under $w, resumed under $r: ids differ from computing all under $r"
					cmp -s "$TMP/res.kv" "$TMP/all.kv" ||
						fail "$m $opts: written under $w, resumed under $r: its snapshot differs from computing all"
				done
			done
		done
	done
}

if [ "$MODE" = record ]; then
	rm -f "$TMP/sums.scalar"
	portable
	{ echo "# the portable set's results (tests/test_golden.sh record), which every set and compiler give"
	  cat "$TMP/sums.scalar"; } >"$GOLD"
	echo "recorded $(grep -vc '^#' "$GOLD") sums"
	exit 0
fi

rm -f "$TMP/sums.scalar"
t every_set_writes_the_portable_sets_bytes
t results_are_bitwise_those_recorded
t the_other_compiler_gives_the_same_bits
t a_snapshot_resumes_alike_under_every_set
