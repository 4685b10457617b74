/* attn.h: attention over a KV cache, which the cache owns. */
#ifndef LLM_ATTN_H
#define LLM_ATTN_H

#include "kv.h"
#include "pool.h"
#include "rope.h"

/*
 * What attention needs beside the cache: the query heads, RoPE (a
 * window's sinks are scored with the query rotated back), the threads,
 * and per-thread scratch, grown as positions come.  One per sequence
 * being computed; the cache itself holds no scratch of the queries.
 */
struct attn {
	int n_heads;			/* query heads, a multiple of n_kv_heads */
	int n_kv_heads, head_dim;	/* the model's: a cache row is n_kv_heads heads */
	const struct rope *rope;
	float scale;			/* of the scores: 1 / sqrt(head_dim) unless the model says */
	const float *sinks;		/* the layer's learned sink logit by query head (gpt-oss), or NULL */
	struct pool *pool;
	float *att;			/* per thread: a tile's scores, att_cap apart */
	float *tile;			/* per thread: a tile's queries, outputs and widened keys */
	int att_cap, att_threads;
};

void attn_init(struct attn *a, int n_heads, int n_kv_heads, int head_dim, const struct rope *rope,
    struct pool *pool);
void attn_free(struct attn *a);

/*
 * The attention of the tokens at positions pos..pos+n-1, whose keys and
 * values kv_append() has just given the cache for this layer: q holds
 * their queries after RoPE (n_heads * head_dim floats a token), out gets
 * softmax(q k * scale) v for each query head, laid out as q; with sinks,
 * each head's sink logit joins its softmax's sum (kernels_softmax).  The
 * learned sinks are no cache slots: a window's sinks (kv_set_window's,
 * StreamingLLM's first positions kept) are, and the two compose.
 * The cache writes the rows as its type and window need, scores every
 * slot a query sees (the window's sinks with the query rotated back),
 * and rotates quantized values back.  Each output has the same bits
 * whatever the batch and the threads.  0, or -1 with llm_err() set.
 */
int kv_attend(struct kv *kv, struct attn *a, int layer, int pos, int n, const float *q,
    float *out);

#endif
