#!/bin/sh
# The scripts in examples/ run as a user would run them.
. tests/lib.sh

demo_runs() {
	sh examples/demo.sh >"$TMP/demo" 2>&1 || fail "exit $?: $(tail -n 3 "$TMP/demo")"
	grep -q '^prompt: Once upon a time$' "$TMP/demo" || fail "no prompt line"
	grep -q 'generated at' "$TMP/demo" || fail "no stats"
}

demo_runs_with_a_random_model_when_no_model_is_found() {
	# Point the demo away from ../shared by running a copy of it elsewhere.
	mkdir -p "$TMP/proj/examples" "$TMP/proj/cmd" "$TMP/proj/tools"
	cp examples/demo.sh "$TMP/proj/examples/"
	cp cmd/llm-decode cmd/llm-tokenize "$TMP/proj/cmd/"
	cp tools/mkmodel "$TMP/proj/tools/"
	(cd "$TMP/proj" && sh examples/demo.sh) >"$TMP/rdemo" 2>&1 || fail "exit: $(tail -n 3 "$TMP/rdemo")"
	grep -q 'random' "$TMP/rdemo" || fail "does not say the text is random"
}

chat_demo_resumes_and_forks() {
	sh examples/chat-demo.sh >"$TMP/chat" 2>&1 || fail "exit $?: $(tail -n 5 "$TMP/chat")"
	# turn 1 computes everything; turns 2, 3 and the fork reuse the snapshot
	[ "$(grep -c 'reused 0 tokens' "$TMP/chat")" -eq 1 ] || fail "$(grep reused "$TMP/chat")"
	[ "$(grep -c 'reused [1-9][0-9]* tokens' "$TMP/chat")" -eq 3 ] || fail "$(grep reused "$TMP/chat")"
	grep -q '^a: ' "$TMP/chat" && grep -q '^b: ' "$TMP/chat" || fail "no snapshot contents"
}

# With a chat template, the turns go through llm-tokenize --chat and still resume.
chat_demo_uses_the_models_template() {
	"$PWD/tools/mkmodel" -C chatml -o "$TMP/chatml.gguf" || fail "mkmodel"
	LLM_MODEL="$TMP/chatml.gguf" sh examples/chat-demo.sh >"$TMP/chat" 2>&1 ||
		fail "exit $?: $(tail -n 5 "$TMP/chat")"
	[ "$(grep -ac 'reused [1-9][0-9]* tokens' "$TMP/chat")" -eq 3 ] || fail "$(grep -a reused "$TMP/chat")"
	grep -aq '^a: user Once upon a time, a cat' "$TMP/chat" || fail "$(grep -a '^a: ' "$TMP/chat")"
}

# model: stories260K where ../shared has it, else the tiny random model
model() {
	if [ -f "$SHARED/models/stories260K.gguf" ]; then
		echo "$SHARED/models/stories260K.gguf"
	else
		# a context as long as stories260K's: examples/system.txt is 689 of its random tokens
		[ -f "$TMP/tiny-ctx.gguf" ] || "$PWD/tools/mkmodel" -t q8_0 -c 2048 -o "$TMP/tiny-ctx.gguf" >&2 ||
			fail "mkmodel -c 2048"
		echo "$TMP/tiny-ctx.gguf"
	fi
}

# make as a user runs it, not as a sub-make of make check
umake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory "$@"; }

# examples/classify.sh: a label of those given on every line, as the
# grammar would give it alone; a line too long gets an empty label and exit 1.
classify_labels_every_line() {
	m=$(model)
	printf 'The cake was good.\nThe dog was sad, "very" sad.\n\nA cat; $(rm -rf /) `x`\n' >"$TMP/lines"
	(cd /tmp && sh "$OLDPWD/examples/classify.sh" -m "$m" -q ' Happy or sad?' "$TMP/lines" happy sad) \
		>"$TMP/labels" || fail "exit $?"
	[ "$(wc -l <"$TMP/labels")" -eq 4 ] || fail "$(cat "$TMP/labels")"
	cut -f 2- "$TMP/labels" | cmp -s - "$TMP/lines" || fail "the lines are not kept: $(cat "$TMP/labels")"
	cut -f 1 "$TMP/labels" | grep -vqxE 'happy|sad' && fail "not a label: $(cat "$TMP/labels")"
	# line 2's label is its own run's
	printf '%s' 'The dog was sad, "very" sad. Happy or sad?' | "$BIN/llm-tokenize" -m "$m" |
		"$BIN/llm-decode" -m "$m" --greedy -q --grammar 'root ::= " happy" | " sad"' |
		"$BIN/llm-tokenize" -m "$m" -d -n >"$TMP/alone"
	[ " $(sed -n 2p "$TMP/labels" | cut -f 1)" = "$(cat "$TMP/alone")" ] || fail "line 2: $(cat "$TMP/alone")"
	# a line past the context: an empty label, the others kept, exit 1
	{ head -n 1 "$TMP/lines"; seq 1 3000 | tr '\n' ' '; echo; } >"$TMP/long"
	sh examples/classify.sh -m "$m" "$TMP/long" yes no >"$TMP/labels" 2>"$TMP/err" && fail "exit 0"
	[ "$(sed -n 2p "$TMP/labels" | cut -f 1)" = "" ] && grep -qxE '(yes|no)	The cake was good.' "$TMP/labels" ||
		fail "$(cut -c 1-40 "$TMP/labels")"
	grep -q 'line 2' "$TMP/err" || fail "$(cat "$TMP/err")"
	sh examples/classify.sh -m "$m" "$TMP/lines" yes 2>/dev/null; [ $? -eq 2 ] || fail "one label: not a usage error"
}

# examples/Makefile: the prefix once, each answer from it, two at a time.
makefile_answers_each_question_from_the_prefix() {
	m=$(model)
	rm -rf "$TMP/ex"
	mkdir -p "$TMP/ex"
	cp -r examples/Makefile examples/system.txt examples/questions "$TMP/ex/"
	umake -C "$TMP/ex" -j2 BIN="$BIN" MODEL="$m" OPTS="--ctx 4096 -q" >"$TMP/make.out" 2>&1 || fail "make: $(tail -n 5 "$TMP/make.out")"
	nq=$(ls examples/questions/*.txt | wc -l)
	[ "$(ls "$TMP/ex/answers/"*.txt | wc -l)" -eq "$nq" ] || fail "not every question answered"
	prefix=$(wc -l <"$TMP/ex/prefix.ids")
	for st in "$TMP/ex/answers/"*.stats; do
		grep -q "\"reused_tokens\":$prefix," "$st" || fail "$st: $(cat "$st")"
	done
	for a in "$TMP/ex/answers/"*.txt; do
		[ -s "$a" ] || fail "$a is empty"
	done
	# Make's bookkeeping: nothing to redo, then only the question that changed
	[ -z "$(umake -C "$TMP/ex" -n -s BIN="$BIN" MODEL="$m")" ] || fail "a second make has work"
	touch "$TMP/ex/questions/bear.txt"
	umake -C "$TMP/ex" -n -s BIN="$BIN" MODEL="$m" >"$TMP/redo"
	grep -q "answers/bear" "$TMP/redo" && ! grep -q -e "answers/ball" -e "--kv-out prefix.kv" "$TMP/redo" ||
		fail "$(cat "$TMP/redo")"
}

# examples/Makefile after failed steps: a missing model leaves no target
# behind, and a damaged snapshot fails make, every time, naming it.
makefile_fails_and_builds_nothing_on_failed_steps() {
	m=$(model)
	rm -rf "$TMP/exf"
	mkdir -p "$TMP/exf"
	cp -r examples/Makefile examples/system.txt examples/questions "$TMP/exf/"
	umake -C "$TMP/exf" BIN="$BIN" MODEL=/nonexistent.gguf >"$TMP/make.out" 2>&1 &&
		fail "make with a missing model succeeded"
	[ ! -e "$TMP/exf/prefix.ids" ] || fail "an empty prefix.ids was left: $(ls -la "$TMP/exf")"
	umake -C "$TMP/exf" BIN="$BIN" MODEL="$m" prefix.kv >"$TMP/make.out" 2>&1 || fail "make prefix.kv"
	printf 'X' | dd of="$TMP/exf/prefix.kv" bs=1 seek=5000 conv=notrunc 2>/dev/null
	for i in 1 2; do
		umake -C "$TMP/exf" BIN="$BIN" MODEL="$m" >"$TMP/make.out" 2>&1 &&
			fail "make $i with a damaged prefix.kv succeeded"
		grep -q 'prefix.kv: .*checksum mismatch' "$TMP/make.out" || fail "$(cat "$TMP/make.out")"
		[ -z "$(ls "$TMP/exf/answers/"*.txt 2>/dev/null)" ] || fail "make $i left answers"
	done
}

batch_gives_each_prompt_its_text() {
	m=$(model)
	rm -rf "$TMP/batch"
	printf 'Once upon a time\nThe dog said "hi" and ran.\n\nA cat; $(rm -rf /) `x`\n' >"$TMP/prompts"
	# from another directory: the default model is found from the script's place
	(cd /tmp && sh "$OLDPWD/examples/batch.sh" -m "$m" -n 10 -s 5 -P 2 "$TMP/prompts" "$TMP/batch") ||
		fail "exit $?"
	for k in 1 2 3; do
		[ -s "$TMP/batch/$k.txt" ] || fail "prompt $k: no output"
	done
	[ ! -e "$TMP/batch/4.txt" ] || fail "the empty line became a prompt"
	grep -q 'A cat; $(rm -rf /) `x`' "$TMP/batch/3.txt" || fail "prompt 3 was not taken literally"
	head -c 40 "$TMP/batch/2.txt" | grep -q '^The dog said "hi" and ran.' || fail "$(cat "$TMP/batch/2.txt")"
	# each continuation is that of its prompt alone
	printf '%s' 'The dog said "hi" and ran.' | "$BIN/llm-tokenize" -m "$m" >"$TMP/p2.ids"
	{ cat "$TMP/p2.ids"; "$BIN/llm-decode" -m "$m" -n 10 --seed 5 -q <"$TMP/p2.ids"; } |
		"$BIN/llm-tokenize" -m "$m" -d >"$TMP/alone.txt"
	cmp "$TMP/alone.txt" "$TMP/batch/2.txt" || fail "prompt 2 differs from its run alone"
	# GNU parallel's form, on this machine (":"), where it is installed
	if command -v parallel >/dev/null; then
		sh examples/batch.sh -m "$m" -n 10 -s 5 -S : "$TMP/prompts" "$TMP/batch3" || fail "-S: exit $?"
		diff -r "$TMP/batch" "$TMP/batch3" || fail "-S gives other texts"
	fi
	sh examples/batch.sh -m /nonexistent.gguf "$TMP/prompts" "$TMP/batch2" 2>"$TMP/err" &&
		fail "a missing model succeeded"
	grep -q 'nonexistent.gguf' "$TMP/err" || fail "$(cat "$TMP/err")"
}

# examples/batch.sh -S over ssh for real: sshd on 127.0.0.1, started and
# stopped here with keys made for it, one a "machine" (a port each): two
# healthy ones, one down, one whose every job fails, one that breaks
# after two chunks.  The chunks' texts are the local run's, a chunk whose
# machine fails goes to another, and a chunk that fails everywhere ends
# the run loudly, naming the machine, with the lines before it written.
batch_runs_on_machines_over_ssh() {
	command -v parallel >/dev/null || skip "GNU parallel is not installed (Debian: parallel)"
	[ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null ||
		skip "sshd and ssh are not installed (Debian: openssh-server)"
	m=$(model)
	d="$TMP/ssh"
	rm -rf "$d" "$TMP/b-"*
	mkdir -p "$d"
	[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd	# privilege separation, which sshd run by root needs
	ssh-keygen -q -t ed25519 -N '' -f "$d/host" && ssh-keygen -q -t ed25519 -N '' -f "$d/id" || fail "ssh-keygen"
	cp "$d/id.pub" "$d/keys" && chmod 600 "$d/keys" "$d/host"
	cat >"$d/flaky" <<EOF
#!/bin/sh
# the machine that breaks: its third job and after fail
n=\$(cat "$d/count" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$d/count"
[ "\$n" -lt 2 ] || exit 1
exec /bin/sh -c "\$SSH_ORIGINAL_COMMAND"
EOF
	chmod +x "$d/flaky"
	base=$((20000 + $$ % 20000))
	printf 'Host *\n\tIdentityFile %s\n\tIdentitiesOnly yes\n\tStrictHostKeyChecking no\n\tUserKnownHostsFile /dev/null\n\tLogLevel ERROR\n\tBatchMode yes\n\tConnectTimeout 5\n' \
		"$d/id" >"$d/ssh_config"
	# the machines are stopped whatever happens
	trap 'for k in 1 2 3 4 5; do [ -f "$d/$k.pid" ] && kill "$(cat "$d/$k.pid")" 2>/dev/null; done' EXIT
	for k in 1 2 3 4 5; do
		p=$((base + k))
		{
			printf 'Port %s\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\n' "$p" "$d/host" "$d/keys"
			printf 'PidFile %s\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n' "$d/$k.pid"
			printf 'KbdInteractiveAuthentication no\nAllowUsers %s\n' "$(id -un)"
			[ $k -ne 4 ] || echo 'ForceCommand /bin/false'
			[ $k -ne 5 ] || echo "ForceCommand $d/flaky"
		} >"$d/$k.conf"
		/usr/sbin/sshd -f "$d/$k.conf" -E "$d/$k.log" || skip "sshd cannot run here: $(tail -n 1 "$d/$k.log")"
		eval "login$k=\"1/ssh -F $d/ssh_config -p $p 127.0.0.1\""
	done
	kill "$(cat "$d/3.pid")"	# machine 3 is down
	for k in 1 2; do	# (4 and 5 would count a probe as a job)
		i=0
		until ssh -F "$d/ssh_config" -p $((base + k)) 127.0.0.1 true 2>/dev/null; do
			i=$((i + 1)) && [ $i -lt 50 ] || skip "ssh to sshd on 127.0.0.1 fails here: $(tail -n 1 "$d/$k.log")"
			sleep 0.1
		done
	done
	seq 1 9 | sed 's/^/Once upon a time, number /' >"$TMP/many"
	sh examples/batch.sh -m "$m" -n 8 -s 5 "$TMP/many" "$TMP/b-local" || fail "local: exit $?"
	printf '%s' 'Once upon a time, number 9' | "$BIN/llm-tokenize" -m "$m" >"$TMP/p9.ids"
	{ cat "$TMP/p9.ids"; "$BIN/llm-decode" -m "$m" -n 8 --seed 5 -q <"$TMP/p9.ids"; } |
		"$BIN/llm-tokenize" -m "$m" -d | cmp -s - "$TMP/b-local/9.txt" || fail "line 9 is not its run alone"
	# two machines, and one down, and one whose jobs fail: chunks of 2 lines, in order
	sh examples/batch.sh -m "$m" -n 8 -s 5 -C 2 -S "$login1,$login2,$login3,$login4" "$TMP/many" "$TMP/b-ssh" \
		2>"$TMP/ssh.err" || fail "exit $?: $(cat "$TMP/ssh.err")"
	diff -r "$TMP/b-local" "$TMP/b-ssh" || fail "the machines' texts differ from the local run's"
	# a machine that breaks after two chunks, alone: 4 lines written, then a loud end naming it
	sh examples/batch.sh -m "$m" -n 8 -s 5 -C 2 -S "$login5" "$TMP/many" "$TMP/b-flaky" 2>"$TMP/flaky.err" &&
		fail "a run whose machine broke succeeded"
	grep -q "failed on ssh -F $d/ssh_config -p $((base + 5)) 127.0.0.1" "$TMP/flaky.err" || fail "$(cat "$TMP/flaky.err")"
	grep -q '4 of 9 lines came back' "$TMP/flaky.err" || fail "$(cat "$TMP/flaky.err")"
	for k in 1 2 3 4; do
		cmp "$TMP/b-local/$k.txt" "$TMP/b-flaky/$k.txt" || fail "line $k, written before the failure, differs"
	done
	[ ! -e "$TMP/b-flaky/5.txt" ] || fail "a line after the failure was written"
}

inspect_answers_from_the_cache() {
	sh examples/inspect.sh -m "$(model)" "$TMP/insp" >"$TMP/insp.out" || fail "exit $?"
	grep -q '^layer [0-9]* has the largest keys: mean norm [0-9.]* over [0-9]* positions$' "$TMP/insp.out" ||
		fail "$(cat "$TMP/insp.out")"
	grep -q '<svg' "$TMP/insp/story.svg" || fail "no heat map"
}

# A failed turn (a damaged snapshot) exits non-zero and leaves every file
# of the conversation as it was, for a model with a template and one without.
chat_turn_that_fails_changes_nothing() {
	"$PWD/tools/mkmodel" -C chatml -o "$TMP/chatml.gguf" || fail "mkmodel"
	for m in "$TMP/chatml.gguf" "$(model)"; do
		rm -rf "$TMP/cv" && mkdir -p "$TMP/cv"
		sh examples/chat.sh -m "$m" -n 5 "$TMP/cv/c" 'Hello there' >/dev/null 2>&1 || fail "first turn: exit $?"
		printf 'X' | dd of="$TMP/cv/c.kv" bs=1 seek=5000 conv=notrunc 2>/dev/null
		(cd "$TMP/cv" && cksum c.* | sort) >"$TMP/before"
		sh examples/chat.sh -m "$m" -n 5 "$TMP/cv/c" 'And then?' >"$TMP/out" 2>"$TMP/err" &&
			fail "$m: a turn from a damaged snapshot succeeded"
		(cd "$TMP/cv" && cksum c.* | sort) >"$TMP/after"
		cmp "$TMP/before" "$TMP/after" || fail "$m: the conversation changed: $(cat "$TMP/after")"
		grep -q 'checksum mismatch' "$TMP/err" || fail "$m: $(cat "$TMP/err")"
		[ -z "$(ls -A "$TMP/cv" | grep -v '^c\.')" ] || fail "left behind: $(ls -A "$TMP/cv")"
	done
}

t demo_runs
t classify_labels_every_line
t chat_turn_that_fails_changes_nothing
t makefile_answers_each_question_from_the_prefix
t makefile_fails_and_builds_nothing_on_failed_steps
t batch_gives_each_prompt_its_text
t batch_runs_on_machines_over_ssh
t inspect_answers_from_the_cache
t chat_demo_uses_the_models_template
t demo_runs_with_a_random_model_when_no_model_is_found
t chat_demo_resumes_and_forks
