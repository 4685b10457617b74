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

/* The two stores, in this order wherever a function takes one. */
enum { KV_K, KV_V };

/*
 * Element types of the cache (the numbers are those of llm-kv(5)); what
 * each stores is one row of kv.c's table of types.
 *
 * f32 is the default and the founding design exactly; f16 rows are
 * plain halves.  Quantized keys (q8_0, q4_0) are quantized per channel
 * over groups of KV_GROUP positions, as KIVI does: a key channel keeps
 * its sign and scale from token to token, so a block along positions
 * fits it far better than a block along the row.  q8_0 keys use q8_0
 * blocks; q4_0 keys use q4_1 blocks (an f16 scale and an f16 minimum),
 * whose offset follows a channel's mean.  Quantized values (q8_0, q4_0)
 * are rows: each head rotated in blocks of rot by a normalized Hadamard
 * transform, then quantized in blocks of 32 along the row; the attention
 * output is rotated back.
 */
enum { KV_F32 = 0, KV_F16 = 1, KV_Q4_0 = 2, KV_Q8_0 = 8 };
#define KV_GROUP 32	/* positions of a group of quantized keys */
#define KV_PUT 32	/* positions a batch surely writes to a store with a ring at once (kv_put_max) */
#define KV_BACK 96	/* positions before its own group a query reads from q4_0's ring */
#define KV_RING_MAX (KV_GROUP + KV_BACK + KV_PUT)	/* the most rows a ring has */

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

/* "f32", "f16", "q8_0", "q4_0"; NULL for another number. */
const char *kv_type_name(int type);
/* The type of a name; -1 if none. */
int kv_type_parse(const char *name);
/* The names, as a sentence lists them: "f32, f16, q8_0 or q4_0". */
const char *kv_type_names(void);
/* What a type's store holds, from kv.c's table. */
int kv_type_grouped(int type, int which);	/* keys quantized per channel over a group */
int kv_type_ring(int type, int which);		/* the ring's type, or -1 */
int kv_type_back(int type);			/* positions before a query's group read from the ring */
/* Bytes of a position's row, or for grouped keys of a group of KV_GROUP positions. */
size_t kv_type_unit(int type, int which, int kv_dim);
/* Bytes of a row of kv_dim elements of a type (a ring's rows). */
size_t kv_type_row_bytes(int type, int kv_dim);
/* The Hadamard block of values of the type: a power of two dividing head_dim, at most 32; 0 if not rotated. */
int kv_rot_of(int v_type, int head_dim);

/*
 * A window: the first sinks positions and the newest window ones are
 * kept, generation goes on past max_ctx, and a layer's store holds slots
 * rows: sink_slots for the sinks, then a ring of ring_slots.  Without a
 * window (window 0) slots is max_ctx and a position's slot is the
 * position itself.
 */
struct kv_win {
	int sinks, window;
	int sink_slots, ring_slots, slots;
};

/*
 * K and V are each one store laid out [layer][pos][row]: offset =
 * ((layer * cap) + pos) * row bytes, the row being kv_dim elements of
 * the store's type.  Grouped keys take a group of KV_GROUP positions as
 * their unit: offset = ((layer * groups) + g) * group bytes, groups =
 * cap rounded up to KV_GROUP.  cap starts at 64 (or max_ctx if smaller)
 * and doubles when a write needs a position past it, never above max_ctx.
 * A layer with a window holds at most its slots: with sliding layers,
 * layer l starts after the min(cap, slots) positions of each layer
 * before it (kv->base), which is layer * cap when no layer's window is
 * shorter than cap.
 */
struct kv {
	int n_layers;
	int kv_dim;
	int max_ctx;
	int cap;		/* positions allocated per layer (a windowed layer's: its slots at most) */
	int top;		/* the most positions a layer holds: cap's ceiling */
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
	void *ring[2];		/* K's and V's newest rows, [layer][ring_rows][kv_dim] of ring_type, or NULL */
	int ring_type[2];
	int ring_rows[2];
	int ring_back[2];	/* positions before a query's own group it reads from the ring */
	int *ring_end;		/* by layer: 1 + the newest position put */
	int groups;		/* grouped keys: the groups quantized, all the complete ones */
	float *scratch;		/* one row, padded to whole blocks, for quantizing */

	/*
	 * Windows, per layer (kv_win): win[0] is every layer's, or with
	 * sliding layers (kv_set_sliding) the global layers'; win[1] the
	 * sliding layers'.  slides: by layer, 1 for a sliding layer; NULL
	 * when none slides.  A layer's store holds min(cap, its slots)
	 * positions, laid out one layer after another (base).
	 */
	struct kv_win win[2];
	unsigned char *slides;
	size_t *base[2];	/* K's and V's units before each layer's, n_layers + 1 of them, at cap */

	/*
	 * The rows kv_append() took for kv_attend(): a batch's f32 keys and
	 * values, written to a store with a ring a step at a time, for one
	 * layer's positions [pos, pos + n).
	 */
	float *staged[2];
	int staged_cap;		/* rows each holds */
	int staged_layer, staged_pos, staged_n;

	/*
	 * Rows read in place (kv_share): the first positions of every layer
	 * lie in memory the cache does not own (a snapshot's map), the first
	 * shared[which] units of layer l's store at share_at[2 * l + which].
	 * The stores keep their layout and never touch their own pages of
	 * those units: new positions go to the store as ever.
	 */
	int shared[2];
	const char **share_at;
};

/* Keys quantized per channel over groups of positions (q8_0, q4_0). */
static inline int
kv_grouped(const struct kv *kv)
{
	return kv_type_grouped(kv->k_type, KV_K);
}

/* An f32 cache, the default; prealloc commits max_ctx densely up front (for comparison runs). */
int kv_init(struct kv *kv, int n_layers, int kv_dim, int max_ctx, int prealloc);
/* A cache of any types; -1 with llm_err() for a shape it cannot hold. */
int kv_init_types(struct kv *kv, int n_layers, int n_kv_heads, int head_dim, int max_ctx,
    int prealloc, int k_type, int v_type);
void kv_free(struct kv *kv);

/*
 * Make a new, empty cache windowed: it keeps positions [0, sinks) and
 * the newest window, in sinks + window slots (each part rounded up to
 * whole groups where a store is grouped or has a ring, and window then
 * at least KV_GROUP).  sinks + window must not exceed max_ctx.  With
 * sliding layers, the window is the global layers'.  0, or -1 with
 * llm_err().
 */
int kv_set_window(struct kv *kv, int sinks, int window);
/*
 * Make the layers whose slides[l] is set slide (Gemma 3's local
 * layers): a query at p sees the keys at p - window < k <= p, at their
 * own positions (no sinks), and the layer keeps the newest of them in a
 * ring.  An f32 cache's ring has window + KV_SLIDE - 1 slots, so that a
 * batch of KV_SLIDE positions goes in at once; other types' rings are
 * the window rounded up to whole groups, and once they wrap a batch
 * goes in a token at a time (kv_attend_step).  Those types refuse a
 * window shorter than a group (KV_GROUP).  On an empty cache, before or
 * after kv_set_window; no layer set is a cache without sliding layers.
 * 0, or -1 with llm_err().
 */
#define KV_SLIDE 32
int kv_set_sliding(struct kv *kv, const unsigned char *slides, int window);
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

/* Whether any layer has a window. */
static inline int
kv_windowed(const struct kv *kv)
{
	return kv->win[0].window || kv->slides;
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

/*
 * The positions of a layer evicted before a query at pos: it sees
 * [0, sinks) and [sinks + evicted, pos].  0 without a window or before
 * it slides.
 */
static inline int
kv_win_evicted(const struct kv_win *w, int pos)
{
	int e = pos - (w->sinks + w->window - 1);

	return w->window && e > 0 ? e : 0;
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

/*
 * Write accessors of f32 stores: grow the store if pos is past cap;
 * NULL on failure.
 */
float *kv_k_write(struct kv *kv, int layer, int pos);
float *kv_v_write(struct kv *kv, int layer, int pos);

/*
 * The write accessor of every type: n rows of kv_dim floats, ld apart,
 * for positions pos..pos+n-1, converted to the store's type (keys after
 * RoPE), and to its ring.  Grows the store; 0 or -1 (llm_err()).  They
 * take at most kv_put_max positions at once.  A position whose queries'
 * earlier ring rows have left the ring cannot be written again.
 */
int kv_put_k(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld);
int kv_put_v(struct kv *kv, int layer, int pos, int n, const float *rows, size_t ld);
/* Whether a layer's ring of K or V holds the rows of positions [p0, p1). */
int kv_ring_holds(const struct kv *kv, int layer, int which, int p0, int p1);

/*
 * A whole row, dequantized and rotated back, as the model computed it
 * (to rounding): what llm-kvstat and llm-kvdump show.
 */
void kv_row(const struct kv *kv, int layer, int which, int pos, float *out);
/* Dimensions [c0, c0 + n) of the key of position pos, as attention reads it. */
void kv_key(const struct kv *kv, int layer, int pos, int c0, int n, float *out);

/* Grow ahead to n positions and mark them filled. */
int kv_set_seq_len(struct kv *kv, int n);
/* Forget the contents; the capacity stays. */
void kv_clear(struct kv *kv);
/*
 * After a reader has filled the first kv_rows(kv, n) slots of each
 * layer's stores (kv_unit; grouped keys: their complete groups) and the
 * ring rows of the positions a query after n reads (kv_ring_row): the
 * cache holds positions [0, n).  0, or -1 with llm_err().
 */
int kv_restore(struct kv *kv, int n);

/* Bytes one position takes in K and V, all layers (grouped keys: a group's / KV_GROUP). */
double kv_bytes_per_pos(const struct kv *kv);

/*
 * The footprint of K and V at the current capacity (what a dense cache
 * of cap positions takes), less the rows read in place.
 */
size_t kv_bytes(const struct kv *kv);
/* The bytes of K and V really resident now: the pages written (mincore). */
size_t kv_resident_bytes(const struct kv *kv);

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
/* Bytes of K and V read in place (kv_share), not the cache's own. */
size_t kv_shared_bytes(const struct kv *kv);
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

#endif
