/* model.h: a model's hyperparameters and family traits, its weights bound by name, the forward pass. */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdint.h>

#include "attn.h"
#include "gguf.h"
#include "kv.h"
#include "matmul.h"
#include "pool.h"
#include "rope.h"

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
	char arch[16];		/* general.architecture: llama, qwen2, qwen3, qwen3moe, phi3, gemma3, gpt-oss */
	char ffn_norm[24];	/* the FFN's norm tensor: ffn_norm, or post_attention_norm (gpt-oss) */
	int rope_neox;		/* rotate pairs (i, i + rope_dim / 2), not adjacent ones */
	int qkv_bias;		/* Q, K and V have biases */
	int out_bias;		/* and the attention's output (gpt-oss) */
	int sinks;		/* a learned sink logit per query head (gpt-oss's attn_sinks) */
	int qk_norm;		/* each head of Q and K is RMS-normed before RoPE (qwen3) */
	int fused;		/* Q, K, V in one attn_qkv, gate and up in one ffn_up (phi3) */
	int post_norms;		/* attention and FFN outputs RMS-normed before the residual add (gemma3) */
	int glu;		/* the FFN's gate: MODEL_GLU_SILU, _GELU (gemma3) or _OAI (gpt-oss) */
	float embd_scale;	/* embeddings are multiplied by it: 1, or sqrt(dim) (gemma3) */
	float attn_scale;	/* the scores' scale: 1 / sqrt(head_dim), or gemma3 27B's */
	float softcap;		/* > 0: logits capped to softcap * tanh(z / softcap) */
	int n_swa;		/* > 0: the sliding layers' window (gemma3.attention.sliding_window) */
	int swa_pattern;	/* layer l slides if l % pattern < pattern - 1 (0: every layer) */
	float rope_base_swa;	/* the sliding layers' RoPE base */
	int swa_same_rope;	/* the sliding layers' RoPE is the others' (gpt-oss; gemma3's has its own) */
	int n_expert;		/* > 0: a routed FFN of this many experts (qwen3moe) */
	int n_expert_used;	/* the experts a token takes */
	int expert_ffn_dim;	/* an expert's hidden width */
	int expert_bias;	/* the router and the experts have biases (gpt-oss) */
	int route_after;	/* routing weights: the softmax of the k chosen logits (gpt-oss), not the
				 * k largest of the softmax over all, renormalized (qwen3moe) */
	int rope_scaling;	/* rope.scaling.type: MODEL_ROPE_NONE, _LINEAR or _YARN */
	float rope_factor;	/* rope.scaling.factor (1 when none) */
	int yarn_orig_ctx;	/* rope.scaling.original_context_length */
	float yarn_beta_fast, yarn_beta_slow;	/* YaRN's ramp: 32 and 1 unless the file says */
};

enum { MODEL_ROPE_NONE, MODEL_ROPE_LINEAR, MODEL_ROPE_YARN };

/* The FFN's gated activations: act(gate) * up */
enum {
	MODEL_GLU_SILU,		/* SwiGLU */
	MODEL_GLU_GELU,		/* GeGLU, GELU's tanh form */
	MODEL_GLU_OAI		/* gpt-oss's clamped SwiGLU: g = min(gate, 7), g * sigmoid(1.702 g) * (clamp(up, -7, 7) + 1) */
};

/* The most experts a routed FFN may have, and a token take */
#define MODEL_MAX_EXPERTS 512
#define MODEL_MAX_EXPERTS_USED 32

struct layer_weights {
	const float *attn_norm, *ffn_norm;
	const float *bq, *bk, *bv, *bo;	/* NULL without biases */
	const float *sinks;		/* a learned logit per query head in the softmax's sum (gpt-oss), or NULL */
	const float *q_norm, *k_norm;	/* head_dim each, NULL without */
	const float *attn_post_norm, *ffn_post_norm;	/* dim each, NULL without */
	struct weight wq, wk, wv, wo;
	struct weight w_gate, w_up, w_down;	/* the dense FFN */
	struct weight w_router;			/* a routed FFN's: n_expert rows of dim */
	struct weight gate_exps, up_exps;	/* n_expert * expert_ffn_dim rows of dim, expert by expert */
	struct weight down_exps;		/* n_expert * dim rows of expert_ffn_dim */
	const float *router_b;			/* the biases of the router and experts, [expert][...], or NULL */
	const float *gate_exps_b, *up_exps_b, *down_exps_b;
};

/* A loaded model: the file's map, the hyperparameters and the weights bound in it; no pass changes it. */
struct model {
	struct gguf gguf;
	struct model_config c;
	struct weight token_embd, output;
	const float *output_norm;
	struct layer_weights *layers;
	float **owned;		/* norm vectors converted from other types */
	int n_owned;
	const float *rope_factors;	/* rope_freqs.weight, rope_dim / 2 of them, or NULL */
	struct rope rope;
	unsigned char *slides;	/* by layer, 1 for a sliding layer; NULL when none slides */
	struct rope rope_swa;	/* the sliding layers' own RoPE, when some slide and have one */
	unsigned char *used;	/* per tensor of the file: bound to the model */
};

/* Open a GGUF and bind a model of a family llm knows; -1 with llm_err() on failure. */
int model_load(struct model *m, const char *path);
void model_free(struct model *m);

/*
 * A cache for the model (kv_init_types), with its sliding layers'
 * windows set (kv_set_sliding): the forward pass refuses a cache whose
 * layers do not slide as the model's do.  0, or -1 with llm_err().
 */
int model_kv_init(const struct model *m, struct kv *kv, int max_ctx, int prealloc, int k_type,
    int v_type);

/*
 * Tokens a forward pass takes at once; longer prompts go in batches.
 * Each batch reads every weight from memory once, and a product packs
 * its rows once for all its tokens: 512 rather than 128 made a 1024-token
 * prefill 1.10-1.13x (SmolLM2's shape; 1.2x a 512-token one at
 * Llama-3.2-1B's) and 16 prompts of 128 with --lines 1.1x (four prompts a
 * pass); 128 rather than 64 had made a 512-token prefill 5-8% faster.
 * The batch buffers are only resident as far as a batch fills them.
 */
#define MODEL_BATCH 512

/* One thread's rows of an expert: its tokens' inputs, FFN and outputs, and x rounded. */
struct expert_scratch {
	float *xe, *hb, *hb2, *ye;
	struct matmul_scratch mm;
};

/*
 * The run state of one sequence (llama2.c's RunState): the buffers of a
 * batch of up to MODEL_BATCH tokens, row per token, and the attention's
 * scratch.  Any number of runs may share one model.
 */
struct model_run {
	const struct model *m;
	struct pool *pool;	/* NULL: the calling thread alone */
	float *x, *xb, *xb2, *hb, *hb2, *q;
	float *route;		/* a routed FFN's: the router's logits, [token][n_expert] */
	float *route_w;		/* each token's experts' weights, [token][n_expert_used], in rank order */
	int *route_e;		/* and the experts, likewise */
	struct expert_scratch *es;	/* a thread's rows of the expert it runs, one a pool thread */
	float *slots;		/* each token's experts' outputs, [token][rank][dim] */
	int *slot_of;		/* the slots by expert, each expert's in order */
	unsigned char *expert_used;	/* [layer][expert]: 1 once a token of the run took it */
	float *logits;		/* MODEL_OUT_LAST's, when no out is given */
	struct matmul_scratch mm;
	float *rope_cs;		/* a batch's cos and sin, [token][rope_dim / 2][2]: once a pass, not per layer */
	float *rope_cs_swa;	/* the same for the sliding layers' own RoPE, if they have one */
	float *k, *v;		/* a batch's keys and values when it spans several sequences */
	struct attn attn;
	struct attn *seq_attn;	/* a thread's, for sequences of one token attended to side by side */
	int n_seq_attn;
};

/* The experts of layer l that a token of the run took (0 without a routed FFN) */
int model_run_experts_used(const struct model_run *r, int l);

int model_run_init(struct model_run *r, const struct model *m, struct pool *pool);
void model_run_free(struct model_run *r);

/* What a forward pass gives. */
enum model_out {
	MODEL_OUT_NONE,		/* nothing: the cache is filled */
	MODEL_OUT_LAST,		/* the last token's logits, vocab_size floats (out NULL: r->logits) */
	MODEL_OUT_ALL,		/* every token's logits, n rows of vocab_size */
	MODEL_OUT_HIDDEN,	/* every token's final-norm hidden state, n rows of dim */
};

/*
 * Run tokens[0..n) at positions pos..pos+n-1 (0 <= pos <= the cache's
 * seq_len) in batches of MODEL_BATCH, appending their keys and values to
 * the cache, and write what is asked to out.  0, or -1 with llm_err()
 * saying why (a bad token, the context full, out of memory): the batches
 * before the failing one are in the cache.  A batch gives bitwise the
 * same results as its tokens one at a time.
 */
int model_forward(struct model_run *r, struct kv *kv, const int *tokens, int n, int pos,
    enum model_out what, float *out);

/*
 * Several sequences in one pass over the weights: sequence i runs its
 * n tokens at positions pos.. of its own cache (pos at most its seq_len),
 * and what it wants goes to out, a row per token wanted in the order of
 * the sequences (MODEL_OUT_LAST: one row; MODEL_OUT_ALL, MODEL_OUT_HIDDEN:
 * n rows; of vocab_size or dim floats).  Their tokens, at most
 * MODEL_BATCH in all, go through each product together; each attends to
 * its own cache.  Each sequence's results are bitwise those of
 * model_forward on it alone.  0, or -1 with llm_err(): then no sequence's
 * cache holds the pass.
 */
struct model_seq {
	struct kv *kv;
	const int *tokens;
	int n, pos;
	enum model_out what;
};

int model_forward_seqs(struct model_run *r, const struct model_seq *seqs, int ns, float *out);

/*
 * An embedding of tokens[0..n): the final-norm hidden states pooled by
 * their mean (summed in double, in order) or the last one's, then L2
 * normalized if asked, dim floats into out.  The cache is cleared before
 * and after, so an input's embedding never depends on another's.  0 or
 * -1 with llm_err().
 */
enum { MODEL_POOL_MEAN, MODEL_POOL_LAST };
int model_embed(struct model_run *r, struct kv *kv, const int *tokens, int n, int pooling,
    int normalize, float *out);

/* The SHA-256 model fingerprint of llm-kv(5). */
void model_fingerprint(const struct model *m, uint8_t out[32]);

/* Weight bytes a decode step reads (for the bandwidth bound; a routed FFN: the experts a token takes). */
uint64_t model_weight_bytes(const struct model *m);

#endif
