/*
 * wdigest: each tensor of a GGUF file as llm reads its weights: its name,
 * its type, and the SHA-256 of its elements expanded to f32 by the
 * library's reference dequantization (quant_dequant_row), in file order.
 * An F32 copy that another program dequantized (llama-quantize's F32)
 * gives the same digests exactly when both expand every weight to the
 * same float: tests/test_weights.sh's check against ggml's.
 */
#include <stdio.h>
#include <stdlib.h>

#include "../lib/gguf.h"
#include "../lib/quant.h"
#include "../lib/sha256.h"
#include "../lib/util.h"
#include "../cmd/tool.h"

int
main(int argc, char *argv[])
{
	struct gguf g;
	uint64_t i, r;
	int b;

	argv0 = "wdigest";
	if (argc != 2) {
		fprintf(stderr, "usage: wdigest FILE.gguf\n");
		return 2;
	}
	quant_init();
	if (gguf_open(&g, argv[1]) < 0)
		die(1, "%s: %s", argv[1], llm_err());
	for (i = 0; i < g.n_tensors; i++) {
		const struct gguf_tensor *t = &g.tensors[i];
		uint64_t cols = t->ne[0], rows = t->n_elements / (cols ? cols : 1);
		size_t rb = quant_row_bytes(t->type, (size_t)cols);
		float *row = xmalloc((size_t)cols * sizeof *row);
		struct sha256 c;
		uint8_t d[32];

		if (!quant_supported(t->type))
			die(1, "%s: %s: type %s is not one llm reads", argv[1], t->name, gguf_type_name(t->type));
		sha256_init(&c);
		for (r = 0; r < rows; r++) {
			quant_dequant_row(t->type, (const char *)t->data + r * rb, row, (size_t)cols);
			sha256_update(&c, row, (size_t)cols * sizeof *row);
		}
		sha256_final(&c, d);
		printf("%s %s ", t->name, gguf_type_name(t->type));
		for (b = 0; b < 32; b++)
			printf("%02x", d[b]);
		printf("\n");
		free(row);
	}
	gguf_close(&g);
	return 0;
}
