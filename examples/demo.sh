#!/bin/sh
# make demo: generate a story with no download.
# The model is $LLM_MODEL if set, else ../shared/models/stories260K.gguf if
# present, else a small random model written by the project's own GGUF writer.
set -eu
cd "$(dirname "$0")/.."
bin=cmd
mkdir -p tests/tmp
model=${LLM_MODEL:-}
random=0
if [ -z "$model" ]; then
	model=../shared/models/stories260K.gguf
	if [ ! -f "$model" ]; then
		model=tests/tmp/demo-random.gguf
		tests/mkmodel -t q8_0 -o "$model"
		random=1
	fi
fi
prompt=${LLM_PROMPT:-Once upon a time}

echo "model:  $model"
if [ $random -eq 1 ]; then
	echo "note:   no real model was found, so this is a random model: the text is random too."
	echo "        Set LLM_MODEL to a Llama GGUF (SmolLM2, TinyLlama, TinyStories) for a real one."
fi
echo "prompt: $prompt"
echo
if [ -x $bin/llm-tokenize ]; then
	$bin/llm-tokenize -m "$model" "$prompt" >tests/tmp/demo-prompt
	printf '%s' "$prompt"
	$bin/llm-decode -m "$model" -n 200 --greedy --stats <tests/tmp/demo-prompt 2>tests/tmp/demo-stats |
		$bin/llm-tokenize -m "$model" -d
	echo
else
	echo 1 | $bin/llm-decode -m "$model" -n 64 --greedy --stats 2>tests/tmp/demo-stats | tr '\n' ' '
	echo
fi
echo
cat tests/tmp/demo-stats
