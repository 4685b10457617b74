/*
 * fixture.c: random Llama models with real shapes.  The weights are
 * seeded, so the same parameters always give the same file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/tok.h"
#include "../lib/unicode.h"
#include "../lib/util.h"
#include "fixture.h"
#include "ggufw.h"

void
fixture_tiny(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 64, .n_layers = 3, .n_heads = 4, .n_kv_heads = 2,
		.ffn_dim = 96, .vocab = 320, .ctx = 512, .rope_base = 10000,
		.tied = 0, .type = type, .seed = 42, .eos_id = 2,
	};
	if (gguf_type_info(type)->block == 256)
		f->dim = 256, f->ffn_dim = 512;
}

void
fixture_smollm2_135m(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 576, .n_layers = 30, .n_heads = 9, .n_kv_heads = 3,
		.ffn_dim = 1536, .vocab = 49152, .ctx = 8192, .rope_base = 100000,
		.tied = 1, .type = type, .seed = 135, .eos_id = 2,
	};
}

/* The family checks' shape: dims of a few hundred, 3 layers, GQA. */
void
fixture_small(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 256, .n_layers = 3, .n_heads = 8, .n_kv_heads = 2,
		.ffn_dim = 512, .vocab = 320, .ctx = 1024, .rope_base = 10000,
		.tied = 0, .type = type, .seed = 256, .eos_id = 2,
	};
}

/* Qwen2.5-0.5B's shapes, for the benchmark: tied, a vocabulary of 151936. */
void
fixture_qwen25_05b(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 896, .n_layers = 24, .n_heads = 14, .n_kv_heads = 2,
		.ffn_dim = 4864, .vocab = 151936, .ctx = 32768, .rope_base = 1000000,
		.tied = 1, .type = type, .seed = 25, .eos_id = 2, .arch = "qwen2",
	};
}

/* Llama-3.2-1B's shapes: 2048 wide (whole blocks of 256 everywhere), 16 layers, tied, a vocabulary of 128256. */
void
fixture_llama32_1b(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 2048, .n_layers = 16, .n_heads = 32, .n_kv_heads = 8,
		.ffn_dim = 8192, .vocab = 128256, .ctx = 8192, .rope_base = 500000,
		.tied = 1, .type = type, .seed = 32, .eos_id = 2,
	};
}

void
fixture_qwen3_30b_a3b(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 2048, .n_layers = 48, .n_heads = 32, .n_kv_heads = 4, .head_dim = 128,
		.ffn_dim = 6144, .vocab = 151936, .ctx = 40960, .rope_base = 1000000,
		.tied = 0, .type = type, .seed = 30, .eos_id = 2, .arch = "qwen3moe",
		.n_expert = 128, .n_expert_used = 8, .expert_ffn = 768,
	};
}

/*
 * gpt-oss-20b's shapes: 2880 wide, 64 heads of 64, 8 KV heads, 32 experts
 * of 2880, 4 a token, a window of 128 on every other layer, YaRN 32 from
 * 4096, o200k's vocabulary of 201088.
 */
void
fixture_gpt_oss_20b(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 2880, .n_layers = 24, .n_heads = 64, .n_kv_heads = 8, .head_dim = 64,
		.ffn_dim = 2880, .vocab = 201088, .ctx = 131072, .rope_base = 150000,
		.tied = 0, .type = type, .seed = 20, .eos_id = 2, .arch = "gpt-oss",
		.n_expert = 32, .n_expert_used = 4, .n_swa = 128, .yarn_factor = 32, .yarn_orig_ctx = 4096,
	};
}

/* gemma-3-270m's shapes: 640 wide, heads of 256, 18 layers, a window of 512. */
void
fixture_gemma3_270m(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 640, .n_layers = 18, .n_heads = 4, .n_kv_heads = 1, .head_dim = 256,
		.ffn_dim = 2048, .vocab = 262144, .ctx = 32768, .rope_base = 1000000,
		.tied = 1, .type = type, .seed = 270, .eos_id = 1, .arch = "gemma3", .n_swa = 512,
	};
}

/* gemma-3-1b's shapes: 1152 wide, heads of 256, 26 layers, a window of 512. */
void
fixture_gemma3_1b(struct fixture *f, uint32_t type)
{
	*f = (struct fixture){
		.dim = 1152, .n_layers = 26, .n_heads = 4, .n_kv_heads = 1, .head_dim = 256,
		.ffn_dim = 6912, .vocab = 262144, .ctx = 32768, .rope_base = 1000000,
		.tied = 1, .type = type, .seed = 1, .eos_id = 1, .arch = "gemma3", .n_swa = 512,
	};
}

static uint64_t
next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Uniform in [-scale, scale). */
static void
fill(float *x, size_t n, float scale, float offset, uint64_t *rng)
{
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = offset + scale * ((float)(next(rng) >> 40) / 8388608.0f - 1.0f);
}

static int mix, mix_layer;

/*
 * A Q4_K_M-like choice, as llama.cpp makes it: Q4_K for most matrices and
 * Q6_K for half the layers' V and FFN-down (fallback_type then gives
 * SmolLM2-135M's 576-wide rows Q5_0 and Q8_0).  Mix 2, a Q2_K-like one:
 * Q2_K, with Q4_K for V (which shares x's rounding with Q and K: both
 * kinds of minimums' sums) and Q3_K for FFN-down.
 */
static uint32_t
mix_type(const char *name, int layer)
{
	int more = strstr(name, "attn_v") || strstr(name, "ffn_down");

	if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "output.weight") == 0)
		return GGML_Q8_0;
	if (mix == 2)
		return strstr(name, "attn_v") ? GGML_Q4_K : strstr(name, "ffn_down") ? GGML_Q3_K : GGML_Q2_K;
	return more && layer % 2 == 0 ? GGML_Q6_K : GGML_Q4_K;
}

/*
 * The type a matrix whose rows are not whole blocks takes instead, as
 * llama.cpp's quantizer chooses it: so -t q6_K on SmolLM2-135M's shape
 * (576-wide rows) gives a file like llama.cpp's Q6_K, not one that no
 * reader accepts.
 */
static uint32_t
fallback_type(uint32_t type, int cols)
{
	const struct gguf_type_info *ti = gguf_type_info(type);

	if (!ti || cols % (int)ti->block == 0)
		return type;
	switch (type) {
	case GGML_Q2_K: case GGML_Q3_K: return GGML_Q4_0;
	case GGML_IQ4_XS: return GGML_IQ4_NL;
	case GGML_Q4_K: return GGML_Q5_0;
	case GGML_Q5_K: return GGML_Q5_1;
	default: return GGML_Q8_0;
	}
}


static void
tensor(struct ggufw *w, const char *name, uint32_t type, int rows, int cols,
    float scale, float offset, uint64_t *rng)
{
	uint64_t ne[2] = { (uint64_t)cols, (uint64_t)rows };
	float *x = xmalloc((size_t)rows * cols * sizeof *x);

	fill(x, (size_t)rows * cols, scale, offset, rng);
	if (mix && rows > 1 && type != GGML_F32)	/* what is asked in f32 stays f32 */
		type = mix_type(name, mix_layer);
	if (type == GGML_MXFP4)		/* as gpt-oss's files: mxfp4 experts (tensor3), the rest q8_0 */
		type = GGML_Q8_0;
	if (rows > 1)
		type = fallback_type(type, cols);
	ggufw_tensor(w, name, type, rows == 1 ? 1 : 2, ne, x);
	free(x);
}

/* n matrices of rows x cols in one 3-D tensor (a routed FFN's experts) */
static void
tensor3(struct ggufw *w, const char *name, uint32_t type, int n, int rows, int cols, float scale,
    uint64_t *rng)
{
	uint64_t ne[3] = { (uint64_t)cols, (uint64_t)rows, (uint64_t)n };
	float *x = xmalloc((size_t)n * rows * cols * sizeof *x);

	fill(x, (size_t)n * rows * cols, scale, 0, rng);
	ggufw_tensor(w, name, fallback_type(type, cols), 3, ne, x);
	free(x);
}

/*
 * Chat templates as the models' own GGUFs have them (shortened): the
 * markers that tell their families apart, and the control tokens they
 * use, which take the last ids of the vocabulary.
 */
static const struct {
	const char *family, *tpl, *marker[6];	/* the last ids, the fifth and sixth before the four */
} chat_fixtures[] = {
	{ "chatml", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
	    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", { "<|im_start|>", "<|im_end|>" } },
	{ "llama3", "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
	    "message['content'] | trim + '<|eot_id|>' }}",
	    { "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>" } },
	{ "llama2", "{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}", { NULL } },
	{ "zephyr", "{{ '<|user|>\\n' + message['content'] + eos_token }}",
	    { "<|system|>", "<|user|>", "<|assistant|>" } },
	{ "phi3", "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>'}}",
	    { "<|system|>", "<|user|>", "<|assistant|>", "<|end|>" } },
	{ "gemma", "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
	    "'<end_of_turn>\\n' }}", { "<start_of_turn>", "<end_of_turn>" } },
	/* gpt-oss's harmony (its message loop) */
	{ "harmony", "{{- '<|start|>' + message.role + '<|channel|>' + message.channel + '<|message|>' + "
	    "message.content + '<|end|>' }}{%- if add_generation_prompt %}<|start|>assistant{%- endif %}",
	    { "<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>" } },
	/* Llama 3.2's, as it ships (tools aside): a system turn with the cutoff and the date, always */
	{ "llama3.2", "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- if "
	    "strftime_now is defined %}\n        {%- set date_string = strftime_now(\"%d %b %Y\") "
	    "%}\n    {%- else %}\n        {%- set date_string = \"26 Jul 2024\" %}\n    {%- endif "
	    "%}\n{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message "
	    "= messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n{%- else %}\n"
	    "    {%- set system_message = \"\" %}\n{%- endif %}\n{{- \"<|start_header_id|>system"
	    "<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
	    "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- system_message }}\n"
	    "{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n    {{- '<|start_header_id|>' + "
	    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' "
	    "}}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>"
	    "assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n",
	    { "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>" } },
	/* ChatML templates with a default system message, as the models ship them */
	{ "smollm2", "{% for message in messages %}{% if loop.first and messages[0]['role'] != "
	    "'system' %}{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, "
	    "trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] "
	    "+ '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
	    "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	    { "<|im_start|>", "<|im_end|>" } },
	{ "qwen2.5", "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if "
	    "messages[0]['role'] == 'system' %}\n        {{- messages[0]['content'] }}\n    {%- else "
	    "%}\n        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' "
	    "}}\n    {%- endif %}\n{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
	    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
	    "    {%- else %}\n        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba "
	    "Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n"
	    "{%- for message in messages %}\n    {{- '<|im_start|>' + message.role + '\\n' + "
	    "message.content + '<|im_end|>' + '\\n' }}\n{%- endfor %}\n{%- if add_generation_prompt "
	    "%}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n",
	    { "<|im_start|>", "<|im_end|>" } },
};

/* A SentencePiece-style vocabulary: specials, 256 bytes, then pieces. */
static void
vocab(struct ggufw *w, int n, int eos_id, int as_ints, const char *chat, int no_space_prefix)
{
	static const char *syl[] = { "a", "e", "i", "o", "u", "ka", "lo", "mi",
	    "ne", "ri", "sa", "to", "the", "and", "was", "day" };
	char **tok = xcalloc((size_t)n, sizeof *tok);
	float *score = xcalloc((size_t)n, sizeof *score);
	int32_t *type = xcalloc((size_t)n, sizeof *type);
	char buf[64];
	int i;

	for (i = 0; i < n; i++) {
		if (i == 0)
			snprintf(buf, sizeof buf, "<unk>"), type[i] = 2;
		else if (i == 1)
			snprintf(buf, sizeof buf, "<s>"), type[i] = 3;
		else if (i == 2)
			snprintf(buf, sizeof buf, "</s>"), type[i] = 3;
		else if (i < 259)
			snprintf(buf, sizeof buf, "<0x%02X>", i - 3), type[i] = 6;
		else
			snprintf(buf, sizeof buf, "\xe2\x96\x81%s%s%d", syl[i % 16],
			    syl[(i / 16) % 16], i), type[i] = 1;
		tok[i] = strdup(buf);
		score[i] = i < 259 ? 0 : -(float)i;
	}
	for (size_t c = 0; chat && c < sizeof chat_fixtures / sizeof chat_fixtures[0]; c++) {
		if (strcmp(chat, chat_fixtures[c].family) != 0)
			continue;
		for (int k = 0; k < 6 && chat_fixtures[c].marker[k]; k++) {
			int id = k < 4 ? n - 4 + k : n - 6 + (k - 4);
			free(tok[id]);
			tok[id] = strdup(chat_fixtures[c].marker[k]);
			type[id] = 3;
		}
		ggufw_str(w, "tokenizer.chat_template", chat_fixtures[c].tpl);
	}
	ggufw_str(w, "tokenizer.ggml.model", "llama");
	if (no_space_prefix)	/* as Gemma's files say */
		ggufw_bool(w, "tokenizer.ggml.add_space_prefix", 0);
	if (as_ints)
		ggufw_i32_arr(w, "tokenizer.ggml.tokens", type, (size_t)n);
	else
		ggufw_str_arr(w, "tokenizer.ggml.tokens", (const char *const *)tok, (size_t)n);
	ggufw_f32_arr(w, "tokenizer.ggml.scores", score, (size_t)n);
	ggufw_i32_arr(w, "tokenizer.ggml.token_type", type, (size_t)n);
	ggufw_u32(w, "tokenizer.ggml.bos_token_id", 1);
	ggufw_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos_id);
	for (i = 0; i < n; i++)
		free(tok[i]);
	free(tok);
	free(score);
	free(type);
}

/* A string array key of g written to w as it is; 0 if absent, -1 on error. */
static int
copy_str_arr(struct ggufw *w, const struct gguf *g, const char *key, uint64_t *count)
{
	struct gguf_str *v;
	uint64_t n, i;
	int r = gguf_get_str_arr(g, key, &v, &n);

	if (r <= 0)
		return r;
	char **s = xcalloc((size_t)n + 1, sizeof *s);
	for (i = 0; i < n; i++)
		s[i] = memcpy(xcalloc((size_t)v[i].n + 1, 1), v[i].s, (size_t)v[i].n);
	ggufw_str_arr(w, key, (const char *const *)s, (size_t)n);
	for (i = 0; i < n; i++)
		free(s[i]);
	free(s), free(v);
	if (count)
		*count = n;
	return 1;
}

/*
 * The tokenizer of the GGUF at path (a real vocabulary, such as
 * ../shared/vocab's), its keys copied; *n its size.  0, or -1 (llm_err).
 */
static int
vocab_copy(struct ggufw *w, const char *path, int *n)
{
	static const char *strs[] = { "tokenizer.ggml.model", "tokenizer.ggml.pre",
		"tokenizer.chat_template" };
	static const char *ids[] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
		"tokenizer.ggml.eot_token_id" };
	static const char *bools[] = { "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_space_prefix" };
	struct gguf g;
	struct gguf_str str;
	const void *data;
	uint64_t count = 0, k;
	uint32_t u;
	int b, r = -1;
	size_t i;

	if (gguf_open(&g, path) < 0)
		return -1;
	if (copy_str_arr(w, &g, "tokenizer.ggml.tokens", &count) <= 0 || count > INT32_MAX) {
		llm_seterr("%s: no tokenizer.ggml.tokens", path);
		goto out;
	}
	*n = (int)count;
	if (copy_str_arr(w, &g, "tokenizer.ggml.merges", NULL) < 0)
		goto out;
	if (gguf_get_arr(&g, "tokenizer.ggml.token_type", GGUF_INT32, &data, &k) > 0)
		ggufw_i32_arr(w, "tokenizer.ggml.token_type", data, (size_t)k);
	if (gguf_get_arr(&g, "tokenizer.ggml.scores", GGUF_FLOAT32, &data, &k) > 0)
		ggufw_f32_arr(w, "tokenizer.ggml.scores", data, (size_t)k);
	for (i = 0; i < sizeof strs / sizeof *strs; i++)
		if (gguf_get_str(&g, strs[i], &str) > 0) {
			char *t = memcpy(xcalloc((size_t)str.n + 1, 1), str.s, (size_t)str.n);
			ggufw_str(w, strs[i], t);
			free(t);
		}
	for (i = 0; i < sizeof ids / sizeof *ids; i++)
		if (gguf_get_u32(&g, ids[i], &u) > 0)
			ggufw_u32(w, ids[i], u);
	for (i = 0; i < sizeof bools / sizeof *bools; i++)
		if (gguf_get_bool(&g, bools[i], &b) > 0)
			ggufw_bool(w, bools[i], b);
	r = 0;
out:
	gguf_close(&g);
	return r;
}

int
fixture_write(const struct fixture *f, const char *path)
{
	struct ggufw *w = ggufw_new();
	uint64_t rng = f->seed * 2654435761u + 1;
	const char *arch = f->arch ? f->arch : "llama";
	int oss = strcmp(arch, "gpt-oss") == 0, moe = strcmp(arch, "qwen3moe") == 0 || oss;
	int qwen3 = strcmp(arch, "qwen3") == 0 || strcmp(arch, "qwen3moe") == 0, phi3 = strcmp(arch, "phi3") == 0;
	int n_exp = f->n_expert > 0 ? f->n_expert : 8, n_used = f->n_expert_used > 0 ? f->n_expert_used : 2;
	int exp_ffn = f->expert_ffn > 0 ? f->expert_ffn : f->ffn_dim;
	int gemma3 = strcmp(arch, "gemma3") == 0;
	/* qwen3, gemma3, gpt-oss: heads of their own size, so that n_heads * head_dim != dim */
	int head_dim = f->head_dim > 0 ? f->head_dim : qwen3 || gemma3 ? f->dim / f->n_heads / 2 * 4 :
	    oss ? f->dim / f->n_heads / 2 * 3 : f->dim / f->n_heads;
	int q_dim = f->n_heads * head_dim, kv_dim = f->n_kv_heads * head_dim;
	/* uniform in [-s, s] has standard deviation s / sqrt(3) */
	float sd = f->std > 0 ? f->std * sqrtf(3) : 1.0f / sqrtf((float)f->dim);
	float sf = f->std > 0 ? sd : 1.0f / sqrtf((float)f->ffn_dim);
	float se = f->std > 0 ? sd : 1.0f;
	char name[64];
	int l, r;

	const char *a = arch;
	char key[96];

	mix = f->q4k_mix;
#define K(s) (snprintf(key, sizeof key, "%s." s, a), key)
	ggufw_str(w, "general.architecture", a);
	ggufw_str(w, "general.name", "llm random fixture");
	ggufw_u32(w, K("context_length"), (uint32_t)f->ctx);
	ggufw_u32(w, K("embedding_length"), (uint32_t)f->dim);
	ggufw_u32(w, K("block_count"), (uint32_t)f->n_layers);
	ggufw_u32(w, K("feed_forward_length"), (uint32_t)f->ffn_dim);
	ggufw_u32(w, K("attention.head_count"), (uint32_t)f->n_heads);
	if (!f->minimal_keys) {
		ggufw_u32(w, K("attention.head_count_kv"), (uint32_t)f->n_kv_heads);
		ggufw_u32(w, K("rope.dimension_count"), (uint32_t)head_dim);
		ggufw_f32(w, K("rope.freq_base"), f->rope_base);
		ggufw_f32(w, K("attention.layer_norm_rms_epsilon"), gemma3 ? 1e-6f : 1e-5f);
	}
	if (oss)
		ggufw_u32(w, K("attention.sliding_window"), (uint32_t)f->n_swa);
	if (f->yarn_factor > 0) {
		ggufw_str(w, K("rope.scaling.type"), f->scaling ? f->scaling : "yarn");
		ggufw_f32(w, K("rope.scaling.factor"), f->yarn_factor);
		ggufw_u32(w, K("rope.scaling.original_context_length"), (uint32_t)f->yarn_orig_ctx);
	}
	if (gemma3) {
		ggufw_u32(w, K("attention.sliding_window"), (uint32_t)f->n_swa);
		if (f->swa_pattern > 0)
			ggufw_u32(w, K("attention.sliding_window_pattern"), (uint32_t)f->swa_pattern);
		if (f->softcap > 0)
			ggufw_f32(w, K("final_logit_softcapping"), f->softcap);
	}
	if (moe) {
		ggufw_u32(w, K("expert_count"), (uint32_t)n_exp);
		ggufw_u32(w, K("expert_used_count"), (uint32_t)n_used);
		ggufw_u32(w, K("expert_feed_forward_length"), (uint32_t)(f->expert_ffn_key > 0 ? f->expert_ffn_key : exp_ffn));
	}
	if (qwen3 || gemma3 || oss) {
		ggufw_u32(w, K("attention.key_length"), (uint32_t)head_dim);
		ggufw_u32(w, K("attention.value_length"), (uint32_t)head_dim);
	}
#undef K
	if (f->extra_key)
		ggufw_f32(w, f->extra_key, 1.0f);
	if (f->eot_id > 0)
		ggufw_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)f->eot_id);
	if (f->eom_id > 0)
		ggufw_u32(w, "tokenizer.ggml.eom_token_id", (uint32_t)f->eom_id);
	int n_vocab = f->vocab;
	if (!f->minimal_keys) {
		ggufw_u32(w, "general.file_type", f->type);
		if (!f->vocab_from)
			vocab(w, f->vocab, f->eos_id, f->vocab_as_ints, f->chat, gemma3);
		else if (vocab_copy(w, f->vocab_from, &n_vocab) < 0) {
			ggufw_free(w);
			return -1;
		}
	}

	tensor(w, "token_embd.weight", f->type, n_vocab, f->dim, se, 0, &rng);
	if (f->rope_freqs) {
		/* Llama 3's shape: high frequencies kept, low ones slowed down up to 8x */
		float fac[512];
		uint64_t ne[1] = { (uint64_t)head_dim / 2 };
		for (int i = 0; i < head_dim / 2; i++)
			fac[i] = 1.0f + 7.0f * (float)i / (float)(head_dim / 2);
		ggufw_tensor(w, "rope_freqs.weight", GGML_F32, 1, ne, fac);
	}
	if (f->extra)
		tensor(w, f->extra, GGML_F32, 1, f->dim, 0.1f, 0, &rng);
	tensor(w, "output_norm.weight", GGML_F32, 1, f->dim, 0.1f, 1, &rng);
	if (!f->tied)
		tensor(w, "output.weight", f->type, n_vocab, f->dim, sd, 0, &rng);
	for (l = 0; l < f->n_layers; l++) {
		mix_layer = l;
#define N(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", l), name)
		tensor(w, N("attn_norm"), GGML_F32, 1, f->dim, 0.1f, 1, &rng);
		if (phi3) {
			/* fused: Q, K and V in one matrix, gate and up in one */
			tensor(w, N("attn_qkv"), f->type, q_dim + 2 * kv_dim, f->dim, sd, 0, &rng);
		} else {
			tensor(w, N("attn_q"), f->type, q_dim, f->dim, sd, 0, &rng);
			tensor(w, N("attn_k"), f->type, kv_dim, f->dim, sd, 0, &rng);
			tensor(w, N("attn_v"), f->type, kv_dim, f->dim, sd, 0, &rng);
		}
		if (qwen3 || gemma3) {
			tensor(w, N("attn_q_norm"), GGML_F32, 1, head_dim, 0.1f, 1, &rng);
			tensor(w, N("attn_k_norm"), GGML_F32, 1, head_dim, 0.1f, 1, &rng);
		}
		tensor(w, N("attn_output"), f->type, f->dim, q_dim, sd, 0, &rng);
		if (oss)	/* sinks about the scores' size, or far below them */
			tensor(w, N("attn_sinks"), GGML_F32, 1, f->n_heads, f->no_sinks ? 0 : 1.0f,
			    f->no_sinks ? -1000 : 0, &rng);
		if (gemma3 || oss)	/* gpt-oss: the FFN's norm */
			tensor(w, N("post_attention_norm"), GGML_F32, 1, f->dim, 0.1f, 1, &rng);
		if (!oss)
			tensor(w, N("ffn_norm"), GGML_F32, 1, f->dim, 0.1f, 1, &rng);
		if (moe) {
			/* the router stays f32, as llama.cpp's quantizer leaves it; its logits a few units apart */
			tensor(w, N("ffn_gate_inp"), GGML_F32, n_exp, f->dim, f->router_zero ? 0 : 4 * sd, 0, &rng);
			tensor3(w, N("ffn_gate_exps"), f->type, n_exp, exp_ffn, f->dim, sd, &rng);
			tensor3(w, N("ffn_up_exps"), f->type, n_exp, exp_ffn, f->dim, sd, &rng);
			tensor3(w, N("ffn_down_exps"), f->type, n_exp, f->dim, exp_ffn,
			    f->std > 0 ? sd : 1.0f / sqrtf((float)exp_ffn), &rng);
			if (oss) {
#define B(s) (snprintf(name, sizeof name, "blk.%d." s ".bias", l), name)
				/* the router's and the experts' biases, a vector per expert: gate and up past the clamps at 7 */
				tensor(w, B("ffn_gate_inp"), GGML_F32, 1, n_exp, f->router_zero ? 0 : 0.5f, 0, &rng);
				tensor(w, B("ffn_gate_exps"), GGML_F32, n_exp, exp_ffn, 8.0f, 0, &rng);
				tensor(w, B("ffn_up_exps"), GGML_F32, n_exp, exp_ffn, 8.0f, 0, &rng);
				tensor(w, B("ffn_down_exps"), GGML_F32, n_exp, f->dim, 0.1f, 0, &rng);
#undef B
			}
		} else if (phi3) {
			tensor(w, N("ffn_up"), f->type, 2 * f->ffn_dim, f->dim, sd, 0, &rng);
		} else {
			tensor(w, N("ffn_gate"), f->type, f->ffn_dim, f->dim, sd, 0, &rng);
			tensor(w, N("ffn_up"), f->type, f->ffn_dim, f->dim, sd, 0, &rng);
		}
		if (!moe)
			tensor(w, N("ffn_down"), f->type, f->dim, f->ffn_dim, sf, 0, &rng);
		if (gemma3)
			tensor(w, N("post_ffw_norm"), GGML_F32, 1, f->dim, 0.1f, 1, &rng);
#undef N
		if ((f->arch && strcmp(f->arch, "qwen2") == 0) || oss) {
#define B(s) (snprintf(name, sizeof name, "blk.%d." s ".bias", l), name)
			tensor(w, B("attn_q"), GGML_F32, 1, q_dim, 0.5f, 0, &rng);
			tensor(w, B("attn_k"), GGML_F32, 1, kv_dim, 0.5f, 0, &rng);
			tensor(w, B("attn_v"), GGML_F32, 1, kv_dim, 0.5f, 0, &rng);
			if (oss)
				tensor(w, B("attn_output"), GGML_F32, 1, f->dim, 0.1f, 0, &rng);
#undef B
		}
	}
	r = ggufw_write(w, path, 3, 32);
	ggufw_free(w);
	return r;
}

/*
 * A byte-level BPE vocabulary: the 256 byte stand-ins (GPT-2's mapping), a
 * few merges toward "hello world", and one control token.
 */
int
fixture_bpe_vocab(const char *path, const char *pre)
{
	static const char *extra[] = { "he", "ll", "hell", "hello", "\xc4\xa0w", "or",
	    "\xc4\xa0wor", "ld", "\xc4\xa0world", "el", "<|endoftext|>" };
	static const char *merges[] = { "h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r",
	    "\xc4\xa0w or", "l d", "\xc4\xa0wor ld", "e l" };
	const char *tokens[256 + 11];
	char store[256][4];
	int32_t types[256 + 11];
	uint32_t next = 256;
	struct ggufw *w = ggufw_new();
	int b, i, r;

	for (b = 0; b < 256; b++) {
		uint32_t cp = ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae) ? (uint32_t)b : next++;
		int n = utf8_encode(cp, store[b]);
		store[b][n] = '\0';
		tokens[b] = store[b];
		types[b] = TT_NORMAL;
	}
	for (i = 0; i < 11; i++) {
		tokens[256 + i] = extra[i];
		types[256 + i] = i == 10 ? TT_CONTROL : TT_NORMAL;
	}
	ggufw_str(w, "general.architecture", "llama");
	ggufw_str(w, "tokenizer.ggml.model", "gpt2");
	ggufw_str(w, "tokenizer.ggml.pre", pre);
	ggufw_str_arr(w, "tokenizer.ggml.tokens", tokens, 267);
	ggufw_i32_arr(w, "tokenizer.ggml.token_type", types, 267);
	ggufw_str_arr(w, "tokenizer.ggml.merges", merges, 10);
	ggufw_u32(w, "tokenizer.ggml.eos_token_id", 266);
	r = ggufw_write(w, path, 3, 32);
	ggufw_free(w);
	return r;
}

/* A SentencePiece vocabulary: specials, 256 byte tokens, a few pieces with scores. */
int
fixture_spm_vocab(const char *path)
{
	static const struct { const char *s; float score; } pieces[] = {
		{ "\xe2\x96\x81", -1 }, { "h", -1 }, { "e", -1 }, { "l", -1 }, { "o", -1 },
		{ "\xe2\x96\x81h", -2 }, { "ll", -3 }, { "\xe2\x96\x81he", -4 }, { "llo", -5 },
		{ "\xe2\x96\x81hello", -6 }, { "\xe2\x96\x81\xe2\x96\x81", -7 },
	};
	enum { N = 3 + 256 + 11 };
	const char *tokens[N];
	char store[256][8];
	float scores[N] = { 0 };
	int32_t types[N];
	struct ggufw *w = ggufw_new();
	int i, r;

	tokens[0] = "<unk>", types[0] = TT_UNKNOWN;
	tokens[1] = "<s>", types[1] = TT_CONTROL;
	tokens[2] = "</s>", types[2] = TT_CONTROL;
	for (i = 0; i < 256; i++) {
		snprintf(store[i], sizeof store[i], "<0x%02X>", i);
		tokens[3 + i] = store[i];
		types[3 + i] = TT_BYTE;
	}
	for (i = 0; i < 11; i++) {
		tokens[259 + i] = pieces[i].s;
		scores[259 + i] = pieces[i].score;
		types[259 + i] = TT_NORMAL;
	}
	ggufw_str(w, "general.architecture", "llama");
	ggufw_str(w, "tokenizer.ggml.model", "llama");
	ggufw_str_arr(w, "tokenizer.ggml.tokens", tokens, N);
	ggufw_f32_arr(w, "tokenizer.ggml.scores", scores, N);
	ggufw_i32_arr(w, "tokenizer.ggml.token_type", types, N);
	ggufw_u32(w, "tokenizer.ggml.bos_token_id", 1);
	ggufw_u32(w, "tokenizer.ggml.eos_token_id", 2);
	r = ggufw_write(w, path, 3, 32);
	ggufw_free(w);
	return r;
}
