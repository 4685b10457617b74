/*
 * test_tok: the tokenizers against the reference vectors in
 * ../shared/vocab, and on small vocabularies of our own.
 */
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/pretok.h"
#include "../lib/tok.h"
#include "../lib/unicode.h"
#include "../lib/util.h"
#include "check.h"
#include "ggufw.h"

static char tmpdir[256], shared[256];

static int
read_file(const char *path, struct buf *b)
{
	FILE *fp = fopen(path, "rb");
	int r;

	if (!fp)
		return -1;
	r = buf_read_all(b, fp);
	fclose(fp);
	return r;
}

static void
decode_all(const struct tok *t, const int *ids, size_t n, struct buf *out)
{
	struct tok_decoder d;
	size_t i;

	tok_decoder_init(&d, t, 0);
	for (i = 0; i < n; i++)
		tok_decode(&d, ids[i], out);
	tok_decode_finish(&d, out);
}

/* Check every vector of one vocabulary; skip if the files are absent. */
static void
reference_vectors(const char *name)
{
	char path[512];
	struct buf inp = { 0 }, outp = { 0 };
	struct gguf g;
	struct tok t;
	const char *sep = "\n__ggml_vocab_test__\n";
	char *in, *line, *next_in, *next_line;
	int ncase = 0, bad_enc = 0, bad_dec = 0;

	snprintf(path, sizeof path, "%s/vocab/%s.inp", shared, name);
	if (read_file(path, &inp) < 0)
		SKIP("%s not present", path);
	snprintf(path, sizeof path, "%s/vocab/%s.out", shared, name);
	CHECK(read_file(path, &outp) == 0, "%s", path);
	snprintf(path, sizeof path, "%s/vocab/%s", shared, name);
	CHECK(gguf_open(&g, path) == 0, "%s", llm_err());
	CHECK(tok_load(&t, &g) == 0, "%s", llm_err());

	for (in = inp.s, line = outp.s; in && *in && line && *line; in = next_in, line = next_line) {
		struct ids want = { 0 }, got = { 0 };
		struct buf text = { 0 };
		char *end = strstr(in, sep), *p, *q;
		size_t len = end ? (size_t)(end - in) : strlen(in);

		next_in = end ? end + strlen(sep) : NULL;
		next_line = strchr(line, '\n');
		if (next_line)
			*next_line++ = '\0';
		for (p = line; *p;) {
			long v = strtol(p, &q, 10);
			if (q == p)
				break;
			ids_push(&want, (int)v);
			p = q;
		}
		tok_encode(&t, in, len, 0, &got);
		if (got.n != want.n || memcmp(got.v, want.v, got.n * sizeof *got.v)) {
			fprintf(stderr, "  %s case %d '%.*s': got", name, ncase, (int)len, in);
			for (size_t i = 0; i < got.n; i++)
				fprintf(stderr, " %d", got.v[i]);
			fprintf(stderr, ", want %s\n", line);
			bad_enc++;
		}
		decode_all(&t, want.v, want.n, &text);
		if (text.n != len || memcmp(text.s ? text.s : "", in, len)) {
			fprintf(stderr, "  %s case %d: decode gives '%.*s', want '%.*s'\n",
			    name, ncase, (int)text.n, text.s, (int)len, in);
			bad_dec++;
		}
		ids_free(&want);
		ids_free(&got);
		buf_free(&text);
		ncase++;
	}
	CHECK(ncase > 40, "%s: only %d cases", name, ncase);
	CHECK(bad_enc == 0, "%s: %d of %d cases encode wrongly", name, bad_enc, ncase);
	CHECK(bad_dec == 0, "%s: %d of %d cases decode wrongly", name, bad_dec, ncase);
	tok_free(&t);
	gguf_close(&g);
	buf_free(&inp);
	buf_free(&outp);
}

/* Cutting SentencePiece input into words must not change a single id. */
static void
llama_spm_word_split_changes_nothing(void)
{
	char path[512];
	struct gguf g;
	struct tok t;
	struct buf text = { 0 };
	struct ids a = { 0 }, b = { 0 };
	int i;

	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
	if (gguf_open(&g, path) < 0)
		SKIP("%s not present", path);
	CHECK(tok_load(&t, &g) == 0, "%s", llm_err());
	CHECK(t.spm_words == 1, "llama-spm should allow the word split");
	for (i = 0; i < 300; i++) {
		static const char *parts[] = { "Hello", " world", "  ", "\n", "int main(void) {",
		    " \u00e9t\u00e9", " 3.14159", "\t", "--", " the", "ing", " \xe4\xb8\xad\xe6\x96\x87",
		    "   x", "\xf0\x9f\x98\x80", "''", " don't" };
		buf_add(&text, parts[(i * 7 + i / 5) % 16], strlen(parts[(i * 7 + i / 5) % 16]));
	}
	tok_encode(&t, text.s, text.n, 0, &a);
	t.spm_words = 0;
	tok_encode(&t, text.s, text.n, 0, &b);
	CHECK(a.n == b.n && memcmp(a.v, b.v, a.n * sizeof *a.v) == 0, "%zu vs %zu ids", a.n, b.n);
	ids_free(&a), ids_free(&b), buf_free(&text);
	tok_free(&t);
	gguf_close(&g);
}

static void gpt2_reference_vectors(void) { reference_vectors("ggml-vocab-gpt-2.gguf"); }
static void starcoder_reference_vectors(void) { reference_vectors("ggml-vocab-starcoder.gguf"); }
static void llama_spm_reference_vectors(void) { reference_vectors("ggml-vocab-llama-spm.gguf"); }

int
main(void)
{
	snprintf(tmpdir, sizeof tmpdir, "%s", getenv("LLM_TEST_TMP") ? getenv("LLM_TEST_TMP") : "tests/tmp");
	snprintf(shared, sizeof shared, "%s", getenv("LLM_SHARED") ? getenv("LLM_SHARED") : "../shared");
	TEST(gpt2_reference_vectors);
	TEST(starcoder_reference_vectors);
	TEST(llama_spm_reference_vectors);
	TEST(llama_spm_word_split_changes_nothing);
	CHECK_EXIT();
}
