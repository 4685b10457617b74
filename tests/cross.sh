#!/bin/sh
# cross.sh: the tests on Linux AArch64, here on x86-64, under qemu-user.
# Each cross compiler builds a copy of the tree (static programs, so that
# qemu needs no libraries), every program is wrapped in a script that
# runs it under qemu-aarch64 by its own name, and the tests run as make
# check runs them, on emulated processors:
#
#   max         dotprod and i8mm: every NEON set (neon, dotprod, i8mm) is
#               there, and the kernels' test and the golden test compare
#               each with the portable set
#   cortex-a53  neither (a Raspberry Pi 3's): the neon set chosen
#
# The golden test holds the sums that x86 gives: one result on every
# machine.  Emulation runs the tests 3 to 400 times slower, so the plan
# splits the work between the compilers, which run side by side: gcc on
# max the C unit tests and the families', gcc on cortex-a53 the kernels'
# test and the golden test, clang on max the kernels', the golden and
# the families' tests, test_model's three longest comparisons with
# references, test_gguf and test_grammar (so that the chains take about
# as long).  There the golden test takes a part of its cases
# (LLM_GOLDEN=quick), and LLM_TEST_SKIP names the one unit test that
# emulation makes 7 minutes long.  Usage (make check-aarch64):
#
#   sh tests/cross.sh
#
# LLM_CROSS_CC     the compilers, ";"-separated (default: those present of
#                  aarch64-linux-gnu-gcc and clang --target=aarch64-linux-gnu)
# LLM_CROSS_PLAN   lines of "COMPILER CPU TEST...", COMPILER the number of
#                  one in LLM_CROSS_CC; "all" for TEST runs the whole suite;
#                  TEST:NAMES runs those of a C test's tests, TEST:-NAMES
#                  the others (NAMES comma-separated, tests/check.h)
# LLM_GOLDEN       quick by default here; "full" for every case
# LLM_TEST_SKIP    C unit tests to skip (tests/check.h)
#
# It skips, and says so, where qemu-aarch64 or every cross compiler is
# missing (Debian: qemu-user, gcc-aarch64-linux-gnu; .ci/run installs them).
set -u
ROOT=$PWD
OUT=$ROOT/tests/tmp/cross
# test_model's three longest comparisons with references, test_gguf and
# test_grammar run in clang's chain: each chain about 19 minutes emulated
# (gcc's 1251 s against clang's 1060 s before test_gguf and test_grammar moved)
REFS=kv_types_stay_close_to_f32,gemma3_matches_the_reference,routed_ffn_matches_the_reference
PLAN=${LLM_CROSS_PLAN:-"1 max tests/test_quant tests/test_model:-$REFS tests/test_kv tests/test_tok tests/test_snapshot tests/test_families.sh
1 cortex-a53 tests/test_quant tests/test_golden.sh
2 max tests/test_quant tests/test_golden.sh tests/test_families.sh tests/test_model:$REFS tests/test_gguf tests/test_grammar"}
GOLDEN=${LLM_GOLDEN:-quick}
# 7 minutes emulated (1 s natively): the gemma3 cache types over every chunk size
SKIP=${LLM_TEST_SKIP:-gemma3_cache_types_batched_equals_token_by_token}

if ! command -v qemu-aarch64 >/dev/null 2>&1; then
	echo "SKIP: cross: qemu-aarch64 is not installed (Debian's qemu-user)"
	exit 0
fi
if [ -z "${LLM_CROSS_CC:-}" ]; then
	LLM_CROSS_CC=
	command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && LLM_CROSS_CC="aarch64-linux-gnu-gcc"
	# clang targets AArch64 with the GNU cross toolchain's libraries and linker
	command -v clang >/dev/null 2>&1 && command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 &&
		LLM_CROSS_CC="$LLM_CROSS_CC;clang --target=aarch64-linux-gnu"
fi
if [ -z "$LLM_CROSS_CC" ]; then
	echo "SKIP: cross: no compiler for aarch64 (Debian's gcc-aarch64-linux-gnu)"
	exit 0
fi

# build NAME CC: the tree built for aarch64 by CC in $OUT/NAME, programs wrapped
build() {
	dir=$OUT/$1
	rm -rf "$dir" && mkdir -p "$dir/tests" || return 1
	cp -R Makefile config.mk lib cmd tools examples man "$dir" || return 1
	for f in tests/*; do
		[ "$f" = tests/tmp ] || cp -R "$f" "$dir/tests/" || return 1
	done
	(cd "$dir" && make clean >/dev/null && make -j2 CC="$2" LDFLAGS=-static testbin >build.log 2>&1) || {
		tail -n 20 "$dir/build.log"
		return 1
	}
	# each program runs under qemu, by its own name (-0: the errors it prints name it)
	for f in "$dir"/cmd/llm-* "$dir"/tools/mkmodel "$dir"/tests/test_* "$dir"/tests/fuzz/replay-* \
	    "$dir"/tests/fuzz/mkseeds; do
		case $f in *.o) continue ;; esac
		[ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
		mv "$f" "$f.aarch64" || return 1
		printf '#!/bin/sh\nexec qemu-aarch64 ${LLM_QEMU_CPU:+-cpu "$LLM_QEMU_CPU"} -0 "$0" "$0.aarch64" "$@"\n' >"$f"
		chmod +x "$f"
	done
}

# chain N CC: the build by CC and its tests on every processor, into $OUT/ccN.log; 1 if any failed
chain() {
	num=$1 cc=$2
	echo "== aarch64, $cc"
	if ! build "cc$num" "$cc"; then
		echo "FAIL: cross: $cc: the build failed"
		return 1
	fi
	# the plan's lines on stdin; the tests' stdin is /dev/null
	echo "$PLAN" | { st=0; while read -r c cpu list; do
		[ "$c" = "$num" ] || continue
		# the set the processor's features choose, as --stats-json reports it
		isa=$(cd "$OUT/cc$num" && "$ROOT/tools/mkmodel" -o "$OUT/isa$num.gguf" &&
			echo 1 | LLM_QEMU_CPU=$cpu cmd/llm-decode -m "$OUT/isa$num.gguf" -n 1 --stats-json 2>&1 >/dev/null |
			sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')
		echo "== aarch64, $cc, qemu -cpu $cpu: kernels $isa"
		case $cpu in
		max) want=i8mm ;;
		cortex-a53) want=neon ;;
		cortex-a76|neoverse-n1) want=dotprod ;;
		*) want=$isa ;;
		esac
		[ "$isa" = "$want" ] || { echo "FAIL: cross: -cpu $cpu chose $isa, not $want"; st=1; }
		# the plain tests in one run, then each with a part of its tests (TEST:NAMES, TEST:-NAMES)
		plain=
		for w in $list; do
			case $w in *:*) ;; *) plain="$plain $w" ;; esac
		done
		if [ "$list" = all ]; then
			tests_on "$num" "$cpu" "" "$SKIP" || st=1
		elif [ -n "$plain" ]; then
			# shellcheck disable=SC2086
			tests_on "$num" "$cpu" "" "$SKIP" $plain || st=1
		fi
		for w in $list; do
			case $w in
			*:-*) tests_on "$num" "$cpu" "" "$SKIP,${w#*:-}" "${w%%:*}" || st=1 ;;
			*:*) tests_on "$num" "$cpu" "${w#*:}" "$SKIP" "${w%%:*}" || st=1 ;;
			esac
		done
	done; exit $st; }
}

# tests_on N CPU ONLY SKIP [TEST...]: run build N's tests (all if none named) on qemu -cpu CPU,
# LLM_TEST_ONLY and LLM_TEST_SKIP as given (tests/check.h); 1 if any failed
tests_on() {
	(num=$1 cpu=$2 only=$3 skip=$4
	shift 4
	cd "$OUT/cc$num" && LLM_QEMU_CPU=$cpu LLM_CROSS=aarch64 LLM_GOLDEN=$GOLDEN LLM_TEST_ONLY=$only \
		LLM_TEST_SKIP=$skip LLM_SHARED="${LLM_SHARED:-$ROOT/../shared}" sh tests/run.sh "$@" </dev/null)
}

# The compilers' chains side by side (a qemu process keeps about one core busy), then their logs in turn.
rm -rf "$OUT" && mkdir -p "$OUT" || exit 1
n=0
IFS_SAVE=$IFS
IFS=';'
for cc in $LLM_CROSS_CC; do
	IFS=$IFS_SAVE
	n=$((n + 1))
	{ chain $n "$cc" >"$OUT/cc$n.log" 2>&1; echo $? >"$OUT/cc$n.status"; } &
	IFS=';'
done
IFS=$IFS_SAVE
wait
status=0
i=1
while [ $i -le $n ]; do
	cat "$OUT/cc$i.log"
	[ "$(cat "$OUT/cc$i.status" 2>/dev/null)" = 0 ] || status=1
	i=$((i + 1))
done
[ $status -eq 0 ] && echo "cross: every aarch64 build and test passed" || echo "FAIL: cross: see above"
exit $status
