#!/bin/sh
# chat-demo.sh: two turns of a conversation kept in a snapshot, then a fork.
# Uses $LLM_MODEL, else ../shared/models/stories260K.gguf, else a random model.
set -eu
cd "$(dirname "$0")/.."
tmp=${TMPDIR:-/tmp}/llm-chat-demo.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
model=${LLM_MODEL:-../shared/models/stories260K.gguf}
if [ ! -f "$model" ]; then
	model=$tmp/random.gguf
	tools/mkmodel -o "$model"
	echo "(no model found: a random one, so the words are random)"
fi
chat="sh examples/chat.sh -m $model -n 30"

echo "--- turn 1"
$chat "$tmp/a" "Once upon a time, a cat"
echo "--- turn 2: only the new tokens are computed"
$chat "$tmp/a" "The cat was hungry."
echo "--- fork: copy the conversation, then take it two ways"
for f in "$tmp"/a.*; do cp "$f" "$tmp/b.${f##*/a.}"; done
$chat "$tmp/a" "It ate a fish."
$chat "$tmp/b" "It went to sleep."
echo "--- what each snapshot holds"
for c in a b; do
	printf '%s: ' $c
	cmd/llm-kvdump --tokens "$tmp/$c.kv" | cmd/llm-tokenize -m "$model" -d | tr '\n' ' '
	echo
done
