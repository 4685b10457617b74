/*
 * fuzz_grammar: --grammar's text.  The input is a grammar, then after a
 * NUL byte a text.  A grammar that parses is matched against the text
 * byte by byte and all at once, which must agree (too ambiguous at the
 * same place, too), and its masks over a small vocabulary, at the start
 * and after the text, must be those of each token tried alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/gguf.h"
#include "../../lib/grammar.h"
#include "../../lib/tok.h"
#include "../../lib/util.h"
#include "../../tools/fixture.h"
#include "fuzz.h"

static struct gguf g;
static struct tok t;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct fixture f;
	char path[256];

	(void)argc, (void)argv;
	fixture_tiny(&f, GGML_F32);
	snprintf(path, sizeof path, "%s/grammar.gguf", fuzz_dir());
	if (fixture_write(&f, path) < 0 || gguf_open(&g, path) < 0 || tok_load(&t, &g) < 0) {
		fprintf(stderr, "fuzz_grammar: %s: %s\n", path, llm_err());
		abort();
	}
	unlink(path);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul = memchr(data, 0, size);
	size_t n = nul ? (size_t)(nul - (const char *)data) : size;
	const char *text = nul ? nul + 1 : "";
	size_t tn = nul ? size - n - 1 : 0;
	struct grammar gr;
	struct gstate a, b, s = { 0 };
	struct gmask gm;
	struct buf piece = { 0 };
	unsigned char *mask;
	int end = t.eos, ok_a, ok_b = 1;

	if (grammar_parse(&gr, (const char *)data, n) < 0)
		return 0;
	if (gstate_init(&a, &gr) < 0) {
		grammar_free(&gr);
		return 0;
	}
	gstate_init(&b, &gr);
	ok_a = gstate_accept(&a, text, tn);
	for (size_t i = 0; i < tn && ok_b == 1; i++)
		ok_b = gstate_accept(&b, text + i, 1);
	if (ok_a != ok_b || (ok_a == 1 && gstate_complete(&a) != gstate_complete(&b)))
		abort();
	/* the masks of the start state, and of the state after the text if it is still a start */
	gmask_init(&gm, &t);
	mask = malloc((size_t)t.n_vocab);
	for (int round = 0; round < 2; round++) {
		gstate_free(&a);
		gstate_init(&a, &gr);
		gstate_for(&a, &t);
		if (round == 1 && (ok_a != 1 || gstate_accept(&a, text, tn) != 1))
			break;
		memcpy(mask, gmask_compute(&gm, &a, &end, 1), (size_t)t.n_vocab);
		for (int id = 0; id < t.n_vocab; id++) {
			int want;
			if (id == end) {
				want = gstate_complete(&a);
			} else if (t.type[id] == TT_CONTROL || t.type[id] == TT_UNKNOWN) {
				want = 0;
			} else {
				piece.n = 0;
				tok_piece(&t, id, 0, &piece);
				gstate_copy(&s, &a);
				want = piece.n > 0 ? gstate_accept(&s, piece.s, piece.n) : 0;
				if (want < 0 && !mask[id] && gm.over)
					continue;	/* too ambiguous to follow: refused, and the mask says so */
			}
			if (mask[id] != want)
				abort();
		}
	}
	free(mask);
	buf_free(&piece);
	gmask_free(&gm);
	gstate_free(&s);
	gstate_free(&a);
	gstate_free(&b);
	grammar_free(&gr);
	return 0;
}
