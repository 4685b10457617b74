/*
 * kv.c: the KV cache.  The founding design: memory follows the
 * positions really used, not max_ctx.  A dense fp32 cache for an 8k
 * context dominated peak RSS of a 16-token chat on SmolLM2-135M.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kv.h"
#include "util.h"

static size_t
store_floats(const struct kv *kv, int cap)
{
	return (size_t)kv->n_layers * (size_t)cap * (size_t)kv->kv_dim;
}

/*
 * The stores are mapped and populated at once: what bytes() reports is
 * then exactly what is resident, and filling the cache costs no page
 * faults one row at a time.
 */
static float *
store_alloc(size_t floats)
{
	void *p = mmap(NULL, floats * sizeof(float), PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void
store_free(float *p, size_t floats)
{
	if (p)
		munmap(p, floats * sizeof(float));
}

int
kv_init(struct kv *kv, int n_layers, int kv_dim, int max_ctx, int prealloc)
{
	memset(kv, 0, sizeof *kv);
	if (n_layers <= 0 || n_layers > KV_MAX_LAYERS || kv_dim <= 0 || kv_dim > KV_MAX_DIM ||
	    max_ctx <= 0 || max_ctx > KV_MAX_CTX) {
		llm_seterr("kv: bad shape %d layers x %d x %d", n_layers, kv_dim, max_ctx);
		return -1;
	}
	kv->n_layers = n_layers;
	kv->kv_dim = kv_dim;
	kv->max_ctx = max_ctx;
	if (kv_grow_to(kv, prealloc ? max_ctx : 1) < 0)
		return -1;
	return 0;
}

void
kv_free(struct kv *kv)
{
	store_free(kv->k, store_floats(kv, kv->cap));
	store_free(kv->v, store_floats(kv, kv->cap));
	kv->k = kv->v = NULL;
	kv->cap = kv->seq_len = 0;
}

/* Re-lay one store out for a wider cap: each layer's rows move verbatim. */
static float *
relayout(const struct kv *kv, const float *old, int newcap)
{
	size_t row = (size_t)kv->kv_dim;
	float *p;
	int l;

	if (!(p = store_alloc(store_floats(kv, newcap))))
		return NULL;
	if (old)
		for (l = 0; l < kv->n_layers; l++)
			memcpy(p + (size_t)l * newcap * row,
			    old + (size_t)l * kv->cap * row,
			    (size_t)kv->cap * row * sizeof(float));
	return p;
}

int
kv_grow_to(struct kv *kv, int npos)
{
	float *k, *v;
	int cap;

	if (npos <= kv->cap)
		return 0;
	if (npos > kv->max_ctx) {
		llm_seterr("context full: position %d is past max_ctx %d",
		    npos - 1, kv->max_ctx);
		return -1;
	}
	cap = kv->cap ? kv->cap : KV_INITIAL_CAP;
	while (cap < npos)
		cap *= 2;
	if (cap > kv->max_ctx)
		cap = kv->max_ctx;
	k = relayout(kv, kv->k, cap);
	v = relayout(kv, kv->v, cap);
	if (!k || !v) {
		store_free(k, store_floats(kv, cap));
		store_free(v, store_floats(kv, cap));
		llm_seterr("kv: out of memory growing to %d positions", cap);
		return -1;
	}
	store_free(kv->k, store_floats(kv, kv->cap));
	store_free(kv->v, store_floats(kv, kv->cap));
	kv->k = k;
	kv->v = v;
	kv->cap = cap;
	return 0;
}

static size_t
offset(const struct kv *kv, int layer, int pos)
{
	return ((size_t)layer * kv->cap + pos) * kv->kv_dim;
}

float *
kv_k_write(struct kv *kv, int layer, int pos)
{
	if (kv_grow_to(kv, pos + 1) < 0)
		return NULL;
	return kv->k + offset(kv, layer, pos);
}

float *
kv_v_write(struct kv *kv, int layer, int pos)
{
	if (kv_grow_to(kv, pos + 1) < 0)
		return NULL;
	return kv->v + offset(kv, layer, pos);
}

int
kv_set_seq_len(struct kv *kv, int n)
{
	if (kv_grow_to(kv, n) < 0)
		return -1;
	kv->seq_len = n;
	return 0;
}

void
kv_clear(struct kv *kv)
{
	kv->seq_len = 0;
}

size_t
kv_bytes(const struct kv *kv)
{
	return 2 * store_floats(kv, kv->cap) * sizeof(float);
}
