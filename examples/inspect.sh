#!/bin/sh
# inspect.sh: questions about a real cache, answered with the tools.
#
#   inspect.sh [-m MODEL] OUTDIR
#
# It writes a story's cache to OUTDIR/story.kv, draws it with
# llm-kvstat --svg (OUTDIR/story.svg), and asks llm-kvdump and awk
# which layer's keys have the largest norms, and which position of that
# layer stands out most.
set -eu
bin=$(cd "$(dirname "$0")/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-../shared/models/stories260K.gguf}
while getopts m: opt; do
	case $opt in
	m) model=$OPTARG ;;
	*) echo "usage: inspect.sh [-m MODEL] OUTDIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 1 ] || { echo "usage: inspect.sh [-m MODEL] OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out"

llm-tokenize -m "$model" 'Once upon a time, there was a little dog named Max.' |
	llm-decode -m "$model" -n 60 --greedy -q --kv-out "$out/story.kv" >/dev/null
llm-kvstat --svg "$out/story.svg" "$out/story.kv" >/dev/null
echo "heat map: $out/story.svg"

# llm-kvdump's rows: layer, k or v, position, head, dimension, value
llm-kvdump --k "$out/story.kv" | awk -F '\t' '
NR > 1 { sq[$1 "\t" $3] += $6 * $6 }
END {
	for (key in sq) {
		split(key, f, "\t")
		norm = sqrt(sq[key]); sum[f[1]] += norm; n[f[1]]++
		if (norm > top[f[1]]) { top[f[1]] = norm; at[f[1]] = f[2] }
	}
	for (l in sum)
		if (best == "" || sum[l] / n[l] > sum[best] / n[best])
			best = l
	printf "layer %d has the largest keys: mean norm %.3f over %d positions\n", best, sum[best] / n[best], n[best]
	printf "its largest key is at position %d (norm %.3f)\n", at[best], top[best]
}'
