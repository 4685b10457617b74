#!/bin/sh
# batch.sh: prompts from a file, one per line, each continued by one
# llm-decode --lines process that decodes LINES of them at a time.
#
#   batch.sh [-m MODEL] [-n N] [-s SEED] [-P LINES] [-S HOSTS] PROMPTS OUTDIR
#
# Line k of PROMPTS (empty lines skipped) gives OUTDIR/k.txt, the prompt
# and its continuation.  The prompts are tokenized a line each, the ids
# decoded together in one process (each line's continuation is the one a
# run of that line alone gives, with the seed -s if given), and each
# line of ids turned back into text.  With -S, GNU parallel sends
# chunks of 256 lines to the machines HOSTS names (its --sshlogin
# syntax, as 2/host1,2/host2), one --lines process a chunk, and keeps
# their output in order; the machines need the tools and the model at
# the same paths.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$here/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-$here/../../shared/models/stories260K.gguf}
n=40
lines=16
hosts=
seed=
usage() {
	echo "usage: batch.sh [-m MODEL] [-n N] [-s SEED] [-P LINES] [-S HOSTS] PROMPTS OUTDIR" >&2
	exit 2
}
while getopts m:n:s:P:S: opt; do
	case $opt in
	m) model=$OPTARG ;;
	n) n=$OPTARG ;;
	s) seed="--seed $OPTARG" ;;
	P) lines=$OPTARG ;;
	S) hosts=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
[ -f "$model" ] || { echo "batch.sh: $model: no such model (-m, or LLM_MODEL)" >&2; exit 1; }
mkdir -p "$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a line of ids a prompt; the text goes to llm-tokenize on its standard
# input, so that no quote or space of it meets a shell
grep -v '^[[:space:]]*$' "$1" | while IFS= read -r prompt; do
	printf '%s' "$prompt" | llm-tokenize -m "$model" | tr '\n' ' '
	echo
done >"$tmp/prompts.ids"

decode="llm-decode -m $model -n $n $seed --lines -P $lines -q"
if [ -n "$hosts" ]; then
	parallel --pipe --keep-order -N 256 --sshlogin "$hosts" "$decode" \
		<"$tmp/prompts.ids" >"$tmp/out.ids"
else
	$decode <"$tmp/prompts.ids" >"$tmp/out.ids"
fi
[ "$(wc -l <"$tmp/out.ids")" -eq "$(wc -l <"$tmp/prompts.ids")" ] ||
	{ echo "batch.sh: a line of output is missing" >&2; exit 1; }

# prompt and continuation, back to text
paste -d ' ' "$tmp/prompts.ids" "$tmp/out.ids" | {
	k=0
	while IFS= read -r ids; do
		k=$((k + 1))
		echo "$ids" | tr ' ' '\n' | grep . | llm-tokenize -m "$model" -d >"$2/$k.txt.tmp"
		mv "$2/$k.txt.tmp" "$2/$k.txt"
	done
}
