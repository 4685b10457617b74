/*
 * fuzz_tok: text through every tokenizer and pre-tokenizer, and back.
 * The first byte picks the vocabulary (SentencePiece, or byte-level BPE
 * with one of the pre-tokenizers), the second whether control tokens
 * are parsed; the rest is the text.  Every id must be in the vocabulary,
 * and without control tokens the text must come back byte for byte
 * (SentencePiece cannot give back a U+2581 of the input: it is its space).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/gguf.h"
#include "../../lib/tok.h"
#include "../../lib/util.h"
#include "../../tools/fixture.h"
#include "fuzz.h"

static const char *pre[] = { "default", "gpt-2", "mpt", "gpt-neox", "starcoder", "smollm",
	"refact", "llama3", "llama-bpe", "qwen2", "falcon", "deepseek-llm", "deepseek-coder", "gpt-4o" };
enum { NPRE = sizeof pre / sizeof pre[0], NVOCAB = NPRE + 1 };

static struct gguf g[NVOCAB];
static struct tok t[NVOCAB];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[256];
	int i;

	(void)argc, (void)argv;
	for (i = 0; i < NVOCAB; i++) {
		snprintf(path, sizeof path, "%s/vocab-%d.gguf", fuzz_dir(), i);
		if ((i == NPRE ? fixture_spm_vocab(path) : fixture_bpe_vocab(path, pre[i])) < 0 ||
		    gguf_open(&g[i], path) < 0 || tok_load(&t[i], &g[i]) < 0) {
			fprintf(stderr, "fuzz_tok: %s: %s\n", path, llm_err());
			abort();
		}
		unlink(path);
	}
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct tok *tk;
	const char *text;
	struct ids ids = { 0 };
	struct buf out = { 0 };
	struct tok_decoder d;
	size_t n, i;
	int special;

	if (size < 2)
		return 0;
	tk = &t[data[0] % NVOCAB];
	special = data[1] & 1;
	text = (const char *)data + 2;
	n = size - 2;
	tok_encode(tk, text, n, special, &ids);
	tok_decoder_init(&d, tk, special);
	for (i = 0; i < ids.n; i++) {
		if (ids.v[i] < 0 || ids.v[i] >= tk->n_vocab)
			abort();	/* an id outside the vocabulary */
		tok_decode(&d, ids.v[i], &out);
	}
	tok_decode_finish(&d, &out);
	if (!special && !(tk->model == TOK_SPM && mem_find(text, n, "\xe2\x96\x81", 3)) &&
	    (out.n != n || (n && memcmp(out.s, text, n) != 0)))
		abort();	/* the text did not come back */
	buf_free(&d.pending);
	buf_free(&out);
	ids_free(&ids);
	return 0;
}
