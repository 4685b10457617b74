#!/bin/sh
# llm-decode --lines: many prompts in one process, decoded together, and
# snapshots read in place.  Each line's output must be exactly that of a
# run of the line alone.
. tests/lib.sh
D="$BIN/llm-decode"

model() {	# model SHAPE TYPE [EOS]: a fixture, made once
	f="$TMP/$1-$2${3:+-e$3}.gguf"
	[ -f "$f" ] || "$PWD/tools/mkmodel" -s "$1" -t "$2" -c 2048 ${3:+-E $3} -o "$f" >&2 ||
		fail "mkmodel $1 $2"
	echo "$f"
}

# lines N SEED: N lines of 1 to 70 ids in 1..319, of different lengths.
lines() {
	awk -v n="$1" -v s="$2" 'BEGIN { x = s; for (i = 0; i < n; i++) {
		x = (x * 75 + 74) % 65537; len = 1 + x % 70; line = ""
		for (j = 0; j < len; j++) { x = (x * 75 + 74) % 65537; line = line (j ? " " : "") 1 + x % 319 }
		print line } }'
}

# solo FILE OPTIONS...: each line of FILE run alone, its ids joined on one line.
solo() {
	_in=$1
	shift
	while IFS= read -r l; do
		echo "$l" | "$D" "$@" | tr '\n' ' ' | sed 's/ $//'
		echo
	done <"$_in"
}

every_line_equals_its_solo_run() {
	lines 11 3 >"$TMP/in"
	# the model ends a sequence at id 7 now and then: lines end at different times
	for m in small:q8_0:23 small:f32:23 small:q4_K_mix; do
		f=$(model $(echo "$m" | tr ':' ' '))
		for c in f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0 \
		    win:--kv-type,q8_0,--ctx,128,--kv-window,64; do
			opts=$(echo "${c#*:}" | tr ',' ' ')
			for s in "--temp 1.5 --seed 11" "--greedy"; do
				# shellcheck disable=SC2086
				"$D" -m "$f" -q -n 24 $s $opts --lines -P 4 <"$TMP/in" >"$TMP/got" ||
					fail "$m ${c%%:*} $s: exit $?"
				# shellcheck disable=SC2086
				solo "$TMP/in" -m "$f" -q -n 24 $s $opts >"$TMP/want"
				[ "$(wc -l <"$TMP/got")" -eq 11 ] || fail "$m ${c%%:*}: $(wc -l <"$TMP/got") lines"
				cmp "$TMP/want" "$TMP/got" || fail "$m ${c%%:*} $s: a line differs from its solo run"
				[ "$m:${c%%:*}:$s" = "small:q8_0:23:f32:--greedy" ] &&
					cp "$TMP/got" "$TMP/varied"
			done
		done
	done
	# the lines ended at different times (the end-of-sequence id, or -n)
	[ "$(awk '{ print NF }' "$TMP/varied" | sort -u | wc -l)" -gt 1 ] || fail "every line had one length"
}

parallel_and_threads_change_nothing() {
	f=$(model small q8_0 7)
	lines 20 5 >"$TMP/in"
	"$D" -m "$f" -q -n 16 --temp 1 --seed 3 --lines -P 1 -t 1 <"$TMP/in" >"$TMP/a" || fail "exit $?"
	for p in 3 20 128; do
		"$D" -m "$f" -q -n 16 --temp 1 --seed 3 --lines -P $p -t 2 <"$TMP/in" >"$TMP/b" ||
			fail "-P $p: exit $?"
		cmp "$TMP/a" "$TMP/b" || fail "-P $p gives other ids"
	done
	[ "$(wc -l <"$TMP/a")" -eq 20 ] || fail "$(wc -l <"$TMP/a") lines"
}

score_lines_equal_solo_scores() {
	f=$(model small f32)
	lines 6 9 >"$TMP/in"
	echo >>"$TMP/in"	# no tokens: nothing scored
	"$D" -m "$f" --score --lines -P 3 <"$TMP/in" >"$TMP/got" || fail "exit $?"
	[ "$(wc -l <"$TMP/got")" -eq 7 ] || fail "$(wc -l <"$TMP/got") lines"
	i=0
	while IFS= read -r l; do
		i=$((i + 1))
		got=$(sed -n "${i}p" "$TMP/got")
		set -- $got
		[ $# -eq 3 ] || fail "line $i: '$got' is not a sum, a count and a perplexity"
		n=$(echo "$l" | wc -w)
		if [ "$n" -lt 2 ]; then
			[ "$2" -eq 0 ] && [ "$3" = nan ] || fail "line $i of $n tokens: '$got'"
			continue
		fi
		echo "$l" | "$D" -m "$f" --score 2>"$TMP/err" >"$TMP/lp" || fail "solo exit $?"
		want=$(sed -n 's/^scored \([0-9]*\) tokens, perplexity \(.*\)$/\1 \2/p' "$TMP/err")
		[ "$2 $3" = "$want" ] || fail "line $i: '$got', alone '$want'"
		# the sum is that of the per-token log-probabilities (each printed to 1e-6)
		awk -v s="$1" '{ t += $1 } END { d = t - s; if (d < 0) d = -d; exit !(d < 1e-6 * NR + 1e-9) }' \
			"$TMP/lp" || fail "line $i: sum $1 is not that of $(tr '\n' ' ' <"$TMP/lp")"
	done <"$TMP/in"
}

bad_lines_among_good_ones() {
	f=$(model small q8_0)
	printf '1 2 3\n4 x 5\n6 7\n9999999\n%s\n8 9 10\n' "$(awk 'BEGIN { for (i = 1; i <= 150; i++)
		printf "%d%s", i, i < 150 ? " " : "" }')" >"$TMP/in"
	"$D" -m "$f" -n 5 --greedy --ctx 100 --lines -P 2 <"$TMP/in" >"$TMP/got" 2>"$TMP/err"
	rc=$?
	[ $rc -eq 1 ] || fail "exit $rc, not 1"
	[ "$(wc -l <"$TMP/got")" -eq 6 ] || fail "$(wc -l <"$TMP/got") output lines, not 6"
	grep -q '^llm-decode: stdin: line 2: ' "$TMP/err" || fail "line 2 not named: $(cat "$TMP/err")"
	grep -q '^llm-decode: stdin: line 4: ' "$TMP/err" || fail "line 4 not named: $(cat "$TMP/err")"
	grep -q '^llm-decode: stdin: line 5: .*do not fit max_ctx 100' "$TMP/err" ||
		fail "line 5 not named: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/err")" -eq 3 ] || fail "stderr: $(cat "$TMP/err")"
	for i in 2 4 5; do
		[ -z "$(sed -n "${i}p" "$TMP/got")" ] || fail "bad line $i has output"
	done
	for i in 1 3 6; do
		want=$(sed -n "${i}p" "$TMP/in" | "$D" -m "$f" -n 5 --greedy --ctx 100 | tr '\n' ' ' | sed 's/ $//')
		[ "$(sed -n "${i}p" "$TMP/got")" = "$want" ] || fail "good line $i differs"
	done
	# a line that runs past the context keeps the tokens it generated
	echo "1 2 3" | "$D" -m "$f" -n 50 --greedy --ignore-eos --ctx 20 --lines >"$TMP/got" 2>"$TMP/err"
	[ $? -eq 1 ] || fail "context full: exit status"
	grep -q 'line 1: context full.*(18 tokens generated)' "$TMP/err" || fail "$(cat "$TMP/err")"
	echo "1 2 3" | "$D" -m "$f" -n 50 --greedy --ignore-eos --ctx 20 2>/dev/null | tr '\n' ' ' |
		sed 's/ $//' >"$TMP/want"
	[ "$(wc -w <"$TMP/want")" -eq 18 ] || fail "alone: $(cat "$TMP/want")"
	[ "$(cat "$TMP/want")" = "$(cat "$TMP/got")" ] || fail "$(cat "$TMP/got")"
}

lines_are_written_in_order_as_they_are_done() {
	f=$(model small q8_0)
	# the input stays open: the first line's output must come before it ends
	rm -f "$TMP/got"	# before the job starts, which may truncate it later
	{ echo "1 2 3"; sleep 30; } | "$D" -m "$f" -n 3 --greedy --lines >"$TMP/got" 2>"$TMP/err" &
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		[ "$(wc -w <"$TMP/got" 2>/dev/null)" = 3 ] && break
		sleep 0.5
	done
	pkill -f "sleep 30" 2>/dev/null
	kill $! 2>/dev/null
	[ "$(wc -w <"$TMP/got")" -eq 3 ] || fail "no line while the input was open: $(cat "$TMP/got")"
	# a long line first, short ones after: the order is the input's
	{ lines 1 2 | awk '{ s = $0; for (i = 0; i < 5; i++) s = s " " $0; print s }'; echo 5; echo 6; } >"$TMP/in"
	"$D" -m "$f" -n 4 --greedy --ignore-eos --lines -P 3 <"$TMP/in" >"$TMP/got" || fail "exit $?"
	solo "$TMP/in" -m "$f" -n 4 --greedy --ignore-eos >"$TMP/want"
	cmp "$TMP/want" "$TMP/got" || fail "out of order"
}

early_close_of_stdout() {
	f=$(model small q8_0)
	lines 200 6 >"$TMP/in"
	{ "$D" -m "$f" -n 20 --greedy --lines -P 4 <"$TMP/in" 2>"$TMP/err"; echo $? >"$TMP/rc"; } |
		head -n 1 >"$TMP/got"
	[ "$(cat "$TMP/rc")" -eq 141 ] || fail "exit $(cat "$TMP/rc"), not 141"
	[ ! -s "$TMP/err" ] || fail "stderr: $(cat "$TMP/err")"
	[ "$(wc -l <"$TMP/got")" -eq 1 ] || fail "$(cat "$TMP/got")"
}

# A snapshot shared by lines that diverge at different positions: inside
# it, at its end, after it, and not at all; every cache type.
a_shared_snapshot_gives_solo_results() {
	f=$(model small q8_0 7)
	printf '%s' "$(lines 3 8 | tr '\n' ' ' | sed 's/ $//')" >"$TMP/prefix"
	np=$(wc -w <"$TMP/prefix")
	p=$(cat "$TMP/prefix")
	printf '%s\n' "$p 5 6 7 8" "$p" "$(echo "$p" | cut -d' ' -f1-40)" \
	    "$(echo "$p" | cut -d' ' -f1-$((np - 10))) 1 2" "9 9 9" "$p 11 12" >"$TMP/in"
	for c in f32: f16:--kv-type,f16 q8_0:--kv-type,q8_0 q4_0:--kv-type,q4_0 kq8vq4:--kv-type-k,q8_0,--kv-type-v,q4_0; do
		opts=$(echo "${c#*:}" | tr ',' ' ')
		# shellcheck disable=SC2086
		"$D" -m "$f" -q -n 0 $opts --kv-out "$TMP/p.kv" <"$TMP/prefix" || fail "${c%%:*}: save"
		# shellcheck disable=SC2086
		"$D" -m "$f" -q -n 12 --temp 1.3 --seed 2 $opts --kv-in "$TMP/p.kv" --lines -P 3 \
			--stats-json <"$TMP/in" >"$TMP/got" 2>"$TMP/st" || fail "${c%%:*}: exit $?"
		# shellcheck disable=SC2086
		solo "$TMP/in" -m "$f" -q -n 12 --temp 1.3 --seed 2 $opts >"$TMP/want"
		cmp "$TMP/want" "$TMP/got" || fail "${c%%:*}: a resumed line differs from its solo run"
		json_assert "$TMP/st" "d['lines'] == 6 and d['reused_tokens'] > 2 * $np"
	done
}

# --kv-in maps the snapshot: the cache's own memory holds the new
# positions only (its resident pages, by mincore), not a copy.
resume_reads_the_snapshot_in_place() {
	f=$(model small f32)
	lines 40 1 | tr '\n' ' ' | sed 's/ $//' >"$TMP/prefix"
	np=$(wc -w <"$TMP/prefix")
	[ "$np" -gt 1000 ] || fail "prefix of $np"
	"$D" -m "$f" -q -n 0 --kv-out "$TMP/p.kv" <"$TMP/prefix" || fail "save"
	size=$(wc -c <"$TMP/p.kv")
	{ cat "$TMP/prefix"; echo " 1 2 3"; } >"$TMP/in"
	"$D" -m "$f" -q -n 4 --greedy --kv-in "$TMP/p.kv" --stats-json <"$TMP/in" >"$TMP/a" 2>"$TMP/st" ||
		fail "exit $?"
	json_assert "$TMP/st" "d['reused_tokens'] == $np and d['kv_shared_bytes'] > 0.95 * $size and \
d['kv_resident_bytes'] < 0.05 * $size and d['kv_bytes'] < 0.6 * $size"
	"$D" -m "$f" -q -n 4 --greedy --stats-json <"$TMP/in" >"$TMP/b" 2>"$TMP/st" || fail "exit $?"
	json_assert "$TMP/st" "d['kv_shared_bytes'] == 0 and d['kv_resident_bytes'] > 0.9 * $size"
	cmp "$TMP/a" "$TMP/b" || fail "resumed ids differ"
	# a damaged block is refused, whatever part of the file is used
	cp "$TMP/p.kv" "$TMP/bad.kv"
	printf 'X' | dd of="$TMP/bad.kv" bs=1 seek=$((size - 5000)) conv=notrunc 2>/dev/null
	echo 1 2 | "$D" -m "$f" -n 1 --kv-in "$TMP/bad.kv" --lines >/dev/null 2>"$TMP/err" &&
		fail "a damaged snapshot was read"
	grep -q 'checksum mismatch' "$TMP/err" || fail "$(cat "$TMP/err")"
}

lines_options_are_checked() {
	f=$(model small q8_0)
	for o in "-P 2" "--lines -P 0" "--lines -P 129" "--lines --kv-out $TMP/x.kv" "--lines --warmup" \
	    "--embed --lines -P 2"; do
		# shellcheck disable=SC2086
		echo 1 | "$D" -m "$f" $o >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "$o: not a usage error"
		[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$o: $(cat "$TMP/err")"
	done
	[ ! -e "$TMP/x.kv" ] || fail "a snapshot was written"
	# no input: no output, success
	"$D" -m "$f" --lines </dev/null >"$TMP/got" || fail "empty input: exit $?"
	[ ! -s "$TMP/got" ] || fail "empty input gave output"
	# -n 0: an empty line per line
	printf '1 2\n3\n' | "$D" -m "$f" -n 0 --lines >"$TMP/got" || fail "-n 0: exit $?"
	[ "$(cat "$TMP/got")" = "$(printf '\n\n')" ] || fail "-n 0: '$(cat "$TMP/got")'"
}

# The man page's classification loop, run as printed (its model and file
# names aside): a label for every line, in order.
the_man_pages_classification_loop_works() {
	m="$SHARED/models/stories260K.gguf"
	need "$m"
	awk '/^Label every line/ { on = 1 } on && /^\.Bd/ { inb = 1; next } inb && /^\.Ed/ { exit }
		inb { gsub(/\\e/, "\\"); print }' "$PWD/man/llm-decode.1" >"$TMP/loop.sh"
	grep -q 'llm-decode -m m.gguf --lines' "$TMP/loop.sh" || fail "no loop in the man page: $(cat "$TMP/loop.sh")"
	printf 'The cake was good.\nThe dog was sad.\nI like the sun.\n' >"$TMP/reviews.txt"
	(cd "$TMP" && PATH="$BIN:$PATH" && ln -sf "$m" m.gguf && sh loop.sh) >"$TMP/labels" ||
		fail "exit $?"
	[ "$(wc -l <"$TMP/labels")" -eq 3 ] || fail "$(cat "$TMP/labels")"
	cut -f2 "$TMP/labels" | cmp - "$TMP/reviews.txt" || fail "the reviews are not in order"
	# each label is the review's own next token, computed alone
	q=$("$BIN/llm-tokenize" -m "$m" --no-bos ' Positive or negative? Answer:')
	while IFS= read -r r; do
		{ "$BIN/llm-tokenize" -m "$m" "$r"; echo "$q"; } | "$BIN/llm-decode" -m "$m" -n 1 --greedy |
			"$BIN/llm-tokenize" -m "$m" -d
	done <"$TMP/reviews.txt" >"$TMP/want"
	cut -f1 "$TMP/labels" | cmp - "$TMP/want" || fail "labels: $(cut -f1 "$TMP/labels" | tr '\n' '|')"
}

# The sampling controls apply to each line as to the line alone, and
# change what is generated.
sampling_controls_apply_per_line() {
	f=$(model small q8_0 23)
	lines 9 7 >"$TMP/in"
	for s in "--temp 1.2 --seed 4 --min-p 0.05" "--greedy --repeat-penalty 1.5 --repeat-last-n 16" \
	    "--temp 0.9 --seed 2 --top-k 0 --min-p 0.1 --repeat-penalty 1.3"; do
		# shellcheck disable=SC2086
		"$D" -m "$f" -q -n 30 $s --lines -P 4 <"$TMP/in" >"$TMP/got" || fail "$s: exit $?"
		# shellcheck disable=SC2086
		solo "$TMP/in" -m "$f" -q -n 30 $s >"$TMP/want"
		cmp "$TMP/want" "$TMP/got" || fail "$s: a line differs from its solo run"
	done
	"$D" -m "$f" -q -n 30 --greedy --lines <"$TMP/in" >"$TMP/plain"
	cmp -s "$TMP/plain" "$TMP/got" && fail "the controls changed nothing"
	# the penalty makes greedy repeat itself less
	"$D" -m "$f" -q -n 30 --greedy --repeat-penalty 1.5 --repeat-last-n 16 --lines <"$TMP/in" >"$TMP/pen"
	rep() { awk '{ delete seen; for (i = 1; i <= NF; i++) { if ($i in seen) r++; seen[$i] } } END { print r + 0 }' "$1"; }
	[ "$(rep "$TMP/pen")" -lt "$(rep "$TMP/plain")" ] || fail "repeats: $(rep "$TMP/pen") against $(rep "$TMP/plain")"
	for o in "--greedy --min-p 0.1" "--score --repeat-penalty 1.2" "--repeat-last-n 8"; do
		# shellcheck disable=SC2086
		echo 1 2 3 | "$D" -m "$f" $o >/dev/null 2>"$TMP/err"
		[ $? -eq 2 ] || fail "$o: not a usage error"
	done
}

# --stop: generation ends where the text ends with a stop string, whose
# tokens are not written; alone and in --lines alike.
stop_strings_end_generation() {
	m="$SHARED/models/stories260K.gguf"
	need "$m"
	T="$BIN/llm-tokenize"
	"$T" -m "$m" 'Once upon a time' | tr '\n' ' ' >"$TMP/p"
	echo >>"$TMP/p"
	"$D" -m "$m" -n 80 --greedy <"$TMP/p" | "$T" -m "$m" -d -n >"$TMP/full"
	grep -q 'Lily. She' "$TMP/full" || fail "the story changed: $(cat "$TMP/full")"
	for st in Lily She ' park' 'ball. '; do
		"$D" -m "$m" -n 80 --greedy --stop "$st" <"$TMP/p" >"$TMP/ids" || fail "--stop '$st': exit $?"
		"$T" -m "$m" -d -n <"$TMP/ids" >"$TMP/got"
		tr '\n' ' ' <"$TMP/ids" | sed 's/ $//' >"$TMP/ids1"
		echo >>"$TMP/ids1"
		"$D" -m "$m" -n 80 --greedy --stop "$st" --lines <"$TMP/p" | cmp - "$TMP/ids1" ||
			fail "--stop '$st': --lines differs from alone"
		python3 -c 'import sys
full = open(sys.argv[1]).read(); got = open(sys.argv[2]).read(); st = sys.argv[3]
i = full.find(st)
assert i >= 0, "no stop text in the story"
assert full.startswith(got), "not a prefix: %r" % got
assert st not in got, "the stop text was written: %r" % got
assert len(got) <= i and i - len(got) < 16, "stopped at %d, the text at %d" % (len(got), i)' \
			"$TMP/full" "$TMP/got" "$st" || fail "--stop '$st': $(cat "$TMP/got")"
	done
	# two strings: the first that comes
	"$D" -m "$m" -n 80 --greedy --stop park --stop She <"$TMP/p" | "$T" -m "$m" -d >"$TMP/got"
	[ "$(cat "$TMP/got")" = ", there was a little girl named Lily." ] || fail "two: $(cat "$TMP/got")"
	echo 1 | "$D" -m "$m" --stop '' >/dev/null 2>&1
	[ $? -eq 2 ] || fail "an empty --stop accepted"
}

t every_line_equals_its_solo_run
t parallel_and_threads_change_nothing
t score_lines_equal_solo_scores
t bad_lines_among_good_ones
t lines_are_written_in_order_as_they_are_done
t early_close_of_stdout
t a_shared_snapshot_gives_solo_results
t resume_reads_the_snapshot_in_place
t lines_options_are_checked
t the_man_pages_classification_loop_works
t sampling_controls_apply_per_line
t stop_strings_end_generation
