#!/bin/sh
# make demo: generate a story with no download.
# The model is $LLM_MODEL if set, else ../shared/models/stories260K.gguf if
# present, else a small random model written by the project's own GGUF writer.
set -eu
cd "$(dirname "$0")/.."
bin=cmd
tmp=tests/tmp
mkdir -p $tmp
model=${LLM_MODEL:-}
random=0
if [ -z "$model" ]; then
	model=../shared/models/stories260K.gguf
	if [ ! -f "$model" ]; then
		model=$tmp/demo-random.gguf
		# mostly word pieces, few byte tokens: random, but readable
		tools/mkmodel -t q8_0 -v 4096 -o "$model"
		random=1
	fi
fi
prompt=${LLM_PROMPT:-Once upon a time}

echo "model:  $model"
if [ $random -eq 1 ]; then
	echo "note:   no real model was found, so this one has random weights and the text is random too."
	echo "        Set LLM_MODEL to a Llama GGUF (SmolLM2, TinyLlama, TinyStories) for a real one."
fi
echo "prompt: $prompt"
echo
# The prompt's ids go first through the detokenizer, so the text reads on;
# the generated ids follow as llm-decode writes them.
$bin/llm-tokenize -m "$model" "$prompt" >$tmp/demo-prompt
{
	cat $tmp/demo-prompt
	$bin/llm-decode -m "$model" -n 200 --greedy --stats <$tmp/demo-prompt 2>$tmp/demo-stats
} | $bin/llm-tokenize -m "$model" -d
echo
cat $tmp/demo-stats
