/*
 * kv.c: the KV cache.  The founding design: memory follows the
 * positions really used, not max_ctx.  A dense fp32 cache for an 8k
 * context dominated peak RSS of a 16-token chat on SmolLM2-135M.
 *
 * How growing stays cheaper than a dense cache at every length:
 *
 * - Each store (K, V) reserves the address space of max_ctx positions
 *   once, PROT_NONE, so nothing is committed.  Growing to cap makes the
 *   first n_layers * cap rows readable and writable; only the pages that
 *   are written become resident.
 * - Growing from cap to newcap moves each layer's rows from
 *   l * cap * kv_dim to l * newcap * kv_dim inside the same reservation,
 *   from the last layer down (each destination lies above every source
 *   not yet moved), backward in chunks of 64 KiB (safe where a layer's
 *   source and destination overlap).  Right after a chunk is copied, the
 *   whole pages of its source that hold nothing else are released with
 *   MADV_DONTNEED.  So every row is resident in one place at any moment:
 *   growth costs one chunk and a few boundary pages per layer, never a
 *   second store, and never more than the dense cache.
 * - Only the rows written so far move (the high-water mark of the write
 *   accessors, or seq_len), not the unused end of the old capacity.
 * - The values are copied verbatim, so the results are bitwise those of
 *   a dense cache (--kv-prealloc), which tests check.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kv.h"
#include "util.h"

enum { MOVE_CHUNK = 64 << 10 };	/* bytes copied between two releases */

static size_t page_size;

static size_t
round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

static size_t
row_bytes(const struct kv *kv)
{
	return (size_t)kv->kv_dim * sizeof(float);
}

/* Bytes of a store laid out for cap positions. */
static size_t
store_bytes(const struct kv *kv, int cap)
{
	return (size_t)kv->n_layers * (size_t)cap * row_bytes(kv);
}

static float *
store_reserve(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
	    -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Give back the whole pages inside [a, b): they read as zeros afterwards. */
static void
release(char *a, char *b)
{
	uintptr_t lo = round_up((uintptr_t)a, page_size), hi = (uintptr_t)b / page_size * page_size;

	if (lo < hi)
		madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/*
 * Move n bytes from src up to dst (dst > src), backward in chunks,
 * releasing each chunk's source pages that the move has not written.
 */
static void
move_up(char *dst, char *src, size_t n)
{
	size_t left = n, c;

	while (left > 0) {
		c = left < MOVE_CHUNK ? left : MOVE_CHUNK;
		left -= c;
		memmove(dst + left, src + left, c);
		/* dst + left onward is written; the source below it is free */
		release(src + left, src + left + c < dst + left ? src + left + c : dst + left);
	}
}

/* Re-lay one store from cap to newcap positions per layer, in place. */
static void
relayout(const struct kv *kv, float *store, int newcap, int rows)
{
	size_t row = row_bytes(kv);
	char *base = (char *)store;
	int l;

	for (l = kv->n_layers - 1; l > 0; l--)
		move_up(base + (size_t)l * newcap * row, base + (size_t)l * kv->cap * row,
		    (size_t)rows * row);
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
	if (!page_size)
		page_size = (size_t)sysconf(_SC_PAGESIZE);
	kv->n_layers = n_layers;
	kv->kv_dim = kv_dim;
	kv->max_ctx = max_ctx;
	kv->reserved = round_up(store_bytes(kv, max_ctx), page_size);
	if (!(kv->k = store_reserve(kv->reserved)) || !(kv->v = store_reserve(kv->reserved))) {
		llm_seterr("kv: cannot reserve %zu bytes of address space for %d positions: %s",
		    2 * kv->reserved, max_ctx, strerror(errno));
		kv_free(kv);
		return -1;
	}
	if (kv_grow_to(kv, prealloc ? max_ctx : 1) < 0) {
		kv_free(kv);
		return -1;
	}
	if (prealloc) {
		/* A dense cache, as the comparison runs want it: every page resident. */
		memset(kv->k, 0, store_bytes(kv, max_ctx));
		memset(kv->v, 0, store_bytes(kv, max_ctx));
	}
	return 0;
}

void
kv_free(struct kv *kv)
{
	if (kv->k)
		munmap(kv->k, kv->reserved);
	if (kv->v)
		munmap(kv->v, kv->reserved);
	kv->k = kv->v = NULL;
	kv->cap = kv->seq_len = kv->written = 0;
}

int
kv_grow_to(struct kv *kv, int npos)
{
	size_t commit;
	double t0;
	int cap, rows;

	if (npos <= kv->cap)
		return 0;
	if (npos > kv->max_ctx) {
		llm_seterr("context full: position %d is past max_ctx %d",
		    npos - 1, kv->max_ctx);
		return -1;
	}
	t0 = now_seconds();
	/* The founding rule: 64 (or max_ctx), doubling, never past max_ctx. */
	cap = kv->cap ? kv->cap : KV_INITIAL_CAP;
	while (cap < npos)
		cap *= 2;
	if (cap > kv->max_ctx)
		cap = kv->max_ctx;
	commit = round_up(store_bytes(kv, cap), page_size);
	if (mprotect(kv->k, commit, PROT_READ | PROT_WRITE) < 0 ||
	    mprotect(kv->v, commit, PROT_READ | PROT_WRITE) < 0) {
		llm_seterr("kv: out of memory growing to %d positions", cap);
		return -1;
	}
	rows = kv->seq_len > kv->written ? kv->seq_len : kv->written;
	if (rows > kv->cap)
		rows = kv->cap;
	if (kv->cap && rows) {
		relayout(kv, kv->k, cap, rows);
		relayout(kv, kv->v, cap, rows);
	}
	kv->cap = cap;
	kv->grow_seconds += now_seconds() - t0;
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
	if (pos >= kv->written)
		kv->written = pos + 1;
	return kv->k + offset(kv, layer, pos);
}

float *
kv_v_write(struct kv *kv, int layer, int pos)
{
	if (kv_grow_to(kv, pos + 1) < 0)
		return NULL;
	if (pos >= kv->written)
		kv->written = pos + 1;
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
	kv->written = 0;
}

size_t
kv_bytes(const struct kv *kv)
{
	return 2 * store_bytes(kv, kv->cap);
}

size_t
kv_resident_bytes(const struct kv *kv)
{
	size_t len = round_up(store_bytes(kv, kv->cap), page_size), pages = len / page_size;
	size_t i, n = 0;
	unsigned char *vec;
	int s;

	if (!kv->k || !len)
		return 0;
	vec = xmalloc(pages);
	for (s = 0; s < 2; s++)
		if (mincore(s ? (void *)kv->v : (void *)kv->k, len, vec) == 0)
			for (i = 0; i < pages; i++)
				n += vec[i] & 1;
	free(vec);
	return n * page_size;
}
