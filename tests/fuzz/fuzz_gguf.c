/*
 * fuzz_gguf: a GGUF file from someone else's machine.  The reader, the
 * model's binding and fingerprint, two forward steps, and the tokenizer
 * the file carries: none may crash, leak or read outside the map.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/gguf.h"
#include "../../lib/kv.h"
#include "../../lib/model.h"
#include "../../lib/tok.h"
#include "../../lib/util.h"
#include "fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	return 0;
}

static void
try_tokenizer(const struct gguf *g)
{
	static const char text[] = "Hello, world! <s> 12\n\xe4\xb8\xad\xff";
	struct tok t;
	struct ids ids = { 0 };
	struct buf out = { 0 };
	struct tok_decoder d;

	if (tok_load(&t, g) < 0)
		return;
	tok_encode(&t, text, sizeof text - 1, 1, &ids);
	tok_encode(&t, text, sizeof text - 1, 0, &ids);
	tok_decoder_init(&d, &t, 1);
	for (size_t i = 0; i < ids.n; i++)
		tok_decode(&d, ids.v[i], &out);
	tok_decode(&d, t.n_vocab - 1, &out);
	tok_decode_finish(&d, &out);
	buf_free(&d.pending);
	buf_free(&out);
	ids_free(&ids);
	tok_free(&t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_file(data, size);
	struct model m;
	struct model_run r;
	struct kv kv;
	struct gguf g;
	uint8_t fp[32];
	int tok;

	if (gguf_open(&g, path) == 0) {
		try_tokenizer(&g);
		gguf_close(&g);
	}
	if (model_load(&m, path) < 0)
		return 0;
	model_fingerprint(&m, fp);
	model_run_init(&r, &m, NULL);
	if (kv_init(&kv, m.c.n_layers, m.c.kv_dim, 4, 0) == 0) {
		tok = m.c.vocab_size - 1;
		if (model_forward(&r, &kv, &(int){ 0 }, 1, 0, MODEL_OUT_LAST, NULL) == 0)
			model_forward(&r, &kv, &tok, 1, 1, MODEL_OUT_LAST, NULL);
		kv_free(&kv);
	}
	model_run_free(&r);
	model_free(&m);
	return 0;
}
