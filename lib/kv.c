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
 *   l * cap * row to l * newcap * row inside the same reservation, from
 *   the last layer down (each destination lies above every source not
 *   yet moved), backward in chunks of 64 KiB (safe where a layer's
 *   source and destination overlap).  Right after a chunk is copied, the
 *   whole pages of its source that hold nothing else are released (fresh
 *   pages mapped over them).  So every row is resident in one place at any moment:
 *   growth costs one chunk and a few boundary pages per layer, never a
 *   second store, and never more than the dense cache.
 * - Only the rows written so far move (the high-water mark of the write
 *   accessors, or seq_len), not the unused end of the old capacity.
 * - The values are copied verbatim, so the results are bitwise those of
 *   a dense cache (--kv-prealloc), which tests check.
 *
 * The quantized types extend this: a store's "row" is a position's row
 * of its type, or for grouped keys a group of KV_GROUP positions, and
 * everything above holds unit for unit.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kvpriv.h"

/* MAP_ANON: the BSDs' and macOS's name; MAP_NORESERVE: Linux's, where overcommit is checked */
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
#if !defined(MAP_NORESERVE)
#define MAP_NORESERVE 0
#endif
#include "quant.h"
#include "util.h"

enum { MOVE_CHUNK = 64 << 10 };	/* bytes copied between two releases */

static size_t page_size;

static size_t
round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- the stores ---- */

static int
grouped(const struct kv *kv, int which)
{
	return kv_type_grouped(which ? kv->v_type : kv->k_type, which);
}

static char *
store(const struct kv *kv, int which)
{
	return (char *)(which ? kv->v : kv->k);
}

/* Units (rows, or groups of grouped keys) per layer at cap positions. */
static size_t
units(const struct kv *kv, int which, int cap)
{
	return grouped(kv, which) ? ((size_t)cap + KV_GROUP - 1) / KV_GROUP : (size_t)cap;
}

static size_t
unit_bytes(const struct kv *kv, int which)
{
	return which ? kv->v_unit : kv->k_unit;
}

/* A layer's positions at cap: its window's slots at most. */
static int
layer_cap(const struct kv *kv, int layer, int cap)
{
	int slots = kv_win(kv, layer)->slots;

	return cap < slots ? cap : slots;
}

/* The units before each layer's at cap, and all of them in base[n_layers]. */
static void
layout(const struct kv *kv, int which, int cap, size_t *base)
{
	base[0] = 0;
	for (int l = 0; l < kv->n_layers; l++)
		base[l + 1] = base[l] + units(kv, which, layer_cap(kv, l, cap));
}

static size_t
store_bytes(const struct kv *kv, int which, int cap)
{
	size_t n = 0;

	for (int l = 0; l < kv->n_layers; l++)
		n += units(kv, which, layer_cap(kv, l, cap));
	return n * unit_bytes(kv, which);
}

void *
kv_unit(const struct kv *kv, int layer, int which, int unit)
{
	if (unit < kv->shared[which])
		return (char *)kv->share_at[2 * layer + which] + (size_t)unit * unit_bytes(kv, which);
	return store(kv, which) + (kv->base[which][layer] + (size_t)unit) * unit_bytes(kv, which);
}

const char *
kv_units(const struct kv *kv, int layer, int which, int u, int *end)
{
	if (u < kv->shared[which] && *end > kv->shared[which])
		*end = kv->shared[which];
	return kv_unit(kv, layer, which, u);
}

void
kv_copy_units(const struct kv *kv, int layer, int which, int u0, int u1, void *dst)
{
	size_t ub = unit_bytes(kv, which);
	int end;

	for (; u0 < u1; u0 = end) {
		end = u1;
		const char *p = kv_units(kv, layer, which, u0, &end);
		memcpy(dst, p, (size_t)(end - u0) * ub);
		dst = (char *)dst + (size_t)(end - u0) * ub;
	}
}

int
kv_share(struct kv *kv, int base, const void *const *at)
{
	int grouped_k = grouped(kv, KV_K);

	if (kv->seq_len || kv->written || kv_windowed(kv) || base < 0 || base > kv->max_ctx ||
	    (grouped_k && base % KV_GROUP)) {
		llm_seterr("kv: %d positions cannot be shared by this cache", base);
		return -1;
	}
	if (kv_grow_to(kv, base) < 0)
		return -1;
	if (!kv->share_at)
		kv->share_at = xcalloc(2 * (size_t)kv->n_layers, sizeof *kv->share_at);
	for (int i = 0; i < 2 * kv->n_layers; i++)
		kv->share_at[i] = at[i];
	kv->shared[KV_K] = grouped_k ? base / KV_GROUP : base;
	kv->shared[KV_V] = base;
	return 0;
}

size_t
kv_shared_bytes(const struct kv *kv)
{
	return (size_t)kv->n_layers * ((size_t)kv->shared[KV_K] * kv->k_unit +
	    (size_t)kv->shared[KV_V] * kv->v_unit);
}

size_t
kv_ring_row_bytes(const struct kv *kv, int which)
{
	return kv->ring[which] ? kv_type_row_bytes(kv->ring_type[which], kv->kv_dim) : 0;
}

/* A ring's bytes, all layers. */
static size_t
ring_store_bytes(const struct kv *kv, int which)
{
	return (size_t)kv->n_layers * (size_t)kv_ring_rows(kv, which) *
	    kv_type_row_bytes(kv->ring_type[which], kv->kv_dim);
}

void *
kv_ring_row(const struct kv *kv, int layer, int which, int pos)
{
	int rows = kv_ring_rows(kv, which);

	return (char *)kv->ring[which] +
	    ((size_t)layer * (size_t)rows + (size_t)(pos % rows)) * kv_ring_row_bytes(kv, which);
}

static void *
store_reserve(size_t bytes)
{
	void *p = mmap(NULL, bytes ? bytes : 1, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Give back the whole pages inside [a, b): they read as zeros afterwards.
 * Fresh pages mapped over them (MAP_FIXED) is POSIX's way: madvise's
 * MADV_DONTNEED zeroes them on Linux, but macOS does not promise it.  The
 * range lies in the grown, writable part, and its mapping is the store's
 * own, so it stays one mapping.  Should the call fail, the pages are
 * zeroed where they are: only memory is lost.
 */
static void
release(char *a, char *b)
{
	uintptr_t lo = round_up((uintptr_t)a, page_size), hi = (uintptr_t)b / page_size * page_size;

	if (lo < hi && mmap((void *)lo, hi - lo, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		memset((void *)lo, 0, hi - lo);
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

/*
 * Re-lay one store from cap to newcap positions per layer, in place: the
 * units [shared, moved) of each layer (at most those it holds), for the
 * shared ones are not in it.  Each layer starts no lower than before.
 */
static void
relayout(struct kv *kv, int which, int newcap, size_t moved)
{
	size_t unit = unit_bytes(kv, which), u0 = (size_t)kv->shared[which], n;
	size_t *from = kv->base[which], *to = xmalloc(((size_t)kv->n_layers + 1) * sizeof *to);
	char *base = store(kv, which);
	int l;

	layout(kv, which, newcap, to);
	for (l = kv->n_layers - 1; l > 0 && kv->cap; l--) {
		n = units(kv, which, layer_cap(kv, l, kv->cap));
		if (moved < n)
			n = moved;
		if (to[l] != from[l] && n > u0) {
			move_up(base + (to[l] + u0) * unit, base + (from[l] + u0) * unit, (n - u0) * unit);
			kv->moved_bytes += (n - u0) * unit;
		}
	}
	memcpy(from, to, ((size_t)kv->n_layers + 1) * sizeof *to);
	free(to);
}

/* ---- making and growing ---- */

static int reserve(struct kv *kv);

int
kv_init(struct kv *kv, int n_layers, int kv_dim, int max_ctx, int prealloc)
{
	return kv_init_types(kv, n_layers, 1, kv_dim, max_ctx, prealloc, KV_F32, KV_F32);
}

int
kv_init_types(struct kv *kv, int n_layers, int n_kv_heads, int head_dim, int max_ctx,
    int prealloc, int k_type, int v_type)
{
	size_t nb;

	memset(kv, 0, sizeof *kv);
	if (n_layers <= 0 || n_layers > KV_MAX_LAYERS || n_kv_heads <= 0 || head_dim <= 0 ||
	    (long long)n_kv_heads * head_dim > KV_MAX_DIM || max_ctx <= 0 || max_ctx > KV_MAX_CTX) {
		llm_seterr("kv: bad shape %d layers x %d x %d x %d", n_layers, n_kv_heads, head_dim,
		    max_ctx);
		return -1;
	}
	if (!kv_type_name(k_type) || !kv_type_name(v_type)) {
		llm_seterr("kv: unknown cache type %d", kv_type_name(k_type) ? v_type : k_type);
		return -1;
	}
	if (!page_size)
		page_size = (size_t)sysconf(_SC_PAGESIZE);
	kv->n_layers = n_layers;
	kv->kv_dim = n_kv_heads * head_dim;
	kv->head_dim = head_dim;
	kv->max_ctx = max_ctx;
	kv->k_type = k_type;
	kv->v_type = v_type;
	kv->rot = kv_rot_of(v_type, head_dim);
	nb = ((size_t)kv->kv_dim + 31) / 32;	/* blocks of a quantized row, the last padded */
	kv->k_unit = kv_type_unit(k_type, KV_K, kv->kv_dim);
	kv->v_unit = kv_type_unit(v_type, KV_V, kv->kv_dim);
	kv->win[0].slots = kv->win[1].slots = max_ctx;
	kv->base[KV_K] = xcalloc((size_t)n_layers + 1, sizeof(size_t));
	kv->base[KV_V] = xcalloc((size_t)n_layers + 1, sizeof(size_t));
	for (int which = KV_K; which <= KV_V; which++) {
		int type = which ? v_type : k_type;
		if ((kv->ring_type[which] = kv_type_ring(type, which)) < 0)
			continue;
		kv->ring_back[which] = kv_type_back(type);
		/* mapped, not committed: only the pages of rows written become resident */
		kv->ring[which] = mmap(NULL, ring_store_bytes(kv, which), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (kv->ring[which] == MAP_FAILED) {
			kv->ring[which] = NULL;
			llm_seterr("kv: cannot map the rings: %s", strerror(errno));
			kv_free(kv);
			return -1;
		}
	}
	kv->scratch = xcalloc(nb * 32, sizeof(float));
	kv->ring_end = xcalloc((size_t)n_layers, sizeof *kv->ring_end);
	kv->prealloc = prealloc;
	if (reserve(kv) < 0) {
		kv_free(kv);
		return -1;
	}
	return 0;
}

/*
 * Reserve the stores for the most positions any layer holds (kv->top:
 * its window's slots, or max_ctx where a cache stops there) and grow to
 * the first capacity.
 */
static int
reserve(struct kv *kv)
{
	kv->top = 0;
	for (int l = 0; l < kv->n_layers; l++) {
		int slots = kv_win(kv, l)->slots;
		if (!kv->win[0].window && slots > kv->max_ctx)
			slots = kv->max_ctx;
		if (slots > kv->top)
			kv->top = slots;
	}
	kv->k_reserved = round_up(store_bytes(kv, 0, kv->top), page_size);
	kv->v_reserved = round_up(store_bytes(kv, 1, kv->top), page_size);
	if (!(kv->k = store_reserve(kv->k_reserved)) || !(kv->v = store_reserve(kv->v_reserved))) {
		llm_seterr("kv: cannot reserve %zu bytes of address space for %d positions: %s",
		    kv->k_reserved + kv->v_reserved, kv->top, strerror(errno));
		return -1;
	}
	if (kv_grow_to(kv, kv->prealloc ? kv->top : 1) < 0)
		return -1;
	if (kv->prealloc) {
		/* A dense cache, as the comparison runs want it: every page resident. */
		memset(kv->k, 0, store_bytes(kv, 0, kv->top));
		memset(kv->v, 0, store_bytes(kv, 1, kv->top));
	}
	return 0;
}

static void
unreserve(struct kv *kv)
{
	if (kv->k)
		munmap(kv->k, kv->k_reserved);
	if (kv->v)
		munmap(kv->v, kv->v_reserved);
	kv->k = kv->v = NULL;
	kv->cap = 0;
}

int
kv_set_window(struct kv *kv, int sinks, int window)
{
	if (kv->seq_len || kv->written) {
		llm_seterr("kv: a window is set on an empty cache");
		return -1;
	}
	if (kv_window_shape(kv, kv_window_group(kv->k_type, kv->v_type), kv->max_ctx, sinks,
	    window) < 0) {
		char why[256];
		snprintf(why, sizeof why, "%s", llm_err());
		if (kv_window_group(kv->k_type, kv->v_type) > 1)
			llm_seterr("%s (k %s v %s)", why, kv_type_name(kv->k_type),
			    kv_type_name(kv->v_type));
		return -1;
	}
	kv->ring_back[KV_K] = kv->ring_back[KV_V] = 0;	/* see the ring in kv.h */
	unreserve(kv);
	return reserve(kv);
}

int
kv_set_sliding(struct kv *kv, const unsigned char *slides, int window)
{
	int l, any = 0, g = kv_window_group(kv->k_type, kv->v_type);

	if (kv->seq_len || kv->written) {
		llm_seterr("kv: sliding layers are set on an empty cache");
		return -1;
	}
	for (l = 0; l < kv->n_layers; l++)
		any |= slides[l] != 0;
	if (any && kv_slide_shape(&kv->win[1], g, window) < 0) {
		char why[128];
		snprintf(why, sizeof why, "%s", llm_err());
		llm_seterr("kv: %s of k %s v %s", why, kv_type_name(kv->k_type), kv_type_name(kv->v_type));
		return -1;
	}
	free(kv->slides);
	kv->slides = NULL;
	if (any) {
		kv->slides = xmalloc((size_t)kv->n_layers);
		for (l = 0; l < kv->n_layers; l++)
			kv->slides[l] = slides[l] != 0;
		kv->ring_back[KV_K] = kv->ring_back[KV_V] = 0;	/* see the ring in kv.h */
	}
	unreserve(kv);
	return reserve(kv);
}

int
kv_fits_layers(const struct kv *kv, int n_layers, const unsigned char *slides, int window)
{
	int l;

	if (kv->n_layers != n_layers) {
		llm_seterr("a cache of %d layers for a model of %d", kv->n_layers, n_layers);
		return -1;
	}
	for (l = 0; l < n_layers; l++)
		if ((slides && slides[l]) != (kv->slides && kv->slides[l]))
			break;
	if (l < n_layers || (slides && kv->win[1].window != window)) {
		llm_seterr("the cache's sliding layers are not the model's (model_kv_init)");
		return -1;
	}
	return 0;
}

void
kv_free(struct kv *kv)
{
	unreserve(kv);
	for (int which = KV_K; which <= KV_V; which++)
		if (kv->ring[which])
			munmap(kv->ring[which], ring_store_bytes(kv, which));
	free(kv->scratch);
	kv->scratch = NULL;
	free(kv->staged[0]);
	free(kv->staged[1]);
	kv->staged[0] = kv->staged[1] = NULL;
	kv->staged_cap = kv->staged_n = 0;
	kv->ring[KV_K] = kv->ring[KV_V] = NULL;
	free(kv->ring_end);
	kv->ring_end = NULL;
	free(kv->share_at);
	kv->share_at = NULL;
	free(kv->slides);
	kv->slides = NULL;
	free(kv->base[KV_K]);
	free(kv->base[KV_V]);
	kv->base[KV_K] = kv->base[KV_V] = NULL;
	kv->shared[KV_K] = kv->shared[KV_V] = 0;
	kv->cap = kv->seq_len = kv->written = kv->groups = 0;
}

int
kv_grow_to(struct kv *kv, int npos)
{
	double t0;
	size_t rows;
	int cap;

	if (npos > kv->max_ctx && !kv->win[0].window) {
		llm_seterr("context full: position %d is past max_ctx %d",
		    npos - 1, kv->max_ctx);
		return -1;
	}
	if (npos > kv->top)
		npos = kv->top;	/* the rings take the rest */
	if (npos <= kv->cap)
		return 0;
	t0 = now_seconds();
	/* The founding rule: 64 (or max_ctx), doubling, never past max_ctx (windowed: slots). */
	cap = kv->cap ? kv->cap : KV_INITIAL_CAP;
	while (cap < npos)
		cap *= 2;
	if (cap > kv->top)
		cap = kv->top;
	if (mprotect(kv->k, round_up(store_bytes(kv, 0, cap), page_size), PROT_READ | PROT_WRITE) < 0 ||
	    mprotect(kv->v, round_up(store_bytes(kv, 1, cap), page_size), PROT_READ | PROT_WRITE) < 0) {
		llm_seterr("kv: out of memory growing to %d positions", cap);
		return -1;
	}
	rows = (size_t)(kv->seq_len > kv->written ? kv->seq_len : kv->written);
	if (rows > (size_t)kv->cap)
		rows = (size_t)kv->cap;
	relayout(kv, 0, cap, grouped(kv, 0) ? (size_t)kv->groups : rows);
	relayout(kv, 1, cap, rows);
	kv->cap = cap;
	kv->grow_seconds += now_seconds() - t0;
	return 0;
}

int
kv_reserve(struct kv *kv, int n)
{
	return kv_grow_to(kv, n < kv->max_ctx ? n : kv->max_ctx);
}

/* ---- writing ---- */

float *
kv_k_write(struct kv *kv, int layer, int pos)
{
	if (kv->k_type != KV_F32) {
		llm_seterr("kv: the keys are %s, not f32", kv_type_name(kv->k_type));
		return NULL;
	}
	if (kv_grow_to(kv, pos + 1) < 0)
		return NULL;
	if (pos >= kv->written)
		kv->written = pos + 1;
	return kv_unit(kv, layer, KV_K, kv_slot(kv, layer, pos));
}

float *
kv_v_write(struct kv *kv, int layer, int pos)
{
	if (kv->v_type != KV_F32) {
		llm_seterr("kv: the values are %s, not f32", kv_type_name(kv->v_type));
		return NULL;
	}
	if (kv_grow_to(kv, pos + 1) < 0)
		return NULL;
	if (pos >= kv->written)
		kv->written = pos + 1;
	return kv_unit(kv, layer, KV_V, kv_slot(kv, layer, pos));
}

/* Quantize group g of layer's keys, channel by channel, from the ring (f16 or q8_0 rows). */
static void
encode_group(struct kv *kv, int layer, int g)
{
	void *dst = kv_unit(kv, layer, KV_K, kv_slot(kv, layer, g * KV_GROUP) / KV_GROUP);
	float col[KV_GROUP];
	int c, j;

	for (c = 0; c < kv->kv_dim; c++) {
		for (j = 0; j < KV_GROUP; j++)
			kv_ring_span(kv, layer, KV_K, g * KV_GROUP + j, c, 1, &col[j]);
		if (kv->k_type == KV_Q8_0)
			quant_quantize_q8_0(col, (struct block_q8_0 *)dst + c, 1);
		else
			quant_quantize_q4_1(col, (struct block_q4_1 *)dst + c, 1);
	}
}

static int
put(struct kv *kv, int which, int layer, int pos, int n, const float *rows, size_t ld)
{
	int type = which ? kv->v_type : kv->k_type, i, g;
	int rotated = which && kv->rot > 0;

	if (kv_grow_to(kv, pos + n) < 0)
		return -1;
	/*
	 * The ring must hold the earlier rows pos's queries read, and a
	 * batch written to it now must not overwrite them.
	 */
	if (!kv_ring_holds(kv, layer, which, kv_ring_from(kv, which, pos), pos) ||
	    (kv->ring[which] && n > kv_put_max(kv, pos))) {
		llm_seterr("kv: a %s cache cannot rewrite position %d after %d", kv_type_name(type),
		    pos, kv->written);
		return -1;
	}
	if (!grouped(kv, which))
		for (i = 0; i < n; i++)
			kv_encode_row(type, kv->kv_dim, rotated ? kv->rot : 0, rows + (size_t)i * ld,
			    kv_unit(kv, layer, which, kv_slot(kv, layer, pos + i)), kv->scratch);
	if (kv->ring[which]) {
		for (i = 0; i < n; i++)
			kv_encode_row(kv->ring_type[which], kv->kv_dim, rotated ? kv->rot : 0,
			    rows + (size_t)i * ld, kv_ring_row(kv, layer, which, pos + i), kv->scratch);
		if (pos + n > kv->ring_end[layer])
			kv->ring_end[layer] = pos + n;
	}
	if (grouped(kv, which)) {
		/* The groups this write completes are quantized now, before attention reads them. */
		for (g = pos / KV_GROUP; g < (pos + n) / KV_GROUP; g++)
			encode_group(kv, layer, g);
		if (layer == kv->n_layers - 1)
			kv->groups = (pos + n) / KV_GROUP;
	}
	if (pos + n > kv->written)
		kv->written = pos + n;
	return 0;
}

int
kv_begin(struct kv *kv, int pos, int n)
{
	if (!kv->win[0].window && pos + n > kv->max_ctx) {
		llm_seterr("context full: position %d is past max_ctx %d", pos + n - 1, kv->max_ctx);
		return -1;
	}
	if (pos < 0 || pos > kv->seq_len || n < 1 || pos > INT_MAX - n) {
		llm_seterr("forward: bad position %d or batch %d", pos, n);
		return -1;
	}
	return kv_grow_to(kv, pos + n);
}

int
kv_attend_step(const struct kv *kv, int layer, int pos, int n)
{
	const struct kv_win *w = kv_win(kv, layer);
	int step = kv_put_max(kv, pos) < n ? kv_put_max(kv, pos) : n;

	/*
	 * A batch that wraps a window's ring must not overwrite the rows its
	 * first token reads, the newest window.  In row stores of f32 a
	 * position y overwrites y - ring_slots alone, so a step takes
	 * ring_slots - window + 1 positions (the rows its later tokens
	 * overwrite are ones its earlier tokens no longer see, masked as
	 * evicted); a group of keys completed by a later token would
	 * overwrite a whole group of slots, so caches in groups go one
	 * token at a time.  A store with a ring takes kv_put_max at once.
	 */
	if (w->window && pos + n > w->slots) {
		int most = kv_window_group(kv->k_type, kv->v_type) == 1 ? w->ring_slots - w->window + 1 : 1;
		if (step > most)
			step = most;
	}
	return step;
}

/*
 * Whether a batch's rows of K or V go straight to the store: an f32 store
 * that takes the batch whole, in contiguous slots (the founding design's
 * write accessor, nothing copied).  Other types' rows wait in the staging rows until
 * kv_attend() puts them in their type a step at a time.
 */
static int
in_place(const struct kv *kv, int which, int layer, int pos, int n)
{
	/* ... and whose slots are contiguous: the batch does not wrap a window's ring */
	return (which ? kv->v_type : kv->k_type) == KV_F32 && kv_attend_step(kv, layer, pos, n) == n &&
	    kv_slot(kv, layer, pos + n - 1) - kv_slot(kv, layer, pos) == n - 1;
}

static int
bad_append(const struct kv *kv, int layer, int pos, int n)
{
	if (layer >= 0 && layer < kv->n_layers && pos >= 0 && n >= 1 && pos <= INT_MAX - n)
		return 0;
	llm_seterr("kv: bad append of %d positions at %d to layer %d", n, pos, layer);
	return 1;
}

/*
 * Map the pages of rows about to be written, [a, a + n), in one call
 * where the system has one (Linux 5.14's MADV_POPULATE_WRITE): a prompt's
 * rows fault a page at a time otherwise, each fault a trip through the
 * kernel (about 6 us in a virtual machine; a batch of 16 prompts ran 1.08x
 * with them mapped at once).  They are the pages the write makes resident
 * anyway, so the resident memory is the same.  Elsewhere, or if the call
 * fails, they come as they are written.
 */
static void
populate(char *a, size_t n)
{
#ifdef MADV_POPULATE_WRITE
	uintptr_t lo = (uintptr_t)a / page_size * page_size, hi = round_up((uintptr_t)a + n, page_size);

	if (hi - lo > page_size)
		(void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
#else
	(void)a, (void)n;
#endif
}

float *
kv_append_rows(struct kv *kv, int layer, int which, int pos, int n)
{
	if (bad_append(kv, layer, pos, n))
		return NULL;
	if (in_place(kv, which, layer, pos, n)) {
		if (kv_grow_to(kv, pos + n) < 0)
			return NULL;
		char *rows = (char *)kv_unit(kv, layer, which, kv_slot(kv, layer, pos));
		if (n > 1)
			populate(rows, (size_t)n * unit_bytes(kv, which));
		return (float *)rows;
	}
	if (n > kv->staged_cap) {
		for (int w = KV_K; w <= KV_V; w++) {
			free(kv->staged[w]);
			kv->staged[w] = xmalloc((size_t)n * kv->kv_dim * sizeof(float));
		}
		kv->staged_cap = n;
	}
	return kv->staged[which];
}

int
kv_append(struct kv *kv, int layer, int pos, int n)
{
	if (bad_append(kv, layer, pos, n))
		return -1;
	kv->staged_layer = layer, kv->staged_pos = pos, kv->staged_n = n;
	/* rows written in place are in the store already */
	if ((in_place(kv, KV_K, layer, pos, n) || in_place(kv, KV_V, layer, pos, n)) &&
	    pos + n > kv->written)
		kv->written = pos + n;
	return 0;
}

int
kv_appended(const struct kv *kv, int layer, int pos, int n)
{
	return kv->staged_layer == layer && kv->staged_pos == pos && kv->staged_n == n;
}

int
kv_put_appended(struct kv *kv, int layer, int pos, int n)
{
	size_t off = (size_t)(pos - kv->staged_pos) * kv->kv_dim;

	for (int which = KV_K; which <= KV_V; which++)
		if (!in_place(kv, which, layer, kv->staged_pos, kv->staged_n) &&
		    put(kv, which, layer, pos, n, kv->staged[which] + off, (size_t)kv->kv_dim) < 0)
			return -1;
	return 0;
}

int
kv_put_k(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld)
{
	return put(kv, KV_K, layer, pos, n, rows, ld);
}

int
kv_put_v(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld)
{
	return put(kv, KV_V, layer, pos, n, rows, ld);
}

int
kv_ring_holds(const struct kv *kv, int layer, int which, int p0, int p1)
{
	if (!kv->ring[which] || p0 == p1)
		return 1;
	/* written with the store: the layer's newest rows */
	return p0 >= kv->ring_end[layer] - kv_ring_rows(kv, which);
}

/* ---- reading ---- */

void
kv_ring_span(const struct kv *kv, int layer, int which, int pos, int c0, int n, float *out)
{
	kv_decode_span(kv->ring_type[which], kv_ring_row(kv, layer, which, pos), c0, n, out);
}

void
kv_row(const struct kv *kv, int layer, int which, int pos, float *out)
{
	int type = which ? kv->v_type : kv->k_type;

	if (which == KV_K) {
		kv_key(kv, layer, pos, 0, kv->kv_dim, out);
		return;
	}
	kv_decode_span(type, kv_unit(kv, layer, which, kv_slot(kv, layer, pos)), 0, kv->kv_dim, out);
	if (kv->rot > 0)
		quant_hadamard(out, (size_t)kv->kv_dim, kv->rot);
}

void
kv_key(const struct kv *kv, int layer, int pos, int c0, int n, float *out)
{
	int s = kv_slot(kv, layer, pos);

	/*
	 * A key is in its group once this layer's rows have completed the
	 * group (ring_end), not the last layer's (kv->groups): within a pass
	 * the earlier layers are ahead of the last, and a batch read the
	 * sinks that attention_window scores again from the ring, where a
	 * token alone read them from their group.
	 */
	if (!grouped(kv, KV_K))
		kv_decode_span(kv->k_type, kv_unit(kv, layer, KV_K, s), c0, n, out);
	else if (pos / KV_GROUP < kv->ring_end[layer] / KV_GROUP)
		kv_decode_group(kv->k_type, kv_unit(kv, layer, KV_K, s / KV_GROUP), s % KV_GROUP, c0, n,
		    out);
	else
		kv_ring_span(kv, layer, KV_K, pos, c0, n, out);
}

/* ---- the rest of the founding interface ---- */

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
	kv->groups = 0;
	memset(kv->ring_end, 0, (size_t)kv->n_layers * sizeof *kv->ring_end);
	kv->shared[KV_K] = kv->shared[KV_V] = 0;	/* the shared rows are let go */
}

int
kv_restore(struct kv *kv, int n)
{
	if (kv_set_seq_len(kv, n) < 0)
		return -1;
	kv->written = n;
	for (int l = 0; l < kv->n_layers; l++)
		kv->ring_end[l] = n;
	kv->groups = kv_grouped(kv) ? n / KV_GROUP : 0;
	return 0;
}

double
kv_bytes_per_pos(const struct kv *kv)
{
	double k = grouped(kv, 0) ? (double)kv->k_unit / KV_GROUP : (double)kv->k_unit;

	return (k + (double)kv->v_unit) * kv->n_layers;
}

/*
 * The rings' footprint: the rows of positions below cap are all that can
 * have been written while cap is under a ring's rows (a window's
 * positions go on past its cap, round the whole ring).
 */
static size_t
ring_bytes(const struct kv *kv)
{
	size_t n = 0, rows;

	for (int which = KV_K; which <= KV_V; which++) {
		rows = (size_t)kv_ring_rows(kv, which);
		if (kv->cap < kv_ring_rows(kv, which) && !kv_windowed(kv))
			rows = (size_t)kv->cap;
		if (kv->ring[which])
			n += (size_t)kv->n_layers * rows * kv_ring_row_bytes(kv, which);
	}
	return n;
}

size_t
kv_bytes(const struct kv *kv)
{
	return store_bytes(kv, KV_K, kv->cap) + store_bytes(kv, KV_V, kv->cap) + ring_bytes(kv) -
	    kv_shared_bytes(kv);
}

/*
 * The bytes of the whole pages of [p, p + len) that are resident: mincore,
 * Linux's, macOS's and the BSDs' (not POSIX's; 0 where it fails).  Its
 * vector is unsigned char on Linux, char on macOS: passed as void *.
 */
static size_t
resident(const void *p, size_t len)
{
	size_t n = 0, i, pages = round_up(len, page_size) / page_size;
	unsigned char *vec = xmalloc(pages ? pages : 1);

	if (pages && mincore((void *)p, pages * page_size, (void *)vec) == 0)
		for (i = 0; i < pages; i++)
			n += (size_t)(vec[i] & 1) * page_size;
	free(vec);
	return n;
}

size_t
kv_resident_bytes(const struct kv *kv)
{
	size_t n = 0;
	int which;

	if (!kv->k)
		return 0;
	for (which = KV_K; which <= KV_V; which++) {
		n += resident(store(kv, which), store_bytes(kv, which, kv->cap));
		if (kv->ring[which])
			n += resident(kv->ring[which], ring_store_bytes(kv, which));
	}
	return n;
}

int
kv_rows(const struct kv *kv, int layer, int n)
{
	return kv_win_rows(kv_win(kv, layer), n);
}
