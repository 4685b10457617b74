#!/bin/sh
# cross.sh: the tests on Linux AArch64, here on x86-64, under qemu-user.
# Each cross compiler builds a copy of the tree (static programs, so that
# qemu needs no libraries), every program is wrapped in a script that
# runs it under qemu-aarch64, and the tests run as make check runs them,
# on emulated processors:
#
#   max         dotprod and i8mm: every set, neon, dotprod and i8mm, is
#               there to test (LLM_ISA's default: i8mm)
#   cortex-a53  neither (a Raspberry Pi 3's): the neon set alone
#   cortex-a76  dotprod alone (a Raspberry Pi 5's)
#
# The golden test holds the sums that x86 gives: one result on every
# machine.  Emulation runs the tests 3 to 30 times slower, so the first
# compiler on the first processor runs the C unit tests, the golden test
# (LLM_GOLDEN=quick: a part of its cases) and the families'; every other
# pair the kernels' test, the golden test and the families'.  Usage
# (make check-aarch64):
#
#   sh tests/cross.sh
#
# LLM_CROSS_CC     the compilers, ";"-separated (default: those present of
#                  aarch64-linux-gnu-gcc and clang --target=aarch64-linux-gnu)
# LLM_CROSS_CPUS   the processors (default: max cortex-a53)
# LLM_CROSS_TESTS  the first pair's tests ("all": the whole suite)
# LLM_CROSS_MORE   every other pair's tests
# LLM_GOLDEN       quick by default here; "full" for every case
#
# It skips, and says so, where qemu-aarch64 or every cross compiler is
# missing (Debian: qemu-user, gcc-aarch64-linux-gnu; .ci/run installs them).
set -u
ROOT=$PWD
OUT=$ROOT/tests/tmp/cross
CPUS=${LLM_CROSS_CPUS:-"max cortex-a53"}
TESTS=${LLM_CROSS_TESTS:-"tests/test_quant tests/test_model tests/test_kv tests/test_gguf tests/test_tok
	tests/test_grammar tests/test_snapshot tests/test_golden.sh tests/test_families.sh"}
MORE=${LLM_CROSS_MORE:-"tests/test_quant tests/test_golden.sh tests/test_families.sh"}
GOLDEN=${LLM_GOLDEN:-quick}

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
		[ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
		mv "$f" "$f.aarch64" || return 1
		printf '#!/bin/sh\nexec qemu-aarch64 ${LLM_QEMU_CPU:+-cpu "$LLM_QEMU_CPU"} -0 "$0" "$0.aarch64" "$@"\n' >"$f"
		chmod +x "$f"
	done
}

status=0
n=0
IFS_SAVE=$IFS
IFS=';'
for cc in $LLM_CROSS_CC; do
	IFS=$IFS_SAVE
	n=$((n + 1))
	echo "== aarch64, $cc"
	if ! build "cc$n" "$cc"; then
		echo "FAIL: cross: $cc: the build failed"
		status=1
		continue
	fi
	for cpu in $CPUS; do
		echo "== aarch64, $cc, qemu -cpu $cpu: kernels $(cd "$OUT/cc$n" && "$ROOT/tools/mkmodel" -o "$OUT/isa.gguf" &&
			echo 1 | LLM_QEMU_CPU=$cpu cmd/llm-decode -m "$OUT/isa.gguf" -n 1 --stats-json 2>&1 >/dev/null |
			sed -n 's/.*"isa":"\([a-z0-9]*\)".*/\1/p')"
		# shellcheck disable=SC2086
		if [ "$TESTS" = all ]; then set -- ; else set -- $TESTS; fi
		TESTS=$MORE
		(cd "$OUT/cc$n" && LLM_QEMU_CPU=$cpu LLM_CROSS=aarch64 LLM_GOLDEN=$GOLDEN \
			LLM_SHARED="${LLM_SHARED:-$ROOT/../shared}" sh tests/run.sh "$@") || status=1
	done
	IFS=';'
done
IFS=$IFS_SAVE
exit $status
