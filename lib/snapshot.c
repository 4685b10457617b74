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

#include "kv.h"
#include "snapshot.h"
#include "util.h"

#define P64 0x9E3779B97F4A7C15ull

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

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
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

int
snapshot_write(const char *path, const struct snap_meta *meta, const struct kv *kv,
    const int *tokens, int n_pos)
{
	uint64_t dir_offset = align_up(SNAP_HEADER_SIZE + 4ull * n_pos, 8);
	uint64_t meta_end = dir_offset + (uint64_t)SNAP_DIR_ENTRY * meta->n_layers;
	uint64_t data_offset = align_up(meta_end, SNAP_ALIGN);
	uint64_t block = (uint64_t)n_pos * meta->kv_dim * sizeof(float);
	uint64_t stride = align_up(block, SNAP_ALIGN), off;
	char *copy = strdup(path), *dir = strdup(dirname(copy)), *tmp = NULL;
	uint8_t *m;
	uint32_t l;
	int fd = -1, dfd, i;

	if (n_pos < 0 || n_pos > kv->seq_len || (uint32_t)kv->kv_dim != meta->kv_dim ||
	    (uint32_t)kv->n_layers != meta->n_layers) {
		llm_seterr("snapshot: %d positions do not fit the cache", n_pos);
		free(copy), free(dir);
		return -1;
	}
	m = xcalloc(1, (size_t)data_offset);
	memcpy(m, SNAP_MAGIC, 8);
	put32(m + 8, SNAP_VERSION);
	put32(m + 12, SNAP_HEADER_SIZE);
	put32(m + 16, SNAP_F32);
	put32(m + 20, meta->n_layers);
	put32(m + 24, meta->n_kv_heads);
	put32(m + 28, meta->head_dim);
	put32(m + 32, meta->kv_dim);
	put32(m + 36, (uint32_t)n_pos);
	put32(m + 40, meta->max_ctx);
	put32(m + 44, meta->rope_dim);
	memcpy(m + 48, &meta->rope_base, 4);
	put32(m + 52, 0);
	memcpy(m + 56, meta->fingerprint, 32);
	put64(m + 88, SNAP_HEADER_SIZE);
	put64(m + 96, dir_offset);
	put64(m + 104, data_offset);
	put64(m + 112, data_offset + 2 * stride * meta->n_layers);
	for (i = 0; i < n_pos; i++)
		put32(m + SNAP_HEADER_SIZE + 4 * i, (uint32_t)tokens[i]);
	off = data_offset;
	for (l = 0; l < meta->n_layers; l++) {
		uint8_t *e = m + dir_offset + SNAP_DIR_ENTRY * l;
		/* Rows [0, n_pos) of a layer are contiguous in the cache. */
		put64(e, off);
		put64(e + 8, block);
		put64(e + 16, snapshot_sum(kv_k_read(kv, (int)l, 0), (size_t)block));
		put64(e + 24, off + stride);
		put64(e + 32, block);
		put64(e + 40, snapshot_sum(kv_v_read(kv, (int)l, 0), (size_t)block));
		off += 2 * stride;
	}
	put64(m + 120, snapshot_sum(m, (size_t)meta_end));

	tmp = xmalloc(strlen(path) + 32);
	{
		char *base = strdup(path), *b = basename(base);
		snprintf(tmp, strlen(path) + 32, "%s/.%s.tmp-XXXXXX", dir, b);
		free(base);
	}
	if ((fd = mkstemp(tmp)) < 0)
		goto fail;
	{
		/* mkstemp makes 0600; give the file the mode a plain creat would. */
		mode_t mask = umask(0);
		umask(mask);
		if (fchmod(fd, 0666 & ~mask) < 0)
			goto fail;
	}
	if (write_all(fd, m, (size_t)data_offset) < 0)
		goto fail;
	for (l = 0; l < meta->n_layers; l++)
		if (write_all(fd, kv_k_read(kv, (int)l, 0), (size_t)block) < 0 ||
		    write_zeros(fd, (size_t)(stride - block)) < 0 ||
		    write_all(fd, kv_v_read(kv, (int)l, 0), (size_t)block) < 0 ||
		    write_zeros(fd, (size_t)(stride - block)) < 0)
			goto fail;
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
	free(m), free(tmp), free(copy), free(dir);
	return 0;
fail:
	llm_seterr("%s", strerror(errno));
	if (fd >= 0)
		close(fd);	/* after llm_seterr: close may change errno */
	if (tmp)
		unlink(tmp);
	free(m), free(tmp), free(copy), free(dir);
	return -1;
}

void
snapshot_close(struct snapshot *s)
{
	if (s->map)
		munmap((void *)s->map, s->size);
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

int
snapshot_open(struct snapshot *s, const char *path)
{
	char msg[256];
	struct stat st;
	const uint8_t *h;
	uint64_t meta_end, block, file_size, sum;
	struct interval *iv;
	uint32_t l, header_size, n;
	uint8_t *copy;
	int fd;

	memset(s, 0, sizeof *s);
	if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
		llm_seterr("%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < SNAP_HEADER_SIZE) {
		close(fd);
		llm_seterr(S_ISREG(st.st_mode) ? "truncated: %lld bytes is too small for a snapshot header"
		    : "not a regular file", (long long)st.st_size);
		return -1;
	}
	s->size = (size_t)st.st_size;
	/* Populated at once: every byte is read anyway, by the checks or the tools. */
	s->map = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		llm_seterr("mmap: %s", strerror(errno));
		return -1;
	}
	h = s->map;
	if (memcmp(h, SNAP_MAGIC, 8) != 0)
		return bad(s, "bad magic: not an llm-kv snapshot");
	s->version = get32(h + 8);
	if (s->version != SNAP_VERSION) {
		snprintf(msg, sizeof msg, "snapshot format version %u is not supported "
		    "(this build reads version %u)", s->version, SNAP_VERSION);
		return bad(s, msg);
	}
	header_size = get32(h + 12);
	s->elem_type = get32(h + 16);
	s->meta.n_layers = get32(h + 20);
	s->meta.n_kv_heads = get32(h + 24);
	s->meta.head_dim = get32(h + 28);
	s->meta.kv_dim = get32(h + 32);
	s->n_pos = get32(h + 36);
	s->meta.max_ctx = get32(h + 40);
	s->meta.rope_dim = get32(h + 44);
	memcpy(&s->meta.rope_base, h + 48, 4);
	memcpy(s->meta.fingerprint, h + 56, 32);
	s->dir_offset = get64(h + 96);
	s->data_offset = get64(h + 104);
	file_size = get64(h + 112);
	if (header_size != SNAP_HEADER_SIZE)
		return bad(s, "bad header size");
	if (s->elem_type != SNAP_F32) {
		snprintf(msg, sizeof msg, "element type %u is not supported (this build reads f32, 0)",
		    s->elem_type);
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
	if (s->n_pos > s->meta.max_ctx) {
		snprintf(msg, sizeof msg, "n_pos %u is more than max_ctx %u", s->n_pos, s->meta.max_ctx);
		return bad(s, msg);
	}
	if (file_size != s->size) {
		snprintf(msg, sizeof msg, "%s: the file has %zu bytes, its header says %llu",
		    file_size > s->size ? "truncated" : "wrong size", s->size,
		    (unsigned long long)file_size);
		return bad(s, msg);
	}
	/* All sizes below are bounded by the checks above, so none overflows. */
	meta_end = s->dir_offset + (uint64_t)SNAP_DIR_ENTRY * s->meta.n_layers;
	if (get64(h + 88) != SNAP_HEADER_SIZE ||
	    s->dir_offset != align_up(SNAP_HEADER_SIZE + 4ull * s->n_pos, 8) ||
	    s->data_offset % SNAP_ALIGN || s->data_offset < meta_end || s->data_offset > s->size)
		return bad(s, "bad token, directory or data offset in header");
	copy = xmalloc((size_t)meta_end);
	memcpy(copy, h, (size_t)meta_end);
	memset(copy + 120, 0, 8);
	sum = snapshot_sum(copy, (size_t)meta_end);
	free(copy);
	if (sum != get64(h + 120))
		return bad(s, "header checksum mismatch: the header, tokens or directory are corrupt");
	s->tokens = h + SNAP_HEADER_SIZE;

	block = (uint64_t)s->n_pos * s->meta.kv_dim * sizeof(float);
	n = 2 * s->meta.n_layers;
	s->dir = xcalloc(s->meta.n_layers, sizeof *s->dir);
	iv = xcalloc(n, sizeof *iv);
	for (l = 0; l < s->meta.n_layers; l++) {
		const uint8_t *e = h + s->dir_offset + SNAP_DIR_ENTRY * l;
		struct snap_dir *d = &s->dir[l];

		d->k_offset = get64(e), d->k_length = get64(e + 8), d->k_sum = get64(e + 16);
		d->v_offset = get64(e + 24), d->v_length = get64(e + 32), d->v_sum = get64(e + 40);
		if (d->k_length != block || d->v_length != block) {
			snprintf(msg, sizeof msg, "layer %u: block length does not match n_pos x kv_dim", l);
			free(iv);
			return bad(s, msg);
		}
		if (d->k_offset % SNAP_ALIGN || d->v_offset % SNAP_ALIGN) {
			snprintf(msg, sizeof msg, "layer %u: block not aligned to %d bytes", l, SNAP_ALIGN);
			free(iv);
			return bad(s, msg);
		}
		if (d->k_offset < s->data_offset || d->v_offset < s->data_offset ||
		    d->k_offset > s->size || s->size - d->k_offset < block ||
		    d->v_offset > s->size || s->size - d->v_offset < block) {
			snprintf(msg, sizeof msg, "layer %u: block outside the data area of the file", l);
			free(iv);
			return bad(s, msg);
		}
		iv[2 * l] = (struct interval){ d->k_offset, d->k_offset + block };
		iv[2 * l + 1] = (struct interval){ d->v_offset, d->v_offset + block };
	}
	qsort(iv, n, sizeof *iv, by_start);
	for (l = 1; l < n && block > 0; l++)
		if (iv[l].start < iv[l - 1].end) {
			free(iv);
			return bad(s, "blocks overlap");
		}
	free(iv);
	return 0;
}

uint32_t
snapshot_token(const struct snapshot *s, uint32_t pos)
{
	return get32(s->tokens + 4 * pos);
}

const float *
snapshot_block(const struct snapshot *s, uint32_t layer, int which)
{
	return (const float *)(s->map + (which ? s->dir[layer].v_offset : s->dir[layer].k_offset));
}

int
snapshot_verify_block(const struct snapshot *s, uint32_t layer, int which)
{
	const struct snap_dir *d = &s->dir[layer];

	if (snapshot_sum(snapshot_block(s, layer, which), (size_t)d->k_length) !=
	    (which ? d->v_sum : d->k_sum)) {
		llm_seterr("layer %u: %c block checksum mismatch: the data is corrupt",
		    layer, which ? 'V' : 'K');
		return -1;
	}
	return 0;
}

/*
 * Check a block's sum and copy its first ncopy bytes to dst, in one pass:
 * each segment is summed right after it is copied, while it is in cache.
 */
static int
verify_copy(const struct snapshot *s, uint32_t layer, int which, void *dst, size_t ncopy)
{
	enum { SEG = 1 << 16 };
	const uint8_t *src = (const uint8_t *)snapshot_block(s, layer, which);
	size_t len = (size_t)s->dir[layer].k_length, off, n;
	struct sum_state st;

	sum_init(&st);
	for (off = 0; off < len; off += n) {
		n = len - off < SEG ? len - off : SEG;
		if (off < ncopy)
			memcpy((uint8_t *)dst + off, src + off, ncopy - off < n ? ncopy - off : n);
		sum_update(&st, src + off, n);
	}
	if (sum_final(&st) != (which ? s->dir[layer].v_sum : s->dir[layer].k_sum)) {
		llm_seterr("layer %u: %c block checksum mismatch: the data is corrupt",
		    layer, which ? 'V' : 'K');
		return -1;
	}
	return 0;
}

int
snapshot_load(const struct snapshot *s, struct kv *kv, uint32_t n)
{
	size_t row = (size_t)s->meta.kv_dim * sizeof(float);
	uint32_t l;

	if ((uint32_t)kv->n_layers != s->meta.n_layers || (uint32_t)kv->kv_dim != s->meta.kv_dim) {
		llm_seterr("snapshot shape %u layers x %u does not match the cache's %d x %d",
		    s->meta.n_layers, s->meta.kv_dim, kv->n_layers, kv->kv_dim);
		return -1;
	}
	if (n > s->n_pos) {
		llm_seterr("snapshot has %u positions, not %u", s->n_pos, n);
		return -1;
	}
	kv_clear(kv);
	if (kv_set_seq_len(kv, (int)n) < 0)
		return -1;
	/*
	 * Every block is checked, even past n: a damaged file is refused
	 * whatever part of it is used.  Rows [0, n) of a layer are contiguous
	 * in both the file and the cache.
	 */
	for (l = 0; l < s->meta.n_layers; l++)
		if (verify_copy(s, l, 0, kv_k_write(kv, (int)l, 0), n * row) < 0 ||
		    verify_copy(s, l, 1, kv_v_write(kv, (int)l, 0), n * row) < 0) {
			kv_clear(kv);
			return -1;
		}
	return 0;
}

int
snapshot_resume(const struct snapshot *s, struct kv *kv, const int *ids, int n_ids)
{
	uint32_t lcp = 0;

	while (lcp < s->n_pos && (int)lcp < n_ids && snapshot_token(s, lcp) == (uint32_t)ids[lcp])
		lcp++;
	if (lcp > 0 && (int)lcp == n_ids)
		lcp--;
	return snapshot_load(s, kv, lcp) < 0 ? -1 : (int)lcp;
}

static int
parse_whole(const char *s, const char *end, long *v)
{
	long x = 0;

	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || x > (INT32_MAX - (*s - '0')) / 10)
			return -1;
		x = x * 10 + (*s - '0');
	}
	*v = x;
	return 0;
}

int
snapshot_parse_range(const char *s, long *a, long *b)
{
	const char *dash = strchr(s, '-'), *end = s + strlen(s);

	if (parse_whole(s, dash ? dash : end, a) < 0 ||
	    (dash && (parse_whole(dash + 1, end, b) < 0 || *b < *a))) {
		llm_seterr("'%.40s': expected a position A or a range A-B, "
		    "whole numbers with A <= B", s);
		return -1;
	}
	if (!dash)
		*b = *a;
	return 0;
}

int
snapshot_slice_check(const struct snapshot *s, struct snap_slice *sl)
{
	const struct snap_meta *m = &s->meta;

	if (sl->layer >= (long)m->n_layers) {
		llm_seterr("--layer %ld is out of range (0-%u)", sl->layer, m->n_layers - 1);
		return -1;
	}
	if (sl->head >= (long)m->n_kv_heads) {
		llm_seterr("--head %ld is out of range (0-%u)", sl->head, m->n_kv_heads - 1);
		return -1;
	}
	if (sl->have_pos && s->n_pos == 0) {
		llm_seterr("--pos %ld is out of range: the snapshot holds no positions", sl->pos_a);
		return -1;
	}
	if (sl->have_pos && (sl->pos_a < 0 || sl->pos_b < sl->pos_a || sl->pos_b >= (long)s->n_pos)) {
		if (sl->pos_a == sl->pos_b)
			llm_seterr("--pos %ld is out of range (0-%u)", sl->pos_a, s->n_pos - 1);
		else
			llm_seterr("--pos %ld-%ld is out of range (0-%u)", sl->pos_a, sl->pos_b,
			    s->n_pos - 1);
		return -1;
	}
	sl->l0 = sl->layer < 0 ? 0 : (uint32_t)sl->layer;
	sl->l1 = sl->layer < 0 ? m->n_layers : (uint32_t)sl->layer + 1;
	sl->p0 = sl->have_pos ? (uint32_t)sl->pos_a : 0;
	sl->p1 = sl->have_pos ? (uint32_t)sl->pos_b + 1 : s->n_pos;
	/* head * head_dim < n_kv_heads * head_dim = kv_dim, which the open bounded */
	sl->d0 = sl->head < 0 ? 0 : (uint32_t)sl->head * m->head_dim;
	sl->d1 = sl->head < 0 ? m->kv_dim : sl->d0 + m->head_dim;
	return 0;
}
