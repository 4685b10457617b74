#!/bin/sh
# batch.sh: prompts from a file, one per line, each continued by one
# llm-decode --lines process that decodes LINES of them at a time.
#
#   batch.sh [-m MODEL] [-n N] [-s SEED] [-P LINES] [-S HOSTS [-C CHUNK]] PROMPTS OUTDIR
#
# Line k of PROMPTS (empty lines skipped) gives OUTDIR/k.txt, the prompt
# and its continuation.  The prompts are tokenized a line each, the ids
# decoded together in one process (each line's continuation is the one a
# run of that line alone gives, with the seed -s if given), and each
# line of ids turned back into text.  With -S, GNU parallel sends
# chunks of CHUNK lines (256) to the machines HOSTS names (its --sshlogin
# syntax, as 2/host1,2/host2, or a whole ssh command and host,
# "1/ssh -p 2222 host3"), one --lines process a chunk, and keeps their
# output in order; the machines need the tools and the model at the same
# paths.  A chunk whose machine fails (down, or its process fails) goes
# to another, twice at most; one that fails everywhere ends the run with
# exit 1, naming the machines it failed on, after the texts of the lines
# before it are written.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$here/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-$here/../../shared/models/stories260K.gguf}
n=40
lines=16
hosts=
chunk=256
seed=
usage() {
	echo "usage: batch.sh [-m MODEL] [-n N] [-s SEED] [-P LINES] [-S HOSTS [-C CHUNK]] PROMPTS OUTDIR" >&2
	exit 2
}
while getopts m:n:s:P:S:C: opt; do
	case $opt in
	m) model=$OPTARG ;;
	n) n=$OPTARG ;;
	s) seed="--seed $OPTARG" ;;
	P) lines=$OPTARG ;;
	S) hosts=$OPTARG ;;
	C) chunk=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
[ -f "$model" ] || { echo "batch.sh: $model: no such model (-m, or LLM_MODEL)" >&2; exit 1; }
model=$(cd "$(dirname "$model")" && pwd)/$(basename "$model")	# whole, for the other machines
mkdir -p "$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# a line of ids a prompt; the text goes to llm-tokenize on its standard
# input, so that no quote or space of it meets a shell
grep -v '^[[:space:]]*$' "$1" | while IFS= read -r prompt; do
	printf '%s' "$prompt" | llm-tokenize -m "$model" | tr '\n' ' '
	echo
done >"$tmp/prompts.ids"

# the tool by its whole path, which the other machines share
decode="$(command -v llm-decode) -m $model -n $n $seed --lines -P $lines -q"
failed=0
if [ -n "$hosts" ]; then
	parallel --pipe --keep-order -N "$chunk" --sshlogin "$hosts" --retries 3 --halt now,fail=1 \
		--joblog "$tmp/jobs" "$decode" <"$tmp/prompts.ids" >"$tmp/out.ids" || failed=1
	# each failed try: its chunk and its machine
	awk -F '\t' 'NR > 1 && $7 != 0 { printf "batch.sh: chunk %s failed on %s (exit %s)\n", $1, $2, $7 }' \
		"$tmp/jobs" >&2
else
	$decode <"$tmp/prompts.ids" >"$tmp/out.ids" || failed=1
fi
got=$(wc -l <"$tmp/out.ids")
[ "$got" -eq "$(wc -l <"$tmp/prompts.ids")" ] || failed=1

# prompt and continuation, back to text: the whole lines that came back
head -n "$got" "$tmp/out.ids" >"$tmp/back.ids"
head -n "$got" "$tmp/prompts.ids" | paste -d ' ' - "$tmp/back.ids" | {
	k=0
	while IFS= read -r ids; do
		k=$((k + 1))
		echo "$ids" | tr ' ' '\n' | grep . | llm-tokenize -m "$model" -d >"$2/$k.txt.tmp"
		mv "$2/$k.txt.tmp" "$2/$k.txt"
	done
}
[ "$failed" -eq 0 ] || { echo "batch.sh: $got of $(wc -l <"$tmp/prompts.ids") lines came back" >&2; exit 1; }
