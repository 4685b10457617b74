#!/bin/sh
# classify.sh: label each line of a file with one of a few labels, which
# a grammar makes the only text the model may write.
#
#   classify.sh [-m MODEL] [-q QUESTION] FILE LABEL...
#
# Each line of FILE (empty ones too) gives one line on standard output:
# the label, a tab, the line.  The prompt is the line, then QUESTION
# (default " Answer:"); every line is decoded greedily in one llm-decode
# --lines process under the grammar root ::= " LABEL1" | " LABEL2" | ...,
# so nothing but a label can come out.  A line the model cannot take
# (too long for its context) gets an empty label, and the exit status is
# then 1.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$here/../cmd" 2>/dev/null && pwd || echo)
PATH="${bin:+$bin:}$PATH"
model=${LLM_MODEL:-$here/../../shared/models/stories260K.gguf}
question=" Answer:"
usage() {
	echo "usage: classify.sh [-m MODEL] [-q QUESTION] FILE LABEL..." >&2
	exit 2
}
while getopts m:q: opt; do
	case $opt in
	m) model=$OPTARG ;;
	q) question=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 3 ] || usage
file=$1
shift
[ -f "$model" ] || { echo "classify.sh: $model: no such model (-m, or LLM_MODEL)" >&2; exit 1; }
[ -r "$file" ] || { echo "classify.sh: $file: cannot read it" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the grammar: a label, with the space before it that follows "Answer:"
grammar="root ::="
sep=
for label in "$@"; do
	case $label in
	*[\"\\]*|'') echo "classify.sh: '$label': a label is a word, with no quote or backslash" >&2
		exit 2 ;;
	esac
	grammar="$grammar$sep \" $label\""
	sep=" |"
done

# a line of ids a line of FILE; its text goes to llm-tokenize on stdin
while IFS= read -r line || [ -n "$line" ]; do
	printf '%s%s' "$line" "$question" | llm-tokenize -m "$model" | tr '\n' ' '
	echo
done <"$file" >"$tmp/prompts.ids"

status=0
llm-decode -m "$model" --lines --greedy -n 16 -q --grammar "$grammar" \
	<"$tmp/prompts.ids" >"$tmp/out.ids" || status=$?
[ "$(wc -l <"$tmp/out.ids")" -eq "$(wc -l <"$tmp/prompts.ids")" ] ||
	{ echo "classify.sh: a line of output is missing" >&2; exit 1; }

# each line of ids back to its label, beside the line
while IFS= read -r ids; do
	printf '%s\n' $ids | llm-tokenize -m "$model" -d -n | sed 's/^ //'
	echo
done <"$tmp/out.ids" | paste - "$file"
exit $status
