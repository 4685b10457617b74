#!/bin/sh
# make fuzz: build each fuzz target with clang's libFuzzer, ASan and UBSan,
# and run it for $FUZZ_SECONDS (default 60), two targets at a time.  Everything is built in
# tests/fuzz/build, apart from the plain build.  UBSan is left off the two
# SIMD kernel files: clang takes many minutes on them with it.
#
# Corpora: the seeds tests/fuzz/mkseeds writes, the committed regression
# corpus tests/fuzz/regress/TARGET (read only), and tests/fuzz/build/corpus
# (what the fuzzer finds; kept between runs, never committed).  An input
# that crashes is left as tests/fuzz/build/crash-TARGET-*: fix the bug, then
# copy the input into tests/fuzz/regress/TARGET, which make check replays.
#
# Usage: sh tests/fuzz/run.sh [TARGET...]    (from the project root)
set -u
: "${FUZZ_SECONDS:=60}"
: "${CLANG:=clang}"
targets=${*:-gguf snapshot tokstream tok kvsel chat grammar schema}
B=tests/fuzz/build
SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
CF="-std=c11 -O1 -g -D_DEFAULT_SOURCE -fno-omit-frame-pointer"
AVX2="-mavx2 -mfma -mf16c"
AVX512="-mavx512f -mavx512bw -mavx512vl -mfma -mf16c"

command -v "$CLANG" >/dev/null || { echo "fuzz: $CLANG not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 1; }
mkdir -p "$B/obj" "$B/corpus"
[ -x tests/fuzz/mkseeds ] || { echo "fuzz: run make first (tests/fuzz/mkseeds)" >&2; exit 1; }
tests/fuzz/mkseeds "$B/seeds" || exit 1

echo "fuzz: building with $CLANG"
objs=""
for src in lib/*.c lib/simd/*.c cmd/tool.c tools/ggufw.c tools/fixture.c tests/fuzz/fuzz_common.c; do
	o="$B/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
	case "$src" in
	lib/simd/avx2.c) flags="$CF -fsanitize=fuzzer-no-link,address $AVX2" ;;
	lib/simd/avx512.c) flags="$CF -fsanitize=fuzzer-no-link,address $AVX512" ;;
	lib/simd/vnni.c) flags="$CF -fsanitize=fuzzer-no-link,address $AVX512 -mavx512vnni" ;;
	lib/simd/amx.c) flags="$CF -fsanitize=fuzzer-no-link,address $AVX512 -mavx512vnni -mamx-tile -mamx-int8" ;;
	*) flags="$CF $SAN" ;;
	esac
	if [ ! -f "$o" ] || [ "$src" -nt "$o" ] || [ -n "$(find lib cmd tools tests -name '*.h' -newer "$o" -o -name '*.inc' -newer "$o")" ]; then
		echo "$CLANG $flags -c -o $o $src"
	fi
	objs="$objs $o"
done | xargs -P 2 -I{} sh -c '{}' || exit 1
objs=$(ls "$B"/obj/*.o)

# every target linked, then run two at a time (a fuzzer keeps one core busy)
for t in $targets; do
	$CLANG $CF -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-o "$B/fuzz-$t" "tests/fuzz/fuzz_$t.c" $objs -lpthread -lm || exit 1
	mkdir -p "$B/corpus/$t"
done

# fuzz T: target T for $FUZZ_SECONDS, its output in $B/T.log and its status in $B/T.rc
fuzz() {
	regress=""
	[ -d "tests/fuzz/regress/$1" ] && regress="tests/fuzz/regress/$1"
	# the tokenizer's long regression inputs are replayed whole; mutants stay short, so it runs fast
	len=""
	[ "$1" = tok ] && len=-max_len=4096
	"$B/fuzz-$1" $len -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$B/crash-$1-" \
		"$B/corpus/$1" "$B/seeds/$1" $regress >"$B/$1.log" 2>&1
	echo $? >"$B/$1.rc"
}

rm -f "$B"/*.rc
set -- $targets
while [ $# -gt 0 ]; do
	echo "fuzz: $1${2:+ and $2} for $FUZZ_SECONDS s"
	fuzz "$1" &
	[ $# -gt 1 ] && fuzz "$2" &
	wait
	shift
	[ $# -gt 0 ] && shift
done

status=0
for t in $targets; do
	rc=$(cat "$B/$t.rc")
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$B/$t.log")
	cov=$(grep -o 'cov: [0-9]*' "$B/$t.log" | tail -n 1)
	if [ "$rc" -eq 0 ]; then
		echo "fuzz: $t: ok, ${execs:-?} executions, $cov"
	else
		echo "fuzz: $t: FAILED (status $rc) after ${execs:-?} executions; see $B/$t.log"
		grep -E 'ERROR|SUMMARY|Test unit written' "$B/$t.log" | head -n 5
		status=1
	fi
done
exit $status
