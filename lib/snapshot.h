/* snapshot.h: the llm-kv(5) file: write atomically, map, validate. */
#ifndef LLM_SNAPSHOT_H
#define LLM_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"

#define SNAP_MAGIC "LLMKVSNP"
#define SNAP_VERSION 6		/* the highest this build reads, and the layout of its caches (f32 ones are written as version 1) */
#define SNAP_HEADER_SIZE 128	/* versions 1 and 2 */
#define SNAP_HEADER_SIZE_3 160	/* versions 3 (a windowed cache), 4 (f16 stores), 5 (q4_0 stores), 6 (sliding layers) */
#define SNAP_ALIGN 4096
#define SNAP_DIR_ENTRY 48
/* What a snapshot says about the model and the cache. */
struct snap_meta {
	uint32_t n_layers, n_kv_heads, head_dim, kv_dim, max_ctx, rope_dim;
	float rope_base;
	uint8_t fingerprint[32];
	int k_type, v_type;	/* KV_F32 ... (kv.h) */
	uint32_t rot;		/* the Hadamard block of the values, 0 if not rotated */
	uint32_t sinks, window;	/* window 0: not windowed (with sliding layers: the global layers') */
	uint32_t swa;		/* the sliding layers' window, 0 if none slides */
	const unsigned char *slides;	/* n_layers flags, 1 for a sliding layer; NULL if none slides */
};

struct snap_dir {
	uint64_t k_offset, k_length, k_sum;
	uint64_t v_offset, v_length, v_sum;
};

/*
 * The rows of a window's layers: the global layers' (win[0]: every
 * layer's without sliding ones) and, in version 6, the sliding ones'.
 */
struct snap_win {
	struct kv_win shape;		/* its geometry, as the cache's (lib/kvwin.c); window 0: none */
	uint32_t n_rows;		/* rows per block: n_pos, or the window's slots */
	const uint8_t *positions;	/* n_rows little-endian uint32; NULL: row r is position r */
	uint32_t ring_slot;		/* the row of the incomplete key group's first position */
};

struct snapshot {
	const uint8_t *map;
	size_t size;
	uint32_t version, n_pos;
	struct snap_meta meta;
	uint64_t dir_offset, data_offset;
	const uint8_t *tokens;		/* n_pos little-endian uint32 */
	struct snap_win win[2];		/* by meta.slides[layer] (snapshot_win) */
	struct snap_dir *dir;		/* n_layers entries, decoded */
	int verified;			/* every block's checksum checked (snapshot_verify) */
};

/* A layer's rows: its window's. */
static inline const struct snap_win *
snapshot_win(const struct snapshot *s, uint32_t layer)
{
	return &s->win[s->meta.slides ? s->meta.slides[layer] : 0];
}

struct model;

/* The meta a snapshot of this model's cache has: its shape, RoPE, fingerprint, types and window. */
void snapshot_meta_of(struct snap_meta *meta, const struct model *m, const struct kv *kv);

/*
 * Whether a snapshot can resume this model's cache: 0, or -1 with
 * llm_err() saying what differs, and *what the part: SNAP_MODEL (the
 * shape, RoPE or fingerprint: another model), SNAP_TYPES (the cache
 * types) or SNAP_WINDOW (the window).
 */
enum { SNAP_MODEL = 1, SNAP_TYPES, SNAP_WINDOW };
int snapshot_check(const struct snapshot *s, const struct model *m, const struct kv *kv, int *what);

/* The llm-kv(5) checksum of n bytes. */
uint64_t snapshot_sum(const void *p, size_t n);

/*
 * Write positions [0, n_pos) of the cache and their tokens to path,
 * atomically.  With rings (grouped keys, f16 and q4_0 stores), n_pos's group must
 * still be in the ring: within its rows of the newest position written.
 * 0, or -1 with llm_err() set and any old file intact.
 */
int snapshot_write(const char *path, const struct snap_meta *meta,
    const struct kv *kv, const int *tokens, int n_pos);

/*
 * Whether a snapshot can be written to path, checked before the work
 * that fills it: not a directory, and a temporary file can be made
 * beside it (and is removed).  0, or -1 with llm_err().
 */
int snapshot_writable(const char *path);

/* Map and validate everything but the block checksums; -1, llm_err(). */
int snapshot_open(struct snapshot *s, const char *path);
void snapshot_close(struct snapshot *s);

uint32_t snapshot_token(const struct snapshot *s, uint32_t pos);
/* The K or V (KV_K, KV_V) block of a layer, as stored (llm-kv(5)). */
const void *snapshot_block(const struct snapshot *s, uint32_t layer, int which);
/* Row r of a layer's block, dequantized and rotated back: kv_dim floats into out. */
void snapshot_row(const struct snapshot *s, uint32_t layer, int which, uint32_t r, float *out);
/* The position row r of a layer holds. */
uint32_t snapshot_row_pos(const struct snapshot *s, uint32_t layer, uint32_t r);
/* The row of a layer that holds the i-th stored position, in increasing order. */
uint32_t snapshot_row_at(const struct snapshot *s, uint32_t layer, uint32_t i);
/*
 * Whether position pos is live in a layer: kept, and read by the last
 * position's query (a window's sinks and its newest positions; every
 * position without a window).
 */
int snapshot_live(const struct snapshot *s, uint32_t layer, uint32_t pos);
/* The row of a layer that holds position pos, or -1 if its window does not keep it. */
long snapshot_pos_row(const struct snapshot *s, uint32_t layer, uint32_t pos);
/* Check one block's checksum; 0 or -1 with llm_err() naming it. */
int snapshot_verify_block(const struct snapshot *s, uint32_t layer, int which);

/* Check every block's checksum, once for the map; 0, or -1 with llm_err() naming the block. */
int snapshot_verify(struct snapshot *s);

/*
 * Verify every block (unless snapshot_verify did), then copy positions [0, n) into an empty cache of
 * the same shape, types and window, which grows to hold them by its
 * doubling rule.  With grouped keys, n must end a group or lie in the
 * file's last one: the f16 rows of the other groups are not stored.  A
 * window whose ring has wrapped gives all its positions or none.
 */
int snapshot_load(const struct snapshot *s, struct kv *kv, uint32_t n);

/*
 * Resume: load the longest common prefix of the snapshot's tokens and
 * ids[0..n_ids), reading its rows in place where the layout allows
 * (kv_share: every position of an f32 row cache without a window; whole
 * groups for the other types; the rest and the rings are copied), so
 * the snapshot must stay open while the cache holds them, until
 * kv_clear() or kv_free().  Never ids' last token, whose logits the caller
 * needs and the file does not hold.  With grouped keys, a prefix that
 * ends inside a complete group is cut back to the group's start, whose
 * exact rows are not stored: the rest is recomputed, and the results
 * stay bitwise those of recomputing everything.  A wrapped window that
 * would have to be cut is not loaded at all (0), nor are q4_0 stores cut
 * short of the file's ring of 160 positions (kv.h), nor files before
 * format version 5 that have q4_0 stores.  Returns the position the
 * caller computes from: the positions loaded, except that q4_0 rings
 * load a whole file whose tokens are all of ids and return its last
 * position, which the caller writes again; or -1 with llm_err() set.
 */
int snapshot_resume(const struct snapshot *s, struct kv *kv, const int *ids, int n_ids);

/*
 * A slice of a snapshot, as llm-kvdump selects it: K, V or both, one
 * layer or all, positions A to B inclusive or all, one head or all.
 */
struct snap_slice {
	int which;		/* KV_K, KV_V, or -1: both */
	long layer, head;	/* -1: all */
	int have_pos;
	long pos_a, pos_b;
	/*
	 * What snapshot_slice_check makes of it, half-open ranges: p0..p1
	 * index the stored positions in order (snapshot_row_at), per window
	 * (snapshot_slice_rows gives a layer's).
	 */
	uint32_t l0, l1, d0, d1;
	uint32_t p0[2], p1[2];
	int bad;		/* after a refusal: the part of it at fault */
};

enum { SLICE_LAYER = 1, SLICE_HEAD, SLICE_POS };

/*
 * Check a slice against the file and resolve its ranges; -1 with
 * llm_err() naming the range, or the window of a selected layer that no
 * longer holds any of its positions, and sl->bad the part at fault.
 */
int snapshot_slice_check(const struct snapshot *s, struct snap_slice *sl);
/* The stored positions a slice takes in a layer, p0..p1 (snapshot_row_at). */
void snapshot_slice_rows(const struct snapshot *s, const struct snap_slice *sl, uint32_t layer,
    uint32_t *p0, uint32_t *p1);

#endif
