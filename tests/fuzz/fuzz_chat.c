/*
 * fuzz_chat: llm-tokenize --chat's input.  The first byte picks the
 * template family, the rest is the conversation.  A conversation that
 * chat_read accepts is rendered with a vocabulary that has ChatML's
 * control tokens: every id must be in the vocabulary, and <|im_start|>
 * may only come from the template, once a message and once to open the
 * answer, whatever the messages say.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/chat.h"
#include "../../lib/gguf.h"
#include "../../lib/tok.h"
#include "../../lib/util.h"
#include "../../tools/fixture.h"
#include "fuzz.h"

static struct gguf g;
static struct tok t;
static int im_start;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct fixture f;
	char path[256];

	(void)argc, (void)argv;
	fixture_tiny(&f, GGML_F32);
	f.chat = "chatml";
	snprintf(path, sizeof path, "%s/chat.gguf", fuzz_dir());
	if (fixture_write(&f, path) < 0 || gguf_open(&g, path) < 0 || tok_load(&t, &g) < 0 ||
	    (im_start = tok_lookup(&t, "<|im_start|>", 12)) < 0) {
		fprintf(stderr, "fuzz_chat: %s: %s\n", path, llm_err());
		abort();
	}
	unlink(path);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chat_msg *msgs;
	struct ids ids = { 0 };
	size_t n_msgs, i, starts = 0;
	int family;

	struct chat_view view;

	if (size < 1)
		return 0;
	family = data[0] % 7;
	/* the input's bytes as a reply's ids, through what a reader is shown (harmony's channels) */
	chat_view_init(&view, &t, CHAT_HARMONY);
	for (i = 1; i < size; i++)
		(void)chat_shown(&view, data[i] % t.n_vocab);
	if (chat_read((const char *)data + 1, size - 1, &msgs, &n_msgs) < 0)
		return 0;
	if (chat_render(&t, family, msgs, n_msgs, &ids) < 0) {
		/* another family's control tokens, which this vocabulary lacks: refused, never text */
		if (family == CHAT_CHATML || !strstr(llm_err(), "which the vocabulary lacks"))
			abort();
		chat_free(msgs, n_msgs);
		ids_free(&ids);
		return 0;
	}
	for (i = 0; i < ids.n; i++) {
		if (ids.v[i] < 0 || ids.v[i] >= t.n_vocab)
			abort();
		starts += ids.v[i] == im_start;
	}
	/* the only control tokens are the template's */
	if (family == CHAT_CHATML ? starts != n_msgs + 1 : starts != 0)
		abort();
	chat_free(msgs, n_msgs);
	ids_free(&ids);
	return 0;
}
