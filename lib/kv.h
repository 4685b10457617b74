/* kv.h: the grow-on-demand KV cache of the founding design. */
#ifndef LLM_KV_H
#define LLM_KV_H

#include <stddef.h>
#include <stdint.h>

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
 * Element types of the cache (the numbers are those of llm-kv(5)).
 *
 * f32 is the default and the founding design exactly; f16 rows are
 * plain halves.  Quantized keys (q8_0, q4_0) are quantized per channel
 * over groups of KV_GROUP positions, as KIVI does: a key channel keeps
 * its sign and scale from token to token, so a block along positions
 * fits it far better than a block along the row.  q8_0 keys use q8_0
 * blocks; q4_0 keys use q4_1 blocks (an f16 scale and an f16 minimum),
 * whose offset follows a channel's mean.  The newest positions, whose
 * group is not complete, stay in f16 (q8_0 for q4_0 keys, below), and a
 * query reads the keys of its own group from those and earlier ones
 * from the groups: which depends on positions alone, never on how
 * tokens were batched.  Quantized
 * values (q8_0, q4_0) are rows: each head rotated in blocks of rot by a
 * normalized Hadamard transform, then quantized in blocks of 32 along
 * the row; the attention output is rotated back.
 */
enum { KV_F32 = 0, KV_F16 = 1, KV_Q4_0 = 2, KV_Q8_0 = 8 };
#define KV_GROUP 32
#define KV_PUT 32	/* positions a batch writes to the rings below at once (kv_put_max) */
#define KV_KEY_TAIL (KV_GROUP + KV_PUT)	/* q8_0 keys' f16 ring: a group and a write */

/*
 * q4_0 stores (keys or values) keep a wider tail: every row also goes
 * to a ring of KV_TAIL rows in q8_0 (values rotated as in the store),
 * and a query reads from it the rows of its own group and of the
 * KV_BACK positions before that; older ones come from the q4_0 store.
 * On the benchmark's stream that moves log-probabilities by 0.28 against
 * f32, where the own group's keys in f16 and every value in q4_0 moved
 * them by 0.59 (bench/HISTORY.md).  A windowed cache reads its own group
 * alone (its slots of 128 positions could wrap).
 */
#define KV_BACK 96
#define KV_TAIL (KV_GROUP + KV_BACK + KV_PUT)	/* q4_0 stores' q8_0 ring: 160 rows */

/* The snapshot format whose block layout this build's caches have (llm-kv(5)). */
#define KV_FORMAT 5

/*
 * f16 stores (keys or values) keep an exact tail too: every row goes to
 * the store in f16, and a query reads the rows of its own group exactly
 * and earlier ones from the store.  The exact rows of a batch are its
 * own f32 buffer's; those of the newest group go on to a ring of
 * KV_GROUP f32 rows after the batch's attention (kv_put_tail), for the
 * batches after it.  Rounding to f16 moved log-probabilities by 0.0021
 * on the benchmark's stream; reading the own group exactly, by 0.0017.
 * As for grouped keys, which copy a query reads depends on positions
 * alone.
 */

/* "f32", "f16", "q8_0", "q4_0"; NULL for another number. */
const char *kv_type_name(int type);
/* The type of a name; -1 if none. */
int kv_type_parse(const char *name);

/*
 * K and V are each one store laid out [layer][pos][row]: offset =
 * ((layer * cap) + pos) * row bytes, the row being kv_dim elements of
 * the store's type.  Grouped keys take a group of KV_GROUP positions as
 * their unit: offset = ((layer * groups) + g) * group bytes, groups =
 * cap rounded up to KV_GROUP.  cap starts at 64 (or max_ctx if smaller)
 * and doubles when a write needs a position past it, never above max_ctx.
 */
struct kv {
	int n_layers;
	int kv_dim;
	int max_ctx;
	int cap;		/* positions allocated per layer */
	int seq_len;		/* positions filled */
	int written;		/* 1 + the highest position written */
	float *k, *v;		/* the stores; each reserves max_ctx positions of address space */
	size_t k_reserved, v_reserved;
	double grow_seconds;	/* time spent growing, for the run stats */
	int prealloc;		/* every slot committed up front (--kv-prealloc) */

	int k_type, v_type;
	int head_dim;
	int rot;		/* the Hadamard block of rotated values (kv_rot_of), 0 if none */
	int v_rotated;
	size_t k_unit, v_unit;	/* bytes of a position's row, or of a group (grouped keys) */
	void *tail[2];		/* K's and V's newest rows, [layer][tail_rows][kv_dim] of tail_type, a ring; or NULL */
	int tail_type[2];	/* KV_F16 for q8_0 keys, KV_Q8_0 for q4_0 stores, KV_F32 for f16 stores */
	int tail_rows[2];	/* KV_KEY_TAIL for q8_0 keys, KV_TAIL for q4_0 stores, KV_GROUP for f16 stores */
	int tail_back[2];	/* positions before a query's own group it reads from the tail: KV_BACK or 0 */
	int *tail_end;		/* f16 stores, by layer: 1 + the newest position kv_put_tail has put */
	int *ring_end;		/* rings written with the store, by layer: 1 + the newest position put */
	int groups;		/* grouped keys: the groups quantized, all the complete ones */
	float *scratch;		/* one row, padded to whole blocks, for quantizing */

	/*
	 * A windowed cache (kv_set_window): the first sinks positions and
	 * the newest window ones are kept, generation goes on past max_ctx,
	 * and the store holds slots rows: sink_slots for the sinks, then a
	 * ring of ring_slots.  Without a window slots is max_ctx and a
	 * position's slot is the position itself.
	 */
	int sinks, window;	/* window 0: not windowed */
	int sink_slots, ring_slots, slots;

	/*
	 * The rows kv_append() took for kv_attend(): a batch's f32 keys and
	 * values (the exact rows f16 stores' queries read, and rows a ring
	 * takes a step at a time), for one layer's positions [pos, pos + n).
	 */
	float *staged[2];
	int staged_cap;		/* rows each holds */
	int staged_layer, staged_pos, staged_n;
	int staged_put[2];	/* 1 once K's (0) or V's rows are in the store */
};

/* Keys quantized per channel over groups of positions (q8_0, q4_0). */
static inline int
kv_grouped(const struct kv *kv)
{
	return kv->k_type == KV_Q8_0 || kv->k_type == KV_Q4_0;
}

/* An f32 cache, the default; prealloc commits max_ctx densely up front (for comparison runs). */
int kv_init(struct kv *kv, int n_layers, int kv_dim, int max_ctx, int prealloc);
/* A cache of any types; -1 with llm_err() for a shape it cannot hold. */
int kv_init_types(struct kv *kv, int n_layers, int n_kv_heads, int head_dim, int max_ctx,
    int prealloc, int k_type, int v_type);
void kv_free(struct kv *kv);

/*
 * Make a new, empty cache windowed: it keeps positions [0, sinks) and
 * the newest window, in sinks + window slots (grouped keys: each part
 * rounded up to whole groups, and window at least KV_GROUP).  sinks +
 * window must not exceed max_ctx.  0, or -1 with llm_err().
 */
int kv_set_window(struct kv *kv, int sinks, int window);

/* The first position a query at pos reads from the tail of K (which 0) or V. */
static inline int
kv_tail_from(const struct kv *kv, int which, int pos)
{
	int p = pos / KV_GROUP * KV_GROUP - kv->tail_back[which];

	return p > 0 ? p : 0;
}

/*
 * Whether K (which 0) or V has a ring written with the store (grouped
 * keys, q4_0 stores), not after attention (f16 stores' f32 rows).
 */
static inline int
kv_ring(const struct kv *kv, int which)
{
	return kv->tail[which] && kv->tail_type[which] != KV_F32;
}

/*
 * The most positions kv_put_k and kv_put_v take at once: KV_PUT if a
 * store has a ring, which must keep the rows the batch's queries read;
 * else any number.
 */
static inline int
kv_put_max(const struct kv *kv)
{
	return kv_ring(kv, 0) || kv_ring(kv, 1) ? KV_PUT : 1 << 30;
}

/* The slot that holds position pos: the layout's "pos" (founding design). */
static inline int
kv_slot(const struct kv *kv, int pos)
{
	if (!kv->window || pos < kv->sink_slots)
		return pos;
	return kv->sink_slots + (pos - kv->sink_slots) % kv->ring_slots;
}

/* The slots a query at position pos reads: [0, kv_seen). */
static inline int
kv_seen(const struct kv *kv, int pos)
{
	return kv->window && pos >= kv->slots ? kv->slots : pos + 1;
}

/*
 * The positions evicted before a query at pos: it sees [0, sinks) and
 * [sinks + evicted, pos].  0 without a window or before it slides.
 */
static inline int
kv_evicted(const struct kv *kv, int pos)
{
	int e = pos - (kv->sinks + kv->window - 1);

	return kv->window && e > 0 ? e : 0;
}

/* The position whose row a query at pos finds in slot s < kv_seen(kv, pos). */
int kv_slot_pos(const struct kv *kv, int pos, int s);

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
 * The write accessor of the forward pass: the keys (after RoPE) and
 * values of positions [pos, pos + n) of a layer, n rows of kv_dim floats
 * each, contiguous.  The cache takes them as its type needs (an f32
 * store at once), and kv_attend() (attn.h) writes the rest and attends.
 * 0, or -1 with llm_err().
 */
int kv_append(struct kv *kv, int layer, int pos, int n, const float *k, const float *v);

/* For attn.c: whether kv_append took exactly these positions of this layer. */
int kv_appended(const struct kv *kv, int layer, int pos, int n);
/* For attn.c: the positions a batch of n at pos is attended to at once (kv_put_max, or 1 where a window's ring wraps). */
int kv_attend_step(const struct kv *kv, int pos, int n);
/* For attn.c: the appended rows of [pos, pos + n) into the stores, before their attention. */
int kv_put_appended(struct kv *kv, int layer, int pos, int n);
/* For attn.c: after their attention, the appended rows into the tail rings that keep them (kv_put_tail). */
void kv_put_appended_tail(struct kv *kv, int layer, int pos, int n);
/* For attn.c: the appended f32 rows of K (which 0) or V, the first being position staged_pos. */
static inline const float *
kv_staged(const struct kv *kv, int which)
{
	return kv->staged[which];
}

/*
 * Write accessors of f32 stores: grow the store if pos is past cap;
 * NULL on failure.  The forward pass writes f32 rows through them.
 */
float *kv_k_write(struct kv *kv, int layer, int pos);
float *kv_v_write(struct kv *kv, int layer, int pos);

/*
 * The write accessor of every type: n rows of kv_dim floats, ld apart,
 * for positions pos..pos+n-1, converted to the store's type.  Keys come
 * after RoPE.  Grows the store; 0 or -1 (llm_err()).  They take at most
 * kv_put_max positions at once; f16 stores want kv_put_tail once the
 * batch has been attended to.  A position whose queries' earlier tail
 * rows have left the ring cannot be written again.
 */
int kv_put_k(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld);
int kv_put_v(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld);
/*
 * After a batch's attention: the rows of its newest group go to the f32
 * rings of f16 stores (k, v: the batch's rows, as kv_put_k and kv_put_v
 * took them; either may be NULL if its store has no such ring).
 */
void kv_put_tail(struct kv *kv, int layer, int pos, int n, const float *k, const float *v,
    size_t ld);
/* Whether layer's tail ring holds the rows of positions [p0, p1) (f16 stores: p0 a group's start). */
int kv_tail_holds(const struct kv *kv, int which, int layer, int p0, int p1);

/* Read accessors of f32 stores: never grow; pos must be below cap.  Inline: attention calls them per row. */
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

/*
 * A whole row, dequantized and rotated back, as the model computed it
 * (to rounding), which 0 for K: what llm-kvstat and llm-kvdump show.
 */
void kv_row(const struct kv *kv, int layer, int which, int pos, float *out);
/* Dimensions [c0, c0 + n) of the key of position pos, as attention reads it. */
void kv_key(const struct kv *kv, int layer, int pos, int c0, int n, float *out);

/* Grow ahead to n positions and mark them filled. */
int kv_set_seq_len(struct kv *kv, int n);
/* Forget the contents; the capacity stays. */
void kv_clear(struct kv *kv);

/* Bytes one position takes in K and V, all layers (grouped keys: a group's / KV_GROUP). */
double kv_bytes_per_pos(const struct kv *kv);

/* The footprint of K and V at the current capacity (what a dense cache of cap positions takes). */
size_t kv_bytes(const struct kv *kv);
/* The bytes of K and V really resident now: the pages written (mincore). */
size_t kv_resident_bytes(const struct kv *kv);

/*
 * For snapshots: a layer's K (which 0) or V block holds the rows of the
 * first kv_rows(kv, n) slots after n positions.  Row stores hold those
 * rows, from kv_unit(kv, which, layer, 0) on; grouped keys hold the
 * rows / KV_GROUP groups from there.  A store with a tail then holds
 * its tail rows (kv_file_tail): for q8_0 keys the f16 rows and for f16
 * stores the f32 rows of the n % KV_GROUP positions of the incomplete
 * group, for q4_0 stores the q8_0 rows of the min(n, KV_TAIL) newest
 * positions, oldest first.  Without a window, rows = n and slot =
 * position.  format: the snapshot format version whose layout a block
 * has (KV_FORMAT for a live cache): f16 stores have had tails since
 * version 4, q4_0 stores since version 5.
 */
int kv_rows(const struct kv *kv, int n);
/* The positions whose tail rows a block of n positions holds: [n - count, n). */
int kv_file_tail(int type, int which, int n, int format);
size_t kv_block_bytes(const struct kv *kv, int which, int n);
size_t kv_block_bytes_of(int type, int which, int kv_dim, int rows, int n, int format);
/* The Hadamard block of values of the type: a power of two dividing head_dim, at most 32; 0 if not rotated. */
int kv_rot_of(int v_type, int head_dim);
/*
 * Row (slot) r of such a block, from its bytes alone, as kv_row() gives
 * it: for the tools, which read blocks in a file.  tail_slot is the slot
 * of the incomplete group's first position (grouped keys).
 */
void kv_block_row(int type, int which, int kv_dim, int rot, const void *block, int rows, int n,
    int tail_slot, int r, int format, float *out);
/*
 * The window of a cache of k_type keys and v_type values, in a struct kv
 * that has no stores (for readers of files): sets sinks, window and the
 * slots.  format: as for blocks (a store with a tail keeps its groups
 * whole in the ring).  0, or -1 with llm_err() if the window does not
 * fit max_ctx or the groups.
 */
int kv_window_shape(struct kv *kv, int k_type, int v_type, int format, int max_ctx, int sinks,
    int window);
void *kv_unit(const struct kv *kv, int which, int layer, int unit);
/* The tail ring's row of pos, in K (which 0) or V; kv_dim elements of tail_type[which]. */
void *kv_tail_row(const struct kv *kv, int which, int layer, int pos);
size_t kv_tail_row_bytes(const struct kv *kv, int which);
/* Elements [c0, c0 + n) of the tail ring's row of pos, as stored (values rotated). */
void kv_tail_span(const struct kv *kv, int which, int layer, int pos, int c0, int n, float *out);

#endif
