/* test_gguf: the reader parses good files and refuses bad ones with a message. */
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/model.h"
#include "../cmd/tool.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/fixture.h"
#include "../tools/ggufw.h"

static char dir[200], good[256], bad[256];
static unsigned char *img;
static size_t img_len;

static void
load_good(void)
{
	struct fixture f;

	fixture_tiny(&f, GGML_Q8_0);
	snprintf(good, sizeof good, "%s/good.gguf", dir);
	snprintf(bad, sizeof bad, "%s/bad.gguf", dir);
	if (fixture_write(&f, good) < 0 || !(img = read_whole(good, &img_len)))
		die(1, "%s:", good);
}

static void
write_bad(const unsigned char *p, size_t n)
{
	write_whole(bad, p, n);
}

/* Open the bad file both ways; 1 if refused with a message containing want. */
static int
refused(const char *want)
{
	struct gguf g;
	struct model m;
	int ok = 1;

	if (gguf_open(&g, bad) == 0) {
		gguf_close(&g);
		ok = 0;
	} else if (want && !strstr(llm_err(), want)) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", llm_err(), want);
		ok = 0;
	}
	if (model_load(&m, bad) == 0) {
		model_free(&m);
		ok = 0;
	}
	return ok;
}

static void
good_file_opens_with_its_metadata(void)
{
	struct gguf g;
	const struct gguf_tensor *t;
	uint32_t v;

	CHECK(gguf_open(&g, good) == 0, "%s", llm_err());
	CHECK(g.version == 3 && g.alignment == 32, "version %u align %u", g.version, g.alignment);
	CHECK(gguf_get_u32(&g, "llama.embedding_length", &v) == 1 && v == 64, "dim %u", v);
	t = gguf_find_tensor(&g, "blk.2.ffn_down.weight");
	CHECK(t && t->type == GGML_Q8_0 && t->ne[0] == 96 && t->ne[1] == 64, "ffn_down");
	CHECK(t && (const unsigned char *)t->data + t->nbytes <= g.map + g.size, "bounds");
	gguf_close(&g);
}

static void
every_truncation_is_refused(void)
{
	size_t n, fails = 0;

	/* Every prefix of the header and tensor table, then coarser steps. */
	for (n = 0; n < img_len; n += n < 20000 ? 1 : 997) {
		write_bad(img, n);
		struct gguf g;
		if (gguf_open(&g, bad) == 0) {
			gguf_close(&g);
			fails++;
		}
	}
	CHECK(fails == 0, "%zu truncated files were accepted", fails);
	write_bad(img, img_len - 1);
	CHECK(refused("past end of file"), "one byte short");
}

static void
bad_magic_is_refused(void)
{
	unsigned char *p = xmalloc(img_len);

	memcpy(p, img, img_len);
	memcpy(p, "GGML", 4);
	write_bad(p, img_len);
	CHECK(refused("bad magic"), "bad magic");
	free(p);
}

static void
unknown_versions_are_refused(void)
{
	unsigned char *p = xmalloc(img_len);
	uint32_t v;

	memcpy(p, img, img_len);
	v = 1;
	memcpy(p + 4, &v, 4);
	write_bad(p, img_len);
	CHECK(refused("version 1"), "v1");
	v = 4;
	memcpy(p + 4, &v, 4);
	write_bad(p, img_len);
	CHECK(refused("version 4"), "v4");
	v = 2;	/* v2 has the same layout as v3 */
	memcpy(p + 4, &v, 4);
	write_bad(p, img_len);
	struct gguf g;
	CHECK(gguf_open(&g, bad) == 0, "v2: %s", llm_err());
	gguf_close(&g);
	free(p);
}

/* Where the m bytes at s first occur in a copy p of the image, or NULL. */
static unsigned char *
find(unsigned char *p, const char *s, size_t m)
{
	const unsigned char *at = mem_find(p, img_len, s, m);

	return at ? p + (at - p) : NULL;
}

static void
absurd_counts_are_refused(void)
{
	unsigned char *p = xmalloc(img_len);
	uint64_t big = (uint64_t)1 << 60;
	unsigned char *at;

	memcpy(p, img, img_len);
	memcpy(p + 8, &big, 8);
	write_bad(p, img_len);
	CHECK(refused("absurd tensor count"), "n_tensors");

	memcpy(p, img, img_len);
	memcpy(p + 16, &big, 8);
	write_bad(p, img_len);
	CHECK(refused("absurd metadata count"), "n_kv");

	/* The vocabulary's array count: just after its key and the two type words. */
	memcpy(p, img, img_len);
	at = find(p, "tokenizer.ggml.tokens", 21);
	CHECK(at != NULL, "no tokens key");
	if (at) {
		memcpy(at + 21 + 8, &big, 8);
		write_bad(p, img_len);
		CHECK(refused("tokenizer.ggml.tokens"), "array count");
		/* A string length past the end of the file. */
		memcpy(p, img, img_len);
		memcpy(at + 21 + 16, &big, 8);
		write_bad(p, img_len);
		CHECK(refused("past end of file"), "string length");
	}
	free(p);
}

static void
tensor_past_end_of_file_is_refused(void)
{
	unsigned char *p = xmalloc(img_len);
	const char *name = "blk.1.attn_v.weight";
	unsigned char *at;
	uint64_t off = img_len;

	memcpy(p, img, img_len);
	at = find(p, name, strlen(name));
	CHECK(at != NULL, "no tensor %s", name);
	if (at) {
		/* name, n_dims (4), ne (2 x 8), type (4), then the offset */
		off = (img_len + 4096) / 32 * 32;
		memcpy(at + strlen(name) + 4 + 16 + 4, &off, 8);
		write_bad(p, img_len);
		CHECK(refused("blk.1.attn_v.weight: data ends past end of file"), "offset");
		off = 3;	/* misaligned */
		memcpy(at + strlen(name) + 4 + 16 + 4, &off, 8);
		write_bad(p, img_len);
		CHECK(refused("not aligned"), "alignment");
	}
	free(p);
}

static void
unsupported_type_names_tensor_and_type(void)
{
	struct ggufw *w = ggufw_new();
	uint64_t ne[2] = { 256, 4 };
	struct model m;
	struct fixture f;

	/* A valid file whose layer-0 Q is q8_K (ggml's activation type), which this build cannot run. */
	fixture_tiny(&f, GGML_F32);
	ggufw_str(w, "general.architecture", "llama");
	ggufw_u32(w, "llama.embedding_length", 256);
	ggufw_u32(w, "llama.block_count", 1);
	ggufw_u32(w, "llama.feed_forward_length", 256);
	ggufw_u32(w, "llama.attention.head_count", 4);
	ggufw_tensor(w, "token_embd.weight", GGML_F32, 2, ne, NULL);
	ne[1] = 1;
	ggufw_tensor(w, "output_norm.weight", GGML_F32, 1, ne, NULL);
	ggufw_tensor(w, "blk.0.attn_norm.weight", GGML_F32, 1, ne, NULL);
	ggufw_tensor(w, "blk.0.ffn_norm.weight", GGML_F32, 1, ne, NULL);
	ne[1] = 256;
	ggufw_tensor(w, "blk.0.attn_q.weight", GGML_Q8_K, 2, ne, NULL);
	CHECK(ggufw_write(w, bad, 3, 32) == 0, "write");
	ggufw_free(w);
	CHECK(model_load(&m, bad) < 0, "loaded");
	CHECK(strstr(llm_err(), "blk.0.attn_q.weight") && strstr(llm_err(), "q8_K"),
	    "message: %s", llm_err());
}

static void
non_llama_architecture_is_refused(void)
{
	struct ggufw *w = ggufw_new();
	struct model m;

	ggufw_str(w, "general.architecture", "mamba");
	CHECK(ggufw_write(w, bad, 3, 32) == 0, "write");
	ggufw_free(w);
	CHECK(model_load(&m, bad) < 0 && strstr(llm_err(), "mamba"), "%s", llm_err());
}

static void
vocabulary_of_integers_is_refused_naming_both_types(void)
{
	struct fixture f;
	struct model m;

	fixture_tiny(&f, GGML_F32);
	f.vocab_as_ints = 1;
	CHECK(fixture_write(&f, bad) == 0, "write");
	CHECK(model_load(&m, bad) < 0, "loaded");
	CHECK(strstr(llm_err(), "key tokenizer.ggml.tokens: expected an array of string, "
	    "found an array of int32"), "message: %s", llm_err());
}

/* A file of one f32 tensor, with general.alignment and a name of pad bytes. */
static void
write_aligned(uint32_t alignment, int pad)
{
	struct ggufw *w = ggufw_new();
	uint64_t ne[1] = { 8 };
	float x[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	char name[8] = "";

	memset(name, 'x', (size_t)pad);
	ggufw_u32(w, "general.alignment", alignment);
	ggufw_str(w, "general.name", name);
	ggufw_tensor(w, "x", GGML_F32, 1, ne, x);
	if (ggufw_write(w, bad, 3, alignment ? alignment : 32) < 0)
		die(1, "%s:", bad);
	ggufw_free(w);
}

static void
misaligned_data_and_odd_alignments_are_refused(void)
{
	struct gguf g;
	int pad, opened = 0, refused_misaligned = 0;

	/* Alignment 1: the data lands wherever the header ends. */
	for (pad = 0; pad < 4; pad++) {
		write_aligned(1, pad);
		if (gguf_open(&g, bad) == 0) {
			const float *p = gguf_find_tensor(&g, "x")->data;
			CHECK((uintptr_t)p % 4 == 0 && p[7] == 8, "pad %d: misaligned data accepted", pad);
			opened++;
			gguf_close(&g);
		} else {
			CHECK(strstr(llm_err(), "tensor x: data at file offset") &&
			    strstr(llm_err(), "is not aligned to its f32 elements"), "%s", llm_err());
			refused_misaligned++;
		}
	}
	CHECK(opened == 1 && refused_misaligned == 3, "%d opened, %d refused", opened,
	    refused_misaligned);
	write_aligned(48, 0);
	CHECK(gguf_open(&g, bad) < 0 && strstr(llm_err(), "48 is not a power of two"), "%s", llm_err());
	write_aligned(0, 0);
	CHECK(gguf_open(&g, bad) < 0 && strstr(llm_err(), "0 is not a power of two"), "%s", llm_err());
}

static void
type_errors_name_the_types(void)
{
	struct ggufw *w = ggufw_new();
	struct gguf g;
	const void *data;
	uint64_t n;
	float f;

	ggufw_str(w, "a.string", "x");
	ggufw_f32_arr(w, "a.floats", &f, 0);
	CHECK(ggufw_write(w, bad, 3, 32) == 0, "write");
	ggufw_free(w);
	CHECK(gguf_open(&g, bad) == 0, "%s", llm_err());
	CHECK(gguf_get_arr(&g, "a.floats", GGUF_INT32, &data, &n) < 0 &&
	    strcmp(llm_err(), "key a.floats: expected an array of int32, found an array of float32") == 0,
	    "%s", llm_err());
	CHECK(gguf_get_f32(&g, "a.string", &f) < 0 &&
	    strcmp(llm_err(), "key a.string: expected a float, found string") == 0, "%s", llm_err());
	CHECK(gguf_get_arr(&g, "a.string", GGUF_INT32, &data, &n) < 0 &&
	    strcmp(llm_err(), "key a.string: expected an array of int32, found string") == 0,
	    "%s", llm_err());
	gguf_close(&g);
}

int
main(void)
{
	snprintf(dir, sizeof dir, "%s", getenv("LLM_TEST_TMP") ? getenv("LLM_TEST_TMP") : "tests/tmp");
	load_good();
	TEST(good_file_opens_with_its_metadata);
	TEST(every_truncation_is_refused);
	TEST(bad_magic_is_refused);
	TEST(unknown_versions_are_refused);
	TEST(absurd_counts_are_refused);
	TEST(tensor_past_end_of_file_is_refused);
	TEST(unsupported_type_names_tensor_and_type);
	TEST(non_llama_architecture_is_refused);
	TEST(vocabulary_of_integers_is_refused_naming_both_types);
	TEST(misaligned_data_and_odd_alignments_are_refused);
	TEST(type_errors_name_the_types);
	free(img);
	CHECK_EXIT();
}
