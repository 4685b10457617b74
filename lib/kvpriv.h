/*
 * kvpriv.h: the cache's own part of kv.h, for lib/'s files that read and
 * write its stores: the forward pass (model.c), attention (attn.c),
 * snapshots (snapshot.c), and the cache's files (kv.c, kvtype.c,
 * kvwin.c).  The tools use kv.h alone.
 */
#ifndef LLM_KVPRIV_H
#define LLM_KVPRIV_H

#include "kv.h"

/*
 * The ring, one rule for every type that has one: a store keeps its
 * newest rows in a second type as well (q8_0 keys in f16, f16 stores in
 * f32, q4_0 stores in q8_0), written with the store, KV_GROUP + back +
 * KV_PUT rows of them.  A query at pos reads the rows of its own group,
 * and for q4_0 stores the KV_BACK positions before it, from the ring
 * (kv_ring_from), and older ones from the store: which depends on
 * positions alone, never on how tokens were batched.  Reading a query's
 * own group exactly is what keeps the quantized caches close to f32
 * (bench/HISTORY.md, rounds six and eight).  A windowed cache reads its
 * own group alone (its slots could wrap within the back).
 */

/*
 * Whether the cache is one for a model of n_layers whose layers slide
 * as slides says (NULL: none does) over window positions, as
 * kv_set_sliding made it: 0, or -1 with llm_err() saying what differs.
 */
int kv_fits_layers(const struct kv *kv, int n_layers, const unsigned char *slides, int window);
/* A sliding layer's window shape, its slots rounded to groups of g (for readers of files too); 0 or -1. */
int kv_slide_shape(struct kv_win *w, int g, int window);
/* The positions whose slots a window keeps whole: KV_GROUP where a store is grouped or has a ring, else 1. */
int kv_window_group(int k_type, int v_type);
/*
 * The window of a cache, in a struct kv that has no stores (for readers
 * of files, whose layout may round to another group g): sets win[0].
 * 0, or -1 with llm_err() if the window does not fit max_ctx or the
 * groups.
 */
int kv_window_shape(struct kv *kv, int g, int max_ctx, int sinks, int window);

/* A layer's window. */
static inline const struct kv_win *
kv_win(const struct kv *kv, int layer)
{
	return &kv->win[kv->slides ? kv->slides[layer] : 0];
}

/*
 * The rows of K's or V's ring, from its store's type: a group, the rows
 * before it its type reads back, and a put's.  Fixed when the ring is
 * mapped; a window's setting of ring_back to 0 leaves it.
 */
static inline int
kv_ring_rows(const struct kv *kv, int which)
{
	return KV_GROUP + kv_type_back(which ? kv->v_type : kv->k_type) + KV_PUT;
}

/* The first position a query at pos reads from the ring of K or V. */
static inline int
kv_ring_from(const struct kv *kv, int which, int pos)
{
	int p = pos / KV_GROUP * KV_GROUP - kv->ring_back[which];

	return p > 0 ? p : 0;
}

/*
 * The most positions kv_put_k and kv_put_v take at once from pos: where
 * a store has a ring, as many as leave in it the rows their queries read
 * (its KV_GROUP + back + KV_PUT rows less the back and pos's place in
 * its group: 64 from a group's start, at least KV_PUT); else any number.
 */
static inline int
kv_put_max(const struct kv *kv, int pos)
{
	return kv->ring[KV_K] || kv->ring[KV_V] ? KV_GROUP + KV_PUT - pos % KV_GROUP : 1 << 30;
}

/* The slot of a window that holds position pos: the layout's "pos" (founding design). */
static inline int
kv_win_slot(const struct kv_win *w, int pos)
{
	if (!w->window || pos < w->sink_slots)
		return pos;
	return w->sink_slots + (pos - w->sink_slots) % w->ring_slots;
}

/* Whether a window over positions [0, n) keeps position pos (sinks, and the newest window). */
static inline int
kv_win_keeps(const struct kv_win *w, int pos, int n)
{
	return !w->window || pos < w->sinks || pos + w->window >= n;
}

static inline int
kv_slot(const struct kv *kv, int layer, int pos)
{
	return kv_win_slot(kv_win(kv, layer), pos);
}

/* The slots of a layer a query at position pos reads: [0, kv_seen). */
static inline int
kv_seen(const struct kv *kv, int layer, int pos)
{
	const struct kv_win *w = kv_win(kv, layer);

	return w->window && pos >= w->slots ? w->slots : pos + 1;
}

static inline int
kv_evicted(const struct kv *kv, int layer, int pos)
{
	return kv_win_evicted(kv_win(kv, layer), pos);
}

/* The position whose row a query at pos finds in slot s < kv_seen(kv, layer, pos). */
int kv_slot_pos(const struct kv *kv, int layer, int pos, int s);
int kv_win_slot_pos(const struct kv_win *w, int pos, int s);
/* The slots of a window that hold positions [0, n). */
static inline int
kv_win_rows(const struct kv_win *w, int n)
{
	return w->window && n > w->slots ? w->slots : n;
}

/* Make room for positions [0, npos) (windowed: their slots); 0 or -1 (llm_err()). */
int kv_grow_to(struct kv *kv, int npos);

/*
 * Before a forward pass over positions [pos, pos + n): pos is at most
 * seq_len, the context has room (max_ctx is a hard ceiling, checked
 * before the pass starts; a window slides past it), and the cache grows
 * for the whole batch before any row is written.  0, or -1 with llm_err().
 */
int kv_begin(struct kv *kv, int pos, int n);

/*
 * The write accessor of the forward pass.  kv_append_rows gives where
 * the keys (after RoPE) or values of positions [pos, pos + n) of a layer
 * go: n rows of kv_dim floats, contiguous, which the pass fills (the f32
 * store itself where it takes the batch whole, so that nothing is
 * copied; else the cache's staging rows), or NULL with llm_err().
 * kv_append then takes both, and kv_attend() (attn.h) writes them in
 * their type and attends.  0, or -1 with llm_err().
 */
float *kv_append_rows(struct kv *kv, int layer, int which, int pos, int n);
int kv_append(struct kv *kv, int layer, int pos, int n);

/* For attn.c: whether kv_append took exactly these positions of this layer. */
int kv_appended(const struct kv *kv, int layer, int pos, int n);
/*
 * For attn.c: the positions of a batch of n at pos attended to at once in
 * a layer (kv_put_max, and where a window's ring wraps, as many as leave
 * in it the rows of the step's first query).
 */
int kv_attend_step(const struct kv *kv, int layer, int pos, int n);
/* For attn.c: the appended rows of [pos, pos + n) into the stores, before their attention. */
int kv_put_appended(struct kv *kv, int layer, int pos, int n);

/* Whether a layer's ring of K or V holds the rows of positions [p0, p1). */
int kv_ring_holds(const struct kv *kv, int layer, int which, int p0, int p1);

/* Dimensions [c0, c0 + n) of the key of position pos, as attention reads it. */
void kv_key(const struct kv *kv, int layer, int pos, int c0, int n, float *out);

/*
 * After a reader has filled the first kv_rows(kv, n) slots of each
 * layer's stores (kv_unit; grouped keys: their complete groups) and the
 * ring rows of the positions a query after n reads (kv_ring_row): the
 * cache holds positions [0, n).  0, or -1 with llm_err().
 */
int kv_restore(struct kv *kv, int n);

/* The slots of a layer that hold positions [0, n): n, or a wrapped window's slots. */
int kv_rows(const struct kv *kv, int layer, int n);
/*
 * Unit u (a slot's row, or a group of grouped keys) of a layer's K or V
 * store, the shared rows included.
 */
void *kv_unit(const struct kv *kv, int layer, int which, int unit);
/*
 * Unit u as kv_unit gives it, and *end lowered to the end of the units
 * contiguous with it: the shared units end at kv->shared[which].  Readers
 * of a run of units go a contiguous piece at a time.
 */
const char *kv_units(const struct kv *kv, int layer, int which, int u, int *end);
/* Read accessors of f32 stores: never grow; pos must be below cap. */
static inline const float *
kv_k_read(const struct kv *kv, int layer, int pos)
{
	return kv_unit(kv, layer, KV_K, pos);
}

static inline const float *
kv_v_read(const struct kv *kv, int layer, int pos)
{
	return kv_unit(kv, layer, KV_V, pos);
}

/* Units [u0, u1) of a layer's K or V store, contiguous, into dst. */
void kv_copy_units(const struct kv *kv, int layer, int which, int u0, int u1, void *dst);

/*
 * Read positions [0, base) of an empty cache in place: at[2 * l + which]
 * is layer l's K or V units laid out as its store lays them out (a
 * snapshot's block), in memory that must outlive the cache's use of it
 * (until kv_clear or kv_free).  Grouped keys share whole groups: base is
 * a multiple of KV_GROUP.  No window.  The caller then fills positions
 * from base on and calls kv_restore().  0, or -1 with llm_err().
 */
int kv_share(struct kv *kv, int base, const void *const *at);
/* The ring's row of pos, in K or V; kv_dim elements of ring_type[which]. */
void *kv_ring_row(const struct kv *kv, int layer, int which, int pos);
size_t kv_ring_row_bytes(const struct kv *kv, int which);
/* Elements [c0, c0 + n) of the ring's row of pos, as stored (values rotated). */
void kv_ring_span(const struct kv *kv, int layer, int which, int pos, int c0, int n, float *out);

/*
 * For readers of blocks in files: elements [e0, e0 + n) of a row of the
 * type, as stored (values rotated), and position j of a group of grouped
 * keys, channels [c0, c0 + n).
 */
void kv_decode_span(int type, const void *row, int e0, int n, float *out);
void kv_decode_group(int type, const void *group, int j, int c0, int n, float *out);

/* A window's slots for sinks and window, each part (and a ring of ring slots) rounded up to groups of g. */
void kv_win_shape(struct kv_win *w, int g, int sinks, int window, int ring);
/* One row of kv_dim floats into a row of the type, Hadamard-rotated first in blocks of rot (0: not); scratch: kv_dim rounded up to 32 floats. */
void kv_encode_row(int type, int kv_dim, int rot, const float *x, void *dst, float *scratch);

#endif
