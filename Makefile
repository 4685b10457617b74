# llm: small Unix tools for Llama-architecture models in GGUF files.
# See LICENSE file for copyright and license details.
.POSIX:

include config.mk

LIBSRC = lib/attn.c lib/batch.c lib/fmath.c lib/chat.c lib/grammar.c lib/jsonread.c lib/regex.c lib/schema.c lib/stop.c lib/gguf.c lib/kernels.c lib/kv.c lib/kvtype.c lib/kvwin.c lib/matmul.c lib/model.c lib/pool.c \
	lib/pretok.c lib/quant.c lib/simd/avx2.c lib/simd/avx512.c lib/simd/vnni.c lib/simd/amx.c lib/simd/neon.c lib/sample.c \
	lib/rope.c lib/sha256.c lib/snapshot.c \
	lib/tok.c lib/tokstream.c lib/unicode.c lib/unicode_table.c lib/util.c
LIBHDR = lib/attn.h lib/batch.h lib/fmath.h lib/chat.h lib/grammar.h lib/jsonread.h lib/regex.h lib/schema.h lib/stop.h lib/gguf.h lib/kernels.h lib/kv.h lib/kvpriv.h lib/matmul.h lib/model.h lib/pool.h lib/pretok.h lib/quant.h lib/sample.h \
	lib/rope.h lib/sha256.h lib/snapshot.h \
	lib/tok.h lib/tokstream.h lib/unicode.h lib/util.h
LIBOBJ = $(LIBSRC:.c=.o)
LIB = lib/libllm.a

BIN = cmd/llm-decode cmd/llm-tokenize cmd/llm-kvstat cmd/llm-kvdump cmd/llm-chat
# What the programs share and the library does not have (cmd/tool.h)
TOOLOBJ = cmd/tool.o cmd/sampling.o
# llm-decode's modes beside its main, and the session it shares with llm-chat (cmd/session.h)
DECODEOBJ = cmd/lines.o cmd/embed.o cmd/report.o cmd/session.o
MAN1 = man/llm-decode.1 man/llm-tokenize.1 man/llm-kvstat.1 man/llm-kvdump.1 man/llm-chat.1
MAN5 = man/llm-kv.5
MAN7 = man/llm.7

# The GGUF writer and the model maker that tests, bench, examples and the demo share,
# and wdigest, the weights as llm expands them (tests/test_weights.sh).
MKSRC = tools/ggufw.c tools/fixture.c
MKOBJ = $(MKSRC:.c=.o)
MKMODEL = tools/mkmodel tools/wdigest

TESTBIN = tests/test_kv tests/test_gguf tests/test_model tests/test_tok tests/test_grammar \
	tests/test_snapshot tests/test_quant
BENCHBIN = bench/membw bench/fmapeak

# Fuzz targets: each is a libFuzzer program under make fuzz, and a replay
# program that make check runs over the regression corpus.
FUZZOBJ = tests/fuzz/fuzz_gguf.o tests/fuzz/fuzz_snapshot.o tests/fuzz/fuzz_tokstream.o \
	tests/fuzz/fuzz_tok.o tests/fuzz/fuzz_kvsel.o tests/fuzz/fuzz_chat.o tests/fuzz/fuzz_grammar.o \
	tests/fuzz/fuzz_schema.o
FUZZLIBOBJ = tests/fuzz/replay.o tests/fuzz/fuzz_common.o
REPLAYBIN = tests/fuzz/replay-gguf tests/fuzz/replay-snapshot tests/fuzz/replay-tokstream \
	tests/fuzz/replay-tok tests/fuzz/replay-kvsel tests/fuzz/replay-chat tests/fuzz/replay-grammar \
	tests/fuzz/replay-schema
FUZZ_SECONDS = 60

all: $(LIB) $(BIN) $(MKMODEL)

$(LIBOBJ): $(LIBHDR) config.mk
$(BIN:=.o) $(TOOLOBJ) $(DECODEOBJ): $(LIBHDR) cmd/tool.h cmd/sampling.h cmd/session.h cmd/decode.h config.mk
$(MKOBJ) $(MKMODEL:=.o) $(TESTBIN:=.o): $(LIBHDR) cmd/tool.h tools/ggufw.h tools/fixture.h tests/check.h config.mk
$(FUZZOBJ) $(FUZZLIBOBJ) tests/fuzz/mkseeds.o: $(LIBHDR) tools/fixture.h tests/fuzz/fuzz.h config.mk

.c.o:
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

# One kernel set per instruction set (lib/simd/simd.h), each compiled for
# its set by the pragmas at its top, so one rule builds them all.
SIMDINC = lib/simd/simd.h lib/simd/gemm.inc lib/simd/tile.inc lib/simd/int.inc lib/simd/iload.inc \
	lib/simd/iblock.inc lib/simd/vblock.inc lib/simd/attn.inc lib/simd/gather.inc lib/simd/nint.inc lib/simd/kbytes.inc
lib/kernels.o lib/simd/avx2.o lib/simd/avx512.o lib/simd/vnni.o lib/simd/amx.o lib/simd/neon.o: $(SIMDINC)

$(LIB): $(LIBOBJ)
	rm -f $@
	$(AR) rcs $@ $(LIBOBJ)

$(BIN): $(LIB) $(TOOLOBJ)
cmd/llm-tokenize cmd/llm-kvstat cmd/llm-kvdump:
	$(CC) $(LDFLAGS) -o $@ $@.o $(TOOLOBJ) $(LIB) $(LDLIBS)

cmd/llm-decode: cmd/llm-decode.o $(DECODEOBJ)
	$(CC) $(LDFLAGS) -o $@ $@.o $(DECODEOBJ) $(TOOLOBJ) $(LIB) $(LDLIBS)
cmd/llm-tokenize: cmd/llm-tokenize.o
cmd/llm-kvstat: cmd/llm-kvstat.o
cmd/llm-kvdump: cmd/llm-kvdump.o
cmd/llm-chat: cmd/llm-chat.o cmd/session.o
	$(CC) $(LDFLAGS) -o $@ $@.o cmd/session.o $(TOOLOBJ) $(LIB) $(LDLIBS)

$(MKMODEL) $(TESTBIN): $(MKOBJ) $(TOOLOBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $@.o $(MKOBJ) $(TOOLOBJ) $(LIB) $(LDLIBS)

tools/mkmodel: tools/mkmodel.o
tools/wdigest: tools/wdigest.o
tests/test_kv: tests/test_kv.o
tests/test_gguf: tests/test_gguf.o
tests/test_model: tests/test_model.o
tests/test_tok: tests/test_tok.o
tests/test_grammar: tests/test_grammar.o
tests/test_snapshot: tests/test_snapshot.o
tests/test_quant: tests/test_quant.o

FUZZLINK = $(FUZZLIBOBJ) $(MKOBJ) $(TOOLOBJ) $(LIB)
tests/fuzz/replay-gguf: tests/fuzz/fuzz_gguf.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_gguf.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-snapshot: tests/fuzz/fuzz_snapshot.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_snapshot.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-tokstream: tests/fuzz/fuzz_tokstream.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_tokstream.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-tok: tests/fuzz/fuzz_tok.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_tok.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-kvsel: tests/fuzz/fuzz_kvsel.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_kvsel.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-chat: tests/fuzz/fuzz_chat.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_chat.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-grammar: tests/fuzz/fuzz_grammar.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_grammar.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/replay-schema: tests/fuzz/fuzz_schema.o $(FUZZLINK)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/fuzz_schema.o $(FUZZLINK) $(LDLIBS)
tests/fuzz/mkseeds: tests/fuzz/mkseeds.o $(MKOBJ) $(TOOLOBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ tests/fuzz/mkseeds.o $(MKOBJ) $(TOOLOBJ) $(LIB) $(LDLIBS)

# The probe is built to read as fast as the machine can (its loop
# vectorized by -O3 on every machine's baseline vectors).
bench/membw: bench/membw.c
	$(CC) $(CPPFLAGS) -O3 -o $@ bench/membw.c $(LDLIBS)

# The multiply-add peak picks its instructions at run time.
bench/fmapeak: bench/fmapeak.c
	$(CC) $(CPPFLAGS) -O2 -Wall -Wextra -o $@ bench/fmapeak.c $(LDLIBS)

check: testbin
	sh tests/run.sh

# Everything make check runs, built.
testbin: all $(TESTBIN) $(REPLAYBIN) tests/fuzz/mkseeds

# The tests on Linux AArch64 under qemu-user, built by each cross compiler
# (tests/cross.sh says which tests and processors).
check-aarch64: $(MKMODEL)
	sh tests/cross.sh

# Every tool compiled and linked for macOS, arm64 and x86_64, by zig cc
# (tests/macos.sh), so that a change that breaks the Mac build fails here.
check-macos:
	sh tests/macos.sh

# The whole suite built with AddressSanitizer and UndefinedBehaviorSanitizer,
# two test programs at a time (tests/run.sh).
# gcc, because clang with UBSan takes minutes on each SIMD kernel file.  The
# objects are removed before and after, so a plain build never links them.
SAN_CFLAGS = -std=c11 -O1 -g -Wall -Wextra -ffp-contract=off -fsanitize=address,undefined \
	-fno-omit-frame-pointer -fno-sanitize-recover=all
check-asan:
	$(MAKE) clean
	LLM_GOLDEN=skip LLM_TEST_JOBS=2 $(MAKE) CC=gcc CFLAGS='$(SAN_CFLAGS)' LDFLAGS='-fsanitize=address,undefined' check; \
	status=$$?; $(MAKE) clean; exit $$status

# Regenerate tests/ref/*.logp, llama.cpp's figures for the family tests, with
# ../shared/ref/ref-score (skipped, with a message, where it is absent).
check-ref: all
	sh tests/mkref.sh

# libFuzzer on every target for FUZZ_SECONDS each (clang; see tests/fuzz/run.sh).
fuzz: tests/fuzz/mkseeds
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh

bench: all $(BENCHBIN)
	sh bench/bench.sh

demo: all
	sh examples/demo.sh

install: all
	mkdir -p $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANPREFIX)/man1 $(DESTDIR)$(MANPREFIX)/man5 \
		$(DESTDIR)$(MANPREFIX)/man7
	cp -f $(BIN) $(DESTDIR)$(PREFIX)/bin
	cp -f $(MAN1) $(DESTDIR)$(MANPREFIX)/man1
	cp -f $(MAN5) $(DESTDIR)$(MANPREFIX)/man5
	cp -f $(MAN7) $(DESTDIR)$(MANPREFIX)/man7

uninstall:
	for f in $(BIN); do rm -f $(DESTDIR)$(PREFIX)/bin/$${f#cmd/}; done
	for f in $(MAN1); do rm -f $(DESTDIR)$(MANPREFIX)/man1/$${f#man/}; done
	for f in $(MAN5); do rm -f $(DESTDIR)$(MANPREFIX)/man5/$${f#man/}; done
	for f in $(MAN7); do rm -f $(DESTDIR)$(MANPREFIX)/man7/$${f#man/}; done

clean:
	rm -f $(LIB) $(LIBOBJ) $(BIN) $(BIN:=.o) $(TOOLOBJ) $(DECODEOBJ) $(TESTBIN) $(TESTBIN:=.o) \
		$(MKMODEL) $(MKMODEL:=.o) $(MKOBJ) $(BENCHBIN) $(BENCHBIN:=.o) \
		$(FUZZOBJ) $(FUZZLIBOBJ) $(REPLAYBIN) tests/fuzz/mkseeds tests/fuzz/mkseeds.o
	rm -rf tests/tmp bench/tmp tests/fuzz/build

.PHONY: all check testbin check-aarch64 check-macos check-ref check-asan fuzz bench demo install uninstall clean
