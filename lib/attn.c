/*
 * attn.c: attention over the KV cache, the cache's own code.  The model
 * gives it queries after RoPE and takes back each head's weighted sum of
 * values; which rows a query reads, in which copy (a store or its ring),
 * the window's sinks and the rotation of
 * quantized values are decided here and in kv.c, never in the forward
 * pass.
 *
 * Every score, weight and output is one chain of operations in a fixed
 * order, whatever other queries run with it and whichever thread runs
 * it: a batch, one token at a time and a resumed run agree bit for bit.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kvpriv.h"
#include "attn.h"
#include "gguf.h"
#include "kernels.h"
#include "quant.h"
#include "util.h"

void
attn_init(struct attn *a, int n_heads, int n_kv_heads, int head_dim, const struct rope *rope,
    struct pool *pool)
{
	memset(a, 0, sizeof *a);
	a->n_heads = n_heads;
	a->n_kv_heads = n_kv_heads;
	a->head_dim = head_dim;
	a->rope = rope;
	a->scale = 1.0f / sqrtf((float)head_dim);
	a->pool = pool;
}

void
attn_free(struct attn *a)
{
	free(a->att);
	free(a->tile);
	a->att = a->tile = NULL;
	a->att_cap = a->att_threads = 0;
}

struct attn_job {
	struct attn *a;
	const struct kv *kv;
	int layer, pos, n;	/* tokens at positions pos..pos+n-1 */
	int row;		/* the first token's row in the batch */
	const float *q;		/* the batch's queries, n_heads * head_dim floats a token */
	float *out;		/* the batch's outputs, laid out as q */
	float *keys;		/* a thread's: the q8_0 ring's keys a query reads, widened (tile_keys) */
	atomic_int *next;	/* a batch's next (tile, KV head) to claim */
};

/* Query head h's sink logit, -INFINITY for none */
static float
sink_of(const struct attn *a, int h)
{
	return a->sinks ? a->sinks[h] : -INFINITY;
}

/* Tokens whose queries share one pass over the cache: each cached row is read once per tile. */
#define ATTN_TILE 16

/* Query heads per KV head (GQA). */
static int
group_of(const struct attn *a)
{
	return a->n_heads / a->n_kv_heads;
}

/* A thread's part of a->tile: a tile's queries, its outputs, then KV_RING_MAX keys of a head. */
static size_t
tile_floats(const struct attn *a)
{
	return (size_t)(2 * ATTN_TILE * group_of(a) + KV_RING_MAX) * a->head_dim;
}

/* Where thread ith's part of a->tile keeps the widened keys. */
static float *
tile_keys(const struct attn *a, int ith)
{
	size_t part = tile_floats(a);

	return a->tile + (size_t)ith * part + part - (size_t)KV_RING_MAX * a->head_dim;
}

/*
 * Scores of nq queries (head_dim floats each, contiguous) against the
 * store's key rows [u0, u1) of KV head kvh, or for grouped keys its
 * groups [u0, u1), into att (ld apart) at their slots: a contiguous run
 * of units at a time (shared ones, then the store's own: kv_units).
 */
static void
key_scores(const struct attn *a, const struct kv *kv, int layer, int kvh, int u0, int u1,
    const float *q, int nq, float *att, size_t ld)
{
	size_t hd = (size_t)a->head_dim, col = (size_t)kvh * hd * (kv->k_unit / kv->kv_dim);
	int end;

	for (; u0 < u1; u0 = end) {
		end = u1;
		const char *keys = kv_units(kv, layer, KV_K, u0, &end) + col;
		if (!kv_grouped(kv))
			kernels_gemm(kv->k_type == KV_F16 ? GGML_F16 : GGML_F32, keys, kv->k_unit, 0,
			    end - u0, (int)hd, q, hd, nq, att + u0, ld);
		else
			kernels_group_scores(kv->k_type == KV_Q4_0, keys, kv->k_unit, end - u0, (int)hd,
			    q, hd, nq, att + (size_t)u0 * KV_GROUP, ld);
	}
}

/* Grouped keys: the complete groups a query at pos reads; once a window's ring is full, all. */
static int
complete_groups(const struct kv *kv, int layer, int pos)
{
	int slots = kv_win(kv, layer)->slots;

	return pos / KV_GROUP < slots / KV_GROUP ? pos / KV_GROUP : slots / KV_GROUP;
}

/*
 * Whether keys of a q8_0 ring are read in place: a head of whole blocks.
 * Others (heads of 8, say) are widened to f32 first.
 */
static int
keys_in_place(const struct kv *kv)
{
	return kv->head_dim % 32 == 0;
}

/* The ggml type of the rows ring_rows() gives for keys. */
static uint32_t
ring_row_type(const struct kv *kv, int which)
{
	switch (kv->ring_type[which]) {
	case KV_F16: return GGML_F16;
	case KV_Q8_0: return keys_in_place(kv) ? GGML_Q8_0 : GGML_F32;
	}
	return GGML_F32;
}

/*
 * The ring rows of K or V from position p on, KV head kvh's part, and
 * how far apart (*ld).  Keys of a q8_0 ring whose heads are not whole
 * blocks come widened to f32 in job->keys; values of one are the ring's
 * whole rows (the caller picks the head's elements).  *end: where they
 * stop being contiguous (where the ring wraps), at most end.
 */
static const char *
ring_rows(const struct attn_job *job, int which, int kvh, int p, int *end, size_t *ld)
{
	const struct kv *kv = job->kv;
	size_t dim = (size_t)kv->kv_dim, col = (size_t)kvh * job->a->head_dim;
	int hd = job->a->head_dim, rows = kv_ring_rows(kv, which), wrap = (p / rows + 1) * rows;

	if (*end > wrap)
		*end = wrap;
	*ld = kv_ring_row_bytes(kv, which);
	if (kv->ring_type[which] != KV_Q8_0)
		return (const char *)kv_ring_row(kv, job->layer, which, p) + col * (*ld / dim);
	if (which == KV_V || keys_in_place(kv))
		return (const char *)kv_ring_row(kv, job->layer, which, p) +
		    (which == KV_V ? 0 : col / 32 * sizeof(struct block_q8_0));
	for (int r = p; r < *end; r++)
		kv_ring_span(kv, job->layer, KV_K, r, (int)col, hd, job->keys + (size_t)(r - p) * hd);
	*ld = (size_t)hd * 4;
	return (const char *)job->keys;
}

/*
 * Keys with a ring (grouped, or f16): scores of heads queries (head_dim
 * apart) at pos against the ring rows it reads (those of its own group,
 * or for q4_0 keys from KV_BACK positions before it), into att (att_cap
 * apart) at their slots, replacing the store's.  A group's rows never
 * wrap in the window's ring, which is whole groups long; in a ring that
 * has wrapped they take the slots of an older group, so they are scored
 * after the store.
 */
static void
ring_scores(const struct attn_job *job, int kvh, int pos, const float *q, int heads, float *att)
{
	const struct kv *kv = job->kv;
	int hd = job->a->head_dim, r0 = kv_ring_from(kv, KV_K, pos), p, end;
	size_t ld;
	const char *rows;

	for (p = r0; p <= pos; p = end) {
		end = pos + 1;
		rows = ring_rows(job, KV_K, kvh, p, &end, &ld);
		kernels_gemm(ring_row_type(kv, KV_K), rows, ld, 0, end - p, hd, q, (size_t)hd, heads,
		    att + kv_slot(kv, job->layer, r0) + (p - r0), (size_t)job->a->att_cap);
	}
}

/*
 * Scores of nq queries (head_dim floats each, contiguous, group per
 * token) of tokens at positions first..last against the cached slots
 * [0, kv_seen(last)): row stores as one matmul over their rows (f32 or
 * f16), grouped keys from their groups, then for each token the ring
 * rows of its own group, if the keys have a ring.  Every score is
 * computed as it would be alone.
 */
static void
attention_scores(const struct attn_job *job, int kvh, int first, int last, const float *q,
    int group, float *att)
{
	const struct kv *kv = job->kv;
	size_t ld = (size_t)job->a->att_cap, hd = (size_t)job->a->head_dim;
	int nq = (last - first + 1) * group, t;

	key_scores(job->a, kv, job->layer, kvh, 0,
	    kv_grouped(kv) ? complete_groups(kv, job->layer, last) : kv_seen(kv, job->layer, last), q,
	    nq, att, ld);
	for (t = first; kv->ring[KV_K] && t <= last; t++)
		ring_scores(job, kvh, t, q + (size_t)(t - first) * group * hd, group,
		    att + (size_t)(t - first) * group * ld);
}

/*
 * A windowed cache that has evicted e positions before a query at pos:
 * the slots of evicted positions that still hold rows score -inf, and
 * the sinks are scored again.  Keys are stored rotated by their own
 * position, and RoPE makes a score depend on the distance alone, so the
 * window's keys are already right for the query rotated by pos; the
 * sinks must be e positions nearer, as if the window had closed up
 * behind them, so they take the query rotated back by e.
 */
static void
attention_window(const struct attn *a, const struct kv *kv, int layer, int kvh, int pos,
    const float *q, int group, float *att, float *scratch)
{
	const struct kv_win *w = kv_win(kv, layer);
	size_t ld = (size_t)a->att_cap;
	int hd = a->head_dim, e = kv_evicted(kv, layer, pos), lo, p, h, d;
	/* scratch: the rotated queries, a key, and the angles (group + 2 heads) */
	float *qs = scratch, *key = scratch + (size_t)group * hd, *cs = key + hd, sum;

	if (e == 0)
		return;
	/*
	 * Evicted positions [sinks, sinks + e) still held: those of the sink
	 * slots' round-up, and the ring's oldest, from pos - ring_slots + 1.
	 */
	lo = pos - w->ring_slots + 1 > w->sink_slots ? pos - w->ring_slots + 1 : w->sink_slots;
	for (p = w->sinks; p < w->sinks + e; p++) {
		if (p >= w->sink_slots && p < lo) {
			p = lo - 1;	/* overwritten: skip to the ring's oldest */
			continue;
		}
		for (h = 0; h < group; h++)
			att[h * ld + kv_slot(kv, layer, p)] = -INFINITY;
	}
	memcpy(qs, q, (size_t)group * hd * sizeof *qs);
	rope_angles(a->rope, -e, cs);
	rope_rotate(a->rope, qs, group, cs);
	for (p = 0; p < w->sinks; p++) {
		kv_key(kv, layer, p, kvh * hd, hd, key);
		for (h = 0; h < group; h++) {
			for (sum = 0, d = 0; d < hd; d++)
				sum += qs[h * hd + d] * key[d];
			att[h * ld + p] = sum;
		}
	}
}

/*
 * One stretch of the value chains of queries [a, b) of att (att_cap
 * apart): slots [s, e), dimensions [d0, d0 + w) of KV head kvh, into out
 * (ldo apart).  From the store, or if ring from the ring rows from
 * position r0 on, which fill the slots from kv_slot(r0) on.
 * acc: carry on chains begun in out; an empty stretch does nothing.
 */
static void
value_span(const struct attn_job *job, int kvh, int d0, int w, const float *att, int a, int b,
    int s, int e, int ring, int r0, float *out, size_t ldo, int acc)
{
	const struct kv *kv = job->kv;
	size_t ld = (size_t)job->a->att_cap, dim = (size_t)kv->kv_dim, lr;
	int col = kvh * job->a->head_dim + d0, layer = job->layer;

	if (e <= s)
		return;
	att += (size_t)a * ld;
	out += (size_t)a * ldo;
	while (ring && s < e) {	/* f32 rows of f16 values, or q8_0 rows of q4_0 ones */
		int p = r0 + s - kv_slot(kv, layer, r0), end = p + e - s;
		const char *rows = ring_rows(job, KV_V, kvh, p, &end, &lr);
		if (kv->ring_type[KV_V] == KV_Q8_0)
			kernels_row_values(GGML_Q8_0, end - p, b - a, att + s, ld, rows, lr, col, w,
			    out, ldo, acc);
		else
			kernels_attn_values(end - p, b - a, att + s, ld, (const float *)rows + d0, lr / 4,
			    w, out, ldo, acc);
		s += end - p;
		acc = 1;
	}
	if (ring)
		return;
	/* a contiguous run of the store at a time, the chains carried on */
	for (int end; s < e; s = end, acc = 1) {
		end = e;
		const char *rows = kv_units(kv, layer, KV_V, s, &end);
		if (kv->v_type == KV_F32)
			kernels_attn_values(end - s, b - a, att + s, ld, (const float *)rows + col, dim,
			    w, out, ldo, acc);
		else
			kernels_row_values(kv->v_type == KV_F16 ? GGML_F16 :
			    kv->v_type == KV_Q8_0 ? GGML_Q8_0 : GGML_Q4_0, end - s, b - a, att + s, ld,
			    rows, kv->v_unit, col, w, out, ldo, acc);
	}
}

/*
 * Values with a ring: after the store's slots before the ring rows
 * (shared by the queries [a, b), all of one group), the ring rows each
 * query reads, all queries to the first one's last position,
 * then those that go further carry on; then, in a window's ring that has
 * wrapped, each query's store slots after them.  acc: as value_span.
 */
static void
ring_values(const struct attn_job *job, int kvh, int d0, int w, int first, int group,
    const float *att, int a, int b, float *out, size_t ldo)
{
	const struct kv *kv = job->kv;
	int r0 = kv_ring_from(kv, KV_V, first + a / group), s0 = kv_slot(kv, job->layer, r0);
	int done = s0, h, end;

	value_span(job, kvh, d0, w, att, a, b, 0, s0, 0, r0, out, ldo, 0);
	for (h = a; h < b; ) {
		end = s0 + first + h / group - r0 + 1;
		value_span(job, kvh, d0, w, att, h, b, done, end, 1, r0, out, ldo, done > 0);
		done = end;
		while (h < b && s0 + first + h / group - r0 + 1 == end)
			h++;
	}
	for (h = a; h < b; h++) {
		int pos = first + h / group, seen = kv_seen(kv, job->layer, pos);
		end = s0 + pos - r0 + 1;
		if (end < seen)
			value_span(job, kvh, d0, w, att, h, h + 1, end, seen, 0, r0, out, ldo, 1);
	}
}

/*
 * The weighted sum of the values for queries [a, b) of the tile (token
 * first + (h / group) for query h), into out (head_dim apart).  Each
 * output is one chain over slots in order: all queries run to the first
 * one's last position, then those that go further carry on.  Values
 * with a ring run one group of positions at a time (ring_values).
 */
static void
attention_values(const struct attn_job *job, int kvh, int first, int group, const float *att,
    int a, int b, float *out)
{
	const struct kv *kv = job->kv;
	size_t hd = (size_t)job->a->head_dim;
	int done = 0, h = a, end;

	while (kv->ring[KV_V] && h < b) {
		int g = (first + h / group) / KV_GROUP, h1 = h;
		while (h1 < b && (first + h1 / group) / KV_GROUP == g)
			h1++;
		ring_values(job, kvh, 0, (int)hd, first, group, att, h, h1, out, hd);
		h = h1;
	}
	while (h < b) {
		end = kv_seen(kv, job->layer, first + h / group);	/* the slots query h sees */
		value_span(job, kvh, 0, (int)hd, att, h, b, done, end, 0, 0, out, hd, done > 0);
		done = end;
		while (h < b && kv_seen(kv, job->layer, first + h / group) == end)
			h++;
	}
}

static void
attention_worker(void *arg, int ith, int nth)
{
	struct attn_job own = *(const struct attn_job *)arg;
	const struct attn_job *job = &own;
	struct attn *a = job->a;
	const struct kv *kv = job->kv;
	int group = group_of(a);	/* query heads per KV head */
	int n_kv_heads = a->n_kv_heads;
	int q_dim = a->n_heads * a->head_dim, hd = a->head_dim;
	int tiles = (job->n + ATTN_TILE - 1) / ATTN_TILE;
	float scale = a->scale;
	float *att = a->att + (size_t)ith * ATTN_TILE * group * a->att_cap;
	float *qt = a->tile + (size_t)ith * tile_floats(a), *ot = qt + ATTN_TILE * group * hd;
	int work, i, g, nq;

	own.keys = tile_keys(a, ith);

	/*
	 * Tiles and KV heads claimed in turn, the last tiles (the most
	 * positions) first: shared out by turns, a thread slowed by a
	 * neighbour held the other up at every layer.
	 */
	(void)nth;
	while ((work = atomic_fetch_add_explicit(job->next, 1, memory_order_relaxed)) <
	    tiles * n_kv_heads) {
		int kvh = work % n_kv_heads, i0 = (tiles - 1 - work / n_kv_heads) * ATTN_TILE;
		int i1 = i0 + ATTN_TILE < job->n ? i0 + ATTN_TILE : job->n;

		/* the tile's queries side by side: token by token, the heads of this KV head */
		for (i = i0; i < i1; i++)
			memcpy(qt + (size_t)(i - i0) * group * hd,
			    job->q + (size_t)(job->row + i) * q_dim + (size_t)kvh * group * hd,
			    (size_t)group * hd * 4);
		nq = (i1 - i0) * group;
		attention_scores(job, kvh, job->pos + i0, job->pos + i1 - 1, qt, group, att);
		for (i = i0; i < i1; i++)
			attention_window(a, kv, job->layer, kvh, job->pos + i,
			    qt + (size_t)(i - i0) * group * hd, group,
			    att + (size_t)(i - i0) * group * a->att_cap, ot);	/* ot: free till the values */
		for (g = 0; g < nq; g++)
			kernels_softmax(att + (size_t)g * a->att_cap,
			    kv_seen(job->kv, job->layer, job->pos + i0 + g / group), scale,
			    sink_of(a, kvh * group + g % group));
		attention_values(job, kvh, job->pos + i0, group, att, 0, nq, ot);
		for (i = i0; i < i1; i++)
			memcpy(job->out + (size_t)(job->row + i) * q_dim + (size_t)kvh * group * hd,
			    ot + (size_t)(i - i0) * group * hd, (size_t)group * hd * 4);
	}
}

/*
 * One token over a long cache, in three balanced steps: scores by KV head
 * and slice of positions (of groups, for grouped keys); the f16 rows,
 * window and softmax by query head; values by KV head and block of 32
 * dimensions.  attention_worker gives each thread whole KV heads, so with
 * 3 of them on 2 threads one thread idles a third of the time.  Each
 * score, weight and output is computed with the same operations as there
 * (kernels compute an output alike whatever its company), so the bits are
 * the same; only the two extra hand-offs differ, which pay from SPLIT_MIN
 * cached floats on.
 */
#define SPLIT_MIN (512 * 192)	/* cached floats a layer's keys take: SmolLM2's 512 positions */

static void
split_scores(void *arg, int ith, int nth)
{
	const struct attn_job *job = arg;
	const struct attn *a = job->a;
	const struct kv *kv = job->kv;
	int group = group_of(a), hd = a->head_dim, w;
	int n_kv_heads = a->n_kv_heads, seen = kv_seen(kv, job->layer, job->pos);

	for (w = ith; w < n_kv_heads * nth; w += nth) {
		int kvh = w / nth, piece = w % nth;
		const float *q = job->q + (size_t)job->row * a->n_heads * hd + (size_t)kvh * group * hd;
		float *att = a->att + (size_t)kvh * group * a->att_cap;
		/* a slice of the rows, or of the complete groups (split_softmax scores the f16 rows) */
		int units = kv_grouped(kv) ? complete_groups(kv, job->layer, job->pos) : seen;
		key_scores(a, kv, job->layer, kvh, (int)((long long)units * piece / nth),
		    (int)((long long)units * (piece + 1) / nth), q, group, att, (size_t)a->att_cap);
	}
}

static void
split_softmax(void *arg, int ith, int nth)
{
	struct attn_job own = *(const struct attn_job *)arg;
	const struct attn_job *job = &own;
	struct attn *a = job->a;
	const struct kv *kv = job->kv;
	int group = group_of(a), hd = a->head_dim, h;
	float *scratch = a->tile + (size_t)ith * tile_floats(a);

	own.keys = tile_keys(a, ith);

	for (h = ith; h < a->n_heads; h += nth) {
		const float *q = job->q + (size_t)job->row * a->n_heads * hd + (size_t)h * hd;
		float *att = a->att + (size_t)h * a->att_cap;
		if (kv->ring[KV_K])	/* after the store, which split_scores has done */
			ring_scores(job, h / group, job->pos, q, 1, att);
		attention_window(a, kv, job->layer, h / group, job->pos, q, 1, att, scratch);
		kernels_softmax(att, kv_seen(job->kv, job->layer, job->pos), a->scale, sink_of(a, h));
	}
}

static void
split_values(void *arg, int ith, int nth)
{
	const struct attn_job *job = arg;
	const struct attn *a = job->a;
	const struct kv *kv = job->kv;
	int group = group_of(a), hd = a->head_dim, w;
	int nb = hd % 32 == 0 ? hd / 32 : 1, bw = hd / nb, seen = kv_seen(kv, job->layer, job->pos);
	int n_kv_heads = a->n_kv_heads;

	for (w = ith; w < n_kv_heads * nb; w += nth) {
		int kvh = w / nb, d0 = w % nb * bw;
		const float *att = a->att + (size_t)kvh * group * a->att_cap;
		float *out = job->out + (size_t)job->row * a->n_heads * hd + (size_t)kvh * group * hd + d0;
		if (kv->ring[KV_V])
			ring_values(job, kvh, d0, bw, job->pos, group, att, 0, group, out, (size_t)hd);
		else
			value_span(job, kvh, d0, bw, att, 0, group, 0, seen, 0, 0, out, (size_t)hd, 0);
	}
}

/* The attention of the tokens of one job, on the pool. */
static void
attention(struct attn_job *job)
{
	struct attn *a = job->a;
	const struct kv *kv = job->kv;
	int nth = pool_threads(a->pool), n_kv_heads = a->n_kv_heads;
	long long seen = kv_seen(kv, job->layer, job->pos);
	atomic_int next;

	/* the split needs a row of att per query head */
	if (job->n == 1 && nth > 1 && seen * kv->kv_dim >= SPLIT_MIN && n_kv_heads <= nth * ATTN_TILE) {
		pool_run(a->pool, split_scores, job);
		pool_run(a->pool, split_softmax, job);
		pool_run(a->pool, split_values, job);
		return;
	}
	atomic_init(&next, 0);
	job->next = &next;
	pool_run_work(a->pool, attention_worker, job, job->n * seen * a->n_heads * a->head_dim);
}

/* Room in the scratch for queries that see up to seen slots, on every thread. */
static void
reserve(struct attn *a, int seen)
{
	int nth = pool_threads(a->pool), cap = a->att_cap ? a->att_cap : 64;

	if (seen <= a->att_cap && nth <= a->att_threads)
		return;
	while (cap < seen)
		cap *= 2;
	free(a->att);
	free(a->tile);
	a->att = xmalloc((size_t)nth * ATTN_TILE * group_of(a) * cap * sizeof(float));
	a->tile = xmalloc((size_t)nth * tile_floats(a) * sizeof(float));
	a->att_cap = cap;
	a->att_threads = nth;
}

int
kv_attend(struct kv *kv, struct attn *a, int layer, int pos, int n, const float *q, float *out)
{
	int i, b, q_dim = a->n_heads * a->head_dim;
	struct attn_job job;

	if (kv->kv_dim != a->n_kv_heads * a->head_dim) {
		llm_seterr("kv: rows of %d do not hold %d heads of %d", kv->kv_dim, a->n_kv_heads,
		    a->head_dim);
		return -1;
	}
	if (!kv_appended(kv, layer, pos, n)) {
		llm_seterr("kv: layer %d, positions %d to %d: attended before they were appended",
		    layer, pos, pos + n - 1);
		return -1;
	}
	reserve(a, kv_seen(kv, layer, pos + n - 1));
	/*
	 * The rows go in and are attended to a step at a time where a ring
	 * must keep the rows of the step's queries (kv_put_max), or a
	 * window's ring wraps within the batch.
	 */
	for (i = 0; i < n; i += b) {
		int p = pos + i;
		b = kv_attend_step(kv, layer, p, n - i);
		if (kv_put_appended(kv, layer, p, b) < 0)
			return -1;
		job = (struct attn_job){ a, kv, layer, p, b, i, q, out, NULL, NULL };
		attention(&job);
	}
	/* Rotated values give the rotated output; the transform is its own inverse. */
	if (kv->rot > 0)
		for (i = 0; i < n; i++)
			quant_hadamard(out + (size_t)i * q_dim, (size_t)q_dim, kv->rot);
	return 0;
}
