#!/bin/sh
# make check-ref: regenerate tests/ref/FAMILY.logp, llama.cpp's log-probabilities
# of tests/ref/stream.ids under each family's random model (tools/mkmodel -s
# small with the family's options, written the same way on every machine), with
# ../shared/ref/ref-score (f32 cache).  make check compares llm-decode --score
# with these files, so it needs neither ../shared nor llama.cpp.
set -eu
REF=${REF_SCORE:-../shared/ref/ref-score}
if [ ! -x "$REF" ]; then
	echo "check-ref: $REF not present: the committed tests/ref/*.logp stay as they are" >&2
	exit 0
fi
tmp=${TMPDIR:-/tmp}/llm-mkref.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# a fixed 200-token stream over the fixtures' 320-token vocabulary
awk 'BEGIN { x = 7; for (i = 0; i < 200; i++) { x = (x * 1103515245 + 12345) % 2147483648; print int(x / 65536) % 320 } }' \
	>tests/ref/stream.ids
while read -r name opts; do
	tools/mkmodel -s small $opts -o "$tmp/$name.gguf"
	"$REF" "$tmp/$name.gguf" <tests/ref/stream.ids >tests/ref/$name.logp 2>/dev/null
	echo "check-ref: tests/ref/$name.logp: $(wc -l <tests/ref/$name.logp) log-probabilities (mkmodel -s small $opts)"
done <<'LIST'
llama
llama3 -R
qwen2 -A qwen2
qwen3 -A qwen3
qwen3moe -A qwen3moe
phi3 -A phi3
gemma3 -A gemma3
gpt-oss -A gpt-oss
gpt-oss-yarn -A gpt-oss -Y
LIST
