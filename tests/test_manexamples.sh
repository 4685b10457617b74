#!/bin/sh
# Every man page's examples, run as printed: each literal block that is a
# command (the others show output or a format) runs in a directory with
# the files the examples name: m.gguf and stories260K.gguf are the
# TinyStories model of ../shared, the chat model is a random one with its
# template, and the texts are short ones of our own.  A transcript block
# ("$ command" then its output) must print that output.
. tests/lib.sh

man_page_examples_work_as_printed() {
	need "$SHARED/models/stories260K.gguf"
	command -v python3 >/dev/null || fail "python3 is needed to read the pages"
	d="$TMP/ex"
	rm -rf "$d" "$TMP/blocks"
	mkdir -p "$d/questions"
	st=$(cd "$SHARED/models" && pwd)/stories260K.gguf
	ln -s "$st" "$d/m.gguf"
	ln -s "$st" "$d/stories260K.gguf"
	"$PWD/tools/mkmodel" -C chatml -o "$d/SmolLM2-135M-Instruct-Q8_0.gguf" || fail "mkmodel"
	printf 'Once upon a time, a cat sat in the sun. It was happy.\n' >"$d/essay.txt"
	printf 'The cake was good.\nThe dog was sad.\n' >"$d/reviews.txt"
	printf 'Lily had a red ball. She liked to play with it in the park.\n' >"$d/manual.txt"
	printf 'What did Lily have?\n' >"$d/questions/ball.txt"
	printf 'Where did she play?\n' >"$d/questions/park.txt"
	printf '1 403 407 261 378\n1 403 407 261 378 411\n' >"$d/candidates.ids"
	cp "$d/candidates.ids" "$d/prompts.ids"
	seq 1 300 | awk '{ print $1 % 400 + 3 }' >"$d/long.ids"
	(cd "$d" && PATH="$BIN:$PATH" && llm-tokenize -m m.gguf 'Once upon a time' |
		llm-decode -m m.gguf -n 120 --ignore-eos --greedy --kv-out chat.kv >/dev/null) || fail "chat.kv"
	python3 - "$TMP/blocks" man/*.[157] >/dev/null <<'EOF' || fail "cannot read the pages"
import os, re, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
n = 0
for page in sys.argv[2:]:
	lines, block, on = open(page).read().split("\n"), [], False
	for l in lines:
		if l.startswith(".Bd -literal"):
			on, block = True, []
		elif l.startswith(".Ed") and on:
			on = False
			text = "\n".join(block).replace("\\e", "\\")
			first = block[0] if block else ""
			kind = "transcript" if first.startswith("$ ") else \
			    "command" if re.match(r"(llm-|echo |for |q=|m=|printf )", first) else None
			if kind:
				n += 1
				name = "%02d-%s.%s" % (n, os.path.basename(page), kind)
				open(os.path.join(out, name), "w").write(text + "\n")
		elif on:
			block.append(l)
EOF
	n=$(ls "$TMP/blocks" | wc -l)
	[ "$n" -ge 15 ] || fail "only $n examples found"
	for f in "$TMP/blocks"/*; do
		case "$f" in
		*.transcript)
			# "$ command" lines and the output that follows each
			awk '/^\$ / { n++; sub(/^\$ /, ""); print > (FILENAME ".cmd" n); next }
				{ print > (FILENAME ".want" n) }' "$f"
			for c in "$f".cmd*; do
				k=${c##*.cmd}
				(cd "$d" && PATH="$BIN:$PATH" sh "$c") >"$TMP/got" 2>"$TMP/err" ||
					fail "$(basename "$f"): exit $?: $(cat "$c"): $(cat "$TMP/err")"
				cmp -s "$TMP/got" "$f.want$k" || fail "$(basename "$f"): $(cat "$c") printed $(cat "$TMP/got")"
			done
			;;
		*)
			# a tool the machine lacks (jq) leaves its example out
			if grep -q '| jq ' "$f" && ! command -v jq >/dev/null; then
				grep -v '| jq ' "$f" >"$f.nojq" && mv "$f.nojq" "$f"
			fi
			(cd "$d" && PATH="$BIN:$PATH" sh "$f") >"$TMP/out" 2>"$TMP/err"
			rc=$?
			# a grep at the end that finds nothing (m.gguf here has no chat tokens) is no failure
			[ $rc -eq 0 ] || { [ $rc -eq 1 ] && tail -n 1 "$f" | grep -q '| grep ' && [ ! -s "$TMP/err" ]; } ||
				fail "$(basename "$f"): exit $rc: $(cat "$f") -- $(tail -n 3 "$TMP/err")"
			;;
		esac
	done
}

t man_page_examples_work_as_printed
