#!/bin/sh
# The fuzz targets, replayed without libFuzzer: each runs once on every
# input of its regression corpus (inputs that once crashed or hung a
# tool) and on its seeds.  make fuzz does the fuzzing itself.
. tests/lib.sh
F="$PWD/tests/fuzz"

seeds() {
	[ -d "$TMP/seeds" ] || "$F/mkseeds" "$TMP/seeds" >&2 || fail "mkseeds"
}

# replay TARGET: its regression corpus and seeds, each once.
replay() {
	seeds
	set -- "$1" "$TMP/seeds/$1"
	[ -d "$F/regress/$1" ] && set -- "$@" "$F/regress/$1"
	out=$("$F/replay-$1" "$2" ${3:+"$3"} 2>&1) || fail "$1: $(printf '%s\n' "$out" | tail -n 20)"
	echo "$out"
}

gguf_inputs_replay_cleanly() { replay gguf; }
snapshot_inputs_replay_cleanly() { replay snapshot; }
tokstream_inputs_replay_cleanly() { replay tokstream; }
tokenizer_inputs_replay_cleanly() { replay tok; }
kvdump_selections_replay_cleanly() { replay kvsel; }
chat_inputs_replay_cleanly() { replay chat; }
grammars_replay_cleanly() { replay grammar; }
schemas_replay_cleanly() { replay schema; }

t gguf_inputs_replay_cleanly
t snapshot_inputs_replay_cleanly
t tokstream_inputs_replay_cleanly
t tokenizer_inputs_replay_cleanly
t kvdump_selections_replay_cleanly
t chat_inputs_replay_cleanly
t grammars_replay_cleanly
t schemas_replay_cleanly
