/*
 * model.c: the Llama forward pass, in the order the math happens:
 * embedding, then per layer RMSNorm, QKV, RoPE, attention over the
 * cache, output projection, residual, RMSNorm, SwiGLU FFN, residual;
 * then the final norm and the output projection to logits.
 */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "quant.h"
#include "sha256.h"
#include "util.h"

/* ---- loading ---- */

static int
get_u32(struct model *m, const char *key, int required, uint32_t def, int *out)
{
	uint32_t v = def;
	int r = gguf_get_u32(&m->gguf, key, &v);

	if (r < 0)
		return -1;
	if (r == 0 && required) {
		llm_seterr("missing key %s", key);
		return -1;
	}
	if (v > INT32_MAX) {
		llm_seterr("key %s: value %u out of range", key, v);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int
bind_weight(struct model *m, const char *name, int rows, int cols, struct weight *w)
{
	const struct gguf_tensor *t = gguf_find_tensor(&m->gguf, name);

	if (!t) {
		llm_seterr("missing tensor %s", name);
		return -1;
	}
	if (t->n_dims > 2 || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows) {
		llm_seterr("tensor %s: shape %llux%llu, expected %dx%d", name,
		    (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], cols, rows);
		return -1;
	}
	if (!quant_supported(t->type)) {
		llm_seterr("tensor %s: type %s is not supported (supported: %s)",
		    name, gguf_type_name(t->type), quant_supported_list());
		return -1;
	}
	m->used[t - m->gguf.tensors] = 1;
	w->data = t->data;
	w->type = t->type;
	w->rows = rows;
	w->cols = cols;
	w->row_bytes = quant_row_bytes(t->type, (size_t)cols);
	return 0;
}

/* Norm vectors are tiny: use them in place if f32, else convert once. */
static int
bind_norm(struct model *m, const char *name, int n, const float **out)
{
	struct weight w;
	float *p;

	if (bind_weight(m, name, 1, n, &w) < 0)
		return -1;
	if (w.type == GGML_F32) {
		*out = w.data;
		return 0;
	}
	p = xmalloc((size_t)n * sizeof *p);
	quant_dequant_row(w.type, w.data, p, (size_t)n);
	m->owned = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *m->owned);
	if (!m->owned)
		die(1, "out of memory");
	m->owned[m->n_owned++] = p;
	*out = p;
	return 0;
}

/* What sets each family apart from the plain llama forward pass. */
static const struct family {
	const char *name;
	int rope_neox, qkv_bias, qk_norm, fused;
} families[] = {
	{ "llama", 0, 0, 0, 0 },
	{ "qwen2", 1, 1, 0, 0 },	/* Q, K, V biases */
	{ "qwen3", 1, 0, 1, 0 },	/* per-head Q, K norms */
	{ "phi3", 1, 0, 0, 1 },		/* fused QKV and gate+up */
};

static int
read_config(struct model *m)
{
	const struct family *fam;
	struct model_config *c = &m->c;
	const struct gguf_tensor *emb;
	struct gguf_str arch;
	char key[160], a[64];
	float f;
	int r, kl = 0;

	if ((r = gguf_get_str(&m->gguf, "general.architecture", &arch)) <= 0) {
		if (r == 0)
			llm_seterr("missing key general.architecture");
		return -1;
	}
	/* The families differ in a few fields set here; keys are read from "{arch}.". */
	for (fam = families; fam < families + sizeof families / sizeof families[0]; fam++)
		if (arch.n == strlen(fam->name) && memcmp(arch.s, fam->name, arch.n) == 0)
			break;
	if (fam == families + sizeof families / sizeof families[0]) {
		llm_seterr("architecture '%.*s' is not supported (llama, qwen2, qwen3 and phi3 are)",
		    (int)(arch.n > 40 ? 40 : arch.n), arch.s);
		return -1;
	}
	snprintf(c->arch, sizeof c->arch, "%s", fam->name);
	c->rope_neox = fam->rope_neox;
	c->qkv_bias = fam->qkv_bias;
	c->qk_norm = fam->qk_norm;
	c->fused = fam->fused;
	snprintf(a, sizeof a, "%s", c->arch);
#define KEY(s) (snprintf(key, sizeof key, "%s." s, a), key)
	if (get_u32(m, KEY("embedding_length"), 1, 0, &c->dim) ||
	    get_u32(m, KEY("block_count"), 1, 0, &c->n_layers) ||
	    get_u32(m, KEY("feed_forward_length"), 1, 0, &c->ffn_dim) ||
	    get_u32(m, KEY("attention.head_count"), 1, 0, &c->n_heads) ||
	    get_u32(m, KEY("context_length"), 0, 2048, &c->context_length))
		return -1;
	/* llama.cpp's defaults for the optional keys. */
	if (get_u32(m, KEY("attention.head_count_kv"), 0, (uint32_t)c->n_heads, &c->n_kv_heads))
		return -1;
	if (c->dim <= 0 || c->n_layers <= 0 || c->ffn_dim <= 0 || c->n_heads <= 0 ||
	    c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads || c->dim % c->n_heads ||
	    c->context_length <= 0 || c->n_layers > KV_MAX_LAYERS || c->n_heads > KV_MAX_HEADS) {
		llm_seterr("bad hyperparameters: dim %d, %d layers, %d heads, %d kv heads",
		    c->dim, c->n_layers, c->n_heads, c->n_kv_heads);
		return -1;
	}
	if (get_u32(m, KEY("attention.key_length"), 0, (uint32_t)(c->dim / c->n_heads), &kl))
		return -1;
	c->head_dim = kl;
	if (c->head_dim <= 0 || c->head_dim % 2 || c->head_dim > KV_MAX_HEAD_DIM) {
		llm_seterr("bad head dimension %d", c->head_dim);
		return -1;
	}
	c->kv_dim = c->n_kv_heads * c->head_dim;	/* at most 2^28: no overflow */
	if (c->kv_dim > KV_MAX_DIM || c->context_length > KV_MAX_CTX) {
		llm_seterr("bad hyperparameters: kv_dim %d, context_length %d (at most %d and %d)",
		    c->kv_dim, c->context_length, KV_MAX_DIM, KV_MAX_CTX);
		return -1;
	}
	if (get_u32(m, KEY("rope.dimension_count"), 0, (uint32_t)c->head_dim, &c->rope_dim))
		return -1;
	if (c->rope_dim <= 0 || c->rope_dim > c->head_dim || c->rope_dim % 2) {
		llm_seterr("bad rope.dimension_count %d for head dimension %d",
		    c->rope_dim, c->head_dim);
		return -1;
	}
	c->rope_base = 10000.0f;
	if ((r = gguf_get_f32(&m->gguf, KEY("rope.freq_base"), &f)) < 0)
		return -1;
	if (r)
		c->rope_base = f;
	c->rms_eps = 1e-5f;
	if ((r = gguf_get_f32(&m->gguf, KEY("attention.layer_norm_rms_epsilon"), &f)) < 0)
		return -1;
	if (r)
		c->rms_eps = f;
	if (!(c->rope_base > 0) || !(c->rms_eps >= 0)) {
		llm_seterr("bad rope.freq_base or layer_norm_rms_epsilon");
		return -1;
	}
#undef KEY
	if (!(emb = gguf_find_tensor(&m->gguf, "token_embd.weight"))) {
		llm_seterr("missing tensor token_embd.weight");
		return -1;
	}
	/* The fingerprint walks the vocabulary's strings: make sure they are strings. */
	if (gguf_check_arr(&m->gguf, "tokenizer.ggml.tokens", GGUF_STRING) < 0)
		return -1;
	c->vocab_size = (int)emb->ne[1];
	c->bos_id = c->eos_id = c->eot_id = c->eom_id = -1;
	if (get_u32(m, "tokenizer.ggml.bos_token_id", 0, UINT32_MAX >> 1, &c->bos_id) ||
	    get_u32(m, "tokenizer.ggml.eos_token_id", 0, UINT32_MAX >> 1, &c->eos_id) ||
	    get_u32(m, "tokenizer.ggml.eot_token_id", 0, UINT32_MAX >> 1, &c->eot_id) ||
	    get_u32(m, "tokenizer.ggml.eom_token_id", 0, UINT32_MAX >> 1, &c->eom_id))
		return -1;
	if (c->bos_id >= c->vocab_size)
		c->bos_id = -1;
	if (c->eos_id >= c->vocab_size)
		c->eos_id = -1;
	if (c->eot_id >= c->vocab_size)
		c->eot_id = -1;
	if (c->eom_id >= c->vocab_size)
		c->eom_id = -1;
	return 0;
}

/* Rows [r0, r0 + n) of a bound matrix, as a matrix of their own. */
static struct weight
rows_of(const struct weight *w, int r0, int n)
{
	struct weight v = *w;

	v.data = (const char *)w->data + (size_t)r0 * w->row_bytes;
	v.rows = n;
	return v;
}

static int
bind_weights(struct model *m)
{
	const struct model_config *c = &m->c;
	int q_dim = c->n_heads * c->head_dim;
	char name[96];
	int l;

	if (bind_weight(m, "token_embd.weight", c->vocab_size, c->dim, &m->token_embd) ||
	    bind_norm(m, "output_norm.weight", c->dim, &m->output_norm))
		return -1;
	/* No output.weight means the output is tied to the embedding. */
	if (gguf_find_tensor(&m->gguf, "output.weight")) {
		if (bind_weight(m, "output.weight", c->vocab_size, c->dim, &m->output))
			return -1;
	} else {
		m->output = m->token_embd;
	}
	m->layers = xcalloc((size_t)c->n_layers, sizeof *m->layers);
	for (l = 0; l < c->n_layers; l++) {
		struct layer_weights *L = &m->layers[l];
#define W(s) (snprintf(name, sizeof name, "blk.%d." s ".weight", l), name)
		if (bind_norm(m, W("attn_norm"), c->dim, &L->attn_norm) ||
		    bind_norm(m, W("ffn_norm"), c->dim, &L->ffn_norm))
			return -1;
		if (c->fused) {
			/* one matrix each, split into views: rows are contiguous */
			struct weight qkv, gate_up;
			if (bind_weight(m, W("attn_qkv"), q_dim + 2 * c->kv_dim, c->dim, &qkv) ||
			    bind_weight(m, W("ffn_up"), 2 * c->ffn_dim, c->dim, &gate_up))
				return -1;
			L->wq = rows_of(&qkv, 0, q_dim);
			L->wk = rows_of(&qkv, q_dim, c->kv_dim);
			L->wv = rows_of(&qkv, q_dim + c->kv_dim, c->kv_dim);
			L->w_gate = rows_of(&gate_up, 0, c->ffn_dim);
			L->w_up = rows_of(&gate_up, c->ffn_dim, c->ffn_dim);
		} else if (bind_weight(m, W("attn_q"), q_dim, c->dim, &L->wq) ||
		    bind_weight(m, W("attn_k"), c->kv_dim, c->dim, &L->wk) ||
		    bind_weight(m, W("attn_v"), c->kv_dim, c->dim, &L->wv) ||
		    bind_weight(m, W("ffn_gate"), c->ffn_dim, c->dim, &L->w_gate) ||
		    bind_weight(m, W("ffn_up"), c->ffn_dim, c->dim, &L->w_up)) {
			return -1;
		}
		if (bind_weight(m, W("attn_output"), c->dim, q_dim, &L->wo) ||
		    bind_weight(m, W("ffn_down"), c->dim, c->ffn_dim, &L->w_down))
			return -1;
		if (c->qk_norm && (bind_norm(m, W("attn_q_norm"), c->head_dim, &L->q_norm) ||
		    bind_norm(m, W("attn_k_norm"), c->head_dim, &L->k_norm)))
			return -1;
#undef W
#define B(s) (snprintf(name, sizeof name, "blk.%d." s ".bias", l), name)
		if (c->qkv_bias && (bind_norm(m, B("attn_q"), q_dim, &L->bq) ||
		    bind_norm(m, B("attn_k"), c->kv_dim, &L->bk) ||
		    bind_norm(m, B("attn_v"), c->kv_dim, &L->bv)))
			return -1;
#undef B
	}
	/* Llama 3.1/3.2: a factor for each RoPE frequency (rope scaling, baked in by the converter). */
	if (gguf_find_tensor(&m->gguf, "rope_freqs.weight") &&
	    bind_norm(m, "rope_freqs.weight", c->rope_dim / 2, &m->rope_factors) < 0)
		return -1;
	/* A tensor the forward pass does not use would silently change nothing: refuse it. */
	for (uint64_t i = 0; i < m->gguf.n_tensors; i++)
		if (!m->used[i]) {
			llm_seterr("tensor %.80s is not used by the %s forward pass of this build",
			    m->gguf.tensors[i].name, c->arch);
			return -1;
		}
	return 0;
}

int
model_load(struct model *m, const char *path)
{
	const struct model_config *c = &m->c;
	int i, q_dim;

	memset(m, 0, sizeof *m);
	quant_init();
	if (gguf_open(&m->gguf, path) < 0)
		return -1;
	m->used = xcalloc(m->gguf.n_tensors ? m->gguf.n_tensors : 1, 1);
	if (read_config(m) < 0 || bind_weights(m) < 0) {
		model_free(m);
		return -1;
	}
	q_dim = c->n_heads * c->head_dim;
	m->x = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
	m->xb = xcalloc((size_t)MODEL_BATCH * (q_dim > c->dim ? q_dim : c->dim), sizeof(float));
	m->xb2 = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
	m->hb = xcalloc((size_t)MODEL_BATCH * c->ffn_dim, sizeof(float));
	m->hb2 = xcalloc((size_t)MODEL_BATCH * c->ffn_dim, sizeof(float));
	m->q = xcalloc((size_t)MODEL_BATCH * q_dim, sizeof(float));
	m->kbuf = xcalloc((size_t)MODEL_BATCH * c->kv_dim, sizeof(float));
	m->vbuf = xcalloc((size_t)MODEL_BATCH * c->kv_dim, sizeof(float));
	m->logits = xcalloc((size_t)c->vocab_size, sizeof(float));
	m->rope_inv_freq = xcalloc((size_t)c->rope_dim / 2, sizeof(double));
	m->rope_cs = xcalloc((size_t)MODEL_BATCH * c->rope_dim, sizeof(float));
	for (i = 0; i < c->rope_dim / 2; i++)
		m->rope_inv_freq[i] = pow((double)c->rope_base, -2.0 * i / c->rope_dim) /
		    (m->rope_factors ? (double)m->rope_factors[i] : 1.0);
	return 0;
}

void
model_free(struct model *m)
{
	int i;

	for (i = 0; i < m->n_owned; i++)
		free(m->owned[i]);
	free(m->owned);
	free(m->layers);
	free(m->x);
	free(m->xb);
	free(m->xb2);
	free(m->hb);
	free(m->hb2);
	free(m->q);
	free(m->kbuf);
	free(m->vbuf);
	free(m->logits);
	free(m->att);
	free(m->tile);
	free(m->xr);
	free(m->rope_inv_freq);
	free(m->rope_cs);
	free(m->used);
	gguf_close(&m->gguf);
	memset(m, 0, sizeof *m);
}

void
model_set_pool(struct model *m, struct pool *pool)
{
	m->pool = pool;
}

uint64_t
model_weight_bytes(const struct model *m)
{
	const struct model_config *c = &m->c;
	uint64_t n = 0;
	int l;

	for (l = 0; l < c->n_layers; l++) {
		const struct layer_weights *L = &m->layers[l];
		const struct weight *w[] = { &L->wq, &L->wk, &L->wv, &L->wo,
		    &L->w_gate, &L->w_up, &L->w_down };
		for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
			n += (uint64_t)w[i]->rows * w[i]->row_bytes;
		n += 2 * (uint64_t)c->dim * sizeof(float);
	}
	/* One embedding row, the final norm and the whole output matrix. */
	return n + m->token_embd.row_bytes + (uint64_t)c->dim * sizeof(float) +
	    (uint64_t)m->output.rows * m->output.row_bytes;
}

void
model_fingerprint(const struct model *m, uint8_t out[32])
{
	const struct model_config *c = &m->c;
	const struct gguf_kv *vocab = gguf_find_kv(&m->gguf, "tokenizer.ggml.tokens");
	uint32_t v[9] = { (uint32_t)c->dim, (uint32_t)c->n_layers, (uint32_t)c->n_heads,
		(uint32_t)c->n_kv_heads, (uint32_t)c->head_dim, (uint32_t)c->ffn_dim,
		(uint32_t)c->vocab_size, (uint32_t)c->context_length, (uint32_t)c->rope_dim };
	struct sha256 h;
	uint64_t i, n;
	int d;

	sha256_init(&h);
	sha256_update(&h, "llm-fingerprint1", 16);
	sha256_update(&h, v, sizeof v);
	sha256_update(&h, &c->rope_base, 4);
	sha256_update(&h, &c->rms_eps, 4);
	/* llama's fingerprints stay what they were; another family names itself */
	if (strcmp(c->arch, "llama") != 0)
		sha256_update(&h, c->arch, strlen(c->arch));
	for (i = 0; i < m->gguf.n_tensors; i++) {
		const struct gguf_tensor *t = &m->gguf.tensors[i];
		const uint8_t *data = t->data;
		uint32_t nd = (uint32_t)t->n_dims;

		n = strlen(t->name);
		sha256_update(&h, &n, 8);
		sha256_update(&h, t->name, n);
		sha256_update(&h, &t->type, 4);
		sha256_update(&h, &nd, 4);
		for (d = 0; d < t->n_dims; d++)
			sha256_update(&h, &t->ne[d], 8);
		/* A sample of the weights tells a fine-tune from its base model. */
		if (t->nbytes < 768) {
			sha256_update(&h, data, t->nbytes);
		} else {
			sha256_update(&h, data, 256);
			sha256_update(&h, data + t->nbytes / 2 / 256 * 256, 256);
			sha256_update(&h, data + t->nbytes - 256, 256);
		}
	}
	if (vocab && vocab->type == GGUF_ARRAY && vocab->arr_type == GGUF_STRING) {
		/* The raw array: element type, count, then the strings. */
		const uint8_t *p = vocab->data + 12;
		for (i = 0; i < vocab->arr_n; i++) {
			memcpy(&n, p, 8);
			p += 8 + n;
		}
		sha256_update(&h, vocab->data, (size_t)(p - vocab->data));
	}
	sha256_final(&h, out);
}

/* ---- the math ---- */

/*
 * The sum of squares in eight interleaved partial sums, then a fixed tree:
 * one running sum was a chain of n dependent additions, 3% of a prefill.
 */
static float
sum_squares(const float *x, int n)
{
	float s[8] = { 0 };
	int i, j;

	for (i = 0; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			s[j] += x[i + j] * x[i + j];
	for (j = 0; i < n; i++, j++)
		s[j] += x[i] * x[i];
	return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void
rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
	float ss = 1.0f / sqrtf(sum_squares(x, n) / n + eps), t[8];
	int i, j;

	/* eight at a time, all read before any is written: out may be x */
	for (i = 0; i + 8 <= n; i += 8) {
		for (j = 0; j < 8; j++)
			t[j] = weight[i + j] * (ss * x[i + j]);
		memcpy(out + i, t, sizeof t);
	}
	for (; i < n; i++)
		out[i] = weight[i] * (ss * x[i]);
}


/*
 * Below this many multiply-adds a step runs on the calling thread: a
 * hand-off costs microseconds, more than the work (stories260K's
 * matrices, a decode step's norms), and far more when another process
 * holds a core.
 */
#define INLINE_MACS (1 << 16)

/* Run fn on the pool, or on the calling thread if its work is too small to hand off. */
static void
run(struct model *m, pool_fn fn, void *arg, long long work)
{
	if (work < INLINE_MACS)
		fn(arg, 0, 1);
	else
		pool_run(m->pool, fn, arg);
}

/*
 * The per-token steps of a batch, shared among the threads by tokens:
 * residual adds and RMS norms, and SwiGLU's silu(gate) * up.  Each
 * token's row is computed alone, so the bits do not depend on the split.
 * A residual add runs in the norm's job that follows it: on the calling
 * thread alone it cost 2% of a prompt, the other thread waiting.
 */
#define ROW_COST 8	/* multiply-adds an element of a norm or a silu is worth */

struct rows_job {
	float *out;		/* norms: out = norm(x) * weight; silu: out = silu(out) * x */
	float *x;
	const float *weight;
	int n, len;
	float eps;
	const float *add;	/* norms: x += add first, if not NULL */
};

static void
norm_rows(void *arg, int ith, int nth)
{
	const struct rows_job *j = arg;
	size_t len = (size_t)j->len;

	for (int i = j->n * ith / nth; i < j->n * (ith + 1) / nth; i++) {
		float *x = j->x + i * len;
		for (size_t e = 0; j->add && e < len; e++)
			x[e] += j->add[i * len + e];
		rmsnorm(j->out + i * len, x, j->weight, j->len, j->eps);
	}
}

static void
silu_rows(void *arg, int ith, int nth)
{
	const struct rows_job *j = arg;
	size_t len = (size_t)j->len;
	int i0 = j->n * ith / nth, i1 = j->n * (ith + 1) / nth;

	quant_silu_mul(j->out + i0 * len, j->x + i0 * len, (size_t)(i1 - i0) * len);
}

/* g = silu(g) * u, for each of n rows of the FFN. */
static void
swiglu(struct model *m, float *g, float *u, int n)
{
	struct rows_job job = { g, u, NULL, n, m->c.ffn_dim, 0, NULL };

	run(m, silu_rows, &job, (long long)n * m->c.ffn_dim * ROW_COST);
}

/* x += add (if not NULL), then out = norm(x) * weight, for each of n rows. */
static void
add_norm(struct model *m, float *out, float *x, const float *add, const float *weight, int n)
{
	struct rows_job job = { out, x, weight, n, m->c.dim, m->c.rms_eps, add };

	run(m, norm_rows, &job, (long long)n * m->c.dim * ROW_COST);
}

/*
 * Matrix products over one input batch X (T rows of ldx floats): each
 * weight matrix writes T output rows of ldo floats.  Threads split the
 * weight rows of all the matrices together.  One token's rows go a share
 * a thread, each read front to back as one stream, and a thread done
 * with its own takes halves of another's rest from the back: slices
 * claimed in turn broke the streams (decode 2-13% slower), and fixed
 * halves kept the calling thread waiting 7% of a decode.  A batch's go in
 * slices (multiples of 48 rows, about 8 a thread, down to 48 rows as
 * the rows left run out) that the threads claim in turn, so that a thread
 * slowed by a neighbour does fewer of them: with halves, a batch's two
 * threads finished up to a quarter of their time apart.
 *
 * A batch of GROUP_TOKENS tokens a thread or more is also split by
 * tokens, a group a thread, as the norms and the SwiGLU split it: a
 * thread claims the slices of its own group's rows first, then helps with
 * the others'.  So a thread mostly writes the outputs that its next norm
 * reads, and reads the inputs that its last norm wrote: with every thread
 * writing part of every token's outputs, the norms waited on the other
 * core's cache lines (6% of a 512-token f32 prompt on AVX2, now 0.7%).
 * The price is each weight read once a group instead of once: end to
 * end, avx512vnni f32 prompts of 512 tokens ran 6% faster, the others
 * within the noise.  Each output is computed the same way whoever
 * computes it.
 */
struct matvec {
	float *out;
	size_t ldo;
	const struct weight *w;
};

#define MAX_SHARES 64	/* threads that one token's shares or a batch's groups are for */
#define GROUP_TOKENS 32	/* a batch of this many a thread goes in a group of tokens a thread */

struct matmul_job {
	const struct matvec *mv;
	int n;
	const float *x;
	size_t ldx;
	const float *xr;	/* x rounded once, for the types that take it, or NULL */
	size_t xr_group;	/* floats of xr a group's tokens take */
	int T;
	int groups;		/* a batch's groups of tokens: 1, or a thread's each */
	int total_rows;
	int slice;		/* rows a claim takes, for a batch */
	atomic_int next[MAX_SHARES];	/* each group's first row not yet claimed */
	_Atomic uint64_t share[MAX_SHARES];	/* one token: each thread's rows left, SHARE(lo, hi) */
};

#define SHARE(lo, hi) ((uint64_t)(uint32_t)(hi) << 32 | (uint32_t)(lo))

/* The first token of group g, and how many it has. */
static int
group_tokens(const struct matmul_job *job, int g, int *t0)
{
	*t0 = job->T * g / job->groups;
	return job->T * (g + 1) / job->groups - *t0;
}

/* Rows lo to hi of all the matrices together, for the tokens of group g. */
static void
matmul_rows(const struct matmul_job *job, int g, int lo, int hi)
{
	int i, t0, T = group_tokens(job, g, &t0), base = 0;

	for (i = 0; i < job->n && lo < hi; i++) {
		const struct weight *w = job->mv[i].w;
		float *out = job->mv[i].out + (size_t)t0 * job->mv[i].ldo;
		int r0 = lo > base ? lo - base : 0;
		int r1 = hi - base < w->rows ? hi - base : w->rows;

		if (r0 < r1 && job->xr && quant_rounds_once(w->type))
			quant_gemm_rounded(w->type, w->data, w->row_bytes, r0, r1, w->cols,
			    job->xr + job->xr_group * g, T, out, job->mv[i].ldo);
		else if (r0 < r1)
			quant_gemm(w->type, w->data, w->row_bytes, r0, r1, w->cols,
			    job->x + (size_t)t0 * job->ldx, job->ldx, T, out, job->mv[i].ldo);
		base += w->rows;
	}
}

/*
 * One token: each thread takes its own share's rows from the front, half
 * of what is left at a time (at least 64 rows: a part is a call, and 32
 * measured no better), in one stream (the tiles prefetch into the next
 * part), then halves of what others have left, from the back.  Parts
 * are multiples of 16 rows, whole decode tiles (8 rows, 16 for
 * AVX-512's integer rule).
 */
static void
matvec_share(struct matmul_job *job, int ith, int nth)
{
	_Atomic uint64_t *share = &job->share[ith];
	uint64_t s = atomic_load_explicit(share, memory_order_relaxed);
	int lo, hi, size, mid, j;

	for (;;) {
		lo = (int)(uint32_t)s, hi = (int)(s >> 32);
		if (lo >= hi)
			break;
		size = (hi - lo) / 2 / 16 * 16;
		size = size < 64 ? 64 : size;
		size = size > hi - lo ? hi - lo : size;
		if (atomic_compare_exchange_weak_explicit(share, &s, SHARE(lo + size, hi),
		    memory_order_relaxed, memory_order_relaxed)) {
			matmul_rows(job, 0, lo, lo + size);
			s = atomic_load_explicit(share, memory_order_relaxed);
		}
	}
	for (j = 1; j < nth; j++) {
		share = &job->share[(ith + j) % nth];
		s = atomic_load_explicit(share, memory_order_relaxed);
		for (;;) {
			lo = (int)(uint32_t)s, hi = (int)(s >> 32);
			mid = lo + ((hi - lo) / 2 + 15) / 16 * 16;
			if (mid >= hi)
				break;
			if (atomic_compare_exchange_weak_explicit(share, &s, SHARE(lo, mid),
			    memory_order_relaxed, memory_order_relaxed)) {
				matmul_rows(job, 0, mid, hi);
				s = atomic_load_explicit(share, memory_order_relaxed);
			}
		}
	}
}

static void
matmul_worker(void *arg, int ith, int nth)
{
	struct matmul_job *job = arg;
	int lo, hi, j, g;

	if (job->T == 1 && nth == 1) {	/* run inline: the shares are set for the pool */
		matmul_rows(job, 0, 0, job->total_rows);
		return;
	}
	if (job->T == 1 && nth <= MAX_SHARES) {
		matvec_share(job, ith, nth);
		return;
	}
	for (j = 0; j < job->groups; j++) {	/* its own group first */
		g = (ith + j) % job->groups;
		lo = atomic_load_explicit(&job->next[g], memory_order_relaxed);
		while (lo < job->total_rows) {
			/* a share of what is left, smaller as it shrinks, so that the threads end together */
			int size = (job->total_rows - lo) / (2 * nth) / 48 * 48;

			size = size < 48 ? 48 : size > job->slice ? job->slice : size;
			hi = lo + size < job->total_rows ? lo + size : job->total_rows;
			if (atomic_compare_exchange_weak_explicit(&job->next[g], &lo, hi,
			    memory_order_relaxed, memory_order_relaxed)) {
				matmul_rows(job, g, lo, hi);
				lo = atomic_load_explicit(&job->next[g], memory_order_relaxed);
			}
		}
	}
}

/* The batch's tokens rounded into job->xr, a group's into its own part. */
static void
round_worker(void *arg, int ith, int nth)
{
	struct matmul_job *job = arg;
	int g, t0, T;

	if (job->groups == 1) {	/* the threads share the tokens out */
		quant_round(job->x, job->ldx, job->T * ith / nth, job->T * (ith + 1) / nth, job->T,
		    job->mv[0].w->cols, (float *)job->xr);
		return;
	}
	for (g = ith; g < job->groups; g += nth) {
		T = group_tokens(job, g, &t0);
		quant_round(job->x + (size_t)t0 * job->ldx, job->ldx, 0, T, T, job->mv[0].w->cols,
		    (float *)job->xr + job->xr_group * g);
	}
}

static void
matmul(struct model *m, const struct matvec *mv, int n, const float *x, size_t ldx, int T)
{
	struct matmul_job job = { .mv = mv, .n = n, .x = x, .ldx = ldx, .T = T, .groups = 1 };
	int i, cols = mv[0].w->cols, once = 0, nth = pool_threads(m->pool);

	if (nth > 1 && nth <= MAX_SHARES && T >= GROUP_TOKENS * nth)
		job.groups = nth;
	for (i = 0; i < job.groups; i++)
		atomic_init(&job.next[i], 0);
	for (i = 0; i < n; i++) {
		job.total_rows += mv[i].w->rows;
		once |= quant_rounds_once(mv[i].w->type);
	}
	/*
	 * Products that round x take it rounded once, not once a claim:
	 * rounded in every claim, it took 13% of a q8_0 prompt, and one
	 * token's shares are claimed in parts.
	 */
	if (once) {
		size_t need;

		/* the groups' parts, each for the largest group */
		job.xr_group = quant_rounded_floats((T + job.groups - 1) / job.groups, cols);
		need = job.xr_group * job.groups;
		if (need > m->xr_floats) {
			free(m->xr);
			m->xr = xmalloc(need * sizeof *m->xr);
			m->xr_floats = need;
		}
		job.xr = m->xr;
		run(m, round_worker, &job, (long long)T * cols * ROW_COST);
	}
	for (i = 0; T == 1 && i < nth && nth <= MAX_SHARES; i++) {
		int lo = (int)((long long)job.total_rows * i / nth) / 16 * 16;
		int hi = i == nth - 1 ? job.total_rows : (int)((long long)job.total_rows * (i + 1) / nth) / 16 * 16;

		atomic_init(&job.share[i], SHARE(lo, hi));
	}
	/* about 8 claims a thread, in multiples of 48: whole tiles of 3, 4, 8 or 48 rows */
	job.slice = job.total_rows / (8 * nth) / 48 * 48;
	if (job.slice < 48)
		job.slice = 48;
	run(m, matmul_worker, &job, (long long)job.total_rows * cols * T);
}

/*
 * RoPE: rotate pairs of each head's first rope_dim dimensions by pos times
 * their frequency: adjacent pairs (x[2i], x[2i+1]) in llama's "normal"
 * style, (x[i], x[i + rope_dim/2]) in the NEOX style of qwen2.  The
 * angles' cos and sin are computed once a pass (rope_angles into cs[2i],
 * cs[2i + 1]), not per layer: each is a call to cos and one to sin.
 */
static void
rope_angles(const struct model *m, int pos, float *cs)
{
	int i;

	for (i = 0; i < m->c.rope_dim / 2; i++) {
		double theta = pos * m->rope_inv_freq[i];
		cs[2 * i] = (float)cos(theta);
		cs[2 * i + 1] = (float)sin(theta);
	}
}

/* Rotate by the angles of rope_angles(). */
static void
rope_by(const struct model *m, float *vec, int n_heads, const float *cs)
{
	const struct model_config *c = &m->c;
	int h, i, half = c->rope_dim / 2;

	for (i = 0; i < half; i++) {
		float co = cs[2 * i], sn = cs[2 * i + 1];
		int a = c->rope_neox ? i : 2 * i, b = c->rope_neox ? i + half : 2 * i + 1;

		for (h = 0; h < n_heads; h++) {
			float *p = vec + h * c->head_dim;
			float x0 = p[a], x1 = p[b];

			p[a] = x0 * co - x1 * sn;
			p[b] = x0 * sn + x1 * co;
		}
	}
}

/* RMS-norm each head of a row with weight (head_dim); nothing without one. */
static void
head_norm(const struct model *m, float *row, int heads, const float *weight)
{
	for (int h = 0; weight && h < heads; h++) {
		float *p = row + (size_t)h * m->c.head_dim;
		rmsnorm(p, p, weight, m->c.head_dim, m->c.rms_eps);
	}
}

/* Add a bias to a row of len floats; nothing if there is none. */
static void
add_bias(float *row, const float *bias, int len)
{
	for (int j = 0; bias && j < len; j++)
		row[j] += bias[j];
}

/*
 * A batch's Q, K and V rows after their products: the family's biases and
 * per-head norms if it has them, then RoPE; shared out by tokens.
 */
struct qkv_job {
	const struct model *m;
	const struct layer_weights *L;
	float *q, *k, *v;
	int n;
};

static void
qkv_rows(void *arg, int ith, int nth)
{
	const struct qkv_job *j = arg;
	const struct model_config *c = &j->m->c;
	int Q = c->n_heads * c->head_dim, KV = c->kv_dim;

	for (int i = j->n * ith / nth; i < j->n * (ith + 1) / nth; i++) {
		float *q = j->q + (size_t)i * Q, *k = j->k + (size_t)i * KV, *v = j->v + (size_t)i * KV;
		const float *cs = j->m->rope_cs + (size_t)i * c->rope_dim;

		add_bias(q, j->L->bq, Q);
		add_bias(k, j->L->bk, KV);
		add_bias(v, j->L->bv, KV);
		head_norm(j->m, q, c->n_heads, j->L->q_norm);
		head_norm(j->m, k, c->n_kv_heads, j->L->k_norm);
		rope_by(j->m, q, c->n_heads, cs);
		rope_by(j->m, k, c->n_kv_heads, cs);
	}
}

struct attn_job {
	struct model *m;
	const struct kv *kv;
	int layer, pos, n;	/* tokens at positions pos..pos+n-1 */
	int row;		/* the first token's row in the batch */
	float *keys;		/* a thread's: the q8_0 tail keys a query reads, widened (tile_keys) */
	atomic_int *next;	/* a batch's next (tile, KV head) to claim */
};

/* Tokens whose queries share one pass over the cache: each cached row is read once per tile. */
#define ATTN_TILE 16

/* A thread's part of m->tile: a tile's queries, its outputs, then KV_TAIL keys of a head. */
static size_t
tile_floats(const struct model_config *c)
{
	return (size_t)(2 * ATTN_TILE * (c->n_heads / c->n_kv_heads) + KV_TAIL) * c->head_dim;
}

/* Where thread ith's part of m->tile keeps the widened keys. */
static float *
tile_keys(const struct model *m, int ith)
{
	size_t part = tile_floats(&m->c);

	return m->tile + (size_t)ith * part + part - (size_t)KV_TAIL * m->c.head_dim;
}

/* Where KV head kvh's keys start in a layer: its part of the first row, or of the first group. */
static const char *
head_keys(const struct model *m, const struct kv *kv, int layer, int kvh)
{
	return (const char *)kv_unit(kv, 0, layer, 0) +
	    (size_t)kvh * m->c.head_dim * (kv->k_unit / m->c.kv_dim);
}

/* Grouped keys: the complete groups a query at pos reads; once a window's ring is full, all. */
static int
complete_groups(const struct kv *kv, int pos)
{
	return pos / KV_GROUP < kv->slots / KV_GROUP ? pos / KV_GROUP : kv->slots / KV_GROUP;
}

/*
 * Whether keys of a q8_0 ring are read in place: a head of whole blocks.
 * Others (heads of 8, say) are widened to f32 first.
 */
static int
keys_in_place(const struct kv *kv)
{
	return kv->head_dim % 32 == 0;
}

/* The ggml type of the rows exact_rows gives for keys. */
static uint32_t
tail_type(const struct kv *kv, int which)
{
	switch (kv->tail_type[which]) {
	case KV_F16: return GGML_F16;
	case KV_Q8_0: return keys_in_place(kv) ? GGML_Q8_0 : GGML_F32;
	}
	return GGML_F32;
}

/*
 * The tail rows of K (which 0) or V from position p on, KV head kvh's
 * part, and how far apart (*ld): from the tail ring, or for an f16
 * store from the batch's own f32 buffer once p is in the batch.  Keys
 * of a q8_0 ring whose heads are not whole blocks come widened to f32 in
 * job->keys; values of one are the ring's whole rows (the caller picks
 * the head's elements).  *end: where they stop being contiguous (the
 * batch's start, if p is before it, or where the ring wraps), at most
 * end.
 */
static const char *
exact_rows(const struct attn_job *job, int which, int kvh, int p, int *end, size_t *ld)
{
	const struct model *m = job->m;
	const struct kv *kv = job->kv;
	size_t dim = (size_t)m->c.kv_dim, col = (size_t)kvh * m->c.head_dim;
	int hd = m->c.head_dim, wrap = (p / kv->tail_rows[which] + 1) * kv->tail_rows[which];

	if (kv->tail_type[which] == KV_F32 && p >= job->pos) {
		*ld = dim * 4;
		return (const char *)((which ? m->vbuf : m->kbuf) + (job->row + p - job->pos) * dim + col);
	}
	if (kv->tail_type[which] == KV_F32 && *end > job->pos)
		*end = job->pos;
	if (*end > wrap)
		*end = wrap;
	*ld = kv_tail_row_bytes(kv, which);
	if (kv->tail_type[which] != KV_Q8_0)
		return (const char *)kv_tail_row(kv, which, job->layer, p) + col * (*ld / dim);
	if (which || keys_in_place(kv))
		return (const char *)kv_tail_row(kv, which, job->layer, p) +
		    (which ? 0 : col / 32 * sizeof(struct block_q8_0));
	for (int r = p; r < *end; r++)
		kv_tail_span(kv, 0, job->layer, r, (int)col, hd, job->keys + (size_t)(r - p) * hd);
	*ld = (size_t)hd * 4;
	return (const char *)job->keys;
}

/*
 * Keys with a tail (grouped, or f16): scores of heads queries (head_dim
 * apart) at pos against the tail rows it reads (those of its own group,
 * or for q4_0 keys from KV_BACK positions before it), into att (att_cap
 * apart) at their slots, replacing the store's.  A group's rows never
 * wrap in the window's ring, which is whole groups long; in a ring that
 * has wrapped they take the slots of an older group, so they are scored
 * after the store.
 */
static void
tail_scores(const struct attn_job *job, int kvh, int pos, const float *q, int heads, float *att)
{
	const struct model *m = job->m;
	const struct kv *kv = job->kv;
	int hd = m->c.head_dim, r0 = kv_tail_from(kv, 0, pos), p, end;
	size_t ld;
	const char *rows;

	for (p = r0; p <= pos; p = end) {
		end = pos + 1;
		rows = exact_rows(job, 0, kvh, p, &end, &ld);
		quant_gemm(tail_type(kv, 0), rows, ld, 0, end - p, hd, q, (size_t)hd, heads,
		    att + kv_slot(kv, r0) + (p - r0), (size_t)m->att_cap);
	}
}

/*
 * Scores of nq queries (head_dim floats each, contiguous, group per
 * token) of tokens at positions first..last against the cached slots
 * [0, kv_seen(last)): row stores as one matmul over their rows (f32 or
 * f16), grouped keys from their groups, then for each token the tail
 * rows of its own group, if the keys have a tail.  Every score is
 * computed as it would be alone.
 */
static void
attention_scores(const struct attn_job *job, int kvh, int first, int last, const float *q,
    int group, float *att)
{
	const struct model *m = job->m;
	const struct kv *kv = job->kv;
	const struct model_config *c = &m->c;
	int layer = job->layer;
	size_t ld = (size_t)m->att_cap, hd = (size_t)c->head_dim;
	int nq = (last - first + 1) * group, t, groups;

	if (!kv_grouped(kv))
		quant_gemm(kv->k_type == KV_F16 ? GGML_F16 : GGML_F32, head_keys(m, kv, layer, kvh),
		    kv->k_unit, 0, kv_seen(kv, last), (int)hd, q, hd, nq, att, ld);
	else if ((groups = complete_groups(kv, last)) > 0)
		quant_group_scores(kv->k_type == KV_Q4_0, head_keys(m, kv, layer, kvh),
		    kv->k_unit, groups, (int)hd, q, hd, nq, att, ld);
	for (t = first; kv->tail[0] && t <= last; t++)
		tail_scores(job, kvh, t, q + (size_t)(t - first) * group * hd, group,
		    att + (size_t)(t - first) * group * ld);
}

/*
 * A windowed cache that has evicted e positions before a query at pos:
 * the slots of evicted positions that still hold rows score -inf, and
 * the sinks are scored again.  Keys are stored rotated by their own
 * position, and RoPE makes a score depend on the distance alone, so the
 * window's keys are already right for the query rotated by pos; the
 * sinks must be e positions nearer, as if the window had closed up
 * behind them, so they take the query rotated back by e.
 */
static void
attention_window(const struct model *m, const struct kv *kv, int layer, int kvh, int pos,
    const float *q, int group, float *att, float *scratch)
{
	const struct model_config *c = &m->c;
	size_t ld = (size_t)m->att_cap;
	int hd = c->head_dim, e = kv_evicted(kv, pos), lo, p, h, d;
	/* scratch: the rotated queries, a key, and the angles (group + 2 heads) */
	float *qs = scratch, *key = scratch + (size_t)group * hd, *cs = key + hd, sum;

	if (e == 0)
		return;
	/*
	 * Evicted positions [sinks, sinks + e) still held: those of the sink
	 * slots' round-up, and the ring's oldest, from pos - ring_slots + 1.
	 */
	lo = pos - kv->ring_slots + 1 > kv->sink_slots ? pos - kv->ring_slots + 1 : kv->sink_slots;
	for (p = kv->sinks; p < kv->sinks + e; p++) {
		if (p >= kv->sink_slots && p < lo) {
			p = lo - 1;	/* overwritten: skip to the ring's oldest */
			continue;
		}
		for (h = 0; h < group; h++)
			att[h * ld + kv_slot(kv, p)] = -INFINITY;
	}
	memcpy(qs, q, (size_t)group * hd * sizeof *qs);
	rope_angles(m, -e, cs);
	rope_by(m, qs, group, cs);
	for (p = 0; p < kv->sinks; p++) {
		kv_key(kv, layer, p, kvh * hd, hd, key);
		for (h = 0; h < group; h++) {
			for (sum = 0, d = 0; d < hd; d++)
				sum += qs[h * hd + d] * key[d];
			att[h * ld + p] = sum;
		}
	}
}

/*
 * One stretch of the value chains of queries [a, b) of att (att_cap
 * apart): slots [s, e), dimensions [d0, d0 + w) of KV head kvh, into out
 * (ldo apart).  From the store, or if tail from the tail rows from
 * position r0 on, which fill the slots from kv_slot(r0) on.
 * acc: carry on chains begun in out; an empty stretch does nothing.
 */
static void
value_span(const struct attn_job *job, int kvh, int d0, int w, const float *att, int a, int b,
    int s, int e, int tail, int r0, float *out, size_t ldo, int acc)
{
	const struct model *m = job->m;
	const struct kv *kv = job->kv;
	size_t ld = (size_t)m->att_cap, dim = (size_t)m->c.kv_dim, lr;
	int col = kvh * m->c.head_dim + d0, layer = job->layer;

	if (e <= s)
		return;
	att += (size_t)a * ld;
	out += (size_t)a * ldo;
	while (tail && s < e) {	/* f32 rows of f16 values, or q8_0 rows of q4_0 ones */
		int p = r0 + s - kv_slot(kv, r0), end = p + e - s;
		const char *rows = exact_rows(job, 1, kvh, p, &end, &lr);
		if (kv->tail_type[1] == KV_Q8_0)
			quant_row_values(GGML_Q8_0, end - p, b - a, att + s, ld, rows, lr, col, w,
			    out, ldo, acc);
		else
			quant_attn_values(end - p, b - a, att + s, ld, (const float *)rows + d0, lr / 4,
			    w, out, ldo, acc);
		s += end - p;
		acc = 1;
	}
	if (tail)
		return;
	att += s;
	if (kv->v_type == KV_F32)
		quant_attn_values(e - s, b - a, att, ld, (const float *)kv_unit(kv, 1, layer, s) + col,
		    dim, w, out, ldo, acc);
	else
		quant_row_values(kv->v_type == KV_F16 ? GGML_F16 :
		    kv->v_type == KV_Q8_0 ? GGML_Q8_0 : GGML_Q4_0, e - s, b - a, att, ld,
		    kv_unit(kv, 1, layer, s), kv->v_unit, col, w, out, ldo, acc);
}

/*
 * Values with a tail: after the store's slots before the tail rows
 * (shared by the queries [a, b), all of one group), the tail rows each
 * query reads, all queries to the first one's last position,
 * then those that go further carry on; then, in a window's ring that has
 * wrapped, each query's store slots after them.  acc: as value_span.
 */
static void
tail_values(const struct attn_job *job, int kvh, int d0, int w, int first, int group,
    const float *att, int a, int b, float *out, size_t ldo)
{
	const struct kv *kv = job->kv;
	int r0 = kv_tail_from(kv, 1, first + a / group), s0 = kv_slot(kv, r0), done = s0, h, end;

	value_span(job, kvh, d0, w, att, a, b, 0, s0, 0, r0, out, ldo, 0);
	for (h = a; h < b; ) {
		end = s0 + first + h / group - r0 + 1;
		value_span(job, kvh, d0, w, att, h, b, done, end, 1, r0, out, ldo, done > 0);
		done = end;
		while (h < b && s0 + first + h / group - r0 + 1 == end)
			h++;
	}
	for (h = a; h < b; h++) {
		int pos = first + h / group, seen = kv_seen(kv, pos);
		end = s0 + pos - r0 + 1;
		if (end < seen)
			value_span(job, kvh, d0, w, att, h, h + 1, end, seen, 0, r0, out, ldo, 1);
	}
}

/*
 * The weighted sum of the values for queries [a, b) of the tile (token
 * first + (h / group) for query h), into out (head_dim apart).  Each
 * output is one chain over slots in order: all queries run to the first
 * one's last position, then those that go further carry on.  Values
 * with a tail run one group of positions at a time (tail_values).
 */
static void
attention_values(const struct attn_job *job, int kvh, int first, int group, const float *att,
    int a, int b, float *out)
{
	const struct kv *kv = job->kv;
	size_t hd = (size_t)job->m->c.head_dim;
	int done = 0, h = a, end;

	while (kv->tail[1] && h < b) {
		int g = (first + h / group) / KV_GROUP, h1 = h;
		while (h1 < b && (first + h1 / group) / KV_GROUP == g)
			h1++;
		tail_values(job, kvh, 0, (int)hd, first, group, att, h, h1, out, hd);
		h = h1;
	}
	while (h < b) {
		end = kv_seen(kv, first + h / group);	/* the slots query h sees */
		value_span(job, kvh, 0, (int)hd, att, h, b, done, end, 0, 0, out, hd, done > 0);
		done = end;
		while (h < b && kv_seen(kv, first + h / group) == end)
			h++;
	}
}

static void
attention_worker(void *arg, int ith, int nth)
{
	struct attn_job own = *(const struct attn_job *)arg;
	const struct attn_job *job = &own;
	struct model *m = job->m;
	const struct model_config *c = &m->c;
	int group = c->n_heads / c->n_kv_heads;	/* query heads per KV head */
	int q_dim = c->n_heads * c->head_dim, hd = c->head_dim;
	int tiles = (job->n + ATTN_TILE - 1) / ATTN_TILE;
	float scale = 1.0f / sqrtf((float)hd);
	float *att = m->att + (size_t)ith * ATTN_TILE * group * m->att_cap;
	float *qt = m->tile + (size_t)ith * tile_floats(c), *ot = qt + ATTN_TILE * group * hd;
	int work, i, g, nq;

	own.keys = tile_keys(m, ith);

	/*
	 * Tiles and KV heads claimed in turn, the last tiles (the most
	 * positions) first: shared out by turns, a thread slowed by a
	 * neighbour held the other up at every layer.
	 */
	(void)nth;
	while ((work = atomic_fetch_add_explicit(job->next, 1, memory_order_relaxed)) <
	    tiles * c->n_kv_heads) {
		int kvh = work % c->n_kv_heads, i0 = (tiles - 1 - work / c->n_kv_heads) * ATTN_TILE;
		int i1 = i0 + ATTN_TILE < job->n ? i0 + ATTN_TILE : job->n;

		/* the tile's queries side by side: token by token, the heads of this KV head */
		for (i = i0; i < i1; i++)
			memcpy(qt + (size_t)(i - i0) * group * hd,
			    m->q + (size_t)(job->row + i) * q_dim + (size_t)kvh * group * hd,
			    (size_t)group * hd * 4);
		nq = (i1 - i0) * group;
		attention_scores(job, kvh, job->pos + i0, job->pos + i1 - 1, qt, group, att);
		for (i = i0; i < i1; i++)
			attention_window(m, job->kv, job->layer, kvh, job->pos + i,
			    qt + (size_t)(i - i0) * group * hd, group,
			    att + (size_t)(i - i0) * group * m->att_cap, ot);	/* ot: free till the values */
		for (g = 0; g < nq; g++)
			quant_softmax(att + (size_t)g * m->att_cap,
			    kv_seen(job->kv, job->pos + i0 + g / group), scale);
		attention_values(job, kvh, job->pos + i0, group, att, 0, nq, ot);
		for (i = i0; i < i1; i++)
			memcpy(m->xb + (size_t)(job->row + i) * q_dim + (size_t)kvh * group * hd,
			    ot + (size_t)(i - i0) * group * hd, (size_t)group * hd * 4);
	}
}

/*
 * One token over a long cache, in three balanced steps: scores by KV head
 * and slice of positions (of groups, for grouped keys); the f16 rows,
 * window and softmax by query head; values by KV head and block of 32
 * dimensions.  attention_worker gives each thread whole KV heads, so with
 * 3 of them on 2 threads one thread idles a third of the time.  Each
 * score, weight and output is computed with the same operations as there
 * (kernels compute an output alike whatever its company), so the bits are
 * the same; only the two extra hand-offs differ, which pay from SPLIT_MIN
 * cached floats on.
 */
#define SPLIT_MIN (512 * 192)	/* cached floats a layer's keys take: SmolLM2's 512 positions */

static void
split_scores(void *arg, int ith, int nth)
{
	const struct attn_job *job = arg;
	const struct model *m = job->m;
	const struct model_config *c = &m->c;
	const struct kv *kv = job->kv;
	int group = c->n_heads / c->n_kv_heads, hd = c->head_dim, w;
	int seen = kv_seen(kv, job->pos);

	for (w = ith; w < c->n_kv_heads * nth; w += nth) {
		int kvh = w / nth, piece = w % nth;
		const char *keys = head_keys(m, kv, job->layer, kvh);
		const float *q = m->q + (size_t)job->row * c->n_heads * hd + (size_t)kvh * group * hd;
		float *att = m->att + (size_t)kvh * group * m->att_cap;
		if (!kv_grouped(kv)) {
			int p0 = (int)((long long)seen * piece / nth);
			int p1 = (int)((long long)seen * (piece + 1) / nth);
			quant_gemm(kv->k_type == KV_F16 ? GGML_F16 : GGML_F32, keys, kv->k_unit, p0, p1,
			    hd, q, (size_t)hd, group, att, (size_t)m->att_cap);
			continue;
		}
		/* grouped keys: a slice of the complete groups (split_softmax scores the f16 rows) */
		int groups = complete_groups(kv, job->pos);
		int g0 = (int)((long long)groups * piece / nth), g1 = (int)((long long)groups * (piece + 1) / nth);
		if (g1 > g0)
			quant_group_scores(kv->k_type == KV_Q4_0, keys + (size_t)g0 * kv->k_unit, kv->k_unit,
			    g1 - g0, hd, q, (size_t)hd, group, att + (size_t)g0 * KV_GROUP, (size_t)m->att_cap);
	}
}

static void
split_softmax(void *arg, int ith, int nth)
{
	struct attn_job own = *(const struct attn_job *)arg;
	const struct attn_job *job = &own;
	struct model *m = job->m;
	const struct model_config *c = &m->c;
	int group = c->n_heads / c->n_kv_heads, hd = c->head_dim, h;
	float *scratch = m->tile + (size_t)ith * tile_floats(c);

	own.keys = tile_keys(m, ith);

	for (h = ith; h < c->n_heads; h += nth) {
		const struct kv *kv = job->kv;
		const float *q = m->q + (size_t)job->row * c->n_heads * hd + (size_t)h * hd;
		float *att = m->att + (size_t)h * m->att_cap;
		if (kv->tail[0])	/* after the store, which split_scores has done */
			tail_scores(job, h / group, job->pos, q, 1, att);
		attention_window(m, kv, job->layer, h / group, job->pos, q, 1, att, scratch);
		quant_softmax(att, kv_seen(job->kv, job->pos), 1.0f / sqrtf((float)hd));
	}
}

static void
split_values(void *arg, int ith, int nth)
{
	const struct attn_job *job = arg;
	const struct model *m = job->m;
	const struct model_config *c = &m->c;
	const struct kv *kv = job->kv;
	int group = c->n_heads / c->n_kv_heads, hd = c->head_dim, w;
	int nb = hd % 32 == 0 ? hd / 32 : 1, bw = hd / nb, seen = kv_seen(kv, job->pos);

	for (w = ith; w < c->n_kv_heads * nb; w += nth) {
		int kvh = w / nb, d0 = w % nb * bw;
		const float *att = m->att + (size_t)kvh * group * m->att_cap;
		float *out = m->xb + (size_t)job->row * c->n_heads * hd + (size_t)kvh * group * hd + d0;
		if (kv->tail[1])
			tail_values(job, kvh, d0, bw, job->pos, group, att, 0, group, out, (size_t)hd);
		else
			value_span(job, kvh, d0, bw, att, 0, group, 0, seen, 0, 0, out, (size_t)hd, 0);
	}
}

/* The attention of the tokens of one job, on the pool. */
static void
attention(struct model *m, struct attn_job *job)
{
	const struct model_config *c = &m->c;
	int nth = pool_threads(m->pool);
	long long seen = kv_seen(job->kv, job->pos);
	atomic_int next;

	/* the split needs a row of att per query head */
	if (job->n == 1 && nth > 1 && seen * c->kv_dim >= SPLIT_MIN && c->n_kv_heads <= nth * ATTN_TILE) {
		pool_run(m->pool, split_scores, job);
		pool_run(m->pool, split_softmax, job);
		pool_run(m->pool, split_values, job);
		return;
	}
	atomic_init(&next, 0);
	job->next = &next;
	run(m, attention_worker, job, job->n * seen * c->n_heads * c->head_dim);
}

/*
 * The batch pass.  Logits: none (all_logits NULL, want_logits 0), the last
 * token's into m->logits (want_logits 1), or every token's, n rows of
 * vocab_size, into all_logits.
 */
static float *
forward(struct model *m, struct kv *kv, const int *tokens, int n, int pos,
    int want_logits, float *all_logits, float *hidden, int *err)
{
	const struct model_config *c = &m->c;
	int D = c->dim, F = c->ffn_dim, Q = c->n_heads * c->head_dim, KV = c->kv_dim;
	int nth = pool_threads(m->pool), l, i, seen, one_by_one, step;
	struct attn_job aj;
	float *k, *v;

	*err = 0;
	/* max_ctx is a hard ceiling, checked before the pass starts; a window slides past it. */
	if (!kv->window && pos + n > kv->max_ctx) {
		llm_seterr("context full: position %d is past max_ctx %d", pos + n - 1, kv->max_ctx);
		goto fail;
	}
	if (pos < 0 || pos > kv->seq_len || n < 1 || n > MODEL_BATCH || pos > INT_MAX - n) {
		llm_seterr("forward: bad position %d or batch %d", pos, n);
		goto fail;
	}
	for (i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= c->vocab_size) {
			llm_seterr("forward: bad token %d", tokens[i]);
			goto fail;
		}
	seen = kv_seen(kv, pos + n - 1);
	if (seen > m->att_cap || nth > m->att_threads) {
		int cap = m->att_cap ? m->att_cap : 64;

		while (cap < seen)
			cap *= 2;
		free(m->att);
		free(m->tile);
		m->att = xmalloc((size_t)nth * ATTN_TILE * (c->n_heads / c->n_kv_heads) * cap *
		    sizeof(float));
		m->tile = xmalloc((size_t)nth * tile_floats(c) * sizeof(float));
		m->att_cap = cap;
		m->att_threads = nth;
	}
	/* Grow the cache for the whole batch before any row is written. */
	if (kv_grow_to(kv, pos + n) < 0)
		goto fail;
	/*
	 * A batch that wraps a window's ring would overwrite rows its own
	 * earlier tokens read: its tokens then write and attend one by one.
	 */
	one_by_one = kv->window && pos + n > kv->slots;
	step = one_by_one ? 1 : kv_put_max(kv) < n ? kv_put_max(kv) : n;

	/* the batch's RoPE angles, for every layer */
	for (i = 0; i < n; i++)
		rope_angles(m, pos + i, m->rope_cs + (size_t)i * c->rope_dim);

	for (i = 0; i < n; i++)
		quant_dequant_row(m->token_embd.type,
		    (const char *)m->token_embd.data + (size_t)tokens[i] * m->token_embd.row_bytes,
		    m->x + (size_t)i * D, (size_t)D);

	for (l = 0; l < c->n_layers; l++) {
		const struct layer_weights *L = &m->layers[l];

		/*
		 * Attention: Q, K and V for the batch (f32 K and V straight into
		 * the cache, other types through a batch buffer and kv_put), the
		 * family's biases and per-head norms if it has them, then RoPE.
		 * The previous layer's FFN output joins the residual stream first.
		 */
		add_norm(m, m->xb, m->x, l ? m->xb2 : NULL, L->attn_norm, n);
		k = kv->k_type == KV_F32 && !one_by_one ? kv_k_write(kv, l, pos) : m->kbuf;
		v = kv->v_type == KV_F32 && !one_by_one ? kv_v_write(kv, l, pos) : m->vbuf;
		struct matvec qkv[] = { { m->q, Q, &L->wq }, { k, KV, &L->wk }, { v, KV, &L->wv } };
		matmul(m, qkv, 3, m->xb, D, n);
		struct qkv_job qj = { m, L, m->q, k, v, n };
		run(m, qkv_rows, &qj, (long long)n * (Q + 2 * KV) * ROW_COST);
		/* a window's wrapping batch one by one; q4_0 stores' rings take kv_put_max at once */
		for (i = 0; i < n; i += step) {
			int p = pos + i, b = n - i < step ? n - i : step;
			if ((k == m->kbuf && kv_put_k(kv, l, p, b, k + (size_t)i * KV, KV) < 0) ||
			    (v == m->vbuf && kv_put_v(kv, l, p, b, v + (size_t)i * KV, KV) < 0))
				goto fail;
			aj = (struct attn_job){ m, kv, l, p, b, i, NULL, NULL };
			attention(m, &aj);
			kv_put_tail(kv, l, p, b, k == m->kbuf ? k + (size_t)i * KV : NULL,
			    v == m->vbuf ? v + (size_t)i * KV : NULL, KV);
		}
		/* Rotated values give the rotated output; the transform is its own inverse. */
		if (kv->v_rotated)
			for (i = 0; i < n; i++)
				quant_hadamard(m->xb + (size_t)i * Q, (size_t)Q, kv->rot);

		struct matvec wo[] = { { m->xb2, D, &L->wo } };
		matmul(m, wo, 1, m->xb, Q, n);

		/* FFN: SwiGLU, down(silu(gate(x)) * up(x)), after the residual add. */
		add_norm(m, m->xb, m->x, m->xb2, L->ffn_norm, n);
		struct matvec gate_up[] = { { m->hb, F, &L->w_gate }, { m->hb2, F, &L->w_up } };
		matmul(m, gate_up, 2, m->xb, D, n);
		swiglu(m, m->hb, m->hb2, n);
		struct matvec down[] = { { m->xb2, D, &L->w_down } };
		matmul(m, down, 1, m->hb, F, n);
	}
	/* the last layer's FFN output joins the residual stream of the rows wanted, in their output norm */
	kv->seq_len = pos + n;
	if (hidden) {
		add_norm(m, hidden, m->x, m->xb2, m->output_norm, n);
		return hidden;
	}
	if (all_logits) {
		add_norm(m, m->x, m->x, m->xb2, m->output_norm, n);
		struct matvec out[] = { { all_logits, (size_t)c->vocab_size, &m->output } };
		matmul(m, out, 1, m->x, D, n);
		return all_logits;
	}
	if (!want_logits)
		return NULL;

	/* Only the last token's logits: the output matrix is the largest. */
	float *last = m->x + (size_t)(n - 1) * D;
	add_norm(m, last, last, m->xb2 + (size_t)(n - 1) * D, m->output_norm, 1);
	struct matvec out[] = { { m->logits, 0, &m->output } };
	matmul(m, out, 1, last, D, 1);
	return m->logits;
fail:
	*err = 1;
	return NULL;
}

float *
model_forward_batch(struct model *m, struct kv *kv, const int *tokens, int n, int pos,
    int want_logits, int *err)
{
	return forward(m, kv, tokens, n, pos, want_logits, NULL, NULL, err);
}

float *
model_forward_logits(struct model *m, struct kv *kv, const int *tokens, int n, int pos,
    float *logits, int *err)
{
	return forward(m, kv, tokens, n, pos, 1, logits, NULL, err);
}

float *
model_forward_hidden(struct model *m, struct kv *kv, const int *tokens, int n, int pos,
    float *hidden, int *err)
{
	return forward(m, kv, tokens, n, pos, 0, NULL, hidden, err);
}

int
model_embed(struct model *m, struct kv *kv, const int *tokens, int n, int pooling,
    int normalize, float *out)
{
	int D = m->c.dim, i, b = 0, t, err = 0;	/* b: the last batch's size (n >= 1) */
	float *h = xmalloc((size_t)MODEL_BATCH * D * sizeof *h);
	double *sum = xcalloc((size_t)D, sizeof *sum), ss = 0;

	if (n < 1) {
		llm_seterr("embed: no tokens");
		free(h), free(sum);
		return -1;
	}
	/* every input starts from an empty cache: its embedding is its own */
	kv_clear(kv);
	for (i = 0; i < n && !err; i += b) {
		b = n - i < MODEL_BATCH ? n - i : MODEL_BATCH;
		forward(m, kv, tokens + i, b, i, 0, NULL, h, &err);
		for (t = 0; t < b && !err && pooling == MODEL_POOL_MEAN; t++)
			for (int d = 0; d < D; d++)
				sum[d] += h[(size_t)t * D + d];
	}
	for (int d = 0; d < D && pooling == MODEL_POOL_LAST; d++)
		sum[d] = h[(size_t)(b - 1) * D + d];	/* h holds the last batch */
	kv_clear(kv);
	if (err) {
		free(h), free(sum);
		return -1;
	}
	for (int d = 0; d < D; d++) {
		if (pooling == MODEL_POOL_MEAN)
			sum[d] /= n;
		ss += sum[d] * sum[d];
	}
	for (int d = 0; d < D; d++)
		out[d] = (float)(normalize && ss > 0 ? sum[d] / sqrt(ss) : sum[d]);
	free(h), free(sum);
	return 0;
}

float *
model_forward(struct model *m, struct kv *kv, int token, int pos, int want_logits, int *err)
{
	return model_forward_batch(m, kv, &token, 1, pos, want_logits, err);
}

float *
model_prefill(struct model *m, struct kv *kv, const int *tokens, int n, int pos,
    int want_logits, int *err)
{
	float *logits = NULL;
	int i, b;

	*err = 0;
	for (i = 0; i < n && !*err; i += b) {
		b = n - i < MODEL_BATCH ? n - i : MODEL_BATCH;
		logits = model_forward_batch(m, kv, tokens + i, b, pos + i,
		    want_logits && i + b == n, err);
	}
	return logits;
}
