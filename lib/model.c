/*
 * model.c: the Llama forward pass, in the order the math happens:
 * embedding, then per layer RMSNorm, QKV, RoPE, attention over the
 * cache, output projection, residual, RMSNorm, SwiGLU FFN, residual;
 * then the final norm and the output projection to logits.
 */
#include <math.h>
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

static int
read_config(struct model *m)
{
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
	if (arch.n != 5 || memcmp(arch.s, "llama", 5) != 0) {
		llm_seterr("architecture '%.*s' is not supported (only llama)",
		    (int)(arch.n > 40 ? 40 : arch.n), arch.s);
		return -1;
	}
	snprintf(a, sizeof a, "llama");
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
	    c->context_length <= 0 || c->n_layers > 4096 || c->n_heads > 4096) {
		llm_seterr("bad hyperparameters: dim %d, %d layers, %d heads, %d kv heads",
		    c->dim, c->n_layers, c->n_heads, c->n_kv_heads);
		return -1;
	}
	if (get_u32(m, KEY("attention.key_length"), 0, (uint32_t)(c->dim / c->n_heads), &kl))
		return -1;
	c->head_dim = kl;
	if (c->head_dim <= 0 || c->head_dim % 2 || c->head_dim > 65536) {
		llm_seterr("bad head dimension %d", c->head_dim);
		return -1;
	}
	c->kv_dim = c->n_kv_heads * c->head_dim;
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
	c->vocab_size = (int)emb->ne[1];
	c->bos_id = c->eos_id = c->eot_id = -1;
	if (get_u32(m, "tokenizer.ggml.bos_token_id", 0, UINT32_MAX >> 1, &c->bos_id) ||
	    get_u32(m, "tokenizer.ggml.eos_token_id", 0, UINT32_MAX >> 1, &c->eos_id) ||
	    get_u32(m, "tokenizer.ggml.eot_token_id", 0, UINT32_MAX >> 1, &c->eot_id))
		return -1;
	if (c->bos_id >= c->vocab_size)
		c->bos_id = -1;
	if (c->eos_id >= c->vocab_size)
		c->eos_id = -1;
	if (c->eot_id >= c->vocab_size)
		c->eot_id = -1;
	return 0;
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
		    bind_norm(m, W("ffn_norm"), c->dim, &L->ffn_norm) ||
		    bind_weight(m, W("attn_q"), q_dim, c->dim, &L->wq) ||
		    bind_weight(m, W("attn_k"), c->kv_dim, c->dim, &L->wk) ||
		    bind_weight(m, W("attn_v"), c->kv_dim, c->dim, &L->wv) ||
		    bind_weight(m, W("attn_output"), c->dim, q_dim, &L->wo) ||
		    bind_weight(m, W("ffn_gate"), c->ffn_dim, c->dim, &L->w_gate) ||
		    bind_weight(m, W("ffn_up"), c->ffn_dim, c->dim, &L->w_up) ||
		    bind_weight(m, W("ffn_down"), c->dim, c->ffn_dim, &L->w_down))
			return -1;
#undef W
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
	if (read_config(m) < 0 || bind_weights(m) < 0) {
		model_free(m);
		return -1;
	}
	q_dim = c->n_heads * c->head_dim;
	m->x = xcalloc((size_t)c->dim, sizeof(float));
	m->xb = xcalloc((size_t)(q_dim > c->dim ? q_dim : c->dim), sizeof(float));
	m->xb2 = xcalloc((size_t)c->dim, sizeof(float));
	m->hb = xcalloc((size_t)c->ffn_dim, sizeof(float));
	m->hb2 = xcalloc((size_t)c->ffn_dim, sizeof(float));
	m->q = xcalloc((size_t)q_dim, sizeof(float));
	m->logits = xcalloc((size_t)c->vocab_size, sizeof(float));
	m->rope_inv_freq = xcalloc((size_t)c->rope_dim / 2, sizeof(double));
	for (i = 0; i < c->rope_dim / 2; i++)
		m->rope_inv_freq[i] = pow((double)c->rope_base, -2.0 * i / c->rope_dim);
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
	free(m->logits);
	free(m->att);
	free(m->rope_inv_freq);
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
	if (vocab && vocab->type == GGUF_ARRAY) {
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

static void
rmsnorm(float *out, const float *x, const float *weight, int n, float eps)
{
	float ss = 0;
	int i;

	for (i = 0; i < n; i++)
		ss += x[i] * x[i];
	ss = 1.0f / sqrtf(ss / n + eps);
	for (i = 0; i < n; i++)
		out[i] = weight[i] * (ss * x[i]);
}

static void
softmax(float *x, int n)
{
	float max = x[0], sum = 0;
	int i;

	for (i = 1; i < n; i++)
		if (x[i] > max)
			max = x[i];
	for (i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (i = 0; i < n; i++)
		x[i] /= sum;
}

/* Several matrix-vector products over one input, split by rows across threads. */
struct matvec {
	float *out;
	const struct weight *w;
};

struct matmul_job {
	const struct matvec *mv;
	int n;
	const float *x;
	int total_rows;
};

static void
matmul_worker(void *arg, int ith, int nth)
{
	const struct matmul_job *job = arg;
	int lo = (int)((long long)job->total_rows * ith / nth);
	int hi = (int)((long long)job->total_rows * (ith + 1) / nth);
	int i, base = 0;

	for (i = 0; i < job->n && lo < hi; i++) {
		const struct weight *w = job->mv[i].w;
		int r0 = lo > base ? lo - base : 0;
		int r1 = hi - base < w->rows ? hi - base : w->rows;
		const char *row = (const char *)w->data + (size_t)r0 * w->row_bytes;

		for (int r = r0; r < r1; r++, row += w->row_bytes)
			job->mv[i].out[r] = quant_dot_row(w->type, row, job->x, (size_t)w->cols);
		base += w->rows;
	}
}

static void
matmul(struct model *m, const struct matvec *mv, int n, const float *x)
{
	struct matmul_job job = { mv, n, x, 0 };
	int i;

	for (i = 0; i < n; i++)
		job.total_rows += mv[i].w->rows;
	pool_run(m->pool, matmul_worker, &job);
}

/* RoPE, "normal" mode: rotate adjacent pairs (x[2i], x[2i+1]) of each head. */
static void
rope(const struct model *m, float *vec, int n_heads, int pos)
{
	const struct model_config *c = &m->c;
	int h, i;

	for (i = 0; i < c->rope_dim / 2; i++) {
		double theta = pos * m->rope_inv_freq[i];
		float cs = (float)cos(theta), sn = (float)sin(theta);

		for (h = 0; h < n_heads; h++) {
			float *p = vec + h * c->head_dim + 2 * i;
			float x0 = p[0], x1 = p[1];

			p[0] = x0 * cs - x1 * sn;
			p[1] = x0 * sn + x1 * cs;
		}
	}
}

struct attn_job {
	struct model *m;
	const struct kv *kv;
	int layer, pos;
};

/* Attention for a share of the heads, over positions [0, pos]. */
static void
attention_worker(void *arg, int ith, int nth)
{
	const struct attn_job *job = arg;
	struct model *m = job->m;
	const struct model_config *c = &m->c;
	int group = c->n_heads / c->n_kv_heads;	/* query heads per KV head */
	float scale = 1.0f / sqrtf((float)c->head_dim);
	int h, t, i;

	for (h = ith; h < c->n_heads; h += nth) {
		const float *q = m->q + h * c->head_dim;
		float *att = m->att + (size_t)h * m->att_cap;
		float *out = m->xb + h * c->head_dim;
		int kvh = h / group;	/* GQA: heads share a KV head */

		for (t = 0; t <= job->pos; t++) {
			const float *k = kv_k_read(job->kv, job->layer, t) + kvh * c->head_dim;
			float s = 0;

			for (i = 0; i < c->head_dim; i++)
				s += q[i] * k[i];
			att[t] = s * scale;
		}
		softmax(att, job->pos + 1);
		memset(out, 0, (size_t)c->head_dim * sizeof *out);
		for (t = 0; t <= job->pos; t++) {
			const float *v = kv_v_read(job->kv, job->layer, t) + kvh * c->head_dim;
			float a = att[t];

			for (i = 0; i < c->head_dim; i++)
				out[i] += a * v[i];
		}
	}
}

float *
model_forward(struct model *m, struct kv *kv, int token, int pos, int want_logits, int *err)
{
	const struct model_config *c = &m->c;
	struct attn_job aj;
	float *k, *v;
	int l, i;

	*err = 0;
	/* max_ctx is a hard ceiling, checked before the pass starts. */
	if (pos >= kv->max_ctx) {
		llm_seterr("context full: %d tokens fill max_ctx %d", pos, kv->max_ctx);
		goto fail;
	}
	if (pos < 0 || pos > kv->seq_len || token < 0 || token >= c->vocab_size) {
		llm_seterr("forward: bad token %d or position %d", token, pos);
		goto fail;
	}
	if (pos + 1 > m->att_cap) {
		int cap = m->att_cap ? m->att_cap : 64;

		while (cap < pos + 1)
			cap *= 2;
		free(m->att);
		m->att = xmalloc((size_t)c->n_heads * cap * sizeof(float));
		m->att_cap = cap;
	}

	quant_dequant_row(m->token_embd.type,
	    (const char *)m->token_embd.data + (size_t)token * m->token_embd.row_bytes,
	    m->x, (size_t)c->dim);

	for (l = 0; l < c->n_layers; l++) {
		const struct layer_weights *L = &m->layers[l];

		/* Attention: Q for this token; K and V go straight into the cache. */
		rmsnorm(m->xb, m->x, L->attn_norm, c->dim, c->rms_eps);
		if (!(k = kv_k_write(kv, l, pos)) || !(v = kv_v_write(kv, l, pos)))
			goto fail;
		struct matvec qkv[] = { { m->q, &L->wq }, { k, &L->wk }, { v, &L->wv } };
		matmul(m, qkv, 3, m->xb);
		rope(m, m->q, c->n_heads, pos);
		rope(m, k, c->n_kv_heads, pos);

		aj = (struct attn_job){ m, kv, l, pos };
		pool_run(m->pool, attention_worker, &aj);

		struct matvec wo[] = { { m->xb2, &L->wo } };
		matmul(m, wo, 1, m->xb);
		for (i = 0; i < c->dim; i++)
			m->x[i] += m->xb2[i];

		/* FFN: SwiGLU, down(silu(gate(x)) * up(x)). */
		rmsnorm(m->xb, m->x, L->ffn_norm, c->dim, c->rms_eps);
		struct matvec gate_up[] = { { m->hb, &L->w_gate }, { m->hb2, &L->w_up } };
		matmul(m, gate_up, 2, m->xb);
		for (i = 0; i < c->ffn_dim; i++) {
			float g = m->hb[i];
			m->hb[i] = g / (1.0f + expf(-g)) * m->hb2[i];
		}
		struct matvec down[] = { { m->xb2, &L->w_down } };
		matmul(m, down, 1, m->hb);
		for (i = 0; i < c->dim; i++)
			m->x[i] += m->xb2[i];
	}
	kv->seq_len = pos + 1;
	if (!want_logits)
		return NULL;

	rmsnorm(m->x, m->x, m->output_norm, c->dim, c->rms_eps);
	struct matvec out[] = { { m->logits, &m->output } };
	matmul(m, out, 1, m->x);
	return m->logits;
fail:
	*err = 1;
	return NULL;
}
