# lib.sh: what the benchmark scripts share; sourced from the project root.
D=cmd/llm-decode
TMP=bench/tmp
mkdir -p "$TMP"
th=${BENCH_THREADS:-2}
th=${th##* }

# json KEY FILE: a number from a --stats-json line
json() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }
# meanabs A B: the mean |a - b| of two files of numbers, line by line
meanabs() { paste "$1" "$2" | awk '{ d = $1 - $2; s += d < 0 ? -d : d } END { printf "%.4f", s / NR }'; }
# llama_pair FILE: llama-bench's csv of -p P -n N: the decode and the prefill tok/s
llama_pair() { awk -F, 'NR > 1 { gsub(/"/, "", $(NF - 1)); v[NR] = $(NF - 1) } END { print v[NR], v[NR - 1] }' "$1"; }
# medians FILE: each column's median over FILE's lines (alternating rounds), on one line; "-" for a column of "-"
medians() {
	awk '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
	END {
		for (c = 1; c <= nf; c++) {
			for (i = 1; i <= NR; i++) a[i] = v[c, i]
			for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			m = a[1] == "-" ? "-" : NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
			printf "%s%s", m, c < nf ? " " : "\n"
		}
	}' "$1"
}
# ref_avx2 PROGRAM [DIR]: llama.cpp's PROGRAM (from DIR, ../shared/ref by
# default) with its AVX2 (haswell) kernels alone: a copy in $TMP/ref-avx2
# beside its libraries, haswell its only CPU backend.  Prints its path, or
# fails without the program or that library.  A copy, not a link: ggml
# looks for its backends beside the program's real path, so a link would
# find them all (and load zen4's or icelake's).
ref_avx2() {
	src=${2:-../shared/ref}
	[ -x "$src/$1" ] && [ -f "$src/libggml-cpu-haswell.so" ] || return 1
	mkdir -p "$TMP/ref-avx2" || return 1
	for f in "$src"/lib*.so*; do
		case ${f##*/} in libggml-cpu-*) [ "${f##*/}" = libggml-cpu-haswell.so ] || continue ;; esac
		ln -sf "$(cd "$src" && pwd)/${f##*/}" "$TMP/ref-avx2/" || return 1
	done
	rm -f "$TMP/ref-avx2/$1" && cp "$src/$1" "$TMP/ref-avx2/$1" && echo "$TMP/ref-avx2/$1"
}
