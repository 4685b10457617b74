#!/bin/sh
# The README's commands, run as printed: every indented block that starts
# with a command a user types at the tools (not the build's make targets,
# which make check itself is, nor the layout lists), in a directory laid
# out like the repository beside ../shared.  The chat block's model, which
# nothing downloads, is a random one with the same template.
. tests/lib.sh

readme_commands_work_as_printed() {
	need "$SHARED/models/stories260K.gguf"
	command -v python3 >/dev/null || fail "python3 is needed to read the README's blocks"
	rm -rf "$TMP/r" "$TMP/shared" "$TMP/blocks"
	mkdir -p "$TMP/r"
	ln -s "$(cd "$SHARED" && pwd)" "$TMP/shared"
	ln -s "$PWD/cmd" "$PWD/tools" "$TMP/r/"
	cp -r examples "$TMP/r/examples"
	rm -rf "$TMP/r/examples/answers" "$TMP/r/examples/prefix.ids" "$TMP/r/examples/prefix.kv"
	"$PWD/tools/mkmodel" -C chatml -o "$TMP/r/smollm2-135m-instruct-q8_0.gguf" || fail "mkmodel"
	python3 - "$PWD/README.md" "$TMP/blocks" >/dev/null <<'EOF' || fail "cannot read the README"
import os, re, sys
lines = open(sys.argv[1]).read().split("\n")
blocks, cur = [], []
for i, l in enumerate(lines + [""]):
	if l.startswith("    ") and (cur or i == 0 or lines[i - 1].strip() == ""):
		cur.append(l[4:])
	elif cur:
		blocks.append(cur)
		cur = []
os.makedirs(sys.argv[2], exist_ok=True)
n = 0
for b in blocks:
	if not re.match(r"(m=|c=|cmd/llm-[a-z]+ |for |echo |printf |make -C )", b[0]):
		continue
	n += 1
	open(os.path.join(sys.argv[2], "%02d.sh" % n), "w").write("\n".join(b) + "\n")
print(n)
EOF
	n=$(ls "$TMP/blocks" | wc -l)
	[ "$n" -ge 6 ] || fail "only $n command blocks found"
	# the blocks go on from each other, as a reader types them: $m stays set
	for f in "$TMP/blocks"/*.sh; do
		(cd "$TMP/r" && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
			sh -c "m=../shared/models/stories260K.gguf; . \"$f\"") >"$TMP/out" 2>"$TMP/err" ||
			fail "$(basename "$f"): exit $?: $(cat "$f") -- $(cat "$TMP/err")"
		[ -s "$TMP/out" ] || fail "$(basename "$f") printed nothing: $(cat "$f")"
	done
}

t readme_commands_work_as_printed
