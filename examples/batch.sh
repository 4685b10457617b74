#!/bin/sh
# batch.sh: prompts from a file, one per line, each continued by its own
# llm-decode, P at a time.
#
#   batch.sh [-m MODEL] [-n N] [-P PROCS] PROMPTS OUTDIR
#
# Line k of PROMPTS gives OUTDIR/k.txt (the prompt and its continuation)
# and OUTDIR/k.kv (its snapshot, to go on from later).  The tools keep no
# state outside their files, so no engine of our own is needed to spread
# the work: xargs -P runs it on this machine's cores, and GNU parallel
# runs the very same worker on several machines that have the tools and
# the model at the same path:
#
#   ls OUTDIR/*.prompt | parallel --sshlogin 2/host1,2/host2 \
#       --transferfile {} --return '{.}.txt' --return '{.}.kv' --cleanup \
#       sh batch.sh -m MODEL -n N --one {}
set -eu
bin=$(cd "$(dirname "$0")/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-../shared/models/stories260K.gguf}
n=40
procs=2
one=
while getopts m:n:P:-: opt; do
	case $opt in
	m) model=$OPTARG ;;
	n) n=$OPTARG ;;
	P) procs=$OPTARG ;;
	-) [ "$OPTARG" = one ] || { echo "batch.sh: --$OPTARG: unknown" >&2; exit 2; }; one=1 ;;
	*) echo "usage: batch.sh [-m MODEL] [-n N] [-P PROCS] PROMPTS OUTDIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

if [ -n "$one" ]; then
	# the worker: DIR/k.prompt -> DIR/k.txt and DIR/k.kv
	p=$1
	base=${p%.prompt}
	llm-tokenize -m "$model" <"$p" >"$base.ids"
	llm-decode -m "$model" -n "$n" -q --kv-out "$base.kv" <"$base.ids" >"$base.out"
	cat "$base.ids" "$base.out" | llm-tokenize -m "$model" -d >"$base.txt"
	rm -f "$base.ids" "$base.out"
	exit 0
fi

[ $# -eq 2 ] || { echo "usage: batch.sh [-m MODEL] [-n N] [-P PROCS] PROMPTS OUTDIR" >&2; exit 2; }
mkdir -p "$2"
# one file per prompt: a line's quotes and spaces never meet a shell
awk -v dir="$2" 'NF { k++; f = dir "/" k ".prompt"; printf "%s", $0 >f; close(f) }' "$1"
ls "$2"/*.prompt | xargs -P "$procs" -n 1 sh "$0" -m "$model" -n "$n" --one
