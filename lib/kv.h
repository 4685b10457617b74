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
 * and doubles when a write needs a position past it, never above max_ctx;
 * or, where a run knows how far it goes, once before it starts
 * (kv_reserve), to the capacity the doubling would reach.
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
	size_t moved_bytes;	/* bytes of rows the growths moved, for the run stats */
	int prealloc;		/* every slot committed up front (--kv-prealloc) */

	int k_type, v_type;
	int head_dim;
	int rot;		/* the Hadamard block of rotated values (kv_rot_of), 0 if they are not rotated */
	size_t k_unit, v_unit;	/* bytes of a position's row, or of a group (grouped keys) */
	void *ring[2];		/* K's and V's newest rows, [layer][kv_ring_rows][kv_dim] of ring_type, or NULL */
	int ring_type[2];
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
/* Whether any layer has a window. */
static inline int
kv_windowed(const struct kv *kv)
{
	return kv->win[0].window || kv->slides;
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
/*
 * A whole row, dequantized and rotated back, as the model computed it
 * (to rounding): what llm-kvstat and llm-kvdump show.
 */
void kv_row(const struct kv *kv, int layer, int which, int pos, float *out);
/* Grow ahead to n positions and mark them filled. */
int kv_set_seq_len(struct kv *kv, int n);
/*
 * Grow now to the capacity the doubling would reach for n positions
 * (never past max_ctx), so that no rows move as they come: a growth
 * moves each layer's rows (the time, and as many page faults again).
 * The pages still come as rows are written.  0 or -1 (llm_err()).
 */
int kv_reserve(struct kv *kv, int n);
/* Forget the contents; the capacity stays. */
void kv_clear(struct kv *kv);
/* Bytes one position takes in K and V, all layers (grouped keys: a group's / KV_GROUP). */
double kv_bytes_per_pos(const struct kv *kv);

/*
 * The footprint of K and V at the current capacity (what a dense cache
 * of cap positions takes), less the rows read in place.
 */
size_t kv_bytes(const struct kv *kv);
/* The bytes of K and V really resident now: the pages written (mincore). */
size_t kv_resident_bytes(const struct kv *kv);

/* Bytes of K and V read in place (kv_share), not the cache's own. */
size_t kv_shared_bytes(const struct kv *kv);

#endif
