#!/bin/sh
# chat.sh: one turn of a conversation whose context lives in files.
#
#   chat.sh [-m MODEL] [-n N] CONV 'what the user says'
#
# CONV.kv is the KV snapshot and CONV.ids the token ids it holds.  Each
# turn computes only its new tokens: llm-decode resumes from CONV.kv.
# To fork a conversation, copy its files:
#
#   for f in a.*; do cp "$f" "b.${f#a.}"; done   # b continues from where a is
#
# (llm-chat is the interactive form: a turn a line, the cache in memory.)
#
# A model with a chat template (SmolLM2-Instruct, Qwen2, Llama 3, Phi-3,
# Gemma, TinyLlama's Zephyr) keeps the messages in CONV.chat, one
# "ROLE<TAB>TEXT" a line, and llm-tokenize --chat renders them with the
# model's own template each turn: the rendering of the earlier turns does
# not change, so the snapshot covers it.  Other models (TinyStories) get
# plain text appended to the story.
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

# escape TEXT for a ROLE<TAB>TEXT line: backslashes, tabs and newlines
escape() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/	/\\t/g' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }'; }

# A turn works on new files and puts them in place only when it succeeds:
# a failed turn exits non-zero and leaves the conversation as it was.
# beside the conversation, so that each mv is a rename
tmp=$(mktemp -d "$(dirname "$conv")/.chat.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if printf 'user\tx\n' | llm-tokenize -m "$model" --chat >/dev/null 2>&1; then
	chat=1
	[ ! -f "$conv.chat" ] || cp "$conv.chat" "$tmp/chat"
	printf 'user\t%s\n' "$(escape "$text")" >>"$tmp/chat"
	llm-tokenize -m "$model" --chat <"$tmp/chat" >"$tmp/ids"
else
	chat=0
	# (SentencePiece puts the space between turns by itself.)
	bos=; [ -s "$conv.ids" ] 2>/dev/null && bos=--no-bos
	[ ! -f "$conv.ids" ] || cp "$conv.ids" "$tmp/ids"
	llm-tokenize -m "$model" $bos "$text" >>"$tmp/ids"
fi

resume=
[ -f "$conv.kv" ] && resume="--kv-in $conv.kv"
# The reply streams to the terminal while its ids are kept for the next
# turn; llm-decode's status comes through the pipe in a file.
{
	llm-decode -m "$model" -n "$n" $resume --kv-out "$tmp/kv" --stats-json <"$tmp/ids" \
		2>"$tmp/stats"
	echo $? >"$tmp/status"
} | tee "$tmp/reply" | llm-tokenize -m "$model" -d
if [ "$(cat "$tmp/status")" != 0 ]; then
	grep -v '^{' "$tmp/stats" >&2
	echo "chat.sh: the turn failed; $conv is as it was" >&2
	exit 1
fi
if [ $chat -eq 1 ]; then
	printf 'assistant\t%s\n' "$(escape "$(llm-tokenize -m "$model" -d <"$tmp/reply")")" >>"$tmp/chat"
	mv "$tmp/chat" "$conv.chat"
else
	cat "$tmp/reply" >>"$tmp/ids"
fi
# the snapshot last: each file is whole, and the ids never run ahead of it
mv "$tmp/ids" "$conv.ids"
mv "$tmp/stats" "$conv.stats"
mv "$tmp/kv" "$conv.kv"
sed -n 's/.*"reused_tokens":\([0-9]*\),"computed_tokens":\([0-9]*\).*/(reused \1 tokens from the snapshot, computed \2)/p' "$conv.stats" >&2
