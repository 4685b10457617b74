#!/bin/sh
# Everyday use: --version, exit statuses, -q, progress on a terminal,
# embeddings, and - for stdin.
. tests/lib.sh
D="$BIN/llm-decode"

every_tool_answers_version() {
	v=$(sed -n 's/^VERSION = //p' config.mk)
	[ -n "$v" ] || fail "no VERSION in config.mk"
	for t in llm-decode llm-tokenize llm-kvstat llm-kvdump; do
		out=$("$BIN/$t" --version) || fail "$t --version exited $?"
		[ "$out" = "$t $v" ] || fail "$t --version said '$out'"
	done
}

# Usage errors exit 2, runtime errors 1, for every tool.
exit_statuses_tell_usage_from_runtime_errors() {
	m=$(tiny q8_0)
	for t in llm-decode llm-tokenize llm-kvstat llm-kvdump; do
		"$BIN/$t" --no-such-option </dev/null >/dev/null 2>&1
		[ $? -eq 2 ] || fail "$t: an unknown option exited $?"
	done
	"$BIN/llm-kvstat" "$TMP/missing.kv" >/dev/null 2>&1
	[ $? -eq 1 ] || fail "llm-kvstat: a missing file exited $?"
	"$BIN/llm-kvdump" "$TMP/missing.kv" >/dev/null 2>&1
	[ $? -eq 1 ] || fail "llm-kvdump: a missing file exited $?"
	"$BIN/llm-tokenize" -m "$TMP/missing.gguf" x >/dev/null 2>&1
	[ $? -eq 1 ] || fail "llm-tokenize: a missing model exited $?"
	echo 99999 | "$D" -m "$m" -n 1 >/dev/null 2>&1
	[ $? -eq 1 ] || fail "llm-decode: an out-of-range token exited $?"
	echo 1 | "$D" -m "$m" --pooling mean >/dev/null 2>&1
	[ $? -eq 2 ] || fail "llm-decode: --pooling without --embed exited $?"
}

quiet_silences_all_but_errors() {
	m=$(tiny q8_0)
	seq 1 50 | "$D" -m "$m" --ctx 1024 --score -q >"$TMP/lp" 2>"$TMP/err" || fail "exit $?"
	[ -s "$TMP/lp" ] || fail "no scores on stdout"
	[ ! -s "$TMP/err" ] || fail "-q still wrote: $(cat "$TMP/err")"
	seq 1 50 | "$D" -m "$m" --ctx 1024 --score >/dev/null 2>"$TMP/err" || fail "exit $?"
	grep -q "context_length" "$TMP/err" && grep -q "^scored 49 tokens" "$TMP/err" ||
		fail "without -q: $(cat "$TMP/err")"
	echo 99999 | "$D" -m "$m" -q -n 1 >/dev/null 2>"$TMP/err"
	grep -q "99999" "$TMP/err" || fail "-q silenced an error"
	# llm-tokenize: a vocabulary with a pre-tokenizer it does not know warns, unless -q
	"$PWD/tools/mkmodel" -B no-such-pre -o "$TMP/bpe.gguf" || fail "mkmodel -B"
	"$BIN/llm-tokenize" -m "$TMP/bpe.gguf" hello >/dev/null 2>"$TMP/err" || fail "exit $?"
	grep -q "unknown pre-tokenizer 'no-such-pre'" "$TMP/err" || fail "no warning: $(cat "$TMP/err")"
	"$BIN/llm-tokenize" -q -m "$TMP/bpe.gguf" hello >/dev/null 2>"$TMP/err" || fail "exit $?"
	[ ! -s "$TMP/err" ] || fail "-q still warned: $(cat "$TMP/err")"
}

# A prefill of a second or more draws one line on a terminal, then clears it;
# never when stderr is a file.
progress_only_on_a_terminal() {
	command -v script >/dev/null || skip "script (util-linux) not present"
	m=$(tiny q8_0)
	# a prefill of some seconds on one thread (the line waits for a second)
	seq 1 16000 | awk '{ print $1 % 300 + 3 }' >"$TMP/long"
	script -qec "'$D' -m '$m' --ctx 16384 -t 1 -n 0 <'$TMP/long' >/dev/null" /dev/null >"$TMP/tty" ||
		fail "exit $?"
	tr '\r' '\n' <"$TMP/tty" | grep -q '^llm-decode: [0-9]*/16000 tokens, [0-9]* tok/s, [0-9]* s left' ||
		fail "no progress line: $(tr '\r' '\n' <"$TMP/tty" | cat -v | head -n 3)"
	# the last thing written clears the line
	[ "$(tail -c 4 "$TMP/tty" | od -An -c | tr -d ' \n')" = '\r033[K' ] ||
		fail "the line is not cleared: $(tail -c 8 "$TMP/tty" | od -An -c)"
	"$D" -m "$m" --ctx 16384 -t 1 -n 0 <"$TMP/long" >/dev/null 2>"$TMP/err" || fail "exit $?"
	grep -q "tok/s" "$TMP/err" && fail "progress drawn into a file"
	script -qec "'$D' -m '$m' -q --ctx 16384 -t 1 -n 0 <'$TMP/long' >/dev/null" /dev/null >"$TMP/tty"
	[ ! -s "$TMP/tty" ] || fail "-q drew: $(cat -v "$TMP/tty" | head -c 200)"
}

embeddings_are_one_line_each_and_their_own() {
	m=$(tiny q8_0)
	printf '1 5 9 13\n1 7\n' >"$TMP/two"
	"$D" -m "$m" --embed --lines <"$TMP/two" >"$TMP/e2" || fail "exit $?"
	[ "$(wc -l <"$TMP/e2")" -eq 2 ] || fail "$(wc -l <"$TMP/e2") lines for 2 inputs"
	dim=$(head -n 1 "$TMP/e2" | awk '{ print NF }')
	[ "$dim" -gt 1 ] && [ "$(awk '{ print NF }' "$TMP/e2" | sort -u)" = "$dim" ] ||
		fail "uneven lines"
	# alone, or after another input: the same bits
	echo '1 7' | "$D" -m "$m" --embed >"$TMP/e1" || fail "exit $?"
	tail -n 1 "$TMP/e2" | cmp -s - "$TMP/e1" || fail "an input's embedding depends on its company"
	printf '1 7\n1 5 9 13\n' | "$D" -m "$m" --embed --lines | head -n 1 | cmp -s - "$TMP/e1" ||
		fail "the order of the inputs changes an embedding"
	# --normalize: unit length; --pooling last differs from mean
	echo '1 5 9 13' | "$D" -m "$m" --embed --normalize |
		awk '{ for (i = 1; i <= NF; i++) s += $i * $i; exit !(s > 0.9999 && s < 1.0001) }' ||
		fail "--normalize is not unit length"
	echo '1 5 9 13' | "$D" -m "$m" --embed --pooling last >"$TMP/last" || fail "exit $?"
	head -n 1 "$TMP/e2" | cmp -s - "$TMP/last" && fail "--pooling last gave the mean"
	# never a snapshot; an empty line is an error
	echo 1 | "$D" -m "$m" --embed --kv-out "$TMP/x.kv" >/dev/null 2>&1
	[ $? -eq 2 ] || fail "--embed --kv-out accepted"
	printf '1 2\n\n' | "$D" -m "$m" --embed --lines >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "line 2: no tokens to embed" "$TMP/err" || fail "$(cat "$TMP/err")"
}

# - is standard input wherever a file is read.
dash_reads_standard_input() {
	m=$(tiny q8_0)
	echo "1 5 9" | "$D" -m "$m" -n 5 --kv-out "$TMP/d.kv" >/dev/null || fail "exit $?"
	"$BIN/llm-kvstat" --json "$TMP/d.kv" | sed 's/"file":"[^"]*"//' >"$TMP/a" || fail "exit $?"
	"$BIN/llm-kvstat" --json - <"$TMP/d.kv" | sed 's/"file":"[^"]*"//' >"$TMP/b" || fail "exit $?"
	cmp -s "$TMP/a" "$TMP/b" || fail "llm-kvstat - differs"
	"$BIN/llm-kvdump" --layer 1 "$TMP/d.kv" >"$TMP/a" || fail "exit $?"
	cat "$TMP/d.kv" | "$BIN/llm-kvdump" --layer 1 - >"$TMP/b" || fail "exit $?"
	cmp -s "$TMP/a" "$TMP/b" || fail "llm-kvdump - differs"
	"$BIN/llm-tokenize" -m "$m" 'hello world' >"$TMP/a" || fail "exit $?"
	"$BIN/llm-tokenize" -m - 'hello world' <"$m" >"$TMP/b" || fail "exit $?"
	cmp -s "$TMP/a" "$TMP/b" || fail "llm-tokenize -m - differs"
	head -c 100 "$TMP/d.kv" | "$BIN/llm-kvstat" - >/dev/null 2>"$TMP/err"
	[ $? -eq 1 ] && grep -q "^llm-kvstat: -: truncated" "$TMP/err" || fail "$(cat "$TMP/err")"
	# llm-decode reads ids on stdin and writes tokens on stdout: - is refused
	echo 1 | "$D" -m - -n 1 >/dev/null 2>&1
	[ $? -eq 2 ] || fail "llm-decode -m - accepted"
	echo 1 | "$D" -m "$m" --kv-in - -n 1 >/dev/null 2>&1
	[ $? -eq 2 ] || fail "--kv-in - accepted"
}

# make install puts every tool and page in place; make uninstall takes them all away.
install_and_uninstall() {
	rm -rf "$TMP/inst"
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install DESTDIR="$TMP/inst" >/dev/null ||
		fail "install exited $?"
	for f in bin/llm-decode bin/llm-tokenize bin/llm-kvstat bin/llm-kvdump share/man/man1/llm-decode.1 \
	    share/man/man5/llm-kv.5 share/man/man7/llm.7; do
		[ -f "$TMP/inst/usr/local/$f" ] || fail "$f not installed"
	done
	"$TMP/inst/usr/local/bin/llm-kvstat" --version >/dev/null || fail "the installed tool does not run"
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s uninstall DESTDIR="$TMP/inst" >/dev/null ||
		fail "uninstall exited $?"
	[ -z "$(find "$TMP/inst" -type f)" ] || fail "left behind: $(find "$TMP/inst" -type f)"
}

# Every man page formats cleanly with mandoc (-Tlint) and groff (-ww, as
# man -l runs it), at 80 columns: no warning, no line it cannot break.
man_pages_format_without_warnings() {
	command -v mandoc >/dev/null || skip "mandoc is not installed (.ci/run installs it)"
	command -v groff >/dev/null || skip "groff is not installed (.ci/run installs groff-base)"
	for f in man/*.[157]; do
		mandoc -Tlint -W warning "$f" >"$TMP/lint" 2>&1
		grep -v -e 'mandoc.db' -e 'referenced manual not found' "$TMP/lint" >"$TMP/lint2"
		[ ! -s "$TMP/lint2" ] || fail "$f: $(cat "$TMP/lint2")"
		groff -mandoc -Tutf8 -ww "$f" >/dev/null 2>"$TMP/groff"
		groff -mandoc -Tutf8 -ww -rLL=80n "$f" >/dev/null 2>>"$TMP/groff"
		[ ! -s "$TMP/groff" ] || fail "$f: $(cat "$TMP/groff")"
	done
}

t install_and_uninstall
t dash_reads_standard_input
t every_tool_answers_version
t exit_statuses_tell_usage_from_runtime_errors
t quiet_silences_all_but_errors
t progress_only_on_a_terminal
t embeddings_are_one_line_each_and_their_own
t man_pages_format_without_warnings
