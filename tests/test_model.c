/*
 * test_model: the forward pass against an independent reference, and
 * the grow-on-demand cache against a dense one, bit for bit.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/kvpriv.h"
#include "../lib/gguf.h"
#include "../lib/kv.h"
#include "../lib/model.h"
#include "../lib/pool.h"
#include "../lib/kernels.h"
#include "../lib/quant.h"
#include "../lib/sample.h"
#include "../cmd/tool.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/fixture.h"
#include "../tools/ggufw.h"


/*
 * The tests drive the model as llm-decode does, through a run state;
 * each pass gets a fresh run (a run carries nothing from pass to pass but
 * scratch), on the pool set_pool() last gave (NULL: one thread).
 */
static struct pool *test_pool;
static float *fwd_last;		/* the last MODEL_OUT_LAST logits fwd() gave without an out */

static void fwd_forget(void);

/* The pool the next runs use (fwd's run is made again for it). */
static void
set_pool(struct pool *p)
{
	fwd_forget();
	test_pool = p;
}

/*
 * fwd keeps its run between calls on the same model and shape (set_pool
 * drops it): a run's buffers are MODEL_BATCH tokens deep, and clearing
 * new ones for every token of a token-by-token pass was most of these
 * tests' time (and the tools keep theirs so too).
 */
static struct model_run fwd_run;
static const struct model *fwd_model;
static struct model_config fwd_config;

static void
fwd_forget(void)
{
	if (fwd_model)
		model_run_free(&fwd_run);
	fwd_model = NULL;
}

static struct model_run *
fwd_run_for(const struct model *m)
{
	if (fwd_model != m || memcmp(&fwd_config, &m->c, sizeof fwd_config)) {
		fwd_forget();
		model_run_init(&fwd_run, m, test_pool);
		fwd_model = m;
		memcpy(&fwd_config, &m->c, sizeof fwd_config);
	}
	return &fwd_run;
}

/*
 * model_forward on fwd's run: out, or for MODEL_OUT_LAST without out the
 * logits in a buffer that the next such call overwrites; NULL and *err
 * set on failure (and for MODEL_OUT_NONE).
 */
static float *
fwd(struct model *m, struct kv *kv, const int *tokens, int n, int pos, enum model_out what,
    float *out, int *err)
{
	static size_t cap;
	size_t V = (size_t)m->c.vocab_size;
	struct model_run *r = fwd_run_for(m);

	*err = model_forward(r, kv, tokens, n, pos, what, out) < 0;
	if (!*err && what == MODEL_OUT_LAST && !out) {
		if (V > cap) {
			free(fwd_last);
			fwd_last = xmalloc(V * sizeof *fwd_last);
			cap = V;
		}
		memcpy(fwd_last, r->logits, V * sizeof *fwd_last);
		out = fwd_last;
	}
	return *err || what == MODEL_OUT_NONE ? NULL : out;
}

static int
embed(struct model *m, struct kv *kv, const int *tokens, int n, int pooling, int normalize,
    float *out)
{
	struct model_run r;
	int rc;

	model_run_init(&r, m, test_pool);
	rc = model_embed(&r, kv, tokens, n, pooling, normalize, out);
	model_run_free(&r);
	return rc;
}

static char path[256];

/* Write a fixture as NAME in the tests' scratch folder; its path. */
static const char *
write_fixture(const struct fixture *f, const char *name)
{
	const char *dir = getenv("LLM_TEST_TMP");

	snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/tmp", name);
	if (fixture_write(f, path) < 0)
		die(1, "%s:", path);
	return path;
}

static const char *
tiny_model(uint32_t type)
{
	struct fixture f;
	char name[64];

	fixture_tiny(&f, type);
	/* q2_K as a Q2_K file mixes it: V's q4_K shares x's rounding with Q's and K's q2_K */
	f.q4k_mix = type == GGML_Q2_K ? 2 : 0;
	snprintf(name, sizeof name, "tiny-%s.gguf", gguf_type_name(type));
	return write_fixture(&f, name);
}

/* ---- an independent reference: the whole sequence at once, no cache, in double ---- */

static double *
dense(const struct weight *w)
{
	double *d = xmalloc((size_t)w->rows * w->cols * sizeof *d);
	float *row = xmalloc((size_t)w->cols * sizeof *row);

	for (int r = 0; r < w->rows; r++) {
		quant_dequant_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes,
		    row, (size_t)w->cols);
		for (int c = 0; c < w->cols; c++)
			d[(size_t)r * w->cols + c] = row[c];
	}
	free(row);
	return d;
}

/* out[t][r] = sum_c W[r][c] * x[t][c] for every position t */
static void
ref_matmul(double *out, const struct weight *w, const double *x, int n)
{
	double *W = dense(w);

	for (int t = 0; t < n; t++)
		for (int r = 0; r < w->rows; r++) {
			double s = 0;
			for (int c = 0; c < w->cols; c++)
				s += W[(size_t)r * w->cols + c] * x[(size_t)t * w->cols + c];
			out[(size_t)t * w->rows + r] = s;
		}
	free(W);
}

static void
ref_rmsnorm(double *out, const double *x, const float *g, int dim, int n, double eps)
{
	for (int t = 0; t < n; t++) {
		double ss = 0;
		for (int i = 0; i < dim; i++)
			ss += x[t * dim + i] * x[t * dim + i];
		ss = 1 / sqrt(ss / dim + eps);
		for (int i = 0; i < dim; i++)
			out[t * dim + i] = g[i] * x[t * dim + i] * ss;
	}
}

/* YaRN's factor (0: none) and original context, from the file's keys (ref_forward_window) */
static double ref_yarn_factor;
static int ref_yarn_ctx;

/*
 * RoPE of one head at position pos, into out: the model's style and
 * frequency factors, base given; with YaRN as gpt-oss's Hugging Face
 * config has it (truncate: false): frequency i mixed between f and
 * f / factor by a ramp between the dimensions whose wavelengths are the
 * original context over 32 and over 1, not rounded, and the rotated
 * vector scaled by 0.1 ln(factor) + 1.
 */
static void
ref_rope(const struct model *m, double *out, const double *v, int pos, double base)
{
	const struct model_config *c = &m->c;
	int half = c->rope_dim / 2, d = c->rope_dim;
	double lo = 0, hi = 1, ms = 1;

	if (ref_yarn_factor > 0) {
		lo = fmax(0, d * log(ref_yarn_ctx / (32 * 2 * M_PI)) / (2 * log(base)));
		hi = fmin(d - 1, d * log(ref_yarn_ctx / (2 * M_PI)) / (2 * log(base)));
		ms = 0.1 * log(ref_yarn_factor) + 1;
	}
	memcpy(out, v, c->head_dim * sizeof *out);
	for (int i = 0; i < half; i++) {
		double f = 1 / pow(base, 2.0 * i / d) / (m->rope_factors ? m->rope_factors[i] : 1.0);
		if (ref_yarn_factor > 0) {
			double ramp = fmin(1, fmax(0, (i - lo) / (hi - lo)));
			f = f / ref_yarn_factor * ramp + f * (1 - ramp);
		}
		double th = pos * f;
		int a = c->rope_neox ? i : 2 * i, b = c->rope_neox ? i + half : 2 * i + 1;
		out[a] = ms * (v[a] * cos(th) - v[b] * sin(th));
		out[b] = ms * (v[a] * sin(th) + v[b] * cos(th));
	}
}

static void
ref_bias(double *rows, int n, int len, const float *bias)
{
	for (int t = 0; bias && t < n; t++)
		for (int j = 0; j < len; j++)
			rows[(size_t)t * len + j] += bias[j];
}

/* GELU in its tanh form, in double. */
static double
ref_gelu(double x)
{
	return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

/* The closest margin a reference route met: between the last expert taken and the next (ref_moe's) */
static double ref_moe_margin = INFINITY;

/*
 * The routed FFN, as llama.cpp's build_moe_ffn states it, in double.
 * qwen3moe: the softmax of the router's logits over every expert, the
 * n_expert_used most probable (ties: the lowest index), their
 * probabilities over their sum, and the sum of each chosen expert's
 * SwiGLU FFN times its weight.  gpt-oss: the router's bias added, the
 * largest logits chosen, the softmax over them; each expert's products
 * with their biases and the clamped SwiGLU: x = min(gate, 7),
 * x sigmoid(1.702 x) (clamp(up, -7, 7) + 1).
 */
static void
ref_moe(const struct model *m, const struct layer_weights *L, double *out, const double *xb, int n)
{
	const struct model_config *c = &m->c;
	int D = c->dim, E = c->n_expert, K = c->n_expert_used, Fe = c->expert_ffn_dim;
	double *lg = xcalloc((size_t)n * E, sizeof *lg), *g = xcalloc((size_t)Fe, sizeof *g);
	double *u = xcalloc((size_t)Fe, sizeof *u), *y = xcalloc((size_t)D, sizeof *y);
	int taken[MODEL_MAX_EXPERTS];

	int oss = strcmp(c->arch, "gpt-oss") == 0;

	ref_matmul(lg, &L->w_router, xb, n);
	ref_bias(lg, n, E, L->router_b);
	for (int t = 0; t < n; t++) {
		double *p = lg + (size_t)t * E, max = p[0], sum = 0, wsum = 0, w[MODEL_MAX_EXPERTS_USED];
		int sel[MODEL_MAX_EXPERTS_USED];
		for (int e = 1; e < E; e++)
			max = fmax(max, p[e]);
		for (int e = 0; e < E; e++) {	/* gpt-oss: the logits themselves choose */
			p[e] -= max;
			sum += oss ? 0 : (p[e] = exp(p[e]));
		}
		if (oss)
			sum = 1;
		memset(taken, 0, sizeof taken);
		for (int k = 0; k < K; k++) {
			int best = -1;
			for (int e = 0; e < E; e++)
				if (!taken[e] && (best < 0 || p[e] > p[best]))
					best = e;
			taken[best] = 1;
			sel[k] = best;
			wsum += w[k] = oss ? exp(p[best]) : p[best] / sum;
		}
		for (int e = 0; e < E; e++)	/* the margin of the choice: the last taken against the best left */
			if (!taken[e])
				ref_moe_margin = fmin(ref_moe_margin, (p[sel[K - 1]] - p[e]) / sum);
		memset(out + (size_t)t * D, 0, (size_t)D * sizeof *out);
		for (int k = 0; k < K; k++) {
			struct weight gw = L->gate_exps, uw = L->up_exps, dw = L->down_exps;
			gw.rows = uw.rows = Fe, dw.rows = D;
			gw.data = (const char *)gw.data + (size_t)sel[k] * Fe * gw.row_bytes;
			uw.data = (const char *)uw.data + (size_t)sel[k] * Fe * uw.row_bytes;
			dw.data = (const char *)dw.data + (size_t)sel[k] * D * dw.row_bytes;
			ref_matmul(g, &gw, xb + (size_t)t * D, 1);
			ref_matmul(u, &uw, xb + (size_t)t * D, 1);
			if (oss) {
				ref_bias(g, 1, Fe, L->gate_exps_b + (size_t)sel[k] * Fe);
				ref_bias(u, 1, Fe, L->up_exps_b + (size_t)sel[k] * Fe);
			}
			for (int i = 0; i < Fe; i++) {
				double x = oss ? fmin(g[i], 7) : g[i], y = oss ? fmin(7, fmax(-7, u[i])) + 1 : u[i];
				g[i] = x / (1 + exp(-(oss ? 1.702 : 1) * x)) * y;
			}
			ref_matmul(y, &dw, g, 1);
			if (oss)
				ref_bias(y, 1, D, L->down_exps_b + (size_t)sel[k] * D);
			for (int i = 0; i < D; i++)
				out[(size_t)t * D + i] += w[k] / wsum * y[i];
		}
	}
	free(lg), free(g), free(u), free(y);
}

/*
 * logits[t][vocab] for every position of ids.  With a window (W > 0),
 * StreamingLLM as its paper states it: the query at t sees the S sinks
 * and the newest W positions, and RoPE rotates each by its place in the
 * cache, the sinks first and the window closed up behind them.
 *
 * gemma3, as its paper and llama.cpp state it: embeddings times
 * sqrt(dim); a layer l slides if l % pattern < pattern - 1 (the file's
 * sliding_window_pattern, 6 if absent, 0: all), its query at t seeing
 * the keys at t - sliding_window < s <= t, with RoPE of base 10000 (or
 * rope.freq_base_swa), the others global with rope.freq_base and the
 * window W if any; the attention's and the FFN's outputs RMS-normed
 * before their residual adds; a GELU (tanh) gate; logits capped if the
 * file says.
 *
 * gpt-oss, as llama.cpp and its model card state it: layers 0, 2, 4, ...
 * slide (sliding_window); the attention's output has a bias; each head's
 * sink logit joins its softmax's sum; YaRN as ref_rope; the routed FFN as
 * ref_moe.
 */
static double *
ref_forward_window(const struct model *m, const int *ids, int n, int S, int W)
{
	const struct model_config *c = &m->c;
	int D = c->dim, HD = c->head_dim, KVD = c->kv_dim, F = c->ffn_dim, QD = c->n_heads * HD;
	double *x = xcalloc((size_t)n * D, sizeof *x), *xb = xcalloc((size_t)n * D, sizeof *x);
	double *q = xcalloc((size_t)n * QD, sizeof *x), *k = xcalloc((size_t)n * KVD, sizeof *x);
	double *v = xcalloc((size_t)n * KVD, sizeof *x), *o = xcalloc((size_t)n * D, sizeof *x);
	double *ao = xcalloc((size_t)n * QD, sizeof *x);	/* attention's output, QD wide */
	double *g = xcalloc((size_t)n * F, sizeof *x), *u = xcalloc((size_t)n * F, sizeof *x);
	double *logits = xcalloc((size_t)n * c->vocab_size, sizeof *x);
	double *emb = dense(&m->token_embd);
	double *att = xcalloc((size_t)n, sizeof *att), qr[256], kr[256];
	int gemma = strcmp(c->arch, "gemma3") == 0, oss = strcmp(c->arch, "gpt-oss") == 0, swa = 0, pattern = 6;
	double base_swa = oss ? c->rope_base : 10000, softcap = 0;
	uint32_t key;
	float f;

	ref_yarn_factor = 0;
	if (oss) {
		const char *a = "gpt-oss.";
		struct gguf_str type;
		char k[96];
		pattern = 2;
		if (gguf_get_u32(&m->gguf, (snprintf(k, sizeof k, "%sattention.sliding_window", a), k), &key) > 0)
			swa = (int)key;
		if (gguf_get_str(&m->gguf, (snprintf(k, sizeof k, "%srope.scaling.type", a), k), &type) > 0 &&
		    type.n == 4 && memcmp(type.s, "yarn", 4) == 0 &&
		    gguf_get_f32(&m->gguf, (snprintf(k, sizeof k, "%srope.scaling.factor", a), k), &f) > 0 &&
		    gguf_get_u32(&m->gguf, (snprintf(k, sizeof k, "%srope.scaling.original_context_length",
		    a), k), &key) > 0)
			ref_yarn_factor = f, ref_yarn_ctx = (int)key;
	}

	if (gemma) {
		if (gguf_get_u32(&m->gguf, "gemma3.attention.sliding_window", &key) > 0)
			swa = (int)key;
		if (gguf_get_u32(&m->gguf, "gemma3.attention.sliding_window_pattern", &key) > 0)
			pattern = (int)key;
		if (gguf_get_f32(&m->gguf, "gemma3.rope.freq_base_swa", &f) > 0)
			base_swa = f;
		if (gguf_get_f32(&m->gguf, "gemma3.final_logit_softcapping", &f) > 0)
			softcap = f;
	}
	for (int t = 0; t < n; t++)
		for (int i = 0; i < D; i++)
			x[(size_t)t * D + i] = emb[(size_t)ids[t] * D + i] * (gemma ? sqrt((double)D) : 1);
	for (int l = 0; l < c->n_layers; l++) {
		const struct layer_weights *L = &m->layers[l];
		int slides = swa > 0 && (pattern == 0 || l % pattern < pattern - 1);
		double base = slides ? base_swa : c->rope_base;

		ref_rmsnorm(xb, x, L->attn_norm, D, n, c->rms_eps);
		ref_matmul(q, &L->wq, xb, n);
		ref_matmul(k, &L->wk, xb, n);
		ref_matmul(v, &L->wv, xb, n);
		ref_bias(q, n, QD, L->bq);
		ref_bias(k, n, KVD, L->bk);
		ref_bias(v, n, KVD, L->bv);
		if (L->q_norm) {	/* qwen3: each head RMS-normed */
			ref_rmsnorm(q, q, L->q_norm, HD, n * c->n_heads, c->rms_eps);
			ref_rmsnorm(k, k, L->k_norm, HD, n * c->n_kv_heads, c->rms_eps);
		}
		for (int t = 0; t < n; t++) {
			int e = W && !slides && t - (S + W - 1) > 0 ? t - (S + W - 1) : 0;	/* evicted */
			for (int h = 0; h < c->n_heads; h++) {
				int kh = h / (c->n_heads / c->n_kv_heads);
				double max = -INFINITY, sum = 0;
				ref_rope(m, qr, q + (size_t)t * QD + h * HD, t - e, base);
				for (int s = 0; s <= t; s++) {	/* causal */
					double d = 0;
					att[s] = -INFINITY;
					if ((s >= S && s < S + e) || (slides && s <= t - swa))
						continue;
					ref_rope(m, kr, k + (size_t)s * KVD + kh * HD, s < S ? s : s - e, base);
					for (int i = 0; i < HD; i++)
						d += qr[i] * kr[i];
					/* gemma3 27B (62 layers) scales by 1/sqrt(dim / heads) */
					att[s] = d / sqrt(gemma && c->n_layers == 62 ? (double)D / c->n_heads : HD);
					max = fmax(max, att[s]);
				}
				if (L->sinks)
					max = fmax(max, L->sinks[h]);
				for (int s = 0; s <= t; s++)
					sum += att[s] = exp(att[s] - max);
				if (L->sinks)	/* a logit in the sum, with no value */
					sum += exp(L->sinks[h] - max);
				for (int i = 0; i < HD; i++) {
					double acc = 0;
					for (int s = 0; s <= t; s++)
						acc += att[s] / sum * v[(size_t)s * KVD + kh * HD + i];
					ao[(size_t)t * QD + h * HD + i] = acc;
				}
			}
		}
		ref_matmul(o, &L->wo, ao, n);
		ref_bias(o, n, D, L->bo);
		if (gemma)
			ref_rmsnorm(o, o, L->attn_post_norm, D, n, c->rms_eps);
		for (int i = 0; i < n * D; i++)
			x[i] += o[i];
		ref_rmsnorm(xb, x, L->ffn_norm, D, n, c->rms_eps);
		if (c->n_expert) {
			ref_moe(m, L, o, xb, n);
		} else {
			ref_matmul(g, &L->w_gate, xb, n);
			ref_matmul(u, &L->w_up, xb, n);
			for (int i = 0; i < n * F; i++)
				g[i] = (gemma ? ref_gelu(g[i]) : g[i] / (1 + exp(-g[i]))) * u[i];
			ref_matmul(o, &L->w_down, g, n);
		}
		if (gemma)
			ref_rmsnorm(o, o, L->ffn_post_norm, D, n, c->rms_eps);
		for (int i = 0; i < n * D; i++)
			x[i] += o[i];
	}
	ref_rmsnorm(xb, x, m->output_norm, D, n, c->rms_eps);
	ref_matmul(logits, &m->output, xb, n);
	for (size_t i = 0; softcap > 0 && i < (size_t)n * c->vocab_size; i++)
		logits[i] = softcap * tanh(logits[i] / softcap);
	free(x), free(xb), free(q), free(k), free(v), free(o), free(g), free(u), free(emb), free(att);
	free(ao);
	return logits;
}

static double *
ref_forward(const struct model *m, const int *ids, int n)
{
	return ref_forward_window(m, ids, n, 0, 0);
}

/* The tokens one at a time from position 0: the worst relative logit error against ref. */
static double
worst_against_reference(struct model *m, struct kv *kv, const int *ids, int n, const double *ref)
{
	size_t V = (size_t)m->c.vocab_size;
	double worst = 0;
	int err, t;

	for (t = 0; t < n; t++) {
		float *logits = fwd(m, kv, &ids[t], 1, t, MODEL_OUT_LAST, NULL, &err);
		double maxabs = 0, maxdiff = 0;

		CHECK(!err && logits, "%s", llm_err());
		if (!logits)
			return INFINITY;
		for (size_t i = 0; i < V; i++) {
			double r = ref[(size_t)t * V + i];
			maxabs = worst_of(maxabs, fabs(r));
			maxdiff = worst_of(maxdiff, fabs(logits[i] - r));
		}
		worst = worst_of(worst, maxdiff / maxabs);
	}
	return worst;
}

static void
cached_decoding_matches_uncached_reference(uint32_t type)
{
	enum { N = 40 };
	struct model m;
	struct kv kv;
	int ids[N], t;
	double *ref, worst;

	CHECK(model_load(&m, tiny_model(type)) == 0, "%s", llm_err());
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, m.c.context_length, 0);
	for (t = 0; t < N; t++)
		ids[t] = (t * 7919 + 3) % m.c.vocab_size;
	ref = ref_forward(&m, ids, N);
	worst = worst_against_reference(&m, &kv, ids, N, ref);
	printf("# %s: relative logit error %.3g against the double-precision reference\n", gguf_type_name(type), worst);
	CHECK(worst <= 1e-4, "%s: relative logit error %g", gguf_type_name(type), worst);
	free(ref);
	kv_free(&kv);
	model_free(&m);
}

static void cached_matches_reference_f32(void) { cached_decoding_matches_uncached_reference(GGML_F32); }
static void cached_matches_reference_f16(void) { cached_decoding_matches_uncached_reference(GGML_F16); }
static void cached_matches_reference_bf16(void) { cached_decoding_matches_uncached_reference(GGML_BF16); }
static void cached_matches_reference_q8_0(void) { cached_decoding_matches_uncached_reference(GGML_Q8_0); }
static void cached_matches_reference_q4_0(void) { cached_decoding_matches_uncached_reference(GGML_Q4_0); }
static void cached_matches_reference_q4_1(void) { cached_decoding_matches_uncached_reference(GGML_Q4_1); }
static void cached_matches_reference_q5_0(void) { cached_decoding_matches_uncached_reference(GGML_Q5_0); }
static void cached_matches_reference_q5_1(void) { cached_decoding_matches_uncached_reference(GGML_Q5_1); }
static void cached_matches_reference_q4_K(void) { cached_decoding_matches_uncached_reference(GGML_Q4_K); }
static void cached_matches_reference_q5_K(void) { cached_decoding_matches_uncached_reference(GGML_Q5_K); }
static void cached_matches_reference_q6_K(void) { cached_decoding_matches_uncached_reference(GGML_Q6_K); }
static void cached_matches_reference_q3_K(void) { cached_decoding_matches_uncached_reference(GGML_Q3_K); }
static void cached_matches_reference_q2_K(void) { cached_decoding_matches_uncached_reference(GGML_Q2_K); }
static void cached_matches_reference_iq4_nl(void) { cached_decoding_matches_uncached_reference(GGML_IQ4_NL); }
static void cached_matches_reference_iq4_xs(void) { cached_decoding_matches_uncached_reference(GGML_IQ4_XS); }

/* Greedy decoding of n tokens; all logits are appended to out. */
static void
greedy_run(struct model *m, struct kv *kv, int n, float *out, int *tokens)
{
	int err, tok = 1;

	for (int pos = 0; pos < n; pos++) {
		float *logits = fwd(m, kv, &tok, 1, pos, MODEL_OUT_LAST, NULL, &err);
		if (err)
			die(1, "forward: %s", llm_err());
		memcpy(out + (size_t)pos * m->c.vocab_size, logits,
		    m->c.vocab_size * sizeof *out);
		tokens[pos] = tok;
		tok = 0;
		for (int i = 1; i < m->c.vocab_size; i++)
			if (logits[i] > logits[tok])
				tok = i;
	}
}

static void
grow_on_demand_is_bitwise_identical_to_prealloc(void)
{
	enum { N = 320 };
	struct model m;
	struct kv grow, dense_kv, threaded;
	struct pool *pool;
	float *a, *b, *c;
	int ta[N], tb[N], tc[N];
	size_t bytes;

	CHECK(model_load(&m, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	bytes = (size_t)N * m.c.vocab_size * sizeof(float);
	a = xmalloc(bytes), b = xmalloc(bytes), c = xmalloc(bytes);
	kv_init(&grow, m.c.n_layers, m.c.kv_dim, 512, 0);
	kv_init(&dense_kv, m.c.n_layers, m.c.kv_dim, 512, 1);
	kv_init(&threaded, m.c.n_layers, m.c.kv_dim, 512, 0);
	greedy_run(&m, &grow, N, a, ta);
	greedy_run(&m, &dense_kv, N, b, tb);
	pool = pool_create(2);
	set_pool(pool);
	greedy_run(&m, &threaded, N, c, tc);
	CHECK(grow.cap == 512 && dense_kv.cap == 512, "caps %d %d", grow.cap, dense_kv.cap);
	CHECK(memcmp(a, b, bytes) == 0, "grown and dense logits differ");
	CHECK(memcmp(ta, tb, sizeof ta) == 0, "grown and dense tokens differ");
	CHECK(memcmp(a, c, bytes) == 0, "1-thread and 2-thread logits differ");
	set_pool(NULL);
	pool_destroy(pool);
	kv_free(&grow), kv_free(&dense_kv), kv_free(&threaded);
	free(a), free(b), free(c);
	model_free(&m);
}

static void
forward_refuses_positions_past_max_ctx(void)
{
	struct model m;
	struct kv kv;
	int err, pos;

	CHECK(model_load(&m, tiny_model(GGML_F32)) == 0, "%s", llm_err());
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 8, 0);
	for (pos = 0; pos < 8; pos++) {
		fwd(&m, &kv, &(int){ 5 }, 1, pos, MODEL_OUT_NONE, NULL, &err);
		CHECK(!err, "pos %d: %s", pos, llm_err());
	}
	fwd(&m, &kv, &(int){ 5 }, 1, 8, MODEL_OUT_LAST, NULL, &err);
	CHECK(err && strstr(llm_err(), "context full"), "err %d: %s", err, llm_err());
	CHECK(kv.cap == 8 && kv.seq_len == 8, "cap %d len %d", kv.cap, kv.seq_len);
	kv_free(&kv);
	model_free(&m);
}

static void
missing_optional_keys_take_llama_cpp_defaults(void)
{
	struct fixture f;
	struct model m;

	fixture_tiny(&f, GGML_F32);
	f.minimal_keys = 1;
	f.n_kv_heads = f.n_heads;	/* what the absent key means */
	f.tied = 1;
	CHECK(model_load(&m, write_fixture(&f, "minimal.gguf")) == 0, "%s", llm_err());
	CHECK(m.c.rope_base == 10000.0f, "rope base %g", m.c.rope_base);
	CHECK(m.c.n_kv_heads == m.c.n_heads, "kv heads %d", m.c.n_kv_heads);
	CHECK(m.c.rope_dim == m.c.head_dim, "rope dim %d", m.c.rope_dim);
	CHECK(m.c.rms_eps == 1e-5f, "eps %g", m.c.rms_eps);
	CHECK(m.output.data == m.token_embd.data, "output not tied to token_embd");
	CHECK(m.c.eos_id == -1 && m.c.bos_id == -1, "bos %d eos %d", m.c.bos_id, m.c.eos_id);
	model_free(&m);
}

/*
 * A fixture's rows that are not whole blocks of its type take the type
 * llama.cpp's quantizer gives them (q6_K: q8_0; iq4_xs: iq4_nl), as the benchmark's Q6_K
 * file of SmolLM2's 576-wide rows needs; the others keep it.
 */
static void
partial_rows_fall_back_as_llama_cpp_quantizes(void)
{
	struct fixture f;
	struct model m;
	const struct gguf_tensor *t;

	fixture_tiny(&f, GGML_Q6_K);
	f.ffn_dim = 320;	/* ffn_down's rows: 320 wide, not whole blocks of 256 */
	if (model_load(&m, write_fixture(&f, "fallback.gguf")) < 0) {
		CHECK(!"the fixture loads", "%s", llm_err());
		return;
	}
	t = gguf_find_tensor(&m.gguf, "blk.0.ffn_down.weight");
	CHECK(t && t->type == GGML_Q8_0, "ffn_down is %s", t ? gguf_type_name(t->type) : "missing");
	t = gguf_find_tensor(&m.gguf, "blk.0.ffn_up.weight");
	CHECK(t && t->type == GGML_Q6_K, "ffn_up is %s", t ? gguf_type_name(t->type) : "missing");
	model_free(&m);
	/* iq4_xs: iq4_nl (q2_K, q3_K: q4_0), as llama.cpp's quantizer falls back */
	fixture_tiny(&f, GGML_IQ4_XS);
	f.ffn_dim = 320;
	if (model_load(&m, write_fixture(&f, "fallback.gguf")) < 0) {
		CHECK(!"the fixture loads", "%s", llm_err());
		return;
	}
	t = gguf_find_tensor(&m.gguf, "blk.0.ffn_down.weight");
	CHECK(t && t->type == GGML_IQ4_NL, "ffn_down is %s", t ? gguf_type_name(t->type) : "missing");
	model_free(&m);
}

/*
 * Prefill in batches must equal decoding one token at a time, bit for bit;
 * the batches on three threads, which split batches of 96 tokens or more
 * by tokens into uneven groups.
 */
static void
batched_prefill_on(uint32_t type, int isa)
{
	enum { N = 150 };
	struct model mm;
	struct kv a, b;
	struct pool *three = pool_create(3);
	int ids[N], err, i, n;
	float *one, *batch;

	CHECK(model_load(&mm, tiny_model(type)) == 0, "%s", llm_err());
	for (i = 0; i < N; i++)
		ids[i] = (i * 31 + 7) % mm.c.vocab_size;
	one = xmalloc(mm.c.vocab_size * sizeof *one);
	kv_init(&a, mm.c.n_layers, mm.c.kv_dim, 512, 0);
	for (i = 0; i < N; i++)
		fwd(&mm, &a, &ids[i], 1, i, i == N - 1 ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
	memcpy(one, fwd_last, mm.c.vocab_size * sizeof *one);
	set_pool(three);
	/* chunks of several sizes (a_prompt_past_a_batch_equals_its_pieces: past MODEL_BATCH) */
	for (n = 1; n <= N; n = n * 3 + 1) {
		kv_init(&b, mm.c.n_layers, mm.c.kv_dim, 512, 0);
		for (i = 0; i < N; i += n) {
			int k = N - i < n ? N - i : n;
			batch = fwd(&mm, &b, ids + i, k, i, i + k == N ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
			CHECK(!err, "%s", llm_err());
		}
		CHECK(memcmp(batch, one, mm.c.vocab_size * sizeof *one) == 0,
		    "%s %s: chunks of %d differ from one token at a time", kernels_isa_name(isa),
		    gguf_type_name(type), n);
		for (int l = 0; l < a.n_layers; l++)	/* the filled rows; the rest is spare */
			CHECK(memcmp(kv_k_read(&a, l, 0), kv_k_read(&b, l, 0), (size_t)N * a.kv_dim * 4) == 0 &&
			    memcmp(kv_v_read(&a, l, 0), kv_v_read(&b, l, 0), (size_t)N * a.kv_dim * 4) == 0,
			    "%s %s: chunks of %d: layer %d of the caches differs", kernels_isa_name(isa),
			    gguf_type_name(type), n, l);
		kv_free(&b);
	}
	set_pool(NULL);
	pool_destroy(three);
	kv_free(&a);
	free(one);
	model_free(&mm);
}

/*
 * A prompt longer than a pass (MODEL_BATCH), which model_forward splits,
 * gives every position's logits as pieces of 100 tokens give them.
 */
static void
a_prompt_past_a_batch_equals_its_pieces(void)
{
	enum { N = MODEL_BATCH + 88, PIECE = 100 };
	static const uint32_t types[] = { GGML_F32, GGML_Q8_0, GGML_Q4_K };
	struct pool *two = pool_create(2);
	struct model mm;
	struct kv a, b;
	int ids[N], err, i;

	set_pool(two);
	for (size_t ty = 0; ty < sizeof types / sizeof *types; ty++) {
		CHECK(model_load(&mm, tiny_model(types[ty])) == 0, "%s", llm_err());
		size_t V = (size_t)mm.c.vocab_size;
		float *whole = xmalloc(N * V * sizeof *whole), *pieces = xmalloc(N * V * sizeof *pieces);
		for (i = 0; i < N; i++)
			ids[i] = (i * 37 + 11) % mm.c.vocab_size;
		kv_init(&a, mm.c.n_layers, mm.c.kv_dim, N, 0);
		kv_init(&b, mm.c.n_layers, mm.c.kv_dim, N, 0);
		fwd(&mm, &a, ids, N, 0, MODEL_OUT_ALL, whole, &err);
		CHECK(!err, "%s", llm_err());
		for (i = 0; i < N && !err; i += PIECE)
			fwd(&mm, &b, ids + i, N - i < PIECE ? N - i : PIECE, i, MODEL_OUT_ALL, pieces + i * V, &err);
		CHECK(!err, "%s", llm_err());
		for (i = 0; i < N; i++)
			CHECK(memcmp(whole + i * V, pieces + i * V, V * sizeof *whole) == 0,
			    "%s: position %d of a %d-token prompt differs from its pieces'", gguf_type_name(types[ty]),
			    i, N);
		kv_free(&a), kv_free(&b);
		free(whole), free(pieces);
		model_free(&mm);
	}
	set_pool(NULL);
	pool_destroy(two);
}

/* On every instruction set the processor has, AVX2's integer rule among them. */
static void
batched_prefill_equals_token_by_token(uint32_t type)
{
	int best = kernels_isa(), isa;

	for (isa = KERNELS_SCALAR; isa <= best; isa++)
		if (kernels_set_isa(isa) == 0)	/* not another architecture's */
			batched_prefill_on(type, isa);
	kernels_set_isa(best);
}

static void batched_prefill_equals_token_by_token_f32(void) { batched_prefill_equals_token_by_token(GGML_F32); }
static void batched_prefill_equals_token_by_token_f16(void) { batched_prefill_equals_token_by_token(GGML_F16); }
static void batched_prefill_equals_token_by_token_bf16(void) { batched_prefill_equals_token_by_token(GGML_BF16); }
static void batched_prefill_equals_token_by_token_q8_0(void) { batched_prefill_equals_token_by_token(GGML_Q8_0); }
static void batched_prefill_equals_token_by_token_q4_0(void) { batched_prefill_equals_token_by_token(GGML_Q4_0); }
static void batched_prefill_equals_token_by_token_q5_0(void) { batched_prefill_equals_token_by_token(GGML_Q5_0); }
static void batched_prefill_equals_token_by_token_q4_K(void) { batched_prefill_equals_token_by_token(GGML_Q4_K); }
static void batched_prefill_equals_token_by_token_q6_K(void) { batched_prefill_equals_token_by_token(GGML_Q6_K); }
static void batched_prefill_equals_token_by_token_q3_K(void) { batched_prefill_equals_token_by_token(GGML_Q3_K); }
static void batched_prefill_equals_token_by_token_q2_K(void) { batched_prefill_equals_token_by_token(GGML_Q2_K); }
static void batched_prefill_equals_token_by_token_iq4_nl(void) { batched_prefill_equals_token_by_token(GGML_IQ4_NL); }
static void batched_prefill_equals_token_by_token_iq4_xs(void) { batched_prefill_equals_token_by_token(GGML_IQ4_XS); }

/* ---- cache types ---- */

static const int kv_types[][2] = {
	{ KV_F16, KV_F16 }, { KV_Q8_0, KV_Q8_0 }, { KV_Q4_0, KV_Q4_0 }, { KV_Q4_0, KV_Q8_0 },
	{ KV_F32, KV_Q4_0 }, { KV_Q8_0, KV_F32 },
};
enum { N_KV_TYPES = sizeof kv_types / sizeof kv_types[0] };

static int
typed_cache(const struct model *mm, struct kv *kv, int t, int max_ctx, int prealloc)
{
	return kv_init_types(kv, mm->c.n_layers, mm->c.n_kv_heads, mm->c.head_dim, max_ctx, prealloc,
	    kv_types[t][0], kv_types[t][1]);
}

/* Every stored byte of the first n positions: rows or groups, and the ring rows the next query reads. */
static int
same_cache(const struct kv *a, const struct kv *b, int n)
{
	for (int l = 0; l < a->n_layers; l++)
		for (int w = KV_K; w <= KV_V; w++) {
			int rows = kv_rows(a, l, n), grouped = kv_type_grouped(w ? a->v_type : a->k_type, w);
			size_t unit = w ? a->v_unit : a->k_unit;
			size_t len = grouped ? (size_t)(rows / KV_GROUP) * unit : (size_t)rows * unit;
			if (memcmp(kv_unit(a, l, w, 0), kv_unit(b, l, w, 0), len) != 0)
				return 0;
			for (int p = kv_ring_from(a, w, n); a->ring[w] && p < n; p++)
				if (memcmp(kv_ring_row(a, l, w, p), kv_ring_row(b, l, w, p),
				    kv_ring_row_bytes(a, w)))
					return 0;
		}
	return 1;
}

/* A batch, token by token and any chunking give the same bits, for every cache type. */
static void
kv_types_batched_equals_token_by_token(void)
{
	enum { N = 150 };
	static const int chunks[] = { 13, 40, 64 };
	struct model mm;
	struct kv one, b;
	int ids[N], err, i, t;
	size_t V;
	float *want, *got = NULL;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	V = (size_t)mm.c.vocab_size;
	want = xmalloc(V * sizeof *want);
	for (i = 0; i < N; i++)
		ids[i] = (i * 31 + 7) % mm.c.vocab_size;
	for (t = 0; t < N_KV_TYPES; t++) {
		const char *name = kv_type_name(kv_types[t][0]), *vname = kv_type_name(kv_types[t][1]);
		CHECK(typed_cache(&mm, &one, t, 512, 0) == 0, "%s", llm_err());
		for (i = 0; i < N; i++)
			fwd(&mm, &one, &ids[i], 1, i, i == N - 1 ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
		CHECK(!err, "%s", llm_err());
		memcpy(want, fwd_last, V * sizeof *want);
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
			CHECK(typed_cache(&mm, &b, t, 512, 0) == 0, "%s", llm_err());
			for (i = 0; i < N; i += chunks[c]) {
				int k = N - i < chunks[c] ? N - i : chunks[c];
				got = fwd(&mm, &b, ids + i, k, i, i + k == N ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
				CHECK(!err, "%s", llm_err());
			}
			CHECK(got && memcmp(got, want, V * sizeof *want) == 0,
			    "k %s v %s: chunks of %d differ from one token at a time", name, vname, chunks[c]);
			CHECK(same_cache(&one, &b, N), "k %s v %s: chunks of %d: the caches differ",
			    name, vname, chunks[c]);
			kv_free(&b);
		}
		kv_free(&one);
	}
	free(want);
	model_free(&mm);
}

/* Growing on demand is bitwise a dense cache, for every cache type. */
static void
kv_types_grow_equals_prealloc(void)
{
	enum { N = 200 };
	struct model mm;
	struct kv grow, dense;
	float *a, *b;
	int ta[N], tb[N], t;
	size_t bytes;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	bytes = (size_t)N * mm.c.vocab_size * sizeof(float);
	a = xmalloc(bytes), b = xmalloc(bytes);
	for (t = 0; t < N_KV_TYPES; t++) {
		CHECK(typed_cache(&mm, &grow, t, 300, 0) == 0 && typed_cache(&mm, &dense, t, 300, 1) == 0,
		    "%s", llm_err());
		greedy_run(&mm, &grow, N, a, ta);
		greedy_run(&mm, &dense, N, b, tb);
		CHECK(grow.cap == 256 && dense.cap == 300, "caps %d %d", grow.cap, dense.cap);
		CHECK(memcmp(a, b, bytes) == 0 && memcmp(ta, tb, sizeof ta) == 0,
		    "k %s v %s: grown and dense differ", kv_type_name(kv_types[t][0]),
		    kv_type_name(kv_types[t][1]));
		kv_free(&grow), kv_free(&dense);
	}
	free(a), free(b);
	model_free(&mm);
}

/*
 * The logits of ids[0..n) (rows of the vocabulary) from a fresh cache of
 * k and v types: in batches of up to MODEL_BATCH, or one token at a time.
 */
static void
typed_logits(struct model *mm, int k, int v, const int *ids, int n, int batch, float *out)
{
	size_t V = (size_t)mm->c.vocab_size;
	struct kv kv;
	int i, b, err;

	CHECK(kv_init_types(&kv, mm->c.n_layers, mm->c.n_kv_heads, mm->c.head_dim, 256, 0, k, v) == 0,
	    "%s", llm_err());
	for (i = 0; i < n; i += b) {
		b = !batch ? 1 : n - i < MODEL_BATCH ? n - i : MODEL_BATCH;
		float *l = fwd(mm, &kv, ids + i, b, i, MODEL_OUT_ALL, out + (size_t)i * V, &err);
		CHECK(l && !err, "k %s v %s: %s", kv_type_name(k), kv_type_name(v), llm_err());
	}
	kv_free(&kv);
}

/*
 * A cache that reads its newest rows exactly as another type does: for
 * k and v, the first `same` of n positions give want's logits bit for
 * bit, a batch or token by token, and some later one does not.
 */
static void
reads_newest_as(struct model *mm, int k, int v, const int *ids, int n, int same, const float *want,
    const char *what)
{
	size_t V = (size_t)mm->c.vocab_size, row = V * sizeof(float);
	float *got = xmalloc((size_t)n * row);
	int i;

	for (int batch = 0; batch < 2; batch++) {
		typed_logits(mm, k, v, ids, n, batch, got);
		CHECK(memcmp(got, want, (size_t)same * row) == 0, "k %s v %s: the first %d positions "
		    "differ from %s (%s)", kv_type_name(k), kv_type_name(v), same, what,
		    batch ? "batch" : "one by one");
		for (i = same; i < n && memcmp(got + (size_t)i * V, want + (size_t)i * V, row) == 0; i++)
			;
		CHECK(i < n, "k %s v %s: positions past %d read nothing rounded", kv_type_name(k),
		    kv_type_name(v), same);
	}
	free(got);
}

/*
 * On the tiny q8_0 model's first n positions, each cache of types
 * (K and V) against the one of types ref_k and ref_v: reads_newest_as.
 */
static void
newest_read_as(int n, int ref_k, int ref_v, const int (*types)[2], int ntypes, int same, const char *as)
{
	struct model mm;
	float *want;
	int *ids = xmalloc((size_t)n * sizeof *ids);

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	want = xmalloc((size_t)n * mm.c.vocab_size * sizeof(float));
	for (int i = 0; i < n; i++)
		ids[i] = (i * 29 + 3) % mm.c.vocab_size;
	typed_logits(&mm, ref_k, ref_v, ids, n, 1, want);
	for (int t = 0; t < ntypes; t++)
		reads_newest_as(&mm, types[t][0], types[t][1], ids, n, same, want, as);
	free(want);
	free(ids);
	model_free(&mm);
}

/*
 * q4_0 values read their own group and the KV_BACK positions before it
 * from a ring of q8_0 rows, rotated as q8_0 values are: the first
 * KV_GROUP + KV_BACK positions give the logits of q8_0 values bit for
 * bit; later ones read older rows in q4_0.
 */
static void
q4_0_values_read_their_newest_in_q8_0(void)
{
	static const int types[][2] = { { KV_F32, KV_Q4_0 } };

	newest_read_as(160, KV_F32, KV_Q8_0, types, 1, KV_GROUP + KV_BACK, "q8_0 values");
}

/*
 * f16 caches read the rows of a query's own group from their exact tail:
 * the first KV_GROUP positions give the f32 cache's logits bit for bit;
 * later ones read earlier groups rounded.
 */
static void
f16_cache_reads_its_own_group_exactly(void)
{
	static const int types[][2] = { { KV_F16, KV_F16 }, { KV_F16, KV_F32 }, { KV_F32, KV_F16 } };

	newest_read_as(40, KV_F32, KV_F32, types, 3, KV_GROUP, "f32");
}

/*
 * The mean |change of log-probability| against the f32 cache over a
 * stream of n ids, and the perplexity change; NaN-proof for the checks.
 */
static void
score_against_f32(struct model *mm, int k_type, int v_type, const int *ids, int n,
    double *mean_abs, double *ppl_change)
{
	size_t V = (size_t)mm->c.vocab_size;
	float *lg = xmalloc(MODEL_BATCH * V * sizeof *lg);
	double nll[2] = { 0, 0 }, *ref = xmalloc((size_t)n * sizeof *ref), dsum = 0;
	struct kv kv;
	int pass, i, k, b, err;

	for (pass = 0; pass < 2; pass++) {
		kv_init_types(&kv, mm->c.n_layers, mm->c.n_kv_heads, mm->c.head_dim, n + 1, 0,
		    pass ? k_type : KV_F32, pass ? v_type : KV_F32);
		for (i = 0; i + 1 < n; i += b) {
			b = n - 1 - i < MODEL_BATCH ? n - 1 - i : MODEL_BATCH;
			fwd(mm, &kv, ids + i, b, i, MODEL_OUT_ALL, lg, &err);
			CHECK(!err, "k %s v %s: %s", kv_type_name(k_type), kv_type_name(v_type), llm_err());
			for (k = 0; k < b; k++) {
				double lp = log_prob(lg + k * V, (int)V, ids[i + k + 1]);
				nll[pass] -= lp;
				if (pass == 0)
					ref[i + k] = lp;
				else
					dsum += fabs(lp - ref[i + k]);
			}
		}
		kv_free(&kv);
	}
	*mean_abs = dsum / (n - 1);
	*ppl_change = exp((nll[1] - nll[0]) / (n - 1)) - 1;
	free(lg), free(ref);
}

static void
kv_types_stay_close_to_f32(void)
{
	/*
	 * Loose on the tiny model: enough to catch a broken kernel, not a
	 * tuning.  q4_0 measures 0.0014 (0.0006 for its keys with q8_0
	 * values) and 0.0032 (0.0011) when it reads its own group alone from
	 * the ring, which these bounds catch.
	 */
	static const double tiny_limit[N_KV_TYPES] = { 1e-4, 0.005, 0.0022, 0.0009, 0.0022, 0.002 };
	/* stories260K over 600 tokens of its own: the perplexity targets, with margin */
	static const double ppl_limit[N_KV_TYPES] = { 0.0005, 0.003, 0.03, 0.02, 0.03, 0.003 };
	const char *shared = getenv("LLM_SHARED");
	char path[512];
	struct model mm;
	int ids[600], t, i, err;
	double d, ppl;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	for (i = 0; i < 300; i++)
		ids[i] = (i * 7919 + 13) % mm.c.vocab_size;
	for (t = 0; t < N_KV_TYPES; t++) {
		score_against_f32(&mm, kv_types[t][0], kv_types[t][1], ids, 300, &d, &ppl);
		CHECK(d <= tiny_limit[t], "tiny: k %s v %s: mean |change of log p| %g", 
		    kv_type_name(kv_types[t][0]), kv_type_name(kv_types[t][1]), d);
	}
	model_free(&mm);
	snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared ? shared : "../shared");
	if (model_load(&mm, path) < 0)
		SKIP("%s not present: only the tiny model was checked", path);
	/* a text of its own: sampled at temperature 1 from BOS, with a fixed seed */
	{
		struct kv kv;
		struct sampler smp;
		sampler_init(&smp, mm.c.vocab_size, 1.0f, 0, 1.0f, 7);
		kv_init(&kv, mm.c.n_layers, mm.c.kv_dim, 600, 0);
		ids[0] = mm.c.bos_id;
		for (i = 0; i + 1 < 600; i++)
			ids[i + 1] = sampler_sample(&smp, fwd(&mm, &kv, &ids[i], 1, i, MODEL_OUT_LAST, NULL, &err));
		kv_free(&kv);
		sampler_free(&smp);
	}
	for (t = 0; t < N_KV_TYPES; t++) {
		score_against_f32(&mm, kv_types[t][0], kv_types[t][1], ids, 600, &d, &ppl);
		CHECK(fabs(ppl) <= ppl_limit[t], "stories260K: k %s v %s: perplexity change %g",
		    kv_type_name(kv_types[t][0]), kv_type_name(kv_types[t][1]), ppl);
	}
	model_free(&mm);
}

/* ---- sampling controls ---- */

/* argmax as one pass computes it: the reference for the lanes. */
static int
argmax_scan(const float *x, int n)
{
	int i, best = 0;

	for (i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/*
 * argmax (eight lanes side by side) gives greedy's pick as one pass
 * finds it: the first of equal largest values, whichever lanes they lie
 * in, past NaNs, with the largest in the tail past the last eight.
 */
static void
argmax_is_the_first_largest(void)
{
	float x[53];
	unsigned seed = 5;
	int n, i, k, bad = 0;

	for (k = 0; k < 4000; k++) {
		n = 1 + k % 53;
		for (i = 0; i < n; i++) {
			seed = seed * 1103515245u + 12345u;
			x[i] = (float)(seed >> 16 & 7);	/* few values: many ties */
			if ((seed >> 8 & 31) == 0)
				x[i] = NAN;
		}
		bad += argmax(x, n) != argmax_scan(x, n);
	}
	CHECK(bad == 0, "%d of 4000 vectors: argmax differs from one pass", bad);
	for (i = 0; i < 53; i++)
		x[i] = 1;
	x[52] = 2;
	CHECK(argmax(x, 53) == 52, "the largest in the tail: got %d", argmax(x, 53));
	x[52] = 1, x[13] = 2, x[21] = 2;
	CHECK(argmax(x, 53) == 13, "ties in two lanes: got %d, want 13", argmax(x, 53));
	x[0] = NAN;
	CHECK(argmax(x, 53) == 0, "x[0] NaN: got %d, want 0 as one pass", argmax(x, 53));
}

/*
 * The repeat penalty divides a positive logit and multiplies a negative
 * one, once for each token among the last n accepted, however often it
 * came; min-p keeps only tokens at least min_p as likely as the most
 * likely (on the logits before the temperature).
 */
static void
sampling_controls_do_what_llama_cpp_does(void)
{
	float base[5] = { 2.0f, -1.0f, 0.5f, 1.8f, -2.0f }, l[5];
	struct sampler s;
	int i, counts[5] = { 0 };

	/* greedy: token 0, until its repeats halve it (and token 1's doubles negative) */
	sampler_init(&s, 5, 0, 0, 1, 1);
	sampler_controls(&s, 0, 2.0f, 4);
	memcpy(l, base, sizeof l);
	CHECK(sampler_sample(&s, l) == 0, "no history: not the argmax");
	sampler_accept(&s, 0), sampler_accept(&s, 1), sampler_accept(&s, 0);
	memcpy(l, base, sizeof l);
	CHECK(sampler_sample(&s, l) == 3, "penalized: not token 3");
	CHECK(l[0] == 1.0f && l[1] == -2.0f && l[3] == 1.8f, "penalized logits %g %g %g: once each",
	    l[0], l[1], l[3]);
	/* four newer tokens push 0 out of the window of 4 */
	for (i = 0; i < 4; i++)
		sampler_accept(&s, 2);
	memcpy(l, base, sizeof l);
	CHECK(sampler_sample(&s, l) == 0 && l[0] == 2.0f && l[2] == 0.25f, "the window of 4: %g %g",
	    l[0], l[2]);
	sampler_free(&s);

	/* min-p 0.2 at temperature 1: p(2) / p(0) = e^-1.5 = 0.22 stays, p(1) / p(0) = e^-3 goes */
	sampler_init(&s, 5, 1.0f, 0, 1, 3);
	sampler_controls(&s, 0.2f, 1, 64);
	for (i = 0; i < 2000; i++) {
		memcpy(l, base, sizeof l);
		counts[sampler_sample(&s, l)]++;
	}
	CHECK(counts[1] == 0 && counts[4] == 0 && counts[2] > 0 && counts[3] > 0,
	    "min-p 0.2: counts %d %d %d %d %d", counts[0], counts[1], counts[2], counts[3], counts[4]);
	sampler_free(&s);
	/* without it, the unlikely ones come up too */
	memset(counts, 0, sizeof counts);
	sampler_init(&s, 5, 1.0f, 0, 1, 3);
	for (i = 0; i < 2000; i++) {
		memcpy(l, base, sizeof l);
		counts[sampler_sample(&s, l)]++;
	}
	CHECK(counts[1] > 0, "without min-p: token 1 never drawn in 2000");
	sampler_free(&s);
}

/* ---- windowed caches ---- */

/* The cache of kv_types[t] (t < 0: f32), windowed. */
static int
window_cache(const struct model *mm, struct kv *kv, int t, int max_ctx, int S, int W)
{
	if (kv_init_types(kv, mm->c.n_layers, mm->c.n_kv_heads, mm->c.head_dim, max_ctx, 0,
	    t < 0 ? KV_F32 : kv_types[t][0], t < 0 ? KV_F32 : kv_types[t][1]) < 0)
		return -1;
	return kv_set_window(kv, S, W);
}

/*
 * A window with sinks on every layer (a Llama, where gemma3's fixtures
 * hold one global layer, the last): a batch that evicts its first
 * positions scores the sinks again from the groups, as a token alone
 * does, on the first layers too, whose groups are complete before the
 * last layer's (kv_key read them from the ring's rows in a batch).
 */
static void
window_sinks_batched_equal_token_by_token_on_every_layer(void)
{
	enum { N = 165, CTX = 128 };
	static const int chunks[] = { 70, 128, N };
	struct model mm;
	struct kv one, b;
	float *want, *got = NULL;
	int ids[N], err, i, t;

	CHECK(model_load(&mm, tiny_model(GGML_F32)) == 0, "%s", llm_err());
	size_t V = (size_t)mm.c.vocab_size;
	want = xmalloc(V * sizeof *want);
	for (i = 0; i < N; i++)
		ids[i] = (i * 37 + 11) % mm.c.vocab_size;
	for (t = -1; t < N_KV_TYPES; t++) {
		CHECK(window_cache(&mm, &one, t, CTX, 4, 64) == 0, "%s", llm_err());
		for (i = 0; i < N; i++) {
			fwd(&mm, &one, &ids[i], 1, i, i == N - 1 ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
			CHECK(!err, "%s", llm_err());
		}
		memcpy(want, fwd_last, V * sizeof *want);
		for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
			CHECK(window_cache(&mm, &b, t, CTX, 4, 64) == 0, "%s", llm_err());
			for (i = 0; i < N; i += chunks[c]) {
				int m = N - i < chunks[c] ? N - i : chunks[c];
				got = fwd(&mm, &b, ids + i, m, i, i + m == N ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL,
				    &err);
				CHECK(!err, "%s", llm_err());
			}
			CHECK(got && memcmp(got, want, V * sizeof *want) == 0 && same_cache(&one, &b, N),
			    "k %s v %s: chunks of %d differ from one token at a time",
			    kv_type_name(t < 0 ? KV_F32 : kv_types[t][0]), kv_type_name(t < 0 ? KV_F32 : kv_types[t][1]),
			    chunks[c]);
			kv_free(&b);
		}
		kv_free(&one);
	}
	free(want);
	model_free(&mm);
}

/*
 * Every token's logits of a windowed run, far past max_ctx, against the
 * double-precision StreamingLLM reference: with sinks and without, one
 * token at a time and in batches, which wrap the ring.
 */
static void
window_matches_double_reference(void)
{
	enum { N = 170, CTX = 64 };
	static const int windows[][2] = { { 4, 40 }, { 0, 44 }, { 4, 60 } };
	struct model mm;
	struct kv kv;
	size_t V;
	int ids[N], i, w, t, b, err;
	float *lg;

	CHECK(model_load(&mm, tiny_model(GGML_F32)) == 0, "%s", llm_err());
	V = (size_t)mm.c.vocab_size;
	lg = xmalloc((size_t)N * V * sizeof *lg);
	for (i = 0; i < N; i++)
		ids[i] = (i * 7919 + 3) % mm.c.vocab_size;
	for (w = 0; w < 3; w++) {
		int S = windows[w][0], W = windows[w][1];
		double *ref = ref_forward_window(&mm, ids, N, S, W);
		/* f32, then each type; batches of 1 and of 64 */
		for (t = -1; t < N_KV_TYPES; t++)
			for (int batch = 1; batch <= 64; batch += 63) {
				double worst = 0;
				CHECK(window_cache(&mm, &kv, t, CTX, S, W) == 0, "%s", llm_err());
				for (i = 0; i < N; i += b) {
					b = N - i < batch ? N - i : batch;
					fwd(&mm, &kv, ids + i, b, i, MODEL_OUT_ALL, lg + i * V, &err);
					CHECK(!err, "%s", llm_err());
				}
				for (i = 0; i < N; i++) {
					double maxabs = 0, maxdiff = 0;
					for (size_t j = 0; j < V; j++) {
						double r = ref[i * V + j];
						maxabs = worst_of(maxabs, fabs(r));
						maxdiff = worst_of(maxdiff, fabs(lg[i * V + j] - r));
					}
					worst = worst_of(worst, maxdiff / maxabs);
				}
				/* f32 as the plain path; the other types within their rounding */
				CHECK(worst <= (t < 0 ? 1e-4 : kv_types[t][1] == KV_Q4_0 ? 0.1 : 0.05), "S %d W %d k %s v %s, batch %d: "
				    "relative logit error %g", S, W, t < 0 ? "f32" : kv_type_name(kv_types[t][0]),
				    t < 0 ? "f32" : kv_type_name(kv_types[t][1]), batch, worst);
				kv_free(&kv);
			}
		free(ref);
	}
	free(lg);
	model_free(&mm);
}

/*
 * A window is bitwise the same whatever the batching, for every type,
 * and its footprint stops growing once its slots are full.
 */
static void
window_batched_equals_token_by_token(void)
{
	enum { N = 420, CTX = 128 };
	static const int chunks[] = { 13, 64 };
	struct model mm;
	struct kv one, b;
	size_t V, full;
	float *want, *got = NULL;
	int ids[N], err, i, t;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	V = (size_t)mm.c.vocab_size;
	want = xmalloc(V * sizeof *want);
	for (i = 0; i < N; i++)
		ids[i] = (i * 31 + 7) % mm.c.vocab_size;
	for (t = -1; t < N_KV_TYPES; t++) {
		const char *name = t < 0 ? "f32" : kv_type_name(kv_types[t][0]);
		const char *vname = t < 0 ? "f32" : kv_type_name(kv_types[t][1]);
		CHECK(window_cache(&mm, &one, t, CTX, 4, 100) == 0, "%s", llm_err());
		full = 0;
		for (i = 0; i < N; i++) {
			fwd(&mm, &one, &ids[i], 1, i, i == N - 1 ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
			CHECK(!err, "%s", llm_err());
			if (i == one.win[0].slots)
				full = kv_bytes(&one);
			CHECK(i < one.win[0].slots || kv_bytes(&one) == full, "k %s v %s: kv_bytes %zu at "
			    "position %d, %zu when the slots filled", name, vname, kv_bytes(&one), i, full);
		}
		CHECK(one.cap == one.win[0].slots && one.win[0].slots <= CTX + 2 * KV_GROUP, "k %s v %s: cap %d of "
		    "%d slots", name, vname, one.cap, one.win[0].slots);
		memcpy(want, fwd_last, V * sizeof *want);
		for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
			CHECK(window_cache(&mm, &b, t, CTX, 4, 100) == 0, "%s", llm_err());
			for (i = 0; i < N; i += chunks[c]) {
				int k = N - i < chunks[c] ? N - i : chunks[c];
				got = fwd(&mm, &b, ids + i, k, i, i + k == N ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
				CHECK(!err, "%s", llm_err());
			}
			CHECK(got && memcmp(got, want, V * sizeof *want) == 0,
			    "k %s v %s: chunks of %d differ from one token at a time", name, vname, chunks[c]);
			CHECK(same_cache(&one, &b, N), "k %s v %s: chunks of %d: the caches differ",
			    name, vname, chunks[c]);
			kv_free(&b);
		}
		kv_free(&one);
	}
	free(want);
	model_free(&mm);
}

/*
 * Decode over more than 512 positions (attn.c's SPLIT_MIN at this width)
 * on two threads splits one token's attention by slices of positions and
 * blocks of dimensions: the logits are those of one thread and of a
 * batch.  Head size 64 (two blocks of 32) and 3 KV heads for 2 threads;
 * every kind of key store and windows with sinks that have slid.  (Not
 * much past 512: emulated AArch64 spends minutes on each hundred more.)
 */
static void
long_decode_split_is_bitwise_one_thread(void)
{
	enum { N = 600, FROM = 580, STEPS = N - FROM };
	static const int types[][3] = {	/* key type, value type, windowed */
		{ KV_F32, KV_F32, 0 }, { KV_F16, KV_F16, 0 }, { KV_F32, KV_Q4_0, 0 },
		{ KV_Q8_0, KV_Q8_0, 0 }, { KV_Q4_0, KV_Q8_0, 0 }, { KV_F32, KV_F32, 1 }, { KV_Q8_0, KV_F32, 1 },
		{ KV_F16, KV_F16, 1 },
	};
	struct fixture f;
	struct model mm;
	struct kv kv;
	struct pool *one = pool_create(1), *two = pool_create(2);
	int ids[N], err, i, t, run;
	size_t V;
	float *logits[3];

	fixture_tiny(&f, GGML_Q8_0);
	f.dim = 192, f.n_heads = 3, f.n_kv_heads = 3, f.n_layers = 2, f.ctx = 2048;
	CHECK(model_load(&mm, write_fixture(&f, "split-q8_0.gguf")) == 0, "%s", llm_err());
	CHECK(mm.c.head_dim == 64 && mm.c.n_kv_heads == 3, "head_dim %d", mm.c.head_dim);
	V = (size_t)mm.c.vocab_size;
	for (run = 0; run < 3; run++)
		logits[run] = xmalloc(STEPS * V * sizeof(float));
	for (i = 0; i < N; i++)
		ids[i] = (i * 31 + 7) % mm.c.vocab_size;
	for (t = 0; t < (int)(sizeof types / sizeof types[0]); t++) {
		const char *w = types[t][2] ? " windowed" : "";
		/* run 0: one thread, token by token; 1: two threads, token by token; 2: two, a batch */
		for (run = 0; run < 3; run++) {
			set_pool(run == 0 ? one : two);
			CHECK(kv_init_types(&kv, mm.c.n_layers, mm.c.n_kv_heads, mm.c.head_dim, 2048, 0,
			    types[t][0], types[t][1]) == 0, "%s", llm_err());
			if (types[t][2])
				CHECK(kv_set_window(&kv, 4, 540) == 0, "%s", llm_err());
			fwd(&mm, &kv, ids, FROM, 0, MODEL_OUT_NONE, NULL, &err);
			CHECK(!err, "%s", llm_err());
			if (run < 2)
				for (i = FROM; i < N; i++) {
					float *l = fwd(&mm, &kv, &ids[i], 1, i, MODEL_OUT_LAST, NULL, &err);
					CHECK(l && !err, "%s", llm_err());
					if (l)
						memcpy(logits[run] + (size_t)(i - FROM) * V, l, V * sizeof(float));
				}
			else
				CHECK(fwd(&mm, &kv, ids + FROM, STEPS, FROM, MODEL_OUT_ALL, logits[2], &err) &&
				    !err, "%s", llm_err());
			kv_free(&kv);
		}
		for (i = 0; i < STEPS; i++) {
			CHECK(memcmp(logits[1] + i * V, logits[0] + i * V, V * sizeof(float)) == 0,
			    "k %s v %s%s: position %d on two threads differs from one",
			    kv_type_name(types[t][0]), kv_type_name(types[t][1]), w, FROM + i);
			CHECK(memcmp(logits[2] + i * V, logits[0] + i * V, V * sizeof(float)) == 0,
			    "k %s v %s%s: position %d in a batch differs from one at a time",
			    kv_type_name(types[t][0]), kv_type_name(types[t][1]), w, FROM + i);
		}
	}
	set_pool(NULL);
	pool_destroy(one), pool_destroy(two);
	for (run = 0; run < 3; run++)
		free(logits[run]);
	model_free(&mm);
}

/*
 * Until the window slides, a windowed cache is bitwise the plain one;
 * except for q4_0 stores, which read the KV_BACK positions before their
 * own group from the ring without a window only (kv.h).
 */
static void
window_before_slide_is_plain(void)
{
	enum { N = 103, CTX = 128 };	/* positions 0..102: sinks 4 + window 100 hold them all */
	struct model mm;
	struct kv plain, win;
	float *a, *b;
	int ta[N], tb[N], t;
	size_t bytes;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	bytes = (size_t)N * mm.c.vocab_size * sizeof(float);
	a = xmalloc(bytes), b = xmalloc(bytes);
	for (t = -1; t < N_KV_TYPES; t++) {
		CHECK(window_cache(&mm, &win, t, CTX, 4, 100) == 0, "%s", llm_err());
		if (win.k_type == KV_Q4_0 || win.v_type == KV_Q4_0) {
			kv_free(&win);
			continue;
		}
		CHECK(kv_init_types(&plain, mm.c.n_layers, mm.c.n_kv_heads, mm.c.head_dim, CTX, 0,
		    win.k_type, win.v_type) == 0, "%s", llm_err());
		greedy_run(&mm, &plain, N, a, ta);
		greedy_run(&mm, &win, N, b, tb);
		CHECK(memcmp(a, b, bytes) == 0 && memcmp(ta, tb, sizeof ta) == 0,
		    "k %s v %s: windowed differs before it slides", kv_type_name(win.k_type),
		    kv_type_name(win.v_type));
		kv_free(&plain), kv_free(&win);
	}
	free(a), free(b);
	model_free(&mm);
}

/*
 * Embeddings: mean and last pooling against a direct computation from
 * the hidden states of a plain forward pass, normalization to unit
 * length, and the same bits whatever ran before.  The hidden states are
 * those the logits come from: the last one through the output matrix
 * gives a prompt's logits bit for bit.
 */
static void
embeddings_pool_the_final_hidden_states(void)
{
	enum { N = 150 };
	struct model mm;
	struct kv kv;
	int ids[N], i, d, err, D;
	float *h, *mean, *last, *unit, *again, *logits, *want;
	double s, ss;

	CHECK(model_load(&mm, tiny_model(GGML_Q8_0)) == 0, "%s", llm_err());
	D = mm.c.dim;
	for (i = 0; i < N; i++)
		ids[i] = (i * 53 + 1) % mm.c.vocab_size;
	h = xmalloc((size_t)N * D * sizeof *h);
	mean = xmalloc(D * sizeof *mean), last = xmalloc(D * sizeof *last);
	unit = xmalloc(D * sizeof *unit), again = xmalloc(D * sizeof *again);
	kv_init(&kv, mm.c.n_layers, mm.c.kv_dim, 512, 0);
	/* the direct computation: every token's hidden state, one token at a time */
	for (i = 0; i < N; i++) {
		fwd(&mm, &kv, ids + i, 1, i, MODEL_OUT_HIDDEN, h + (size_t)i * D, &err);
		CHECK(!err, "%s", llm_err());
	}
	logits = xmalloc((size_t)mm.c.vocab_size * sizeof *logits);
	kernels_gemm(mm.output.type, mm.output.data, mm.output.row_bytes, 0, mm.output.rows, D,
	    h + (size_t)(N - 1) * D, (size_t)D, 1, logits, (size_t)mm.c.vocab_size);
	kv_clear(&kv);
	want = fwd(&mm, &kv, ids, N, 0, MODEL_OUT_LAST, NULL, &err);
	CHECK(!err, "%s", llm_err());
	CHECK(memcmp(logits, want, (size_t)mm.c.vocab_size * sizeof *want) == 0,
	    "the last hidden state does not give the prompt's logits");
	free(logits);
	CHECK(embed(&mm, &kv, ids, N, MODEL_POOL_MEAN, 0, mean) == 0, "%s", llm_err());
	CHECK(embed(&mm, &kv, ids, N, MODEL_POOL_LAST, 0, last) == 0, "%s", llm_err());
	CHECK(embed(&mm, &kv, ids, N, MODEL_POOL_MEAN, 1, unit) == 0, "%s", llm_err());
	for (d = 0, ss = 0; d < D; d++) {
		for (s = 0, i = 0; i < N; i++)
			s += h[(size_t)i * D + d];
		CHECK(mean[d] == (float)(s / N), "mean: dimension %d is %g, not %g", d, mean[d], s / N);
		CHECK(last[d] == h[(size_t)(N - 1) * D + d], "last: dimension %d differs", d);
		ss += (double)mean[d] * mean[d];
	}
	for (d = 0, s = 0; d < D; d++) {
		CHECK(fabs(unit[d] - mean[d] / sqrt(ss)) <= 1e-6, "normalized: dimension %d", d);
		s += (double)unit[d] * unit[d];
	}
	CHECK(fabs(s - 1) <= 1e-5, "normalized length^2 %g", s);
	/* after another input, and with a cache that held other tokens: the same bits */
	CHECK(embed(&mm, &kv, ids + 7, 30, MODEL_POOL_MEAN, 0, again) == 0, "%s", llm_err());
	CHECK(embed(&mm, &kv, ids, N, MODEL_POOL_MEAN, 0, again) == 0, "%s", llm_err());
	CHECK(memcmp(again, mean, D * sizeof *mean) == 0, "an embedding depends on the input before");
	CHECK(kv.seq_len == 0, "the cache holds %d positions after an embedding", kv.seq_len);
	kv_free(&kv);
	free(h), free(mean), free(last), free(unit), free(again);
	model_free(&mm);
}

/*
 * The families' differences against the reference: qwen2's biases and
 * NEOX RoPE, Llama 3's rope_freqs, each cached token by token, and a
 * tensor no forward pass uses refused by name.
 */
static void
families_match_the_reference(void)
{
	enum { N = 60, NA = 5 };
	static const char *arch[NA] = { "qwen2", "llama", "qwen2", "qwen3", "phi3" };
	static const int freqs[NA] = { 0, 1, 1, 0, 0 };
	struct fixture f;
	struct model mm;
	struct kv kv;
	int ids[N], t, a;
	double *ref, worst;
	char name[64];

	for (a = 0; a < NA; a++) {
		fixture_tiny(&f, GGML_F32);
		f.arch = arch[a];
		f.rope_freqs = freqs[a];
		snprintf(name, sizeof name, "family-%d.gguf", a);
		CHECK(model_load(&mm, write_fixture(&f, name)) == 0, "%s: %s", arch[a], llm_err());
		CHECK(mm.c.rope_neox == (a != 1) && (mm.rope_factors != NULL) == freqs[a] &&
		    (mm.layers[0].bq != NULL) == (a == 0 || a == 2) &&
		    (mm.layers[0].q_norm != NULL) == (a == 3) && mm.c.fused == (a == 4) &&
		    (a != 3 || mm.c.n_heads * mm.c.head_dim != mm.c.dim), "%s: the family's fields", arch[a]);
		for (t = 0; t < N; t++)
			ids[t] = (t * 7919 + 3) % mm.c.vocab_size;
		ref = ref_forward(&mm, ids, N);
		kv_init(&kv, mm.c.n_layers, mm.c.kv_dim, 512, 0);
		worst = worst_against_reference(&mm, &kv, ids, N, ref);
		printf("# %s%s: relative logit error %.3g against the double-precision reference\n", arch[a],
		    freqs[a] ? " with rope_freqs" : "", worst);
		CHECK(worst <= 1e-4, "%s%s: relative logit error %g", arch[a],
		    freqs[a] ? " with rope_freqs" : "", worst);
		free(ref);
		kv_free(&kv);
		model_free(&mm);
	}
	fixture_tiny(&f, GGML_F32);
	f.extra = "blk.0.attn_q.bias";
	CHECK(model_load(&mm, write_fixture(&f, "extra.gguf")) < 0 && strcmp(llm_err(), "tensor blk.0.attn_q.bias is not used "
	    "by the llama forward pass of this build") == 0, "an unused tensor: '%s'", llm_err());
}

/*
 * The routed FFNs against the reference (their routing in double, the
 * closest margin of a choice printed), token by token: qwen3moe's, and
 * gpt-oss with the rest of its layer (biases, sinks, a window of 8 on
 * every other layer, YaRN with gpt-oss-20b's RoPE); a batch of the
 * stream (its tokens grouped by expert) gives the last logits and the
 * cache of one token at a time, bit for bit, on every instruction set;
 * an expert tensor of the wrong shape is refused by name, and so is a
 * dense FFN's tensor beside the experts (no forward pass would use it).
 */
static void
routed_ffn_matches_the_reference(void)
{
	enum { N = 40 };
	/* a router of zeros, every expert tied: the lowest indices win, as in the reference */
	static const struct { const char *arch; uint32_t type; int E, K, zero; } cases[] = {
		{ "qwen3moe", GGML_F32, 8, 2, 0 }, { "qwen3moe", GGML_F32, 16, 4, 0 },
		{ "qwen3moe", GGML_Q8_0, 8, 2, 0 }, { "qwen3moe", GGML_Q4_K, 8, 3, 0 },
		{ "qwen3moe", GGML_F32, 8, 3, 1 },
		{ "gpt-oss", GGML_F32, 8, 2, 0 }, { "gpt-oss", GGML_F32, 16, 4, 0 },
		{ "gpt-oss", GGML_Q8_0, 8, 2, 0 }, { "gpt-oss", GGML_Q4_K, 8, 3, 0 },
		{ "gpt-oss", GGML_F32, 8, 3, 1 },
	};
	int best = kernels_isa(), ids[N], err, t, isa;

	for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
		struct fixture f;
		struct model mm;
		struct kv a, b;
		char name[64];
		float *one, *batch;
		double *ref, worst;

		const char *arch = cases[ci].arch;
		int oss = strcmp(arch, "gpt-oss") == 0;
		fixture_tiny(&f, cases[ci].type);
		f.arch = arch;
		f.n_expert = cases[ci].E;
		f.n_expert_used = cases[ci].K;
		f.router_zero = cases[ci].zero;
		if (oss) {
			fixture_gpt_oss_20b(&f, cases[ci].type);	/* its RoPE, on the tiny shape */
			f.dim = f.ffn_dim = cases[ci].type == GGML_Q4_K ? 256 : 64;
			f.n_layers = 3, f.n_heads = 4, f.n_kv_heads = 2, f.vocab = 320, f.ctx = 512;
			f.n_expert = cases[ci].E, f.n_expert_used = cases[ci].K, f.router_zero = cases[ci].zero;
			f.n_swa = 8;
		}
		snprintf(name, sizeof name, "moe-%zu.gguf", ci);
		CHECK(model_load(&mm, write_fixture(&f, name)) == 0, "%s", llm_err());
		CHECK(mm.c.n_expert == cases[ci].E && mm.c.n_expert_used == cases[ci].K &&
		    mm.c.expert_ffn_dim == f.ffn_dim && (mm.layers[0].q_norm != NULL) == !oss &&
		    (mm.layers[1].sinks && mm.layers[2].bo && mm.layers[0].down_exps_b && mm.slides &&
		    mm.slides[0] && !mm.slides[1] && mm.slides[2] && mm.c.rope_scaling == MODEL_ROPE_YARN) == oss,
		    "%s's fields", arch);
		for (t = 0; t < N; t++)
			ids[t] = (t * 7919 + 3) % mm.c.vocab_size;
		ref_moe_margin = INFINITY;
		ref = ref_forward(&mm, ids, N);
		CHECK(model_kv_init(&mm, &a, 512, 0, GGML_F32, GGML_F32) == 0, "%s", llm_err());
		worst = worst_against_reference(&mm, &a, ids, N, ref);
		printf("# %s %s, %d experts, %d a token%s: relative logit error %.3g against the reference "
		    "(closest routing margin %.3g)\n", arch, gguf_type_name(cases[ci].type), cases[ci].E,
		    cases[ci].K, cases[ci].zero ? ", all tied" : "", worst, ref_moe_margin);
		CHECK(worst <= 1e-4, "%s %s: relative logit error %g", arch, gguf_type_name(cases[ci].type), worst);
		one = xmalloc(mm.c.vocab_size * sizeof *one);
		memcpy(one, fwd_last, mm.c.vocab_size * sizeof *one);
		for (isa = KERNELS_SCALAR; isa <= best; isa++) {
			if (kernels_set_isa(isa) != 0)
				continue;
			CHECK(model_kv_init(&mm, &b, 512, 0, GGML_F32, GGML_F32) == 0, "%s", llm_err());
			batch = fwd(&mm, &b, ids, N, 0, MODEL_OUT_LAST, NULL, &err);
			CHECK(!err && memcmp(batch, one, mm.c.vocab_size * sizeof *one) == 0,
			    "%s %s %s: a batch differs from one token at a time", arch, kernels_isa_name(isa),
			    gguf_type_name(cases[ci].type));
			for (int l = 0; l < a.n_layers; l++)
				CHECK(memcmp(kv_k_read(&a, l, 0), kv_k_read(&b, l, 0), (size_t)N * a.kv_dim * 4) == 0,
				    "%s %s: layer %d of the caches differs", arch, kernels_isa_name(isa), l);
			kv_free(&b);
		}
		kernels_set_isa(best);
		free(one), free(ref);
		kv_free(&a);
		model_free(&mm);
	}
	/* experts 96 wide where the keys say 48 */
	struct fixture f;
	struct model mm;
	fixture_tiny(&f, GGML_F32);
	f.arch = "qwen3moe";
	f.expert_ffn_key = 48;
	CHECK(model_load(&mm, write_fixture(&f, "moe-bad.gguf")) < 0 && strcmp(llm_err(),
	    "tensor blk.0.ffn_gate_exps.weight: shape 64x96x8, expected 64x48x8") == 0, "'%s'", llm_err());
	f.expert_ffn_key = 0;
	f.extra = "blk.0.ffn_gate.weight";	/* a dense FFN's tensor beside the experts: not used */
	CHECK(model_load(&mm, write_fixture(&f, "moe-extra.gguf")) < 0 && strcmp(llm_err(), "tensor "
	    "blk.0.ffn_gate.weight is not used by the qwen3moe forward pass of this build") == 0, "'%s'", llm_err());
}

/*
 * rope.scaling as llama.cpp reads it: linear divides each frequency by
 * the factor, yarn is routed_ffn_matches_the_reference's; another type,
 * or a YaRN key this build does not read, is refused by name; the
 * scaling is part of the fingerprint (it changes the keys cached).
 */
static void
rope_scaling_is_read_and_fingerprinted(void)
{
	struct fixture f;
	struct model mm;
	uint8_t fp[3][32];
	int ok = 1;

	fixture_tiny(&f, GGML_F32);
	f.yarn_factor = 4, f.yarn_orig_ctx = 256, f.scaling = "linear";
	CHECK(model_load(&mm, write_fixture(&f, "linear.gguf")) == 0, "%s", llm_err());
	for (int i = 0; i < mm.rope.dim / 2; i++)
		ok &= fabs(mm.rope.inv_freq[i] * 4 * pow(10000, 2.0 * i / mm.rope.dim) - 1) < 1e-12;
	CHECK(ok && mm.rope.mscale == 1, "linear scaling: the frequencies over the factor");
	model_fingerprint(&mm, fp[0]);
	model_free(&mm);
	f.scaling = "yarn";
	CHECK(model_load(&mm, write_fixture(&f, "yarn.gguf")) == 0, "%s", llm_err());
	CHECK(fabs(mm.rope.mscale - (0.1 * log(4) + 1)) < 1e-12, "yarn's mscale %g", mm.rope.mscale);
	model_fingerprint(&mm, fp[1]);
	model_free(&mm);
	f.yarn_factor = 0;
	CHECK(model_load(&mm, write_fixture(&f, "plain.gguf")) == 0, "%s", llm_err());
	model_fingerprint(&mm, fp[2]);
	model_free(&mm);
	CHECK(memcmp(fp[0], fp[1], 32) && memcmp(fp[1], fp[2], 32) && memcmp(fp[0], fp[2], 32),
	    "linear, yarn and none give three fingerprints");
	f.yarn_factor = 4, f.scaling = "longrope";
	CHECK(model_load(&mm, write_fixture(&f, "longrope.gguf")) < 0 && strcmp(llm_err(),
	    "llama.rope.scaling.type 'longrope' is not supported (none, linear and yarn are)") == 0,
	    "'%s'", llm_err());
	f.scaling = NULL, f.extra_key = "llama.rope.scaling.yarn_attn_factor";
	CHECK(model_load(&mm, write_fixture(&f, "attn-factor.gguf")) < 0 && strcmp(llm_err(),
	    "key llama.rope.scaling.yarn_attn_factor is not supported") == 0, "'%s'", llm_err());
}

/* gemma3 on the family checks' shape: 7 layers (with the pattern of 6, 0-4 and 6 slide). */
static const char *
gemma3_model(const char *name, int swa, int pattern, float softcap)
{
	struct fixture f;

	fixture_small(&f, GGML_F32);
	f.arch = "gemma3";
	f.n_layers = 7;
	f.n_swa = swa;
	f.swa_pattern = pattern;
	f.softcap = softcap;
	f.rope_base = 1000000;
	return write_fixture(&f, name);
}

/*
 * gemma3 against the reference, token by token, with sliding windows
 * shorter than the stream: the default pattern, another one with a
 * logit cap, and no window (every layer global).  A batch of the whole
 * stream gives the same last logits and the same cache, bit for bit;
 * a cache made without the model's sliding layers is refused.
 */
static void
gemma3_matches_the_reference(void)
{
	enum { N = 70 };
	static const struct { int swa, pattern; float softcap; const char *slides; } cases[] = {
		{ 16, 0, 0, "1111101" }, { 24, 3, 15, "1101101" }, { 0, 0, 0, "0000000" },
	};
	struct model mm;
	struct kv kv, batch;
	float *all;
	int ids[N], t;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char name[64], got[8] = "";
		snprintf(name, sizeof name, "gemma3-%zu.gguf", i);
		CHECK(model_load(&mm, gemma3_model(name, cases[i].swa, cases[i].pattern,
		    cases[i].softcap)) == 0, "%s", llm_err());
		for (int l = 0; l < 7; l++)
			got[l] = mm.slides && mm.slides[l] ? '1' : '0';
		CHECK(strcmp(got, cases[i].slides) == 0 && mm.c.post_norms && mm.c.glu == MODEL_GLU_GELU &&
		    mm.c.embd_scale == sqrtf(256) && mm.c.rope_neox && mm.c.n_heads * mm.c.head_dim != mm.c.dim &&
		    mm.c.rope_base_swa == 10000 && mm.c.softcap == cases[i].softcap,
		    "case %zu: the family's fields: slides %s", i, got);
		for (t = 0; t < N; t++)
			ids[t] = (t * 7919 + 3) % mm.c.vocab_size;
		double *ref = ref_forward(&mm, ids, N);
		CHECK(model_kv_init(&mm, &kv, 512, 0, KV_F32, KV_F32) == 0, "%s", llm_err());
		double worst = worst_against_reference(&mm, &kv, ids, N, ref);
		printf("# gemma3 case %zu: relative logit error %.3g against the double-precision reference\n", i, worst);
		CHECK(worst <= 1e-4, "case %zu (window %d, pattern %d, cap %g): relative logit error %g",
		    i, cases[i].swa, cases[i].pattern, cases[i].softcap, worst);
		size_t V = (size_t)mm.c.vocab_size;
		all = xmalloc((size_t)N * V * sizeof *all);
		CHECK(model_kv_init(&mm, &batch, 512, 0, KV_F32, KV_F32) == 0, "%s", llm_err());
		CHECK(fwd(&mm, &batch, ids, N, 0, MODEL_OUT_ALL, all, &t) && !t, "%s", llm_err());
		CHECK(memcmp(all + (N - 1) * V, fwd_last, V * sizeof *all) == 0 && same_cache(&kv, &batch, N),
		    "case %zu: a batch differs from token by token", i);
		free(all), free(ref);
		kv_free(&batch);
		kv_free(&kv);
		kv_init(&kv, mm.c.n_layers, mm.c.kv_dim, 512, 0);
		got[0] = fwd(&mm, &kv, ids, 1, 0, MODEL_OUT_LAST, NULL, &t) != NULL;
		CHECK(mm.slides ? !got[0] && strstr(llm_err(), "sliding layers are not the model's") : got[0],
		    "case %zu: a plain cache: %s", i, t ? llm_err() : "taken");
		kv_free(&kv);
		model_free(&mm);
	}
}

/*
 * gemma3's sliding layers with every cache type, and with a window on
 * the global layers past max_ctx: one token at a time, in chunks that
 * wrap the rings, equal bit for bit (logits and cache); the f32 runs
 * against the reference too.  A window shorter than a group of keys is
 * refused by the types that keep groups.
 */
static void
gemma3_cache_types_batched_equals_token_by_token(void)
{
	enum { N = 230, CTX = 160 };
	static const int chunks[] = { 13, 64, 128 };
	struct model mm;
	struct kv one, b;
	float *want, *got = NULL;
	int ids[N], err, i, t, win;

	CHECK(model_load(&mm, gemma3_model("gemma3-40.gguf", 40, 0, 0)) == 0, "%s", llm_err());
	size_t V = (size_t)mm.c.vocab_size;
	want = xmalloc(V * sizeof *want);
	for (i = 0; i < N; i++)
		ids[i] = (i * 31 + 7) % mm.c.vocab_size;
	for (win = 0; win < 2; win++)
		for (t = -1; t < N_KV_TYPES; t++) {
			int k = t < 0 ? KV_F32 : kv_types[t][0], v = t < 0 ? KV_F32 : kv_types[t][1];
			int n = win ? N : CTX;
			CHECK(model_kv_init(&mm, &one, CTX, 0, k, v) == 0 &&
			    (!win || kv_set_window(&one, 4, 100) == 0), "%s", llm_err());
			for (i = 0; i < n; i++) {
				fwd(&mm, &one, &ids[i], 1, i, i == n - 1 ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL, &err);
				CHECK(!err, "k %s v %s: %s", kv_type_name(k), kv_type_name(v), llm_err());
			}
			memcpy(want, fwd_last, V * sizeof *want);
			if (t < 0) {
				double *ref = ref_forward_window(&mm, ids, n, win ? 4 : 0, win ? 100 : 0), worst = 0;
				for (size_t e = 0, at = (size_t)(n - 1) * V; e < V; e++)
					worst = worst_of(worst, fabs(want[e] - ref[at + e]) / 10);
				CHECK(worst <= 1e-4, "window %d: the last logits off the reference by %g", win, worst);
				free(ref);
			}
			for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
				CHECK(model_kv_init(&mm, &b, CTX, 0, k, v) == 0 &&
				    (!win || kv_set_window(&b, 4, 100) == 0), "%s", llm_err());
				for (i = 0; i < n; i += chunks[c]) {
					int m = n - i < chunks[c] ? n - i : chunks[c];
					got = fwd(&mm, &b, ids + i, m, i, i + m == n ? MODEL_OUT_LAST : MODEL_OUT_NONE,
					    NULL, &err);
					CHECK(!err, "%s", llm_err());
				}
				CHECK(got && memcmp(got, want, V * sizeof *want) == 0 && same_cache(&one, &b, n),
				    "k %s v %s, window %d: chunks of %d differ from one token at a time",
				    kv_type_name(k), kv_type_name(v), win, chunks[c]);
				kv_free(&b);
			}
			kv_free(&one);
		}
	model_free(&mm);
	CHECK(model_load(&mm, gemma3_model("gemma3-16.gguf", 16, 0, 0)) == 0, "%s", llm_err());
	CHECK(model_kv_init(&mm, &one, CTX, 0, KV_Q8_0, KV_F32) < 0 && strcmp(llm_err(),
	    "kv: a sliding window of 16 positions is less than the 32 of a group of k q8_0 v f32") == 0,
	    "a window under a group: '%s'", llm_err());
	CHECK(model_kv_init(&mm, &one, CTX, 0, KV_F32, KV_F32) == 0, "%s", llm_err());
	kv_free(&one);
	model_free(&mm);
	free(want);
}

/*
 * At 2000 positions with a window of 64, the cache holds what the layers
 * can attend to, within 1.3x: the global layer's 2000 rows and the six
 * sliding layers' 64 each, not 7 x 2000.
 */
static void
gemma3_cache_keeps_what_the_layers_attend_to(void)
{
	enum { N = 2000, SWA = 64 };
	struct model mm;
	struct kv kv;
	int *ids = xmalloc(N * sizeof *ids), err, i;

	CHECK(model_load(&mm, gemma3_model("gemma3-64.gguf", SWA, 0, 0)) == 0, "%s", llm_err());
	CHECK(model_kv_init(&mm, &kv, 4096, 0, KV_F32, KV_F32) == 0, "%s", llm_err());
	for (i = 0; i < N; i++)
		ids[i] = (i * 131 + 5) % mm.c.vocab_size;
	fwd(&mm, &kv, ids, N, 0, MODEL_OUT_NONE, NULL, &err);
	CHECK(!err, "%s", llm_err());
	double row = 2.0 * mm.c.kv_dim * sizeof(float), need = (1.0 * N + 6.0 * SWA) * row;
	CHECK(kv_bytes(&kv) <= 1.3 * need && kv_bytes(&kv) >= need,
	    "kv_bytes %zu for %.0f bytes the layers attend to (%.2fx)", kv_bytes(&kv), need,
	    kv_bytes(&kv) / need);
	kv_free(&kv);
	model_free(&mm);
	free(ids);
}

int
main(void)
{
	TEST(cached_matches_reference_f32);
	TEST(cached_matches_reference_f16);
	TEST(cached_matches_reference_bf16);
	TEST(cached_matches_reference_q8_0);
	TEST(cached_matches_reference_q4_0);
	TEST(cached_matches_reference_q4_1);
	TEST(cached_matches_reference_q5_0);
	TEST(cached_matches_reference_q5_1);
	TEST(cached_matches_reference_q4_K);
	TEST(cached_matches_reference_q5_K);
	TEST(cached_matches_reference_q6_K);
	TEST(cached_matches_reference_q3_K);
	TEST(cached_matches_reference_q2_K);
	TEST(cached_matches_reference_iq4_nl);
	TEST(cached_matches_reference_iq4_xs);
	TEST(grow_on_demand_is_bitwise_identical_to_prealloc);
	TEST(forward_refuses_positions_past_max_ctx);
	TEST(missing_optional_keys_take_llama_cpp_defaults);
	TEST(partial_rows_fall_back_as_llama_cpp_quantizes);
	TEST(batched_prefill_equals_token_by_token_f32);
	TEST(batched_prefill_equals_token_by_token_f16);
	TEST(batched_prefill_equals_token_by_token_bf16);
	TEST(batched_prefill_equals_token_by_token_q8_0);
	TEST(a_prompt_past_a_batch_equals_its_pieces);
	TEST(batched_prefill_equals_token_by_token_q4_0);
	TEST(batched_prefill_equals_token_by_token_q5_0);
	TEST(batched_prefill_equals_token_by_token_q4_K);
	TEST(batched_prefill_equals_token_by_token_q6_K);
	TEST(batched_prefill_equals_token_by_token_q3_K);
	TEST(batched_prefill_equals_token_by_token_q2_K);
	TEST(batched_prefill_equals_token_by_token_iq4_nl);
	TEST(batched_prefill_equals_token_by_token_iq4_xs);
	TEST(kv_types_batched_equals_token_by_token);
	TEST(kv_types_grow_equals_prealloc);
	TEST(f16_cache_reads_its_own_group_exactly);
	TEST(kv_types_stay_close_to_f32);
	TEST(q4_0_values_read_their_newest_in_q8_0);
	TEST(window_matches_double_reference);
	TEST(window_batched_equals_token_by_token);
	TEST(window_before_slide_is_plain);
	TEST(long_decode_split_is_bitwise_one_thread);
	TEST(embeddings_pool_the_final_hidden_states);
	TEST(families_match_the_reference);
	TEST(routed_ffn_matches_the_reference);
	TEST(rope_scaling_is_read_and_fingerprinted);
	TEST(gemma3_matches_the_reference);
	TEST(gemma3_cache_types_batched_equals_token_by_token);
	TEST(window_sinks_batched_equal_token_by_token_on_every_layer);
	TEST(gemma3_cache_keeps_what_the_layers_attend_to);
	TEST(argmax_is_the_first_largest);
	TEST(sampling_controls_do_what_llama_cpp_does);
	fwd_forget();
	CHECK_EXIT();
}
