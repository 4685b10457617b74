/* kv.h: the grow-on-demand KV cache of the founding design. */
#ifndef LLM_KV_H
#define LLM_KV_H

#include <stddef.h>

#define KV_INITIAL_CAP 64

/*
 * The largest shapes a model or a snapshot may have.  Every size made
 * from them fits 64 bits many times over, and they are far beyond any
 * real model; a file that claims more is refused as corrupt.
 */
#define KV_MAX_LAYERS 4096
#define KV_MAX_HEADS 4096
#define KV_MAX_HEAD_DIM 65536
#define KV_MAX_DIM (1 << 20)		/* n_kv_heads * head_dim */
#define KV_MAX_CTX (1 << 28)

/*
 * K and V are each one fp32 store laid out [layer][pos][kv_dim]:
 * offset = ((layer * cap) + pos) * kv_dim.  cap starts at 64 (or
 * max_ctx if smaller) and doubles when a write needs a position past
 * it, never above max_ctx.
 */
struct kv {
	int n_layers;
	int kv_dim;
	int max_ctx;
	int cap;		/* positions allocated per layer */
	int seq_len;		/* positions filled */
	int written;		/* 1 + the highest position a write accessor gave out */
	float *k, *v;		/* each reserves max_ctx positions of address space */
	size_t reserved;	/* bytes reserved per store */
	double grow_seconds;	/* time spent growing, for the run stats */
};

/* prealloc commits max_ctx densely up front (for comparison runs). */
int kv_init(struct kv *kv, int n_layers, int kv_dim, int max_ctx, int prealloc);
void kv_free(struct kv *kv);

/* Make room for positions [0, npos); 0 or -1 (llm_err()). */
int kv_grow_to(struct kv *kv, int npos);

/* Write accessors: grow the store if pos is past cap; NULL on failure. */
float *kv_k_write(struct kv *kv, int layer, int pos);
float *kv_v_write(struct kv *kv, int layer, int pos);

/* Read accessors: never grow; pos must be below cap.  Inline: attention calls them per row. */
static inline const float *
kv_k_read(const struct kv *kv, int layer, int pos)
{
	return kv->k + ((size_t)layer * kv->cap + pos) * kv->kv_dim;
}

static inline const float *
kv_v_read(const struct kv *kv, int layer, int pos)
{
	return kv->v + ((size_t)layer * kv->cap + pos) * kv->kv_dim;
}

/* Grow ahead to n positions and mark them filled. */
int kv_set_seq_len(struct kv *kv, int n);
/* Forget the contents; the capacity stays. */
void kv_clear(struct kv *kv);

/* The footprint of K and V at the current capacity (what a dense cache of cap positions takes). */
size_t kv_bytes(const struct kv *kv);
/* The bytes of K and V really resident now: the pages written (mincore). */
size_t kv_resident_bytes(const struct kv *kv);

#endif
