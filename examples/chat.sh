#!/bin/sh
# chat.sh: one turn of a conversation whose context lives in files.
#
#   chat.sh [-m MODEL] [-n N] CONV 'what the user says'
#
# CONV.kv is the KV snapshot and CONV.ids the conversation's token ids.
# Each turn computes only its new tokens: llm-decode resumes from CONV.kv.
# To fork a conversation, copy both files:
#
#   cp a.kv b.kv; cp a.ids b.ids     # b now continues from where a is
#
# Models with a ChatML vocabulary (SmolLM2-Instruct, Qwen2) get ChatML
# turns; others (TinyStories) get plain text appended to the story.
set -eu
bin=$(cd "$(dirname "$0")/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-../shared/models/stories260K.gguf}
n=60
while getopts m:n: opt; do
	case $opt in
	m) model=$OPTARG ;;
	n) n=$OPTARG ;;
	*) echo "usage: chat.sh [-m MODEL] [-n N] CONV TEXT" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: chat.sh [-m MODEL] [-n N] CONV TEXT" >&2; exit 2; }
conv=$1
text=$2

if llm-tokenize -m "$model" --vocab | cut -f3 | grep -qx '<|im_start|>'; then
	# ChatML: close the assistant's last turn, add the user's, open a new one.
	[ -s "$conv.ids" ] && prefix='<|im_end|>\n' || prefix=''
	printf "$prefix"'<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$text" |
		llm-tokenize -m "$model" --special --no-bos >"$conv.new"
else
	# (SentencePiece puts the space between turns by itself.)
	bos=; [ -s "$conv.ids" ] && bos=--no-bos
	llm-tokenize -m "$model" $bos "$text" >"$conv.new"
fi
cat "$conv.new" >>"$conv.ids"
rm -f "$conv.new"

resume=
[ -f "$conv.kv" ] && resume="--kv-in $conv.kv"
# The reply streams to the terminal while its ids are kept for the next turn.
llm-decode -m "$model" -n "$n" $resume --kv-out "$conv.kv" --stats-json <"$conv.ids" \
	2>"$conv.stats" | tee "$conv.reply" | llm-tokenize -m "$model" -d
echo
cat "$conv.reply" >>"$conv.ids"
rm -f "$conv.reply"
sed -n 's/.*"reused_tokens":\([0-9]*\),"computed_tokens":\([0-9]*\).*/(reused \1 tokens from the snapshot, computed \2)/p' "$conv.stats" >&2
