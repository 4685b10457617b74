/* model.h: Llama hyperparameters, weights bound by name, the forward pass. */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdint.h>

#include "gguf.h"
#include "kv.h"
#include "pool.h"

struct model_config {
	int dim;		/* embedding width */
	int n_layers;
	int n_heads;
	int n_kv_heads;		/* < n_heads: grouped-query attention */
	int head_dim;
	int kv_dim;		/* n_kv_heads * head_dim */
	int ffn_dim;
	int vocab_size;
	int context_length;	/* the model's own context, the default max_ctx */
	int rope_dim;		/* leading dimensions of each head that rotate */
	float rope_base;
	float rms_eps;
	int bos_id, eos_id, eot_id, eom_id;	/* -1 when the file has none; EOT, EOM: Llama 3 */

	/* What sets the families apart, fixed at load (the forward pass has no branch on names). */
	char arch[16];		/* general.architecture: llama or qwen2 */
	int rope_neox;		/* rotate pairs (i, i + rope_dim / 2), not adjacent ones */
	int qkv_bias;		/* Q, K and V have biases */
	int qk_norm;		/* each head of Q and K is RMS-normed before RoPE (qwen3) */
	int fused;		/* Q, K, V in one attn_qkv, gate and up in one ffn_up (phi3) */
};

/* A weight matrix as it lies in the map: rows of cols, in its file type. */
struct weight {
	const void *data;
	uint32_t type;
	int rows, cols;
	size_t row_bytes;
};

struct layer_weights {
	const float *attn_norm, *ffn_norm;
	const float *bq, *bk, *bv;	/* NULL without biases */
	const float *q_norm, *k_norm;	/* head_dim each, NULL without */
	struct weight wq, wk, wv, wo;
	struct weight w_gate, w_up, w_down;
};

struct model {
	struct gguf gguf;
	struct model_config c;
	struct weight token_embd, output;
	const float *output_norm;
	struct layer_weights *layers;
	float **owned;		/* norm vectors converted from other types */
	int n_owned;

	/* Run state for a batch of up to MODEL_BATCH tokens, row per token. */
	float *x, *xb, *xb2, *hb, *hb2, *q, *logits;
	float *kbuf, *vbuf;	/* K and V of a batch, for caches that are not f32 */
	float *att;		/* per thread: the scores of a tile's queries, att_cap apart */
	float *tile;		/* per thread: a tile's queries, then its outputs */
	float *xr;		/* a batch's x rounded once (quant_round), made when first needed */
	size_t xr_floats;
	int att_cap, att_threads;
	const float *rope_factors;	/* rope_freqs.weight, rope_dim / 2 of them, or NULL */
	double *rope_inv_freq;	/* rope_dim / 2 entries, divided by rope_freqs.weight's factors if any */
	float *rope_cs;		/* a batch's cos and sin, [token][rope_dim / 2][2]: once a pass, not per layer */
	unsigned char *used;	/* per tensor of the file: bound to the model */
	struct pool *pool;
};

/* Open a GGUF and bind a Llama model; -1 with llm_err() on failure. */
int model_load(struct model *m, const char *path);
void model_free(struct model *m);
void model_set_pool(struct model *m, struct pool *pool);

/*
 * Tokens a forward pass takes at once; longer prompts go in chunks.  Each
 * chunk reads every weight from memory once: 128 rather than 64 made a
 * 512-token prefill 5-8% faster; the batch buffers are only resident as
 * far as a batch fills them.
 */
#define MODEL_BATCH 128

/*
 * Run tokens[0..n) at positions pos..pos+n-1 (0 <= pos <= kv->seq_len,
 * n <= MODEL_BATCH) and append their K and V to the cache.  Returns the
 * logits of the last token, or NULL if want_logits is 0; on error
 * (context full, out of memory) returns NULL with *err set and llm_err()
 * saying why.  A batch gives bitwise the same results as its tokens one
 * at a time.
 */
float *model_forward_batch(struct model *m, struct kv *kv, const int *tokens, int n,
    int pos, int want_logits, int *err);

/* The same, with every token's logits: n rows of vocab_size into logits. */
float *model_forward_logits(struct model *m, struct kv *kv, const int *tokens, int n,
    int pos, float *logits, int *err);

/* One token: model_forward_batch with n = 1. */
float *model_forward(struct model *m, struct kv *kv, int token, int pos,
    int want_logits, int *err);

/* The same, with every token's final-norm hidden state: n rows of dim into hidden. */
float *model_forward_hidden(struct model *m, struct kv *kv, const int *tokens, int n,
    int pos, float *hidden, int *err);

/*
 * An embedding of tokens[0..n): the final-norm hidden states pooled by
 * their mean (summed in double, in order) or the last one's, then L2
 * normalized if asked, dim floats into out.  The cache is cleared before
 * and after, so an input's embedding never depends on another's.  0 or
 * -1 with llm_err().
 */
enum { MODEL_POOL_MEAN, MODEL_POOL_LAST };
int model_embed(struct model *m, struct kv *kv, const int *tokens, int n, int pooling,
    int normalize, float *out);

/* Run any number of tokens in batches; the logits of the last. */
float *model_prefill(struct model *m, struct kv *kv, const int *tokens, int n,
    int pos, int want_logits, int *err);

/* The SHA-256 model fingerprint of llm-kv(5). */
void model_fingerprint(const struct model *m, uint8_t out[32]);

/* Weight bytes a decode step reads (for the bandwidth bound). */
uint64_t model_weight_bytes(const struct model *m);

#endif
