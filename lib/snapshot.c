/*
 * snapshot.c: the llm-kv(5) file.  The page came first; this follows it.
 * Writes go to a temporary file that is renamed over the target, so a
 * failure never leaves a torn snapshot under the target's name.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvpriv.h"
#include "kv.h"
#include "model.h"
#include "quant.h"
#include "snapshot.h"
#include "util.h"

#define P64 0x9E3779B97F4A7C15ull

/*
 * The header's fields, at these offsets from the start of the file, as
 * llm-kv(5) names them; versions 3 to 5 go on past SNAP_HEADER_SIZE.
 */
enum {
	AT_MAGIC = 0, AT_VERSION = 8, AT_HEADER_SIZE = 12, AT_K_TYPE = 16, AT_V_TYPE = 18,
	AT_N_LAYERS = 20, AT_N_KV_HEADS = 24, AT_HEAD_DIM = 28, AT_KV_DIM = 32, AT_N_POS = 36,
	AT_MAX_CTX = 40, AT_ROPE_DIM = 44, AT_ROPE_BASE = 48, AT_ROT = 52, AT_FINGERPRINT = 56,
	AT_TOKENS_OFFSET = 88, AT_DIR_OFFSET = 96, AT_DATA_OFFSET = 104, AT_FILE_SIZE = 112,
	AT_HEADER_SUM = 120,
	AT_SINKS = 128, AT_WINDOW = 132, AT_N_ROWS = 136, AT_SWA = 140,
	AT_POSITIONS_OFFSET = 144, AT_LAYERS_OFFSET = 152,	/* versions 3 to 5: zero at 140 and 152 */
};

/* A directory entry's fields, from the entry's start: K's, then V's at AT_V. */
enum { AT_K = 0, AT_V = 24, AT_OFFSET = 0, AT_LENGTH = 8, AT_SUM = 16 };

/* The checksum of llm-kv(5), fed in pieces whose sizes are multiples of 32 but the last. */
struct sum_state {
	uint64_t s[4];
	uint64_t n;
};

static void
sum_init(struct sum_state *st)
{
	st->s[0] = P64, st->s[1] = P64 + 1, st->s[2] = P64 + 2, st->s[3] = P64 + 3;
	st->n = 0;
}

static void
sum_update(struct sum_state *st, const void *data, size_t n)
{
	const uint8_t *p = data;
	uint64_t w;
	size_t i, nw = n / 8;
	int j;

	for (i = 0; i + 4 <= nw; i += 4)
		for (j = 0; j < 4; j++) {
			memcpy(&w, p + 8 * (i + j), 8);	/* little-endian hosts only */
			st->s[j] = (st->s[j] ^ w) * P64;
		}
	for (; i < nw; i++) {
		memcpy(&w, p + 8 * i, 8);
		st->s[i % 4] = (st->s[i % 4] ^ w) * P64;
	}
	if (n % 8) {
		w = 0;
		memcpy(&w, p + 8 * nw, n % 8);
		st->s[nw % 4] = (st->s[nw % 4] ^ w) * P64;
	}
	st->n += n;
}

static uint64_t
sum_final(const struct sum_state *st)
{
	uint64_t h = st->n * P64;
	int j;

	for (j = 0; j < 4; j++) {
		h = (h ^ st->s[j]) * P64;
		h ^= h >> 29;
	}
	return h;
}

uint64_t
snapshot_sum(const void *data, size_t n)
{
	struct sum_state st;

	sum_init(&st);
	sum_update(&st, data, n);
	return sum_final(&st);
}

static uint64_t
align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int
write_all(int fd, const void *data, size_t n)
{
	const char *p = data;
	ssize_t k;

	while (n > 0) {
		if ((k = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int
write_zeros(int fd, size_t n)
{
	static const char zero[SNAP_ALIGN];

	while (n > 0) {
		size_t k = n < sizeof zero ? n : sizeof zero;
		if (write_all(fd, zero, k) < 0)
			return -1;
		n -= k;
	}
	return 0;
}

/*
 * ---- the layouts of the versions ----
 *
 * Every version's block layout is here; the cache (kv.h) knows only its
 * own, this build's.  A block of n positions holds the rows of its
 * kv_rows(n) slots (grouped keys: their complete groups), then the ring
 * rows of some newest positions, oldest first: of n's incomplete group
 * for grouped keys and, from version 4 on, f16 stores; from version 5 on
 * the whole ring of q4_0 stores, min(n, SNAP_Q4_RING) positions.
 */
#define SNAP_Q4_RING 160	/* a q4_0 store's ring */
/* A ring of another size is another layout: a new version, not this one. */
_Static_assert(SNAP_Q4_RING == KV_GROUP + KV_BACK + KV_PUT, "q4_0 rings are version 5's 160 rows");

/* The version this build writes for a cache of these types and windows. */
static uint32_t
version_of(int k_type, int v_type, int window, int sliding)
{
	/*
	 * An f32 cache is a version 1 file, as before the types: old readers
	 * still read it.  A windowed cache is version 3: a longer header, and
	 * the position of each row.  A cache with f16 stores is version 4,
	 * version 3's layout (window 0: none) with their rings; one with q4_0
	 * stores is version 5, version 4's with their q8_0 rings; one with
	 * sliding layers version 6, version 5's with their window.
	 */
	if (sliding)
		return 6;
	if (k_type == KV_Q4_0 || v_type == KV_Q4_0)
		return 5;
	if (k_type == KV_F16 || v_type == KV_F16)
		return 4;
	if (window)
		return 3;
	return k_type == KV_F32 && v_type == KV_F32 ? 1 : 2;
}

/* The type of the ring rows a block of the type holds in a version. */
static int
file_ring_type(int type, uint32_t version)
{
	if (type == KV_Q4_0 && version >= 5)
		return KV_Q8_0;
	return type == KV_F16 ? KV_F32 : KV_F16;
}

/* The positions whose ring rows a block of n positions holds: [n - count, n). */
static int
file_ring(int type, int which, int n, uint32_t version)
{
	if (type == KV_Q4_0 && version >= 5)
		return n < SNAP_Q4_RING ? n : SNAP_Q4_RING;
	if (kv_type_grouped(type, which) || (type == KV_F16 && version >= 4))
		return n % KV_GROUP;
	return 0;
}

/* The bytes of a block before its ring rows: rows rows, or their complete groups. */
static size_t
file_main_bytes(int type, int which, int kv_dim, int rows)
{
	return kv_type_grouped(type, which) ?
	    (size_t)(rows / KV_GROUP) * kv_type_unit(type, which, kv_dim) :
	    (size_t)rows * kv_type_unit(type, which, kv_dim);
}

static size_t
file_block_bytes(int type, int which, int kv_dim, int rows, int n, uint32_t version)
{
	return file_main_bytes(type, which, kv_dim, rows) + (size_t)file_ring(type, which, n, version) *
	    kv_type_row_bytes(file_ring_type(type, version), kv_dim);
}

/* The positions a version's window keeps in whole groups: KV_GROUP, or 1. */
static int
file_window_group(int k_type, int v_type, uint32_t version)
{
	if (kv_type_grouped(k_type, KV_K) || (version >= 4 && (k_type == KV_F16 || v_type == KV_F16)) ||
	    (version >= 5 && v_type == KV_Q4_0))
		return KV_GROUP;
	return 1;
}

/*
 * Row (slot) r of a block, from its bytes alone, as kv_row() gives it:
 * ring_slot is the slot of the incomplete group's first position
 * (grouped keys).
 */
static void
file_block_row(int type, int which, int kv_dim, int rot, const void *block, int rows, int n,
    int ring_slot, int r, uint32_t version, float *out)
{
	int ring = file_ring(type, which, n, version), rt = file_ring_type(type, version);

	if (kv_type_grouped(type, which)) {
		/* the groups of the rows, then the ring rows, the incomplete group's the last */
		size_t group = kv_type_unit(type, which, kv_dim), row = kv_type_row_bytes(rt, kv_dim);
		if (r >= ring_slot && r < ring_slot + n % KV_GROUP)
			kv_decode_span(rt, (const char *)block + (size_t)(rows / KV_GROUP) * group +
			    (size_t)(ring - n % KV_GROUP + r - ring_slot) * row, 0, kv_dim, out);
		else
			kv_decode_group(type, (const char *)block + (size_t)(r / KV_GROUP) * group,
			    r % KV_GROUP, 0, kv_dim, out);
		return;
	}
	kv_decode_span(type, (const char *)block + (size_t)r * kv_type_row_bytes(type, kv_dim), 0,
	    kv_dim, out);
	if (which == KV_V && rot > 1)	/* rot matches the type: snapshot_open checked it */
		quant_hadamard(out, (size_t)kv_dim, rot);
}

/* The ring rows a block of the cache's n positions holds, as this build writes it. */
static int
cache_ring(const struct kv *kv, int which, int n)
{
	return file_ring(which ? kv->v_type : kv->k_type, which, n, SNAP_VERSION);
}

/* The bytes of the cache's block before its ring rows. */
static size_t
main_bytes(const struct kv *kv, int which, int rows)
{
	return file_main_bytes(which ? kv->v_type : kv->k_type, which, kv->kv_dim, rows);
}

/*
 * A layer's K or V block of n positions, contiguous: stores without a
 * ring are, in the cache itself; the others are assembled (rows or
 * groups, then the ring rows) into *buf, which the caller frees.
 */
static const void *
block_of(const struct kv *kv, int layer, int which, int n, size_t len, void **buf)
{
	size_t main = main_bytes(kv, which, kv_rows(kv, layer, n)), row = kv_ring_row_bytes(kv, which);
	int first = n - cache_ring(kv, which, n), pos;
	char *p;

	*buf = NULL;
	if (!kv->ring[which] && !kv->shared[which])
		return kv_unit(kv, layer, which, 0);
	p = *buf = xmalloc(len + 1);
	kv_copy_units(kv, layer, which, 0, (int)(main / (which ? kv->v_unit : kv->k_unit)), p);
	for (pos = first; pos < n; pos++)
		memcpy(p + main + (size_t)(pos - first) * row, kv_ring_row(kv, layer, which, pos), row);
	return p;
}

/*
 * A new temporary file beside path, .NAME.tmp-XXXXXX in its directory
 * (its name in *tmp, malloc'd; the directory in *dir if dir is not
 * NULL), with the mode a plain creat would give: the fd, or -1 (errno).
 */
static int
temp_beside(const char *path, char **tmp, char **dir)
{
	char *copy = strdup(path), *d = strdup(dirname(copy)), *base = strdup(path);
	size_t n = strlen(path) + 32;
	mode_t mask;
	int fd, e;

	*tmp = xmalloc(n);
	snprintf(*tmp, n, "%s/.%s.tmp-XXXXXX", d, basename(base));
	free(copy), free(base);
	if (dir)
		*dir = d;
	else
		free(d);
	if ((fd = mkstemp(*tmp)) < 0)
		return -1;
	/* mkstemp makes 0600; give the file the mode a plain creat would. */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask) < 0) {
		e = errno;
		close(fd);
		unlink(*tmp);
		errno = e;
		return -1;
	}
	return fd;
}

int
snapshot_writable(const char *path)
{
	struct stat st;
	char *tmp = NULL;
	int fd;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		llm_seterr("is a directory");
		return -1;
	}
	if ((fd = temp_beside(path, &tmp, NULL)) < 0) {
		llm_seterr("cannot write a snapshot there: %s", strerror(errno));
		free(tmp);
		return -1;
	}
	close(fd);
	unlink(tmp);
	free(tmp);
	return 0;
}

int
snapshot_write(const char *path, const struct snap_meta *meta, const struct kv *kv,
    const int *tokens, int n_pos)
{
	int sliding = kv->slides != NULL;
	uint32_t version = version_of(kv->k_type, kv->v_type, kv->win[0].window, sliding);
	uint32_t header = version >= 3 ? SNAP_HEADER_SIZE_3 : SNAP_HEADER_SIZE;
	/* the rows of each window: the global layers', the sliding ones' */
	uint32_t rows[2] = { (uint32_t)kv_win_rows(&kv->win[0], n_pos),
		sliding ? (uint32_t)kv_win_rows(&kv->win[1], n_pos) : 0 };
	uint64_t pos_offset = align_up(header + 4ull * n_pos, 8);
	uint64_t layers_offset = align_up(pos_offset + 4ull * rows[0], 8);
	uint64_t swa_offset = align_up(layers_offset + (uint64_t)meta->n_layers, 8);
	uint64_t dir_offset = version >= 6 ? align_up(swa_offset + 4ull * rows[1], 8) :
	    version >= 3 ? layers_offset : pos_offset;
	uint64_t meta_end = dir_offset + (uint64_t)SNAP_DIR_ENTRY * meta->n_layers;
	uint64_t data_offset = align_up(meta_end, SNAP_ALIGN);
	uint64_t block[2][2], stride[2][2], off, size;
	char *dir = NULL, *tmp = NULL;
	const void *data;
	void *buf = NULL;
	uint8_t *m;
	uint32_t l;
	int fd = -1, dfd, i, w, c;

	if (n_pos < 0 || n_pos > kv->seq_len || (uint32_t)kv->kv_dim != meta->kv_dim ||
	    (uint32_t)kv->n_layers != meta->n_layers || kv->k_type != meta->k_type ||
	    kv->v_type != meta->v_type || (kv_windowed(kv) && n_pos != kv->seq_len)) {
		llm_seterr("snapshot: %d positions do not fit the cache", n_pos);
		return -1;
	}
	for (i = 0; i < kv->n_layers; i++)
		for (w = KV_K; w <= KV_V; w++)
			if (!kv_ring_holds(kv, i, w, n_pos - cache_ring(kv, w, n_pos), n_pos)) {
				llm_seterr("snapshot: the ring rows of positions %d to %d are no longer in "
				    "the cache (%d written)", n_pos - cache_ring(kv, w, n_pos), n_pos - 1,
				    kv->written);
				return -1;
			}
	for (c = 0; c < 2; c++)
		for (w = KV_K; w <= KV_V; w++) {
			block[c][w] = file_block_bytes(w ? kv->v_type : kv->k_type, w, kv->kv_dim,
			    (int)rows[c], n_pos, version);
			stride[c][w] = align_up(block[c][w], SNAP_ALIGN);
		}
	size = data_offset;
	for (l = 0; l < meta->n_layers; l++)
		size += stride[sliding && kv->slides[l]][0] + stride[sliding && kv->slides[l]][1];
	m = xcalloc(1, (size_t)data_offset);
	memcpy(m + AT_MAGIC, SNAP_MAGIC, 8);
	put32(m + AT_VERSION, version);
	put32(m + AT_HEADER_SIZE, header);
	put16(m + AT_K_TYPE, (uint16_t)kv->k_type);
	put16(m + AT_V_TYPE, (uint16_t)kv->v_type);
	put32(m + AT_N_LAYERS, meta->n_layers);
	put32(m + AT_N_KV_HEADS, meta->n_kv_heads);
	put32(m + AT_HEAD_DIM, meta->head_dim);
	put32(m + AT_KV_DIM, meta->kv_dim);
	put32(m + AT_N_POS, (uint32_t)n_pos);
	put32(m + AT_MAX_CTX, meta->max_ctx);
	put32(m + AT_ROPE_DIM, meta->rope_dim);
	memcpy(m + AT_ROPE_BASE, &meta->rope_base, 4);
	put32(m + AT_ROT, (uint32_t)kv->rot);
	memcpy(m + AT_FINGERPRINT, meta->fingerprint, 32);
	put64(m + AT_TOKENS_OFFSET, header);
	put64(m + AT_DIR_OFFSET, dir_offset);
	put64(m + AT_DATA_OFFSET, data_offset);
	put64(m + AT_FILE_SIZE, size);
	for (i = 0; i < n_pos; i++)
		put32(m + header + 4 * i, (uint32_t)tokens[i]);
	if (version >= 3) {
		put32(m + AT_SINKS, (uint32_t)kv->win[0].sinks);
		put32(m + AT_WINDOW, (uint32_t)kv->win[0].window);
		put32(m + AT_N_ROWS, rows[0]);
		put64(m + AT_POSITIONS_OFFSET, pos_offset);
		for (l = 0; l < rows[0]; l++)
			put32(m + pos_offset + 4 * l, (uint32_t)kv_win_slot_pos(&kv->win[0], n_pos - 1, (int)l));
	}
	if (version >= 6) {
		/* the sliding layers: their window, which layers slide, the positions of their rows */
		put32(m + AT_SWA, (uint32_t)kv->win[1].window);
		put64(m + AT_LAYERS_OFFSET, layers_offset);
		for (l = 0; l < meta->n_layers; l++)
			m[layers_offset + l] = kv->slides[l];
		for (l = 0; l < rows[1]; l++)
			put32(m + swa_offset + 4 * l, (uint32_t)kv_win_slot_pos(&kv->win[1], n_pos - 1, (int)l));
	}
	off = data_offset;
	for (l = 0; l < meta->n_layers; l++) {
		uint8_t *e = m + dir_offset + SNAP_DIR_ENTRY * l;
		c = sliding && kv->slides[l];
		for (w = KV_K; w <= KV_V; w++) {
			uint8_t *f = e + (w ? AT_V : AT_K);
			data = block_of(kv, (int)l, w, n_pos, (size_t)block[c][w], &buf);
			put64(f + AT_OFFSET, off);
			put64(f + AT_LENGTH, block[c][w]);
			put64(f + AT_SUM, snapshot_sum(data, (size_t)block[c][w]));
			free(buf);
			off += stride[c][w];
		}
	}
	put64(m + AT_HEADER_SUM, snapshot_sum(m, (size_t)meta_end));

	buf = NULL;
	if ((fd = temp_beside(path, &tmp, &dir)) < 0) {
		int e = errno;
		free(tmp);
		tmp = NULL;	/* temp_beside removed what it made */
		errno = e;
		goto fail;
	}
	if (write_all(fd, m, (size_t)data_offset) < 0)
		goto fail;
	for (l = 0; l < meta->n_layers; l++)
		for (w = KV_K, c = sliding && kv->slides[l]; w <= KV_V; w++) {
			data = block_of(kv, (int)l, w, n_pos, (size_t)block[c][w], &buf);
			if (write_all(fd, data, (size_t)block[c][w]) < 0 ||
			    write_zeros(fd, (size_t)(stride[c][w] - block[c][w])) < 0)
				goto fail;
			free(buf);
			buf = NULL;
		}
	if (fsync(fd) < 0)
		goto fail;	/* fail closes fd */
	if (close(fd) < 0) {
		fd = -1;	/* closed even so: POSIX leaves it unspecified, Linux closes */
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0)
		goto fail;
	/* The rename is durable once the directory is synced. */
	if ((dfd = open(dir, O_RDONLY)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(m), free(tmp), free(dir);
	return 0;
fail:
	llm_seterr("%s", strerror(errno));
	if (fd >= 0)
		close(fd);	/* after llm_seterr: close may change errno */
	if (tmp)
		unlink(tmp);
	free(buf), free(m), free(tmp), free(dir);
	return -1;
}

void
snapshot_close(struct snapshot *s)
{
	unmap_file(s->map, s->size);
	free(s->dir);
	memset(s, 0, sizeof *s);
}

static int
bad(struct snapshot *s, const char *msg)
{
	llm_seterr("%s", msg);
	snapshot_close(s);
	return -1;
}

struct interval {
	uint64_t start, end;
};

static int
by_start(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/*
 * A window's rows from the file's positions table (NULL before version
 * 3), as shape lays them out: each row must hold the position the rule
 * gives it.  0, or -1 with msg.
 */
static int
win_rows(struct snapshot *s, struct snap_win *w, const struct kv *shape, const uint8_t *positions,
    char *msg, size_t len)
{
	w->ring_slot = s->n_pos / KV_GROUP * KV_GROUP;
	if (!positions)
		return 0;
	/* the rows hold the positions the window keeps, no others */
	w->positions = positions;
	for (uint32_t r = 0; r < w->n_rows; r++)
		if (get32(positions + 4 * r) != (uint32_t)kv_slot_pos(shape, 0, (int)s->n_pos - 1, (int)r)) {
			snprintf(msg, len, "row %u holds position %u, not the one its window keeps there", r,
			    get32(positions + 4 * r));
			return -1;
		}
	w->ring_slot = (uint32_t)kv_slot(shape, 0, (int)w->ring_slot);
	return 0;
}

int
snapshot_open(struct snapshot *s, const char *path)
{
	char msg[256];
	const uint8_t *h;
	uint64_t meta_end, block[2][2], file_size, sum, pos_offset, rows_end, layers_offset = 0;
	uint64_t swa_offset = 0;
	struct interval *iv;
	struct kv shape, shape_swa;
	uint32_t l, header_size, n, n_sliding = 0;
	uint8_t *copy;

	memset(s, 0, sizeof *s);
	/* Populated at once: every byte is read anyway, by the checks or the tools. */
	if (!(s->map = map_file(path, &s->size, 1)))
		return -1;
	if (s->size < SNAP_HEADER_SIZE) {
		llm_seterr("truncated: %zu bytes is too small for a snapshot header", s->size);
		unmap_file(s->map, s->size);
		s->map = NULL;
		return -1;
	}
	h = s->map;
	if (memcmp(h + AT_MAGIC, SNAP_MAGIC, 8) != 0)
		return bad(s, "bad magic: not an llm-kv snapshot");
	s->version = get32(h + AT_VERSION);
	if (s->version < 1 || s->version > SNAP_VERSION) {
		snprintf(msg, sizeof msg, "snapshot format version %u is not supported "
		    "(this build reads versions 1 to %u)", s->version, SNAP_VERSION);
		return bad(s, msg);
	}
	header_size = get32(h + AT_HEADER_SIZE);
	s->meta.k_type = get16(h + AT_K_TYPE);
	s->meta.v_type = get16(h + AT_V_TYPE);
	s->meta.rot = get32(h + AT_ROT);
	s->meta.n_layers = get32(h + AT_N_LAYERS);
	s->meta.n_kv_heads = get32(h + AT_N_KV_HEADS);
	s->meta.head_dim = get32(h + AT_HEAD_DIM);
	s->meta.kv_dim = get32(h + AT_KV_DIM);
	s->n_pos = get32(h + AT_N_POS);
	s->meta.max_ctx = get32(h + AT_MAX_CTX);
	s->meta.rope_dim = get32(h + AT_ROPE_DIM);
	memcpy(&s->meta.rope_base, h + AT_ROPE_BASE, 4);
	memcpy(s->meta.fingerprint, h + AT_FINGERPRINT, 32);
	s->dir_offset = get64(h + AT_DIR_OFFSET);
	s->data_offset = get64(h + AT_DATA_OFFSET);
	file_size = get64(h + AT_FILE_SIZE);
	if (header_size != (s->version >= 3 ? SNAP_HEADER_SIZE_3 : SNAP_HEADER_SIZE) ||
	    header_size > s->size)
		return bad(s, "bad header size");
	if (!kv_type_name(s->meta.k_type) || !kv_type_name(s->meta.v_type)) {
		snprintf(msg, sizeof msg, "%s type %d is not supported (f32 0, f16 1, q4_0 2, q8_0 8 are)",
		    kv_type_name(s->meta.k_type) ? "value" : "key",
		    kv_type_name(s->meta.k_type) ? s->meta.v_type : s->meta.k_type);
		return bad(s, msg);
	}
	if (s->version == 1 && (s->meta.k_type != KV_F32 || s->meta.v_type != KV_F32)) {
		snprintf(msg, sizeof msg, "a version 1 snapshot holds f32 keys and values, not k %s v %s",
		    kv_type_name(s->meta.k_type), kv_type_name(s->meta.v_type));
		return bad(s, msg);
	}
	/* Bounded by what a model can have, and multiplied in 64 bits: never wraps. */
	if (s->meta.n_layers < 1 || s->meta.n_layers > KV_MAX_LAYERS ||
	    s->meta.n_kv_heads < 1 || s->meta.n_kv_heads > KV_MAX_HEADS ||
	    s->meta.head_dim < 1 || s->meta.head_dim > KV_MAX_HEAD_DIM ||
	    (uint64_t)s->meta.kv_dim != (uint64_t)s->meta.n_kv_heads * s->meta.head_dim ||
	    s->meta.kv_dim > KV_MAX_DIM || s->meta.rope_dim > s->meta.head_dim ||
	    s->meta.max_ctx < 1 || s->meta.max_ctx > KV_MAX_CTX)
		return bad(s, "bad shape in header");
	if (s->meta.rot != (uint32_t)kv_rot_of(s->meta.v_type, (int)s->meta.head_dim)) {
		snprintf(msg, sizeof msg, "rotation block %u does not match %s values of head_dim %u",
		    s->meta.rot, kv_type_name(s->meta.v_type), s->meta.head_dim);
		return bad(s, msg);
	}
	s->win[0].n_rows = s->n_pos;
	pos_offset = align_up(header_size + 4ull * s->n_pos, 8);
	memset(&shape, 0, sizeof shape);
	memset(&shape_swa, 0, sizeof shape_swa);
	if (s->version >= 3) {
		s->meta.sinks = get32(h + AT_SINKS);
		s->meta.window = get32(h + AT_WINDOW);
		s->win[0].n_rows = get32(h + AT_N_ROWS);
	}
	/* versions 4 and 5: a window of 0 is none */
	if (s->version >= 4 && !s->meta.window && s->meta.sinks) {
		snprintf(msg, sizeof msg, "bad window: %u sinks without a window", s->meta.sinks);
		return bad(s, msg);
	}
	if (s->version == 3 || s->meta.window) {
		if (s->meta.sinks > KV_MAX_CTX || s->meta.window > KV_MAX_CTX ||
		    kv_window_shape(&shape, file_window_group(s->meta.k_type, s->meta.v_type, s->version),
		    (int)s->meta.max_ctx, (int)s->meta.sinks, (int)s->meta.window) < 0) {
			snprintf(msg, sizeof msg, "bad window: %s", llm_err());
			return bad(s, msg);
		}
	} else if (s->n_pos > s->meta.max_ctx) {
		snprintf(msg, sizeof msg, "n_pos %u is more than max_ctx %u", s->n_pos, s->meta.max_ctx);
		return bad(s, msg);
	}
	s->win[0].shape = shape.win[0];
	if (s->version >= 3) {
		if (s->n_pos > INT32_MAX - 1 || s->win[0].n_rows != (uint32_t)kv_rows(&shape, 0, (int)s->n_pos) ||
		    (s->version < 6 && (get32(h + AT_SWA) != 0 || get64(h + AT_LAYERS_OFFSET) != 0)) ||
		    get64(h + AT_POSITIONS_OFFSET) != pos_offset) {
			snprintf(msg, sizeof msg, "window of %u rows does not match n_pos %u", s->win[0].n_rows,
			    s->n_pos);
			return bad(s, msg);
		}
	}
	rows_end = s->version >= 3 ? pos_offset + 4ull * s->win[0].n_rows : pos_offset;
	if (s->version >= 6) {
		/* the sliding layers' window: a ring as this build's (kv_slide_shape) */
		s->meta.swa = get32(h + AT_SWA);
		if (s->meta.swa > KV_MAX_CTX || kv_slide_shape(&shape_swa.win[0],
		    file_window_group(s->meta.k_type, s->meta.v_type, s->version), (int)s->meta.swa) < 0) {
			snprintf(msg, sizeof msg, "bad sliding window %u: %s", s->meta.swa,
			    s->meta.swa > KV_MAX_CTX ? "too large" : llm_err());
			return bad(s, msg);
		}
		s->win[1].shape = shape_swa.win[0];
		s->win[1].n_rows = (uint32_t)kv_rows(&shape_swa, 0, (int)s->n_pos);
		layers_offset = align_up(rows_end, 8);
		if (get64(h + AT_LAYERS_OFFSET) != layers_offset)
			return bad(s, "bad layer table offset in header");
		swa_offset = align_up(layers_offset + s->meta.n_layers, 8);
		rows_end = swa_offset + 4ull * s->win[1].n_rows;
	}
	if (file_size != s->size) {
		snprintf(msg, sizeof msg, "%s: the file has %zu bytes, its header says %llu",
		    file_size > s->size ? "truncated" : "wrong size", s->size,
		    (unsigned long long)file_size);
		return bad(s, msg);
	}
	/* All sizes below are bounded by the checks above, so none overflows. */
	meta_end = s->dir_offset + (uint64_t)SNAP_DIR_ENTRY * s->meta.n_layers;
	if (get64(h + AT_TOKENS_OFFSET) != header_size || s->dir_offset != align_up(rows_end, 8) ||
	    s->data_offset % SNAP_ALIGN || s->data_offset < meta_end || s->data_offset > s->size)
		return bad(s, "bad token, directory or data offset in header");
	copy = xmalloc((size_t)meta_end);
	memcpy(copy, h, (size_t)meta_end);
	memset(copy + AT_HEADER_SUM, 0, 8);
	sum = snapshot_sum(copy, (size_t)meta_end);
	free(copy);
	if (sum != get64(h + AT_HEADER_SUM))
		return bad(s, "header checksum mismatch: the header, tokens or directory are corrupt");
	s->tokens = h + header_size;
	if (win_rows(s, &s->win[0], &shape, s->version >= 3 ? h + pos_offset : NULL, msg, sizeof msg) < 0)
		return bad(s, msg);
	if (s->version >= 6) {
		/* which layers slide: 0 or 1 each, and at least one */
		s->meta.slides = h + layers_offset;
		for (l = 0; l < s->meta.n_layers; l++) {
			if (s->meta.slides[l] > 1) {
				snprintf(msg, sizeof msg, "layer table: layer %u is %u, not 0 (global) or 1 "
				    "(sliding)", l, s->meta.slides[l]);
				return bad(s, msg);
			}
			n_sliding += s->meta.slides[l];
		}
		if (n_sliding == 0)
			return bad(s, "layer table: no layer slides in a version 6 snapshot");
		if (win_rows(s, &s->win[1], &shape_swa, h + swa_offset, msg, sizeof msg) < 0)
			return bad(s, msg);
	}

	for (n = 0; n < 2; n++)
		for (l = 0; l < 2; l++) {
			int type = l ? s->meta.v_type : s->meta.k_type;
			block[n][l] = file_block_bytes(type, (int)l, (int)s->meta.kv_dim,
			    (int)s->win[n].n_rows, (int)s->n_pos, s->version);
		}
	n = 2 * s->meta.n_layers;
	s->dir = xcalloc(s->meta.n_layers, sizeof *s->dir);
	iv = xcalloc(n, sizeof *iv);
	for (l = 0; l < s->meta.n_layers; l++) {
		const uint8_t *e = h + s->dir_offset + SNAP_DIR_ENTRY * l;
		struct snap_dir *d = &s->dir[l];
		const uint64_t *lb = block[s->meta.slides ? s->meta.slides[l] : 0];

		d->k_offset = get64(e + AT_K + AT_OFFSET), d->k_length = get64(e + AT_K + AT_LENGTH);
		d->k_sum = get64(e + AT_K + AT_SUM);
		d->v_offset = get64(e + AT_V + AT_OFFSET), d->v_length = get64(e + AT_V + AT_LENGTH);
		d->v_sum = get64(e + AT_V + AT_SUM);
		if (d->k_length != lb[0] || d->v_length != lb[1]) {
			snprintf(msg, sizeof msg, "layer %u: block length does not match n_pos, kv_dim "
			    "and the types", l);
			free(iv);
			return bad(s, msg);
		}
		if (d->k_offset % SNAP_ALIGN || d->v_offset % SNAP_ALIGN) {
			snprintf(msg, sizeof msg, "layer %u: block not aligned to %d bytes", l, SNAP_ALIGN);
			free(iv);
			return bad(s, msg);
		}
		if (d->k_offset < s->data_offset || d->v_offset < s->data_offset ||
		    d->k_offset > s->size || s->size - d->k_offset < lb[0] ||
		    d->v_offset > s->size || s->size - d->v_offset < lb[1]) {
			snprintf(msg, sizeof msg, "layer %u: block outside the data area of the file", l);
			free(iv);
			return bad(s, msg);
		}
		iv[2 * l] = (struct interval){ d->k_offset, d->k_offset + lb[0] };
		iv[2 * l + 1] = (struct interval){ d->v_offset, d->v_offset + lb[1] };
	}
	qsort(iv, n, sizeof *iv, by_start);
	for (l = 1; l < n; l++)
		if (iv[l].start < iv[l - 1].end) {
			free(iv);
			return bad(s, "blocks overlap");
		}
	free(iv);
	return 0;
}

void
snapshot_meta_of(struct snap_meta *meta, const struct model *m, const struct kv *kv)
{
	const struct model_config *c = &m->c;

	memset(meta, 0, sizeof *meta);
	meta->n_layers = (uint32_t)c->n_layers;
	meta->n_kv_heads = (uint32_t)c->n_kv_heads;
	meta->head_dim = (uint32_t)c->head_dim;
	meta->kv_dim = (uint32_t)c->kv_dim;
	meta->max_ctx = (uint32_t)kv->max_ctx;
	meta->rope_dim = (uint32_t)c->rope_dim;
	meta->rope_base = c->rope_base;
	meta->k_type = kv->k_type;
	meta->v_type = kv->v_type;
	meta->rot = (uint32_t)kv->rot;
	meta->sinks = (uint32_t)kv->win[0].sinks;
	meta->window = (uint32_t)kv->win[0].window;
	meta->swa = kv->slides ? (uint32_t)kv->win[1].window : 0;
	meta->slides = kv->slides;
	model_fingerprint(m, meta->fingerprint);
}

/* Whether two metas' sliding layers are the same: the same layers, the same window. */
static int
same_slides(const struct snap_meta *a, const struct snap_meta *b)
{
	if (!a->slides || !b->slides)
		return !a->slides && !b->slides;
	return a->swa == b->swa && memcmp(a->slides, b->slides, a->n_layers) == 0;
}

int
snapshot_check(const struct snapshot *s, const struct model *m, const struct kv *kv, int *what)
{
	const struct snap_meta *f = &s->meta;
	struct snap_meta want;

	snapshot_meta_of(&want, m, kv);
	*what = SNAP_MODEL;
	if (f->n_layers != want.n_layers || f->kv_dim != want.kv_dim || f->head_dim != want.head_dim) {
		llm_seterr("snapshot shape (%u layers, kv_dim %u) does not match the model's "
		    "(%u layers, kv_dim %u)", f->n_layers, f->kv_dim, want.n_layers, want.kv_dim);
		return -1;
	}
	if (f->rope_dim != want.rope_dim || f->rope_base != want.rope_base) {
		llm_seterr("snapshot RoPE (dim %u, base %g) does not match the model's (dim %u, base %g)",
		    f->rope_dim, f->rope_base, want.rope_dim, want.rope_base);
		return -1;
	}
	if (memcmp(f->fingerprint, want.fingerprint, 32) != 0) {
		llm_seterr("snapshot was made with a different model (fingerprint %02x%02x%02x%02x..., "
		    "this model %02x%02x%02x%02x...)", f->fingerprint[0], f->fingerprint[1],
		    f->fingerprint[2], f->fingerprint[3], want.fingerprint[0], want.fingerprint[1],
		    want.fingerprint[2], want.fingerprint[3]);
		return -1;
	}
	*what = SNAP_TYPES;
	if (f->k_type != want.k_type || f->v_type != want.v_type) {
		llm_seterr("the snapshot's cache is k %s v %s, this run's k %s v %s",
		    kv_type_name(f->k_type), kv_type_name(f->v_type), kv_type_name(want.k_type),
		    kv_type_name(want.v_type));
		return -1;
	}
	*what = SNAP_WINDOW;
	if (f->window != want.window || f->sinks != want.sinks) {
		llm_seterr("the snapshot's window is %u sinks and %u positions, this run's %u and %u",
		    f->sinks, f->window, want.sinks, want.window);
		return -1;
	}
	if (!same_slides(f, &want)) {
		llm_seterr("the snapshot's sliding layers keep %u positions, this run's %u", f->swa,
		    want.swa);
		return -1;
	}
	*what = 0;
	return 0;
}

uint32_t
snapshot_token(const struct snapshot *s, uint32_t pos)
{
	return get32(s->tokens + 4 * pos);
}

const void *
snapshot_block(const struct snapshot *s, uint32_t layer, int which)
{
	return s->map + (which ? s->dir[layer].v_offset : s->dir[layer].k_offset);
}

static size_t
block_length(const struct snapshot *s, uint32_t layer, int which)
{
	return (size_t)(which ? s->dir[layer].v_length : s->dir[layer].k_length);
}

void
snapshot_row(const struct snapshot *s, uint32_t layer, int which, uint32_t r, float *out)
{
	const struct snap_win *w = snapshot_win(s, layer);

	file_block_row(which ? s->meta.v_type : s->meta.k_type, which, (int)s->meta.kv_dim,
	    (int)s->meta.rot, snapshot_block(s, layer, which), (int)w->n_rows, (int)s->n_pos,
	    (int)w->ring_slot, (int)r, s->version, out);
}

uint32_t
snapshot_row_pos(const struct snapshot *s, uint32_t layer, uint32_t r)
{
	const struct snap_win *w = snapshot_win(s, layer);

	return w->positions ? get32(w->positions + 4 * r) : r;
}

uint32_t
snapshot_row_at(const struct snapshot *s, uint32_t layer, uint32_t i)
{
	const struct snap_win *w = snapshot_win(s, layer);

	/* wrapped: the sinks' slots, then the ring from the slot of position n_pos (its oldest row) */
	if (w->n_rows == s->n_pos || i < (uint32_t)w->shape.sink_slots)
		return i;
	return (uint32_t)kv_win_slot(&w->shape, (int)(s->n_pos + i) - w->shape.sink_slots);
}

int
snapshot_live(const struct snapshot *s, uint32_t layer, uint32_t pos)
{
	const struct snap_win *w = snapshot_win(s, layer);

	return pos < s->n_pos && kv_win_keeps(&w->shape, (int)pos, (int)s->n_pos);
}

long
snapshot_pos_row(const struct snapshot *s, uint32_t layer, uint32_t pos)
{
	const struct snap_win *w = snapshot_win(s, layer);

	if (!snapshot_live(s, layer, pos))
		return -1;
	return w->n_rows == s->n_pos ? (long)pos : kv_win_slot(&w->shape, (int)pos);
}

int
snapshot_verify_block(const struct snapshot *s, uint32_t layer, int which)
{
	const struct snap_dir *d = &s->dir[layer];

	if (snapshot_sum(snapshot_block(s, layer, which), block_length(s, layer, which)) !=
	    (which ? d->v_sum : d->k_sum)) {
		llm_seterr("layer %u: %c block checksum mismatch: the data is corrupt",
		    layer, which ? 'V' : 'K');
		return -1;
	}
	return 0;
}

/*
 * Whether the file holds the ring rows a cache of this build wants in K
 * or V after loading n positions: those of n's incomplete group, and for
 * q4_0 stores the whole ring, the min(n, SNAP_Q4_RING) newest, so that
 * the queries after n and a snapshot written later find theirs.
 */
static int
ring_loadable(const struct snapshot *s, int which, uint32_t n)
{
	int type = which ? s->meta.v_type : s->meta.k_type;
	uint32_t have = (uint32_t)file_ring(type, which, (int)s->n_pos, s->version);
	uint32_t want = (uint32_t)file_ring(type, which, (int)n, SNAP_VERSION);

	if (want == 0)
		return 1;
	/* files before version 5 have no q4_0 rings: only an empty cache */
	if (type == KV_Q4_0 && s->version < 5)
		return n == 0;
	return n - want >= s->n_pos - have;
}

/* Whether the file's stores with rings are all q4_0 ones, with their rings, and no window. */
static int
rings_only(const struct snapshot *s)
{
	int k = s->meta.k_type, v = s->meta.v_type;

	return s->version >= 5 && !s->meta.window && !s->meta.swa && (k == KV_Q4_0 || v == KV_Q4_0) &&
	    (k == KV_F32 || k == KV_Q4_0) && v != KV_F16;
}

/* The positions [0, n) the file can give: see snapshot_load. */
static int
loadable(const struct snapshot *s, uint32_t n)
{
	/* a wrapped ring: its old rows are overwritten */
	if (s->win[0].n_rows < s->n_pos || (s->meta.swa && s->win[1].n_rows < s->n_pos))
		return n == s->n_pos || n == 0;
	return ring_loadable(s, KV_K, n) && ring_loadable(s, KV_V, n);
}

/*
 * Positions [0, n) of the file into an empty cache: those before base
 * read in place (kv_share), the rest copied, with the ring rows.
 */
static int
load(const struct snapshot *s, struct kv *kv, uint32_t n, uint32_t base)
{
	const uint8_t *ring;
	const void **at;
	uint32_t l, p;
	int rows, w;

	if ((uint32_t)kv->n_layers != s->meta.n_layers || (uint32_t)kv->kv_dim != s->meta.kv_dim) {
		llm_seterr("snapshot shape %u layers x %u does not match the cache's %d x %d",
		    s->meta.n_layers, s->meta.kv_dim, kv->n_layers, kv->kv_dim);
		return -1;
	}
	if (kv->k_type != s->meta.k_type || kv->v_type != s->meta.v_type) {
		llm_seterr("the snapshot's cache is k %s v %s, this one k %s v %s",
		    kv_type_name(s->meta.k_type), kv_type_name(s->meta.v_type),
		    kv_type_name(kv->k_type), kv_type_name(kv->v_type));
		return -1;
	}
	if ((uint32_t)kv->win[0].sinks != s->meta.sinks || (uint32_t)kv->win[0].window != s->meta.window) {
		llm_seterr("the snapshot's window is %u sinks and %u positions, this cache's %d and %d",
		    s->meta.sinks, s->meta.window, kv->win[0].sinks, kv->win[0].window);
		return -1;
	}
	struct snap_meta mine = { .n_layers = (uint32_t)kv->n_layers,
		.swa = kv->slides ? (uint32_t)kv->win[1].window : 0, .slides = kv->slides };
	if (!same_slides(&s->meta, &mine)) {
		llm_seterr("the snapshot's sliding layers keep %u positions, this cache's %u", s->meta.swa,
		    mine.swa);
		return -1;
	}
	if (s->version == 3 && (kv->k_type == KV_F16 || kv->v_type == KV_F16)) {
		llm_seterr("a windowed f16 cache of snapshot format version 3 has its rows where "
		    "this build's do not fit (version 4 keeps f16 rings): recompute it");
		return -1;
	}
	if (n > s->n_pos || !loadable(s, n)) {
		llm_seterr("snapshot has %u positions, not %u", s->n_pos, n);
		return -1;
	}
	/*
	 * Every block is checked, even past n, once for the map: a damaged
	 * file is refused whatever part of it is used.
	 */
	for (l = 0; !s->verified && l < s->meta.n_layers; l++)
		for (w = KV_K; w <= KV_V; w++)
			if (snapshot_verify_block(s, l, w) < 0)
				return -1;
	kv_clear(kv);
	if (base > 0) {
		at = xmalloc(2 * (size_t)s->meta.n_layers * sizeof *at);
		for (l = 0; l < s->meta.n_layers; l++)
			for (w = KV_K; w <= KV_V; w++)
				at[2 * l + w] = snapshot_block(s, l, w);
		w = kv_share(kv, (int)base, at);
		free(at);
		if (w < 0)
			return -1;
	}
	if (kv_grow_to(kv, (int)n) < 0)
		return -1;
	/*
	 * The rows of [0, n) of a layer are contiguous in both the file and
	 * the cache; so are grouped keys' groups.  Those from base on are
	 * copied, and the ring rows after them go to the rings.
	 */
	for (l = 0; l < s->meta.n_layers; l++) {
		rows = kv_rows(kv, (int)l, (int)n);
		for (w = KV_K; w <= KV_V; w++) {
			size_t row = kv->ring[w] ? kv_ring_row_bytes(kv, w) : 0;
			size_t from = (size_t)kv->shared[w] * (w ? kv->v_unit : kv->k_unit);
			size_t to = main_bytes(kv, w, rows);
			if (to > from)
				memcpy((char *)kv_unit(kv, (int)l, w, kv->shared[w]),
				    (const uint8_t *)snapshot_block(s, l, w) + from, to - from);
			/* the file's ring rows are those of [n_pos - have, n_pos) */
			uint32_t have = (uint32_t)file_ring(w ? kv->v_type : kv->k_type, w,
			    (int)s->n_pos, s->version);
			ring = (const uint8_t *)snapshot_block(s, l, w) +
			    main_bytes(kv, w, (int)snapshot_win(s, l)->n_rows);
			for (p = n - (uint32_t)cache_ring(kv, w, (int)n); kv->ring[w] && p < n; p++)
				memcpy(kv_ring_row(kv, (int)l, w, (int)p),
				    ring + (size_t)(p - (s->n_pos - have)) * row, row);
		}
	}
	return kv_restore(kv, (int)n);
}

int
snapshot_load(const struct snapshot *s, struct kv *kv, uint32_t n)
{
	return load(s, kv, n, 0);
}

int
snapshot_verify(struct snapshot *s)
{
	for (uint32_t l = 0; !s->verified && l < s->meta.n_layers; l++)
		for (int w = KV_K; w <= KV_V; w++)
			if (snapshot_verify_block(s, l, w) < 0)
				return -1;
	s->verified = 1;
	return 0;
}

/*
 * The positions of [0, n) a cache reads in place, when it goes on from
 * pos: all of them for a row store of f32 and no window; else the whole
 * groups before pos, whose units no later write touches (the rest, and
 * the rings, are copied); none where the window may wrap or the cache
 * could not share them.
 */
static uint32_t
share_base(const struct snapshot *s, const struct kv *kv, uint32_t n, uint32_t pos)
{
	if (s->meta.window || s->meta.swa || kv_windowed(kv))
		return 0;
	if (!kv->ring[KV_K] && !kv->ring[KV_V] && !kv_grouped(kv))
		return n < pos ? n : pos;
	return (n < pos ? n : pos) / KV_GROUP * KV_GROUP;
}

int
snapshot_resume(const struct snapshot *s, struct kv *kv, const int *ids, int n_ids)
{
	uint32_t lcp = 0;

	while (lcp < s->n_pos && (int)lcp < n_ids && snapshot_token(s, lcp) == (uint32_t)ids[lcp])
		lcp++;
	if (lcp > 0 && (int)lcp == n_ids) {
		/*
		 * The last token is computed again, for its logits.  q4_0 rings
		 * are in the file for its last position only: the whole file is
		 * loaded and that position written again, to the same rows.
		 */
		if (lcp == s->n_pos && rings_only(s))
			return load(s, kv, lcp, share_base(s, kv, lcp, lcp - 1)) < 0 ? -1 : (int)lcp - 1;
		lcp--;
	}
	/*
	 * Grouped keys and f16 stores: the rest of lcp's group is recomputed;
	 * a wrapped window, or q4_0 stores short of the file's ring: everything.
	 */
	if (!loadable(s, lcp))
		lcp = loadable(s, lcp / KV_GROUP * KV_GROUP) ? lcp / KV_GROUP * KV_GROUP : 0;
	return load(s, kv, lcp, share_base(s, kv, lcp, lcp)) < 0 ? -1 : (int)lcp;
}

void
snapshot_slice_rows(const struct snapshot *s, const struct snap_slice *sl, uint32_t layer,
    uint32_t *p0, uint32_t *p1)
{
	int c = s->meta.slides ? s->meta.slides[layer] : 0;

	*p0 = sl->p0[c];
	*p1 = sl->p1[c];
}

int
snapshot_slice_check(const struct snapshot *s, struct snap_slice *sl)
{
	const struct snap_meta *m = &s->meta;

	if (sl->layer >= (long)m->n_layers) {
		llm_seterr("layer %ld is out of range (0-%u)", sl->layer, m->n_layers - 1);
		sl->bad = SLICE_LAYER;
		return -1;
	}
	if (sl->head >= (long)m->n_kv_heads) {
		llm_seterr("head %ld is out of range (0-%u)", sl->head, m->n_kv_heads - 1);
		sl->bad = SLICE_HEAD;
		return -1;
	}
	if (sl->have_pos && s->n_pos == 0) {
		llm_seterr("position %ld is out of range: the snapshot holds no positions", sl->pos_a);
		sl->bad = SLICE_POS;
		return -1;
	}
	if (sl->have_pos && (sl->pos_a < 0 || sl->pos_b < sl->pos_a || sl->pos_b >= (long)s->n_pos)) {
		if (sl->pos_a == sl->pos_b)
			llm_seterr("position %ld is out of range (0-%u)", sl->pos_a, s->n_pos - 1);
		else
			llm_seterr("positions %ld-%ld are out of range (0-%u)", sl->pos_a, sl->pos_b,
			    s->n_pos - 1);
		sl->bad = SLICE_POS;
		return -1;
	}
	sl->l0 = sl->layer < 0 ? 0 : (uint32_t)sl->layer;
	sl->l1 = sl->layer < 0 ? m->n_layers : (uint32_t)sl->layer + 1;
	for (int c = 0; c < 2; c++) {
		const struct snap_win *w = &s->win[c];
		uint32_t l;
		/* the first selected layer of this window, if any */
		for (l = sl->l0; l < sl->l1 && (m->slides ? m->slides[l] : 0) != c; l++)
			;
		sl->p0[c] = 0;
		sl->p1[c] = w->n_rows;
		if (l == sl->l1)
			continue;
		/* a sliding layer's ring keeps some rows it no longer reads, the oldest: not its */
		while (c == 1 && sl->p0[c] < w->n_rows &&
		    !snapshot_live(s, l, snapshot_row_pos(s, l, snapshot_row_at(s, l, sl->p0[c]))))
			sl->p0[c]++;
		if (!sl->have_pos)
			continue;
		/* the stored positions in [A, B]; a window may have evicted some or all */
		while (sl->p0[c] < w->n_rows &&
		    snapshot_row_pos(s, l, snapshot_row_at(s, l, sl->p0[c])) < sl->pos_a)
			sl->p0[c]++;
		while (sl->p1[c] > sl->p0[c] &&
		    snapshot_row_pos(s, l, snapshot_row_at(s, l, sl->p1[c] - 1)) > sl->pos_b)
			sl->p1[c]--;
		if (sl->p0[c] == sl->p1[c] && c == 0) {
			llm_seterr("positions %ld-%ld are evicted from the window (%u sinks, then "
			    "positions %u-%u)", sl->pos_a, sl->pos_b, m->sinks, s->n_pos > m->window ?
			    s->n_pos - m->window : 0, s->n_pos - 1);
			sl->bad = SLICE_POS;
			return -1;
		}
		if (sl->p0[c] == sl->p1[c]) {
			llm_seterr("positions %ld-%ld are evicted from layer %u's sliding window "
			    "(positions %u-%u)", sl->pos_a, sl->pos_b, l, s->n_pos > m->swa ?
			    s->n_pos - m->swa : 0, s->n_pos - 1);
			sl->bad = SLICE_POS;
			return -1;
		}
	}
	/* head * head_dim < n_kv_heads * head_dim = kv_dim, which the open bounded */
	sl->d0 = sl->head < 0 ? 0 : (uint32_t)sl->head * m->head_dim;
	sl->d1 = sl->head < 0 ? m->kv_dim : sl->d0 + m->head_dim;
	return 0;
}
