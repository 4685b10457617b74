#!/bin/sh
# mktext.sh: bench/stories260K-2000.ids, the 2000-token text make bench
# scores the cache types on: stories260K sampled at temperature 1 (no
# top-k or top-p) with seed 2026, from BOS, its own end-of-story tokens
# included.  Committed, so that every run scores the same text; this
# remakes it.  Usage: sh bench/mktext.sh [MODEL]
set -eu
m=${1:-../shared/models/stories260K.gguf}
{ echo 1; echo 1 | cmd/llm-decode -m "$m" --temp 1 --top-k 0 --top-p 1 --seed 2026 \
	--ignore-eos -n 1999; } >bench/stories260K-2000.ids
