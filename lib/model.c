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
#include <stdio.h>
#include <string.h>

#include "kvpriv.h"
#include "attn.h"
#include "fmath.h"
#include "gguf.h"
#include "matmul.h"
#include "model.h"
#include "kernels.h"
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

/*
 * A matrix of rows x cols, or with n > 0 a 3-D tensor of n such matrices
 * (a routed FFN's experts), bound as one of n * rows rows: each matrix's
 * rows follow the last's.
 */
static int
bind_matrices(struct model *m, const char *name, int n, int rows, int cols, struct weight *w)
{
	const struct gguf_tensor *t = gguf_find_tensor(&m->gguf, name);

	if (!t) {
		llm_seterr("missing tensor %s", name);
		return -1;
	}
	if ((n ? t->n_dims != 3 || t->ne[2] != (uint64_t)n : t->n_dims > 2) || t->ne[0] != (uint64_t)cols ||
	    t->ne[1] != (uint64_t)rows) {
		char got[96] = "", want[48];
		for (int d = 0; d < t->n_dims; d++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? "x" : "",
			    (unsigned long long)t->ne[d]);
		snprintf(want, sizeof want, n ? "%dx%dx%d" : "%dx%d", cols, rows, n);
		llm_seterr("tensor %s: shape %s, expected %s", name, got, want);
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
	w->rows = (n ? n : 1) * rows;	/* at most 512 times a checked int: the file's size bounds it */
	w->cols = cols;
	w->row_bytes = quant_row_bytes(t->type, (size_t)cols);
	return 0;
}

static int
bind_weight(struct model *m, const char *name, int rows, int cols, struct weight *w)
{
	return bind_matrices(m, name, 0, rows, cols, w);
}

/*
 * Norm and bias vectors are small: used in place if f32, else converted
 * once.  rows of n: a vector per expert (gpt-oss's experts' biases).
 */
static int
bind_vectors(struct model *m, const char *name, int rows, int n, const float **out)
{
	struct weight w;
	float *p;

	if (bind_weight(m, name, rows, n, &w) < 0)
		return -1;
	if (w.type == GGML_F32) {
		*out = w.data;
		return 0;
	}
	p = xmalloc((size_t)rows * n * sizeof *p);
	for (int r = 0; r < rows; r++)
		quant_dequant_row(w.type, (const char *)w.data + (size_t)r * w.row_bytes,
		    p + (size_t)r * n, (size_t)n);
	m->owned = xrealloc(m->owned, (size_t)(m->n_owned + 1) * sizeof *m->owned);
	m->owned[m->n_owned++] = p;
	*out = p;
	return 0;
}

static int
bind_norm(struct model *m, const char *name, int n, const float **out)
{
	return bind_vectors(m, name, 1, n, out);
}

/*
 * What sets each family apart from the plain llama forward pass.  gemma:
 * post-norms, a GELU gate, embeddings scaled by sqrt(dim), sliding
 * layers and a final logit cap read from its keys.  gpt-oss (oss): the
 * attention's output, router and experts biased too, learned sinks,
 * layers 0, 2, 4, ... sliding, the FFN's norm named post_attention_norm,
 * the routing weights a softmax of the chosen, the clamped SwiGLU.
 */
static const struct family {
	const char *name;
	int rope_neox, qkv_bias, qk_norm, fused, gemma, moe, oss;
} families[] = {
	{ "llama", 0, 0, 0, 0, 0, 0, 0 },
	{ "qwen2", 1, 1, 0, 0, 0, 0, 0 },	/* Q, K, V biases */
	{ "qwen3", 1, 0, 1, 0, 0, 0, 0 },	/* per-head Q, K norms */
	{ "qwen3moe", 1, 0, 1, 0, 0, 1, 0 },	/* qwen3's attention, a routed FFN */
	{ "phi3", 1, 0, 0, 1, 0, 0, 0 },	/* fused QKV and gate+up */
	{ "gemma3", 1, 0, 1, 0, 1, 0, 0 },	/* per-head Q, K norms and the rest of gemma's */
	{ "gpt-oss", 1, 1, 0, 0, 0, 1, 1 },	/* biases, sinks, every other layer sliding, routed */
};

/*
 * rope.scaling, as llama.cpp reads it: none, linear (every frequency over
 * the factor) or yarn (rope_yarn: ramp from orig_ctx and the betas).  The
 * YaRN keys llama.cpp reads beyond those are refused, not ignored.
 */
static int
read_rope_scaling(struct model *m, const char *a)
{
	static const char *unread[] = { "ext_factor", "attn_factor", "log_multiplier" };
	struct model_config *c = &m->c;
	struct gguf_str type;
	char key[160];
	int r;

	c->rope_factor = 1;
	c->yarn_beta_fast = 32, c->yarn_beta_slow = 1;
	c->yarn_orig_ctx = c->context_length;
#define KEY(s) (snprintf(key, sizeof key, "%s.rope.scaling." s, a), key)
	if ((r = gguf_get_str(&m->gguf, KEY("type"), &type)) < 0)
		return -1;
	if (r == 0 || (type.n == 4 && memcmp(type.s, "none", 4) == 0))
		return 0;
	if (type.n == 6 && memcmp(type.s, "linear", 6) == 0) {
		c->rope_scaling = MODEL_ROPE_LINEAR;
	} else if (type.n == 4 && memcmp(type.s, "yarn", 4) == 0) {
		c->rope_scaling = MODEL_ROPE_YARN;
	} else {
		llm_seterr("%s '%.*s' is not supported (none, linear and yarn are)", key,
		    (int)(type.n > 40 ? 40 : type.n), type.s);
		return -1;
	}
	if (gguf_get_f32(&m->gguf, KEY("factor"), &c->rope_factor) < 0)
		return -1;
	if (get_u32(m, KEY("original_context_length"), 0, (uint32_t)c->context_length, &c->yarn_orig_ctx))
		return -1;
	if (gguf_get_f32(&m->gguf, KEY("yarn_beta_fast"), &c->yarn_beta_fast) < 0)
		return -1;
	if (gguf_get_f32(&m->gguf, KEY("yarn_beta_slow"), &c->yarn_beta_slow) < 0)
		return -1;
#undef KEY
	for (size_t i = 0; i < sizeof unread / sizeof *unread; i++) {
		snprintf(key, sizeof key, "%s.rope.scaling.yarn_%s", a, unread[i]);
		if (gguf_find_kv(&m->gguf, key)) {
			llm_seterr("key %s is not supported", key);
			return -1;
		}
	}
	if (!(c->rope_factor > 0) || isinf(c->rope_factor) || c->yarn_orig_ctx <= 0 ||
	    !(c->yarn_beta_fast > c->yarn_beta_slow) || !(c->yarn_beta_slow > 0) || isinf(c->yarn_beta_fast)) {
		llm_seterr("bad rope.scaling: factor %g, original_context_length %d, betas %g and %g",
		    c->rope_factor, c->yarn_orig_ctx, c->yarn_beta_fast, c->yarn_beta_slow);
		return -1;
	}
	return 0;
}

static int
read_config(struct model *m)
{
	const struct family *fam;
	struct model_config *c = &m->c;
	const struct gguf_tensor *emb;
	struct gguf_str arch;
	char key[160], a[64];
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
		llm_seterr("architecture '%.*s' is not supported (llama, qwen2, qwen3, qwen3moe, phi3, gemma3 "
		    "and gpt-oss are)",
		    (int)(arch.n > 40 ? 40 : arch.n), arch.s);
		return -1;
	}
	snprintf(c->arch, sizeof c->arch, "%s", fam->name);
	c->rope_neox = fam->rope_neox;
	c->qkv_bias = fam->qkv_bias;
	c->qk_norm = fam->qk_norm;
	c->fused = fam->fused;
	c->post_norms = fam->gemma;
	c->glu = fam->gemma ? MODEL_GLU_GELU : fam->oss ? MODEL_GLU_OAI : MODEL_GLU_SILU;
	c->out_bias = c->sinks = c->expert_bias = c->route_after = fam->oss;
	snprintf(c->ffn_norm, sizeof c->ffn_norm, "%s", fam->oss ? "post_attention_norm" : "ffn_norm");
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
	if (gguf_get_f32(&m->gguf, KEY("rope.freq_base"), &c->rope_base) < 0)
		return -1;
	c->rms_eps = 1e-5f;
	if (gguf_get_f32(&m->gguf, KEY("attention.layer_norm_rms_epsilon"), &c->rms_eps) < 0)
		return -1;
	if (!(c->rope_base > 0) || !(c->rms_eps >= 0)) {
		llm_seterr("bad rope.freq_base or layer_norm_rms_epsilon");
		return -1;
	}
	c->embd_scale = fam->gemma ? sqrtf((float)c->dim) : 1.0f;
	c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
	c->rope_base_swa = 10000.0f;
	if (fam->gemma) {
		/*
		 * As llama.cpp reads gemma3: no sliding_window, no sliding
		 * layers; the pattern 6 unless the file says (0: all slide);
		 * the sliding layers' RoPE base 10000 unless it says.  27B
		 * scales its scores by 1/sqrt(dim / heads), which no key
		 * tells: llama.cpp knows it by its 62 layers, and so do we.
		 */
		if (get_u32(m, KEY("attention.sliding_window"), 0, 0, &c->n_swa) ||
		    get_u32(m, KEY("attention.sliding_window_pattern"), 0, 6, &c->swa_pattern))
			return -1;
		if (gguf_get_f32(&m->gguf, KEY("rope.freq_base_swa"), &c->rope_base_swa) < 0)
			return -1;
		if (gguf_get_f32(&m->gguf, KEY("final_logit_softcapping"), &c->softcap) < 0)
			return -1;
		if (c->n_layers == 62)
			c->attn_scale = 1.0f / sqrtf((float)(c->dim / c->n_heads));
		if (c->n_swa > KV_MAX_CTX || c->swa_pattern > KV_MAX_LAYERS || !(c->rope_base_swa > 0) ||
		    !(c->softcap >= 0) || isinf(c->softcap)) {
			llm_seterr("bad sliding_window %d, sliding_window_pattern %d, rope.freq_base_swa "
			    "or final_logit_softcapping", c->n_swa, c->swa_pattern);
			return -1;
		}
	}
	if (fam->oss) {
		/* as llama.cpp reads gpt-oss: a window the file gives, on layers 0, 2, 4, ... */
		if (get_u32(m, KEY("attention.sliding_window"), 1, 0, &c->n_swa))
			return -1;
		if (c->n_swa <= 0 || c->n_swa > KV_MAX_CTX) {
			llm_seterr("bad sliding_window %d", c->n_swa);
			return -1;
		}
		c->swa_pattern = 2;
		c->rope_base_swa = c->rope_base;	/* hashed by the fingerprint as gemma3's */
		c->swa_same_rope = 1;
	}
	if (read_rope_scaling(m, a) < 0)
		return -1;
	if (fam->moe) {
		/* llama.cpp's keys; an expert's width defaults to the dense FFN's */
		if (get_u32(m, KEY("expert_count"), 1, 0, &c->n_expert) ||
		    get_u32(m, KEY("expert_used_count"), 1, 0, &c->n_expert_used) ||
		    get_u32(m, KEY("expert_feed_forward_length"), 0, (uint32_t)c->ffn_dim, &c->expert_ffn_dim))
			return -1;
		if (c->n_expert <= 0 || c->n_expert > MODEL_MAX_EXPERTS || c->n_expert_used <= 0 ||
		    c->n_expert_used > c->n_expert || c->n_expert_used > MODEL_MAX_EXPERTS_USED ||
		    c->expert_ffn_dim <= 0) {
			llm_seterr("bad experts: %d, %d used (at most %d and %d), %d wide", c->n_expert,
			    c->n_expert_used, MODEL_MAX_EXPERTS, MODEL_MAX_EXPERTS_USED, c->expert_ffn_dim);
			return -1;
		}
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
		    bind_norm(m, (snprintf(name, sizeof name, "blk.%d.%s.weight", l, c->ffn_norm), name),
		    c->dim, &L->ffn_norm))
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
		    bind_weight(m, W("attn_v"), c->kv_dim, c->dim, &L->wv)) {
			return -1;
		}
		if (bind_weight(m, W("attn_output"), c->dim, q_dim, &L->wo))
			return -1;
		if (c->n_expert) {
			/* the router, then each expert's gate, up and down, in place */
			if (bind_weight(m, W("ffn_gate_inp"), c->n_expert, c->dim, &L->w_router) ||
			    bind_matrices(m, W("ffn_gate_exps"), c->n_expert, c->expert_ffn_dim, c->dim,
			    &L->gate_exps) ||
			    bind_matrices(m, W("ffn_up_exps"), c->n_expert, c->expert_ffn_dim, c->dim,
			    &L->up_exps) ||
			    bind_matrices(m, W("ffn_down_exps"), c->n_expert, c->dim, c->expert_ffn_dim,
			    &L->down_exps))
				return -1;
		} else if ((!c->fused && (bind_weight(m, W("ffn_gate"), c->ffn_dim, c->dim, &L->w_gate) ||
		    bind_weight(m, W("ffn_up"), c->ffn_dim, c->dim, &L->w_up))) ||
		    bind_weight(m, W("ffn_down"), c->dim, c->ffn_dim, &L->w_down)) {
			return -1;
		}
		if (c->qk_norm && (bind_norm(m, W("attn_q_norm"), c->head_dim, &L->q_norm) ||
		    bind_norm(m, W("attn_k_norm"), c->head_dim, &L->k_norm)))
			return -1;
		if (c->post_norms && (bind_norm(m, W("post_attention_norm"), c->dim, &L->attn_post_norm) ||
		    bind_norm(m, W("post_ffw_norm"), c->dim, &L->ffn_post_norm)))
			return -1;
#undef W
#define B(s) (snprintf(name, sizeof name, "blk.%d." s ".bias", l), name)
		if (c->qkv_bias && (bind_norm(m, B("attn_q"), q_dim, &L->bq) ||
		    bind_norm(m, B("attn_k"), c->kv_dim, &L->bk) ||
		    bind_norm(m, B("attn_v"), c->kv_dim, &L->bv)))
			return -1;
		if (c->out_bias && bind_norm(m, B("attn_output"), c->dim, &L->bo))
			return -1;
		if (c->expert_bias && (bind_norm(m, B("ffn_gate_inp"), c->n_expert, &L->router_b) ||
		    bind_vectors(m, B("ffn_gate_exps"), c->n_expert, c->expert_ffn_dim, &L->gate_exps_b) ||
		    bind_vectors(m, B("ffn_up_exps"), c->n_expert, c->expert_ffn_dim, &L->up_exps_b) ||
		    bind_vectors(m, B("ffn_down_exps"), c->n_expert, c->dim, &L->down_exps_b)))
			return -1;
#undef B
		if (c->sinks && bind_norm(m, (snprintf(name, sizeof name, "blk.%d.attn_sinks.weight", l), name),
		    c->n_heads, &L->sinks))
			return -1;
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

/* Whether the sliding layers rotate by a RoPE of their own (rope_swa), not the model's */
static int
own_swa_rope(const struct model *m)
{
	return m->slides && !m->c.swa_same_rope;
}

/* The file's rope.scaling on a RoPE of the given base */
static void
scale_rope(const struct model_config *c, struct rope *r, float base)
{
	if (c->rope_scaling == MODEL_ROPE_LINEAR)
		rope_linear(r, c->rope_factor);
	else if (c->rope_scaling == MODEL_ROPE_YARN)
		rope_yarn(r, base, c->rope_factor, c->yarn_orig_ctx, c->yarn_beta_fast, c->yarn_beta_slow);
}

int
model_load(struct model *m, const char *path)
{
	memset(m, 0, sizeof *m);
	kernels_init();
	if (gguf_open(&m->gguf, path) < 0)
		return -1;
	m->used = xcalloc(m->gguf.n_tensors ? m->gguf.n_tensors : 1, 1);
	if (read_config(m) < 0 || bind_weights(m) < 0) {
		model_free(m);
		return -1;
	}
	rope_init(&m->rope, m->c.rope_dim, m->c.head_dim, m->c.rope_neox, m->c.rope_base,
	    m->rope_factors);
	scale_rope(&m->c, &m->rope, m->c.rope_base);
	/* layer l slides if l % pattern < pattern - 1, as llama.cpp's set_swa_pattern */
	for (int l = 0, p = m->c.swa_pattern; m->c.n_swa > 0 && l < m->c.n_layers; l++)
		if (p == 0 || l % p < p - 1) {
			if (!m->slides)
				m->slides = xcalloc((size_t)m->c.n_layers, 1);
			m->slides[l] = 1;
		}
	/* gemma3's sliding layers have a RoPE of their own: its base, unscaled, as llama.cpp */
	if (own_swa_rope(m))
		rope_init(&m->rope_swa, m->c.rope_dim, m->c.head_dim, m->c.rope_neox,
		    m->c.rope_base_swa, m->rope_factors);
	return 0;
}

int
model_kv_init(const struct model *m, struct kv *kv, int max_ctx, int prealloc, int k_type,
    int v_type)
{
	const struct model_config *c = &m->c;

	if (kv_init_types(kv, c->n_layers, c->n_kv_heads, c->head_dim, max_ctx, prealloc, k_type,
	    v_type) < 0)
		return -1;
	if (m->slides && kv_set_sliding(kv, m->slides, c->n_swa) < 0) {
		kv_free(kv);
		return -1;
	}
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
	rope_free(&m->rope);
	rope_free(&m->rope_swa);
	free(m->slides);
	free(m->used);
	gguf_close(&m->gguf);
	memset(m, 0, sizeof *m);
}

int
model_run_init(struct model_run *r, const struct model *m, struct pool *pool)
{
	const struct model_config *c = &m->c;
	int q_dim = c->n_heads * c->head_dim;

	memset(r, 0, sizeof *r);
	r->m = m;
	r->pool = pool;
	r->x = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
	r->xb = xcalloc((size_t)MODEL_BATCH * (q_dim > c->dim ? q_dim : c->dim), sizeof(float));
	r->xb2 = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
	r->hb = xcalloc((size_t)MODEL_BATCH * c->ffn_dim, sizeof(float));	/* the dense FFN's: experts have r->es */
	r->hb2 = xcalloc((size_t)MODEL_BATCH * c->ffn_dim, sizeof(float));
	if (c->n_expert) {
		size_t K = (size_t)c->n_expert_used;
		r->route = xcalloc((size_t)MODEL_BATCH * c->n_expert, sizeof(float));
		r->route_w = xcalloc(MODEL_BATCH * K, sizeof(float));
		r->route_e = xcalloc(MODEL_BATCH * K, sizeof(int));
		r->es = xcalloc((size_t)pool_threads(pool), sizeof *r->es);
		for (int i = 0; i < pool_threads(pool); i++) {
			r->es[i].xe = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
			r->es[i].hb = xcalloc((size_t)MODEL_BATCH * c->expert_ffn_dim, sizeof(float));
			r->es[i].hb2 = xcalloc((size_t)MODEL_BATCH * c->expert_ffn_dim, sizeof(float));
			r->es[i].ye = xcalloc((size_t)MODEL_BATCH * c->dim, sizeof(float));
		}
		r->slots = xcalloc(MODEL_BATCH * K * c->dim, sizeof(float));
		r->slot_of = xcalloc(MODEL_BATCH * K, sizeof(int));
		r->expert_used = xcalloc((size_t)c->n_layers * c->n_expert, 1);
	}
	r->q = xcalloc((size_t)MODEL_BATCH * q_dim, sizeof(float));
	r->logits = xcalloc((size_t)c->vocab_size, sizeof(float));
	r->rope_cs = xcalloc((size_t)MODEL_BATCH * c->rope_dim, sizeof(float));
	if (own_swa_rope(m))
		r->rope_cs_swa = xcalloc((size_t)MODEL_BATCH * c->rope_dim, sizeof(float));
	r->k = xcalloc((size_t)MODEL_BATCH * c->kv_dim, sizeof(float));
	r->v = xcalloc((size_t)MODEL_BATCH * c->kv_dim, sizeof(float));
	attn_init(&r->attn, c->n_heads, c->n_kv_heads, c->head_dim, &m->rope, pool);
	r->attn.scale = c->attn_scale;
	r->n_seq_attn = pool ? pool_threads(pool) : 1;
	r->seq_attn = xcalloc((size_t)r->n_seq_attn, sizeof *r->seq_attn);
	for (int i = 0; i < r->n_seq_attn; i++) {
		attn_init(&r->seq_attn[i], c->n_heads, c->n_kv_heads, c->head_dim, &m->rope, NULL);
		r->seq_attn[i].scale = c->attn_scale;
	}
	return 0;
}

int
model_run_experts_used(const struct model_run *r, int l)
{
	int n = 0;

	for (int e = 0; r->expert_used && e < r->m->c.n_expert; e++)
		n += r->expert_used[(size_t)l * r->m->c.n_expert + e];
	return n;
}

void
model_run_free(struct model_run *r)
{
	free(r->x);
	free(r->xb);
	free(r->xb2);
	free(r->hb);
	free(r->hb2);
	free(r->q);
	free(r->logits);
	free(r->rope_cs);
	free(r->rope_cs_swa);
	free(r->route);
	free(r->route_w);
	free(r->route_e);
	for (int i = 0; r->es && i < pool_threads(r->pool); i++) {
		free(r->es[i].xe);
		free(r->es[i].hb);
		free(r->es[i].hb2);
		free(r->es[i].ye);
		free(r->es[i].mm.xr);
	}
	free(r->es);
	free(r->slots);
	free(r->slot_of);
	free(r->expert_used);
	free(r->k);
	free(r->v);
	free(r->mm.xr);
	attn_free(&r->attn);
	for (int i = 0; i < r->n_seq_attn; i++)
		attn_free(&r->seq_attn[i]);
	free(r->seq_attn);
	memset(r, 0, sizeof *r);
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
		n += (c->post_norms ? 4 : 2) * (uint64_t)c->dim * sizeof(float);
		if (c->n_expert)	/* the router, and the experts a token takes */
			n += (uint64_t)L->w_router.rows * L->w_router.row_bytes + (uint64_t)c->n_expert_used *
			    c->expert_ffn_dim * (L->gate_exps.row_bytes + L->up_exps.row_bytes) +
			    (uint64_t)c->n_expert_used * c->dim * L->down_exps.row_bytes;
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
	/* the sliding layers change what the cache holds: a model with them names them */
	if (m->slides) {
		uint32_t w[2] = { (uint32_t)c->n_swa, (uint32_t)c->swa_pattern };
		sha256_update(&h, w, sizeof w);
		sha256_update(&h, &c->rope_base_swa, 4);
	}
	/* the experts a token takes are no tensor's shape */
	if (c->n_expert) {
		uint32_t k = (uint32_t)c->n_expert_used;
		sha256_update(&h, &k, 4);
	}
	/* nor is RoPE's scaling, which changes the keys cached */
	if (c->rope_scaling != MODEL_ROPE_NONE) {
		uint32_t s[2] = { (uint32_t)c->rope_scaling, (uint32_t)c->yarn_orig_ctx };
		float f[3] = { c->rope_factor, c->yarn_beta_fast, c->yarn_beta_slow };
		sha256_update(&h, s, sizeof s);
		sha256_update(&h, f, sizeof f);
	}
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
 * The per-token steps of a batch, shared among the threads by tokens:
 * residual adds and RMS norms, and SwiGLU's silu(gate) * up.  Each
 * token's row is computed alone, so the bits do not depend on the split.
 * A residual add runs in the norm's job that follows it: on the calling
 * thread alone it cost 2% of a prompt, the other thread waiting.
 */
#define ROW_COST POOL_ROW_WORK

struct rows_job {
	float *out;		/* norms: out = norm(x) * weight; silu: out = silu(out) * x */
	float *x;
	const float *weight;
	int n, len;
	float eps;
	const float *add;	/* norms: x += add first, if not NULL */
	int glu;		/* the gate's MODEL_GLU_ */
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
glu_rows(void *arg, int ith, int nth)
{
	const struct rows_job *j = arg;
	size_t len = (size_t)j->len, i0 = (size_t)(j->n * ith / nth), i1 = (size_t)(j->n * (ith + 1) / nth);
	void (*act)(float *, const float *, size_t) = j->glu == MODEL_GLU_GELU ? kernels_gelu_mul :
	    j->glu == MODEL_GLU_OAI ? kernels_swiglu_oai_mul : kernels_silu_mul;

	act(j->out + i0 * len, j->x + i0 * len, (i1 - i0) * len);
}

/*
 * g = act(g) * u, for each of n rows of len of the FFN: the family's gate
 * (model.h's MODEL_GLU_), on the pool's threads (NULL: the calling one).
 */
static void
glu(struct pool *pool, const struct model_config *c, float *g, float *u, int n, int len)
{
	struct rows_job job = { g, u, NULL, n, len, 0, NULL, c->glu };

	pool_run_work(pool, glu_rows, &job, (long long)n * len * ROW_COST);
}

/* The K largest of p[0..E), in rank order: strictly larger first, so a tie goes to the lowest index. */
static void
top_k(const float *p, int E, int K, int *e_out)
{
	for (int k = 0; k < K; k++) {
		int best = -1;
		for (int e = 0; e < E; e++) {
			int taken = 0;
			for (int j = 0; j < k; j++)
				taken |= e_out[j] == e;
			if (!taken && (best < 0 || p[e] > p[best]))
				best = e;
		}
		e_out[k] = best;
	}
}

/*
 * A token's route, as llama.cpp's build_moe_ffn for the two families:
 * qwen3moe's softmax over every expert, the K most probable, their
 * probabilities over their sum; or gpt-oss's (route_after) K largest
 * logits, the router's bias added, then the softmax of those K.  Ties go
 * to the lowest index; weights in rank order.  Plain C in a fixed order.
 */
static void
route_token(const struct model_config *c, float *logit, const float *bias, int *e_out, float *w_out)
{
	float p[MODEL_MAX_EXPERTS], max, sum = 0;
	int e, k, E = c->n_expert, K = c->n_expert_used;

	for (e = 0; bias && e < E; e++)
		logit[e] += bias[e];
	if (c->route_after) {
		top_k(logit, E, K, e_out);
		for (k = 0; k < K; k++)	/* the first is the largest */
			sum += w_out[k] = fmath_expf(logit[e_out[k]] - logit[e_out[0]]);
		for (k = 0; k < K; k++)
			w_out[k] /= sum;
		return;
	}
	for (max = logit[0], e = 1; e < E; e++)
		max = logit[e] > max ? logit[e] : max;
	for (e = 0; e < E; e++)
		sum += p[e] = fmath_expf(logit[e] - max);
	for (e = 0; e < E; e++)
		p[e] /= sum;
	top_k(p, E, K, e_out);
	for (sum = 0, k = 0; k < K; k++)
		sum += w_out[k] = p[e_out[k]];
	for (k = 0; k < K; k++)
		w_out[k] /= sum;
}

/* A bias added to each of n rows of len floats; nothing if there is none. */
static void
add_bias(float *rows, int n, int len, const float *bias)
{
	for (int t = 0; bias && t < n; t++)
		for (int j = 0; j < len; j++)
			rows[(size_t)t * len + j] += bias[j];
}

/*
 * Expert e's SwiGLU FFN for the cnt tokens whose slots are slot[0..cnt):
 * their rows gathered into one batch (an expert's rows read once a pass),
 * the outputs to their slots, on the pool's threads (NULL: the calling
 * one) and the scratch s.
 */
static void
expert_ffn(struct model_run *r, struct pool *pool, struct expert_scratch *s,
    const struct layer_weights *L, int e, const int *slot, int cnt)
{
	const struct model_config *c = &r->m->c;
	int D = c->dim, K = c->n_expert_used, Fe = c->expert_ffn_dim, i;
	struct weight g = rows_of(&L->gate_exps, e * Fe, Fe), u = rows_of(&L->up_exps, e * Fe, Fe);
	struct weight dn = rows_of(&L->down_exps, e * D, D);
	struct matvec gu[] = { { s->hb, (size_t)Fe, &g }, { s->hb2, (size_t)Fe, &u } };
	struct matvec dm[] = { { s->ye, (size_t)D, &dn } };

	for (i = 0; i < cnt; i++)
		memcpy(s->xe + (size_t)i * D, r->xb + (size_t)(slot[i] / K) * D, (size_t)D * sizeof(float));
	matmul(pool, &s->mm, gu, 2, s->xe, D, cnt);
	if (c->expert_bias) {
		add_bias(s->hb, cnt, Fe, L->gate_exps_b + (size_t)e * Fe);
		add_bias(s->hb2, cnt, Fe, L->up_exps_b + (size_t)e * Fe);
	}
	glu(pool, c, s->hb, s->hb2, cnt, Fe);
	matmul(pool, &s->mm, dm, 1, s->hb, Fe, cnt);
	if (c->expert_bias)
		add_bias(s->ye, cnt, D, L->down_exps_b + (size_t)e * D);
	for (i = 0; i < cnt; i++)
		memcpy(r->slots + (size_t)slot[i] * D, s->ye + (size_t)i * D, (size_t)D * sizeof(float));
}

/* A layer's experts, claimed in turn by the threads, each run whole on its thread. */
struct experts_job {
	struct model_run *r;
	const struct layer_weights *L;
	const int *order;	/* the experts some token took, the most tokens first */
	const int *first;	/* expert e's slots: slot_of[first[e]..first[e + 1]) */
	int n_order;
	atomic_int next;
};

/* The job's a-th expert on the pool's threads (NULL: the calling one), with the scratch s */
static void
job_expert(const struct experts_job *j, int a, struct pool *pool, struct expert_scratch *s)
{
	int e = j->order[a];

	expert_ffn(j->r, pool, s, j->L, e, j->r->slot_of + j->first[e], j->first[e + 1] - j->first[e]);
}

static void
experts_worker(void *arg, int ith, int nth)
{
	struct experts_job *j = arg;
	int a;

	(void)nth;
	while ((a = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->n_order)
		job_expert(j, a, NULL, &j->r->es[ith]);
}

/*
 * With this many experts a thread or more, each expert runs whole on one
 * thread, the layer's in one hand-off (two an expert, both threads
 * waiting at each end, took Qwen3-30B-A3B's prefill of 128 to 514 tok/s
 * against 575; its decode, 8 experts on 2 threads, 75 against 86).  With
 * fewer (gpt-oss's 4 on 2 threads, a decode step's 8 on many), each
 * expert goes on every thread in turn, so that no thread idles.
 */
#define EXPERTS_A_THREAD 4

/*
 * The routed FFN: each token's route, then expert by expert the tokens
 * that chose it (those no token chose never read), its FFN, and a
 * token's output the sum of its slots times their weights, in rank
 * order.  Each product gives a token the bits it has alone, whichever
 * thread computes it, so no token's output depends on its batch or the
 * threads.  Experts go most tokens first, so that the last claimed are
 * the shortest and the threads end together.
 */
static void
moe_ffn(struct model_run *r, const struct layer_weights *L, int l, float *out, int n)
{
	const struct model_config *c = &r->m->c;
	int D = c->dim, E = c->n_expert, K = c->n_expert_used, t, k, e, i, d, a;
	int first[MODEL_MAX_EXPERTS + 1] = { 0 }, at[MODEL_MAX_EXPERTS], order[MODEL_MAX_EXPERTS];
	struct matvec route[] = { { r->route, (size_t)E, &L->w_router } };
	struct experts_job job = { r, L, order, first, 0, 0 };

	matmul(r->pool, &r->mm, route, 1, r->xb, D, n);
	for (t = 0; t < n; t++)
		route_token(c, r->route + (size_t)t * E, L->router_b, r->route_e + (size_t)t * K,
		    r->route_w + (size_t)t * K);
	/* the slots by expert, each expert's in slot order */
	for (i = 0; i < n * K; i++)
		first[r->route_e[i] + 1]++;
	for (e = 0; e < E; e++) {
		first[e + 1] += first[e];
		at[e] = first[e];
	}
	for (i = 0; i < n * K; i++)
		r->slot_of[at[r->route_e[i]]++] = i;
	for (e = 0; e < E; e++) {
		int cnt = first[e + 1] - first[e];
		if (!cnt)
			continue;
		r->expert_used[(size_t)l * E + e] = 1;
		for (a = job.n_order++; a > 0 && first[order[a - 1] + 1] - first[order[a - 1]] < cnt; a--)
			order[a] = order[a - 1];
		order[a] = e;
	}
	if (job.n_order >= EXPERTS_A_THREAD * pool_threads(r->pool)) {
		atomic_init(&job.next, 0);
		pool_run_work(r->pool, experts_worker, &job, (long long)n * K * 3 * c->expert_ffn_dim * D);
	} else {
		for (a = 0; a < job.n_order; a++)
			job_expert(&job, a, r->pool, &r->es[0]);
	}
	for (t = 0; t < n; t++) {
		const float *w = r->route_w + (size_t)t * K, *y = r->slots + (size_t)t * K * D;
		float *o = out + (size_t)t * D;
		for (d = 0; d < D; d++)
			o[d] = w[0] * y[d];
		for (k = 1; k < K; k++)
			for (d = 0; d < D; d++)
				o[d] += w[k] * y[(size_t)k * D + d];
	}
}

/* x += add (if not NULL), then out = norm(x) * weight, for each of n rows. */
static void
add_norm(struct model_run *r, float *out, float *x, const float *add, const float *weight, int n)
{
	const struct model_config *c = &r->m->c;
	struct rows_job job = { out, x, weight, n, c->dim, c->rms_eps, add, 0 };

	pool_run_work(r->pool, norm_rows, &job, (long long)n * c->dim * ROW_COST);
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

/*
 * A batch's Q, K and V rows after their products: the family's biases and
 * per-head norms if it has them, then RoPE; shared out by tokens.
 */
struct qkv_job {
	const struct model *m;
	const struct rope *rope;	/* the layer's */
	const float *rope_cs;	/* rope_angles of each token's position */
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
		const float *cs = j->rope_cs + (size_t)i * c->rope_dim;

		add_bias(q, 1, Q, j->L->bq);
		add_bias(k, 1, KV, j->L->bk);
		add_bias(v, 1, KV, j->L->bv);
		head_norm(j->m, q, c->n_heads, j->L->q_norm);
		head_norm(j->m, k, c->n_kv_heads, j->L->k_norm);
		rope_rotate(j->rope, q, c->n_heads, cs);
		rope_rotate(j->rope, k, c->n_kv_heads, cs);
	}
}

/*
 * A layer's keys and values of a pass's sequences into their caches, and
 * their attention: sequences of one token side by side, a thread's each
 * in turn, on the thread alone (a decode step of many sequences: one
 * token's attention over a short cache is too little to share out); the
 * others each on every thread.  A sequence's attention gives the same
 * bits on any number of threads.
 */
struct seqs_job {
	struct model_run *r;
	const struct model_seq *seqs;
	int ns, layer;
	const int *first;	/* each sequence's first row in the batch */
	atomic_int next;
	atomic_int failed;
	char err[256];		/* the first failure's llm_err(), from the thread that met it */
};

/* Sequence s's keys and values into its cache, then its attention on a (a thread's, or the pool's). */
static int
append_attend(struct model_run *r, const struct model_seq *q, int layer, int t, struct attn *a,
    int copy)
{
	const struct model_config *c = &r->m->c;
	int Q = c->n_heads * c->head_dim, KV = c->kv_dim;

	if (copy) {
		float *kr = kv_append_rows(q->kv, layer, KV_K, q->pos, q->n);
		float *vr = kv_append_rows(q->kv, layer, KV_V, q->pos, q->n);
		if (!kr || !vr)
			return -1;
		memcpy(kr, r->k + (size_t)t * KV, (size_t)q->n * KV * sizeof *kr);
		memcpy(vr, r->v + (size_t)t * KV, (size_t)q->n * KV * sizeof *vr);
	}
	a->sinks = r->m->layers[layer].sinks;
	return kv_append(q->kv, layer, q->pos, q->n) < 0 ||
	    kv_attend(q->kv, a, layer, q->pos, q->n, r->q + (size_t)t * Q, r->xb + (size_t)t * Q) < 0 ?
	    -1 : 0;
}

static void
attend_seqs(void *arg, int ith, int nth)
{
	struct seqs_job *job = arg;
	int s;

	(void)nth;
	while ((s = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->ns) {
		if (job->seqs[s].n != 1)
			continue;
		if (append_attend(job->r, &job->seqs[s], job->layer, job->first[s],
		    &job->r->seq_attn[ith], 1) < 0 && !atomic_exchange(&job->failed, 1))
			snprintf(job->err, sizeof job->err, "%s", llm_err());
	}
}

/* The rows a sequence wants from a pass. */
static int
rows_wanted(const struct model_seq *q)
{
	return q->what == MODEL_OUT_NONE ? 0 : q->what == MODEL_OUT_LAST ? 1 : q->n;
}

/*
 * One pass of the sequences' tokens (n <= MODEL_BATCH in all), a layer
 * at a time as the equations go.  out: as model_forward_seqs's.
 */
static int
forward(struct model_run *r, const struct model_seq *seqs, int ns, int n, float *out)
{
	const struct model *m = r->m;
	const struct model_config *c = &m->c;
	int D = c->dim, F = c->ffn_dim, Q = c->n_heads * c->head_dim, KV = c->kv_dim, l, i, s, t;
	int first[MODEL_BATCH], ones = 0;	/* each sequence's first row; those of one token */
	long long ones_work = 0;		/* their attention's multiply-adds */

	for (s = t = 0; s < ns; s++) {
		first[s] = t;
		ones += ns > 1 && seqs[s].n == 1;
		ones_work += ns > 1 && seqs[s].n == 1 ? (long long)(seqs[s].pos + 1) * Q : 0;
		for (i = 0; i < seqs[s].n; i++)
			if (seqs[s].tokens[i] < 0 || seqs[s].tokens[i] >= c->vocab_size) {
				llm_seterr("forward: bad token %d", seqs[s].tokens[i]);
				return -1;
			}
		/*
		 * m->slides is the model's layer pattern; the cache keeps its
		 * own (model_kv_init's, or a snapshot's): two facts, not one
		 * kept twice, for a cache may come from another model.
		 */
		if (kv_fits_layers(seqs[s].kv, c->n_layers, m->slides, c->n_swa) < 0) {
			char why[256];
			snprintf(why, sizeof why, "%s", llm_err());
			llm_seterr("forward: %s", why);
			return -1;
		}
		if (kv_begin(seqs[s].kv, seqs[s].pos, seqs[s].n) < 0)
			return -1;
		/* the batch's RoPE angles, for every layer (sliding ones: their own), and its embeddings */
		for (i = 0; i < seqs[s].n; i++, t++) {
			rope_angles(&m->rope, seqs[s].pos + i, r->rope_cs + (size_t)t * c->rope_dim);
			if (r->rope_cs_swa)
				rope_angles(&m->rope_swa, seqs[s].pos + i,
				    r->rope_cs_swa + (size_t)t * c->rope_dim);
			float *x = r->x + (size_t)t * D;
			quant_dequant_row(m->token_embd.type, (const char *)m->token_embd.data +
			    (size_t)seqs[s].tokens[i] * m->token_embd.row_bytes, x, (size_t)D);
			for (int d = 0; c->embd_scale != 1.0f && d < D; d++)
				x[d] *= c->embd_scale;
		}
	}

	for (l = 0; l < c->n_layers; l++) {
		const struct layer_weights *L = &m->layers[l];

		/*
		 * Attention: norm, then Q, K and V for the batch, the family's
		 * biases and per-head norms if it has them, then RoPE; K and V
		 * go to each sequence's cache, which attends.  The previous
		 * layer's FFN output joins the residual stream in the norm.
		 * One sequence's keys and values are written where its cache
		 * wants them; several sequences' go there afterwards.
		 */
		add_norm(r, r->xb, r->x, l ? r->xb2 : NULL, L->attn_norm, n);
		float *k = r->k, *v = r->v;
		if (ns == 1 && (!(k = kv_append_rows(seqs[0].kv, l, KV_K, seqs[0].pos, n)) ||
		    !(v = kv_append_rows(seqs[0].kv, l, KV_V, seqs[0].pos, n))))
			return -1;
		struct matvec qkv[] = { { r->q, Q, &L->wq }, { k, KV, &L->wk }, { v, KV, &L->wv } };
		matmul(r->pool, &r->mm, qkv, 3, r->xb, D, n);
		int own = r->rope_cs_swa && m->slides[l];	/* a sliding layer, by its own RoPE */
		struct qkv_job qj = { m, own ? &m->rope_swa : &m->rope, own ? r->rope_cs_swa : r->rope_cs,
		    L, r->q, k, v, n };
		pool_run_work(r->pool, qkv_rows, &qj, (long long)n * (Q + 2 * KV) * ROW_COST);
		for (s = 0; s < ns; s++)
			if ((ns == 1 || seqs[s].n > 1) &&
			    append_attend(r, &seqs[s], l, first[s], &r->attn, ns > 1) < 0)
				return -1;
		if (ones > 0) {
			struct seqs_job job = { .r = r, .seqs = seqs, .ns = ns, .layer = l, .first = first };
			atomic_init(&job.next, 0);
			atomic_init(&job.failed, 0);
			pool_run_work(r->pool, attend_seqs, &job, ones_work);
			if (atomic_load(&job.failed)) {
				llm_seterr("%s", job.err);
				return -1;
			}
		}
		struct matvec wo[] = { { r->xb2, D, &L->wo } };
		matmul(r->pool, &r->mm, wo, 1, r->xb, Q, n);
		add_bias(r->xb2, n, D, L->bo);
		if (L->attn_post_norm)	/* gemma: the output normed before the residual add */
			add_norm(r, r->xb2, r->xb2, NULL, L->attn_post_norm, n);

		/*
		 * FFN: down(act(gate(x)) * up(x)), SiLU (SwiGLU) or GELU, after
		 * the residual add, or a routed FFN's chosen experts' sum
		 * (moe_ffn); gemma norms its output too.
		 */
		add_norm(r, r->xb, r->x, r->xb2, L->ffn_norm, n);
		if (c->n_expert) {
			moe_ffn(r, L, l, r->xb2, n);
		} else {
			struct matvec gate_up[] = { { r->hb, F, &L->w_gate }, { r->hb2, F, &L->w_up } };
			matmul(r->pool, &r->mm, gate_up, 2, r->xb, D, n);
			glu(r->pool, c, r->hb, r->hb2, n, F);
			struct matvec down[] = { { r->xb2, D, &L->w_down } };
			matmul(r->pool, &r->mm, down, 1, r->hb, F, n);
		}
		if (L->ffn_post_norm)
			add_norm(r, r->xb2, r->xb2, NULL, L->ffn_post_norm, n);
	}
	for (s = 0; s < ns; s++)
		if (kv_set_seq_len(seqs[s].kv, seqs[s].pos + seqs[s].n) < 0)
			return -1;
	/*
	 * The last layer's FFN output joins the residual stream of the rows
	 * wanted, in their output norm: hidden states straight to out, the
	 * rows wanted for logits gathered into xb for one product (the
	 * output matrix is the largest).
	 */
	int w = 0, hidden = 0;
	for (s = 0; s < ns; s++)	/* hidden states go with no logits: model_forward_seqs */
		hidden |= seqs[s].what == MODEL_OUT_HIDDEN;
	float *rows_out = hidden ? out : r->xb;
	for (s = t = 0; s < ns; t += seqs[s++].n) {
		const struct model_seq *q = &seqs[s];
		int first = q->what == MODEL_OUT_LAST ? t + q->n - 1 : t, rows = rows_wanted(q);
		add_norm(r, rows_out + (size_t)w * D, r->x + (size_t)first * D,
		    r->xb2 + (size_t)first * D, m->output_norm, rows);
		w += rows;
	}
	if (!hidden && w > 0) {
		struct matvec lg[] = { { out, (size_t)c->vocab_size, &m->output } };
		matmul(r->pool, &r->mm, lg, 1, r->xb, D, w);
		/* a final cap, if the model has one: softcap * tanh(z / softcap) */
		for (size_t e = 0; c->softcap > 0 && e < (size_t)w * c->vocab_size; e++)
			out[e] = c->softcap * fmath_tanhf(out[e] / c->softcap);
	}
	return 0;
}

int
model_forward_seqs(struct model_run *r, const struct model_seq *seqs, int ns, float *out)
{
	int s, n = 0, hidden = 0, logits = 0;

	for (s = 0; s < ns; s++) {
		if (seqs[s].n < 1 || seqs[s].pos < 0 || (unsigned)seqs[s].what > MODEL_OUT_HIDDEN) {
			llm_seterr("forward: bad position %d or batch %d", seqs[s].pos, seqs[s].n);
			return -1;
		}
		n += seqs[s].n;
		hidden |= seqs[s].what == MODEL_OUT_HIDDEN;
		logits |= seqs[s].what == MODEL_OUT_LAST || seqs[s].what == MODEL_OUT_ALL;
	}
	if (ns < 1 || n > MODEL_BATCH || (hidden && logits) || ((hidden || logits) && !out)) {
		llm_seterr("forward: %d sequences of %d tokens do not make a pass", ns, n);
		return -1;
	}
	return forward(r, seqs, ns, n, out);
}

int
model_forward(struct model_run *r, struct kv *kv, const int *tokens, int n, int pos,
    enum model_out what, float *out)
{
	const struct model_config *c = &r->m->c;
	size_t row = what == MODEL_OUT_ALL ? (size_t)c->vocab_size :
	    what == MODEL_OUT_HIDDEN ? (size_t)c->dim : 0;
	int i, b;

	if (n < 1 || (unsigned)what > MODEL_OUT_HIDDEN ||
	    ((what == MODEL_OUT_ALL || what == MODEL_OUT_HIDDEN) && !out)) {
		llm_seterr("forward: bad position %d or batch %d", pos, n);
		return -1;
	}
	if (what == MODEL_OUT_LAST && !out)
		out = r->logits;
	/* Each batch reads every weight from memory once; only the last gives the last logits. */
	for (i = 0; i < n; i += b) {
		b = n - i < MODEL_BATCH ? n - i : MODEL_BATCH;
		struct model_seq q = { kv, tokens + i, b, pos + i,
		    what == MODEL_OUT_LAST && i + b < n ? MODEL_OUT_NONE : what };
		if (forward(r, &q, 1, b, out ? out + (size_t)i * row : NULL) < 0)
			return -1;
	}
	return 0;
}

int
model_embed(struct model_run *r, struct kv *kv, const int *tokens, int n, int pooling,
    int normalize, float *out)
{
	int D = r->m->c.dim, i, b = 0, t, err = 0;	/* b: the last batch's size (n >= 1) */
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
		err = model_forward(r, kv, tokens + i, b, i, MODEL_OUT_HIDDEN, h) < 0;
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
