/*
 * test_snapshot: resuming from an llm-kv(5) file gives bitwise the same
 * logits as computing from scratch, and damaged files are refused.
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <errno.h>
#include <unistd.h>

#include "../lib/kvpriv.h"
#include "../lib/gguf.h"
#include "../lib/kv.h"
#include "../lib/model.h"
#include "../lib/quant.h"
#include "../lib/snapshot.h"
#include "../cmd/tool.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/fixture.h"

static char dir[256], model_path[300], snap_path[300], bad_path[300];
static struct model m;
static struct model_run mr;

static void
meta_of(const struct kv *kv, struct snap_meta *meta)
{
	snapshot_meta_of(meta, &m, kv);
}

/* Run ids[from..n) on the cache; logits of every position go to out[pos]. */
static void
run(struct kv *kv, const int *ids, int from, int n, float *out)
{
	for (int pos = from; pos < n; pos++) {
		if (model_forward(&mr, kv, ids + pos, 1, pos, MODEL_OUT_LAST, NULL) < 0)
			die(1, "forward: %s", llm_err());
		memcpy(out + (size_t)pos * m.c.vocab_size, mr.logits, m.c.vocab_size * sizeof *mr.logits);
	}
}

/* Greedy continuation: append k tokens to ids (which has room). */
static int
extend_greedy(const int *ids_in, int n, int k, int *ids)
{
	struct kv kv;
	float *logits = xmalloc((size_t)(n + k) * m.c.vocab_size * sizeof *logits);

	memcpy(ids, ids_in, (size_t)n * sizeof *ids);
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
	for (int i = 0; i < k; i++) {
		run(&kv, ids, kv.seq_len, n + i, logits);
		const float *l = logits + (size_t)(n + i - 1) * m.c.vocab_size;
		int best = 0;
		for (int v = 1; v < m.c.vocab_size; v++)
			if (l[v] > l[best])
				best = v;
		ids[n + i] = best;
	}
	kv_free(&kv);
	free(logits);
	return n + k;
}

/* The cache types and window the resume tests run with; f32, no window, unless a test sets them. */
static int k_type = KV_F32, v_type = KV_F32, sinks, window;

static void
new_cache(struct kv *kv)
{
	if (kv_init_types(kv, m.c.n_layers, m.c.n_kv_heads, m.c.head_dim, 512, 0, k_type, v_type) < 0 ||
	    (window && kv_set_window(kv, sinks, window) < 0))
		die(1, "%s", llm_err());
}

/*
 * Save the cache after running saved[0..n_saved), resume with ids[0..n)
 * and check every logit computed after the resume equals the scratch run.
 */
static int
resume_matches_scratch(const int *saved, int n_saved, const int *ids, int n, const char *what)
{
	struct kv a, b;
	struct snapshot s;
	struct snap_meta meta;
	size_t V = (size_t)m.c.vocab_size;
	size_t most = (size_t)(n > n_saved ? n : n_saved);
	float *scratch = xmalloc(most * V * sizeof(float));
	float *resumed = xmalloc(most * V * sizeof(float));
	int reused, ok;

	new_cache(&a);
	run(&a, saved, 0, n_saved, scratch);
	meta_of(&a, &meta);
	CHECK(snapshot_write(snap_path, &meta, &a, saved, n_saved) == 0, "%s", llm_err());
	kv_free(&a);

	new_cache(&a);
	run(&a, ids, 0, n, scratch);
	new_cache(&b);
	CHECK(snapshot_open(&s, snap_path) == 0, "%s", llm_err());
	reused = snapshot_resume(&s, &b, ids, n);	/* b reads s in place: s stays open */
	CHECK(reused >= 0, "%s: %s", what, llm_err());
	run(&b, ids, reused, n, resumed);
	ok = memcmp(scratch + (size_t)reused * V, resumed + (size_t)reused * V,
	    (size_t)(n - reused) * V * sizeof(float)) == 0;
	CHECK(ok, "%s: resumed logits differ from scratch", what);
	CHECK(b.seq_len == a.seq_len && b.cap <= a.cap, "%s: len %d/%d cap %d/%d",
	    what, b.seq_len, a.seq_len, b.cap, a.cap);
	kv_free(&a), kv_free(&b);
	snapshot_close(&s);
	free(scratch), free(resumed);
	return reused;
}

/*
 * Every cache type resumes bitwise as it recomputes.  q8_0 keys and f16
 * stores keep the exact tail rows of the last group only, so a prefix
 * that ends inside an earlier group is cut back to its start.  q4_0
 * stores keep the ring of the 160 newest: a prefix is reused
 * whole if the file holds the ring's rows for it (no more than 160
 * positions saved), or not at all; the whole file is reused with its
 * last position written again.
 */
static void
every_cache_type_resumes_bitwise(void)
{
	static const int types[][2] = { { KV_F16, KV_F16 }, { KV_Q8_0, KV_Q8_0 },
		{ KV_Q4_0, KV_Q4_0 }, { KV_Q4_0, KV_F32 }, { KV_F32, KV_Q8_0 }, { KV_F32, KV_Q4_0 },
		{ KV_Q8_0, KV_Q4_0 } };
	int base[200], ids[300], r, tailed, ring;

	for (int i = 0; i < 200; i++)
		base[i] = (i * 37 + 11) % m.c.vocab_size;
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		const char *k = kv_type_name(types[t][0]), *v = kv_type_name(types[t][1]);
		k_type = types[t][0], v_type = types[t][1];
		tailed = k_type == KV_Q8_0 || k_type == KV_F16 || v_type == KV_F16;
		ring = k_type == KV_Q4_0 || v_type == KV_Q4_0;
		/* within the last group (150 = 4 groups and 22) */
		r = resume_matches_scratch(base, 150, base, 200, k);
		CHECK(r == 150, "k %s v %s: extension reused %d", k, v, r);
		/* inside an earlier group: 100 reused, or 96 with tails */
		memcpy(ids, base, sizeof base);
		ids[100] = (ids[100] + 1) % m.c.vocab_size;
		r = resume_matches_scratch(base, 150, ids, 180, k);
		CHECK(r == (tailed ? 96 : 100), "k %s v %s: divergent reused %d", k, v, r);
		/* the same past 160 positions: q4_0 rings have the last 160 only */
		r = resume_matches_scratch(base, 200, ids, 180, k);
		CHECK(r == (ring ? 0 : tailed ? 96 : 100), "k %s v %s: divergent in 200 reused %d",
		    k, v, r);
		/* on a group's end */
		r = resume_matches_scratch(base, 150, base, 65, k);
		CHECK(r == 64, "k %s v %s: a prefix of 65 reused %d", k, v, r);
		/* the whole file again, its last position a group's last */
		r = resume_matches_scratch(base, 192, base, 192, k);
		CHECK(r == (ring ? (tailed ? 0 : 191) : tailed ? 160 : 191),
		    "k %s v %s: the same 192 reused %d", k, v, r);
	}
	k_type = v_type = KV_F32;
}

/*
 * A windowed cache resumes bitwise too, for every type: after its ring
 * has wrapped (all positions or none: the old rows are overwritten), and
 * before (as a plain cache).
 */
static void
windowed_caches_resume_bitwise(void)
{
	static const int types[][2] = { { KV_F32, KV_F32 }, { KV_F16, KV_F16 },
		{ KV_Q8_0, KV_Q8_0 }, { KV_Q4_0, KV_Q4_0 }, { KV_Q4_0, KV_F32 } };
	int base[400], ids[400], r, tailed;

	for (int i = 0; i < 400; i++)
		base[i] = (i * 37 + 11) % m.c.vocab_size;
	sinks = 4, window = 100;
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		k_type = types[t][0], v_type = types[t][1];
		/* q4_0 keys' ring holds all of the 90 saved below */
		tailed = k_type == KV_Q8_0 || k_type == KV_F16 || v_type == KV_F16;
		/* slid far past the window: 300 positions saved, 400 wanted */
		r = resume_matches_scratch(base, 300, base, 400, kv_type_name(k_type));
		CHECK(r == 300, "k %s v %s: extension reused %d", kv_type_name(k_type),
		    kv_type_name(v_type), r);
		/* the input diverges inside the slid window: nothing can be reused */
		memcpy(ids, base, sizeof base);
		ids[250] = (ids[250] + 1) % m.c.vocab_size;
		r = resume_matches_scratch(base, 300, ids, 320, kv_type_name(k_type));
		CHECK(r == 0, "k %s v %s: divergent reused %d", kv_type_name(k_type),
		    kv_type_name(v_type), r);
		/* not wrapped yet: a prefix is reused as without a window */
		ids[50] = (ids[50] + 1) % m.c.vocab_size;
		r = resume_matches_scratch(base, 90, ids, 120, kv_type_name(k_type));
		CHECK(r == (tailed ? 32 : 50), "k %s v %s: unwrapped divergent reused %d",
		    kv_type_name(k_type), kv_type_name(v_type), r);
	}
	k_type = v_type = KV_F32;
	sinks = window = 0;
}

static void
resume_with_full_partial_and_no_overlap_is_bitwise_identical(void)
{
	int base[200], ids[300], r;

	for (int i = 0; i < 200; i++)
		base[i] = (i * 37 + 11) % m.c.vocab_size;
	/* the input is the snapshot exactly: all but the last position reused */
	r = resume_matches_scratch(base, 150, base, 150, "full");
	CHECK(r == 149, "full overlap reused %d", r);
	/* the input is a prefix of the snapshot */
	r = resume_matches_scratch(base, 150, base, 90, "prefix");
	CHECK(r == 89, "prefix reused %d", r);
	/* the input extends the snapshot */
	r = resume_matches_scratch(base, 70, base, 200, "extend");
	CHECK(r == 70, "extension reused %d", r);
	/* the input diverges in the middle */
	memcpy(ids, base, sizeof base);
	ids[100] = (ids[100] + 1) % m.c.vocab_size;
	r = resume_matches_scratch(base, 150, ids, 180, "diverge");
	CHECK(r == 100, "divergent reused %d", r);
	/* nothing in common */
	ids[0] = (base[0] + 1) % m.c.vocab_size;
	r = resume_matches_scratch(base, 150, ids, 120, "none");
	CHECK(r == 0, "no overlap reused %d", r);
}

static void
multi_turn_chat_resumes_bitwise_identically(void)
{
	int turn[400], n = 0, k;
	const int user[3][6] = { { 1, 40, 41, 42, 43, 44 }, { 50, 51, 52 }, { 60, 61, 62, 63 } };

	/* Each turn: the user's tokens, then 20 generated; the next turn resumes. */
	for (int t = 0; t < 3; t++) {
		int before = n;
		for (k = 0; k < (t == 0 ? 6 : t == 1 ? 3 : 4); k++)
			turn[n++] = user[t][k];
		int prev = before;
		n = extend_greedy(turn, n, 20, turn);
		if (t > 0) {
			int r = resume_matches_scratch(turn, prev, turn, n, "turn");
			CHECK(r == prev, "turn %d reused %d of %d", t, r, prev);
		}
	}
	CHECK(n == 6 + 3 + 4 + 60, "n %d", n);
}

/* ---- damaged files ---- */

static unsigned char *img;
static size_t img_len;

static void
make_good_snapshot(void)
{
	struct kv kv;
	struct snap_meta meta;
	int ids[100];
	float *logits = xmalloc(100 * (size_t)m.c.vocab_size * sizeof *logits);

	for (int i = 0; i < 100; i++)
		ids[i] = (i * 13 + 5) % m.c.vocab_size;
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
	run(&kv, ids, 0, 100, logits);
	meta_of(&kv, &meta);
	if (snapshot_write(snap_path, &meta, &kv, ids, 100) < 0)
		die(1, "%s: %s", snap_path, llm_err());
	kv_free(&kv);
	free(logits);
	if (!(img = read_whole(snap_path, &img_len)))
		die(1, "%s:", snap_path);
}

static void
write_bad(const unsigned char *p, size_t n)
{
	write_whole(bad_path, p, n);
}

/* Open and fully load; 1 if refused with a message containing want. */
static int
refused(const char *want)
{
	struct snapshot s;
	struct kv kv;
	int r;

	if (snapshot_open(&s, bad_path) == 0) {
		kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
		r = snapshot_load(&s, &kv, s.n_pos);
		kv_free(&kv);
		snapshot_close(&s);
		if (r == 0)
			return 0;
	}
	if (want && !strstr(llm_err(), want)) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", llm_err(), want);
		return 0;
	}
	return 1;
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* A hostile file carries a valid header checksum: recompute it. */
static void
fix_sum(unsigned char *p)
{
	uint64_t dir_off = get64(p + 96), end = dir_off + 48ull * m.c.n_layers;

	put64(p + 120, 0);
	put64(p + 120, snapshot_sum(p, (size_t)end));
}

static void
good_snapshot_loads(void)
{
	write_bad(img, img_len);
	CHECK(!refused(NULL), "the good file was refused: %s", llm_err());
	CHECK(img_len % 4096 == 0, "size %zu", img_len);
}

static void
every_truncation_is_refused(void)
{
	size_t n, accepted = 0;

	for (n = 0; n < img_len; n += n < 8192 ? 1 : 509) {
		write_bad(img, n);
		accepted += !refused(NULL);
	}
	CHECK(accepted == 0, "%zu truncated files accepted", accepted);
	write_bad(img, img_len - 1);
	CHECK(refused("truncated"), "one byte short");
}

static void
flipped_byte_in_a_block_is_refused(void)
{
	unsigned char *p = xmalloc(img_len);
	uint64_t v1 = get64(img + 128 + 400 + 48 * 1 + 24);	/* layer 1's V block */

	memcpy(p, img, img_len);
	p[v1 + 1234] ^= 0x10;
	write_bad(p, img_len);
	CHECK(refused("layer 1: V block checksum mismatch"), "flipped byte");
	free(p);
}

/* Open the file at bad_path; 1 if refused with a message containing want. */
static int
open_refused(const char *want)
{
	struct snapshot s;

	if (snapshot_open(&s, bad_path) == 0) {
		snapshot_close(&s);
		return 0;
	}
	if (!strstr(llm_err(), want)) {
		fprintf(stderr, "  message '%s' lacks '%s'\n", llm_err(), want);
		return 0;
	}
	return 1;
}

/*
 * Version 6: a cache whose first layer slides (a window of 32, its f32
 * ring of 63 slots wrapped by 100 positions) is written, read row by
 * row as written, loaded into a cache with the same sliding layers and
 * refused by one without them; its layer table and window are checked
 * as the header is.
 */
static void
sliding_layers_are_version_6(void)
{
	enum { N = 100, SWA = 32 };
	unsigned char *slides = xcalloc((size_t)m.c.n_layers, 1), *p;
	struct kv kv, back;
	struct snap_meta meta;
	struct snapshot s;
	float *row = xmalloc((size_t)m.c.kv_dim * sizeof *row), *want = xmalloc((size_t)m.c.kv_dim * sizeof *want);
	int ids[N], l, pos, d, bad = 0;
	size_t len;

	slides[0] = 1;
	CHECK(kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0) == 0 && kv_set_sliding(&kv, slides, SWA) == 0,
	    "%s", llm_err());
	for (pos = 0; pos < N; pos++) {
		ids[pos] = pos % m.c.vocab_size;
		for (l = 0; l < m.c.n_layers; l++) {
			for (d = 0; d < m.c.kv_dim; d++)
				row[d] = (float)(l * 1000 + pos + d);
			kv_put_k(&kv, l, pos, 1, row, (size_t)m.c.kv_dim);
			for (d = 0; d < m.c.kv_dim; d++)
				row[d] = -row[d];
			kv_put_v(&kv, l, pos, 1, row, (size_t)m.c.kv_dim);
		}
	}
	kv_set_seq_len(&kv, N);
	meta_of(&kv, &meta);
	CHECK(snapshot_write(snap_path, &meta, &kv, ids, N) == 0, "%s", llm_err());
	CHECK(snapshot_open(&s, snap_path) == 0, "%s", llm_err());
	CHECK(s.version == 6 && s.meta.swa == SWA && s.win[1].n_rows == SWA + KV_SLIDE - 1 &&
	    s.win[0].n_rows == N && s.meta.slides && s.meta.slides[0] == 1 && s.meta.slides[1] == 0,
	    "version %u, window %u, rows %u and %u", s.version, s.meta.swa, s.win[1].n_rows, s.win[0].n_rows);
	for (l = 0; l < m.c.n_layers; l++)
		for (uint32_t i = 0; i < snapshot_win(&s, (uint32_t)l)->n_rows; i++) {
			uint32_t r = snapshot_row_at(&s, (uint32_t)l, i), q = snapshot_row_pos(&s, (uint32_t)l, r);
			snapshot_row(&s, (uint32_t)l, KV_K, r, row);
			bad += row[1] != (float)(l * 1000 + (int)q + 1) ||
			    (l == 0 && q != (uint32_t)(N - (SWA + KV_SLIDE - 1) + (int)i));
		}
	CHECK(bad == 0, "%d rows hold other positions than they say", bad);
	CHECK(kv_init(&back, m.c.n_layers, m.c.kv_dim, 512, 0) == 0 &&
	    kv_set_sliding(&back, slides, SWA) == 0 && snapshot_load(&s, &back, N) == 0, "%s", llm_err());
	for (l = 0; l < m.c.n_layers; l++)
		for (pos = N - SWA; pos < N; pos++) {
			kv_row(&kv, l, KV_V, pos, want);
			kv_row(&back, l, KV_V, pos, row);
			bad += memcmp(want, row, (size_t)m.c.kv_dim * sizeof *row) != 0;
		}
	CHECK(bad == 0, "%d rows loaded differ", bad);
	kv_free(&back);
	kv_init(&back, m.c.n_layers, m.c.kv_dim, 512, 0);
	CHECK(snapshot_load(&s, &back, N) < 0 && strstr(llm_err(),
	    "the snapshot's sliding layers keep 32 positions, this cache's 0"), "a plain cache: %s", llm_err());
	kv_free(&back);
	snapshot_close(&s);

	unsigned char *file = read_whole(snap_path, &len);
	CHECK(file != NULL, "read");
	p = xmalloc(len);
	uint64_t table = get64(file + 152);
#define CASE6(edit, want) do { \
	memcpy(p, file, len); \
	edit; \
	fix_sum(p); \
	write_bad(p, len); \
	CHECK(open_refused(want), "%s", #edit); \
} while (0)
	CASE6(p[table] = 2, "layer table: layer 0 is 2, not 0 (global) or 1 (sliding)");
	CASE6(p[table] = 0, "layer table: no layer slides");
	CASE6(put32(p + 140, 0), "bad sliding window 0");
	CASE6(put64(p + 152, table + 8), "bad layer table offset");
	CASE6(put32(p + get64(file + 96) - 8, 7), "row 62 holds position 7");
#undef CASE6
	free(p), free(file), free(row), free(want), free(slides);
	kv_free(&kv);
}

static void
damaged_headers_are_refused_each_with_its_message(void)
{
	unsigned char *p = xmalloc(img_len);
	uint64_t dir = 128 + 400, k0 = get64(img + dir), k1 = get64(img + dir + 48);

#define CASE(edit, fix, want) do { \
	memcpy(p, img, img_len); \
	edit; \
	if (fix) \
		fix_sum(p); \
	write_bad(p, img_len); \
	CHECK(refused(want), "%s", #edit); \
} while (0)
	CASE(memcpy(p, "LLMKVSNQ", 8), 0, "bad magic");
	CASE(put32(p + 8, 7), 1, "version 7 is not supported (this build reads versions 1 to 6)");
	CASE(put32(p + 8, 6), 1, "bad header size");
	CASE(put32(p + 8, 3), 1, "bad header size");
	CASE(put32(p + 8, 4), 1, "bad header size");
	CASE(put32(p + 16, 1), 1, "a version 1 snapshot holds f32 keys and values, not k f16 v f32");
	CASE((put32(p + 8, 2), put32(p + 16, 5)), 1, "key type 5 is not supported");
	CASE((put32(p + 8, 2), put32(p + 16, 8 << 16)), 1, "rotation block 0 does not match q8_0 values");
	CASE((put32(p + 8, 2), put32(p + 16, 8)), 1, "layer 0: block length does not match");
	CASE(put32(p + 36, 0x7fffffff), 1, "n_pos 2147483647 is more than max_ctx 512");
	CASE(put32(p + 36, 300), 1, "bad token, directory or data offset");
	CASE(p[130] ^= 1, 0, "header checksum mismatch");
	CASE(put64(p + dir + 48, k0), 1, "blocks overlap");
	CASE(put64(p + dir + 48, k1 + 8), 1, "layer 1: block not aligned");
	CASE(put64(p + dir, img_len), 1, "layer 0: block outside the data area");
	CASE(put64(p + dir, 0), 1, "layer 0: block outside the data area");
	CASE(put64(p + dir + 8, 12), 1, "layer 0: block length");
	/* 2 heads of 0x80000010 make kv_dim 32 in 32-bit arithmetic */
	CASE((put32(p + 24, 2), put32(p + 28, 0x80000010u)), 1, "bad shape");
	CASE((put32(p + 24, 1u << 16), put32(p + 28, 1u << 16), put32(p + 32, 0)), 1, "bad shape");
	CASE(put32(p + 44, 0x7fffffff), 1, "bad shape");
	free(p);
	/* appended junk */
	unsigned char *q = xcalloc(1, img_len + 10);
	memcpy(q, img, img_len);
	write_bad(q, img_len + 10);
	CHECK(refused("wrong size"), "junk appended");
	free(q);
#undef CASE
}

/* Give each K block of the directory at dir the length klen, each V one vlen, and that part's sum. */
static void
cut_blocks(unsigned char *p, uint64_t dir, size_t klen, size_t vlen)
{
	for (int l = 0; l < m.c.n_layers; l++)
		for (int w = 0; w < 2; w++) {
			uint64_t e = dir + 48 * (uint64_t)l + 24 * (uint64_t)w;
			put64(p + e + 8, w ? vlen : klen);
			put64(p + e + 16, snapshot_sum(p + get64(p + e), w ? vlen : klen));
		}
}

/*
 * Resume a fresh cache from the file image p (its sum fixed first) with
 * ids[0..n): the positions reused, or -1.  The file must open; what
 * names it in the failure.
 */
static int
resume_edited(unsigned char *p, size_t len, struct kv *kv, const int *ids, int n, const char *what)
{
	/* the cache reads the file in place: it stays open till the next file, the cache freed */
	static struct snapshot snap;
	static int is_open;

	if (is_open)
		snapshot_close(&snap);
	is_open = 0;
	fix_sum(p);
	write_whole(snap_path, p, len);
	new_cache(kv);
	if (snapshot_open(&snap, snap_path) < 0) {
		CHECK(0, "%s: %s", what, llm_err());
		return -1;
	}
	is_open = 1;
	return snapshot_resume(&snap, kv, ids, n);
}

/*
 * A cache with f16 stores is a version 4 file: version 3's header with a
 * window of 0, and each f16 block ends with the f32 rows of the newest
 * group.  A version 2 file of f16 stores (no tails, as written before)
 * still resumes bitwise: its last group is recomputed.
 */
static void
f16_snapshots_keep_their_tails_and_old_ones_resume(void)
{
	enum { N = 70, MORE = 80 };
	size_t V = (size_t)m.c.vocab_size, len, rows = (size_t)N * m.c.kv_dim * 2;
	float *want = xmalloc(MORE * V * sizeof(float)), *got = xmalloc(MORE * V * sizeof(float));
	unsigned char *p, *q;
	uint64_t dir4, dir2 = (128 + 4 * N + 7) / 8 * 8;
	struct snap_meta meta;
	struct kv kv;
	int ids[MORE], reused;

	for (int i = 0; i < MORE; i++)
		ids[i] = (i * 17 + 9) % m.c.vocab_size;
	k_type = v_type = KV_F16;
	new_cache(&kv);
	run(&kv, ids, 0, MORE, want);
	kv_free(&kv);
	new_cache(&kv);
	run(&kv, ids, 0, N, got);
	meta_of(&kv, &meta);
	CHECK(snapshot_write(snap_path, &meta, &kv, ids, N) == 0, "%s", llm_err());
	kv_free(&kv);
	/* a prefix whose tail rows the ring has overwritten since is refused */
	{
		int many[200];
		float *out = xmalloc(200 * V * sizeof(float));
		for (int i = 0; i < 200; i++)
			many[i] = (i * 7 + 1) % m.c.vocab_size;
		new_cache(&kv);
		run(&kv, many, 0, 200, out);
		meta_of(&kv, &meta);
		CHECK(snapshot_write(bad_path, &meta, &kv, many, 10) < 0 &&
		    strstr(llm_err(), "positions 0 to 9 are no longer in the cache"),
		    "a prefix of 10 after 200: %s", llm_err());
		CHECK(snapshot_write(bad_path, &meta, &kv, many, 70) < 0, "a prefix of 70 after 200");
		CHECK(snapshot_write(bad_path, &meta, &kv, many, 196) == 0, "%s", llm_err());
		kv_free(&kv);
		free(out);
	}
	p = read_whole(snap_path, &len);
	CHECK(p && get64(p + 8) == (160ull << 32 | 4) && get32(p + 128) == 0 && get32(p + 132) == 0,
	    "not a version 4 file of 160 bytes without a window");
	dir4 = get64(p + 96);
	CHECK(get64(p + dir4 + 8) == rows + (N % KV_GROUP) * (size_t)m.c.kv_dim * 4 &&
	    get64(p + dir4 + 32) == get64(p + dir4 + 8), "f16 blocks of %llu bytes",
	    (unsigned long long)get64(p + dir4 + 8));
	q = xmalloc(len);
	memcpy(q, p, len);
	put32(q + 128, 3);
	fix_sum(q);
	write_bad(q, len);
	CHECK(refused("bad window: 3 sinks without a window"), "sinks without a window");

	/* the same cache as version 2 wrote it: a short header, no tails */
	memset(q, 0, len);
	memcpy(q, p, 128);
	put32(q + 8, 2), put32(q + 12, 128), put64(q + 88, 128), put64(q + 96, dir2);
	memcpy(q + 128, p + 160, 4 * N);
	memcpy(q + dir2, p + dir4, 48 * (size_t)m.c.n_layers);
	memcpy(q + get64(p + 104), p + get64(p + 104), len - get64(p + 104));	/* the blocks */
	cut_blocks(q, dir2, rows, rows);
	reused = resume_edited(q, len, &kv, ids, MORE, "version 2");
	CHECK(reused == N / KV_GROUP * KV_GROUP, "a version 2 f16 file reused %d: %s", reused, llm_err());
	if (reused >= 0) {
		run(&kv, ids, reused, MORE, got);
		CHECK(memcmp(got + reused * V, want + reused * V, (MORE - reused) * V * sizeof(float)) == 0,
		    "a version 2 f16 file resumed differs from scratch");
	}
	kv_free(&kv);

	/* a windowed one as version 3 wrote it (no tails, slots not in groups) is refused */
	sinks = 4, window = 100;
	new_cache(&kv);
	run(&kv, ids, 0, N, got);
	meta_of(&kv, &meta);
	CHECK(snapshot_write(snap_path, &meta, &kv, ids, N) == 0, "%s", llm_err());
	kv_free(&kv);
	free(p);
	p = read_whole(snap_path, &len);
	dir4 = get64(p + 96);
	put32(p + 8, 3);
	cut_blocks(p, dir4, rows, rows);
	reused = resume_edited(p, len, &kv, ids, MORE, "version 3");
	CHECK(reused < 0 && strstr(llm_err(), "snapshot format version 3"),
	    "a windowed version 3 f16 file: reused %d: %s", reused, llm_err());
	kv_free(&kv);
	sinks = window = 0;
	k_type = v_type = KV_F32;
	free(p), free(q), free(want), free(got);
}

/*
 * A cache with q4_0 stores is a version 5 file: each block ends with the
 * q8_0 rows of its ring, those of the newest min(n, 160) positions.
 * A file of q4_0 stores as versions before 5 wrote it (no rings) opens,
 * and resumes from nothing, recomputed: still bitwise.  want: the
 * logits of ids[0..more) from scratch; keys q4_0, values q4_0 or f32.
 */
static void
q4_0_file_resumes(int n, const int *ids, int more, const float *want)
{
	size_t V = (size_t)m.c.vocab_size, len, nb = ((size_t)m.c.kv_dim + 31) / 32;
	size_t ring = (size_t)n * nb * sizeof(struct block_q8_0);
	size_t kmain = (size_t)n / KV_GROUP * m.c.kv_dim * sizeof(struct block_q4_1);
	size_t ktail = (size_t)(n % KV_GROUP) * m.c.kv_dim * 2;
	size_t vmain = v_type == KV_Q4_0 ? (size_t)n * nb * sizeof(struct block_q4_0) :
	    (size_t)n * m.c.kv_dim * 4, vring = v_type == KV_Q4_0 ? ring : 0;
	float *got = xmalloc((size_t)more * V * sizeof(float));
	struct snap_meta meta;
	struct kv kv;
	unsigned char *p;
	uint64_t dir;
	int reused;

	new_cache(&kv);
	run(&kv, ids, 0, n, got);
	meta_of(&kv, &meta);
	CHECK(snapshot_write(snap_path, &meta, &kv, ids, n) == 0, "%s", llm_err());
	kv_free(&kv);
	p = read_whole(snap_path, &len);
	if (!p) {
		CHECK(0, "cannot read %s", snap_path);
		free(got);
		return;
	}
	dir = get64(p + 96);
	CHECK(get32(p + 8) == 5, "%d positions: not a version 5 file", n);
	CHECK(get64(p + dir + 8) == kmain + ring && get64(p + dir + 32) == vmain + vring,
	    "%d positions: q4_0 blocks of %llu and %llu bytes", n,
	    (unsigned long long)get64(p + dir + 8), (unsigned long long)get64(p + dir + 32));
	reused = resume_edited(p, len, &kv, ids, more, "version 5");
	CHECK(reused == n, "a version 5 q4_0 file of %d reused %d: %s", n, reused, llm_err());
	if (reused >= 0) {
		run(&kv, ids, reused, more, got);
		CHECK(memcmp(got + reused * V, want + reused * V,
		    (size_t)(more - reused) * V * sizeof(float)) == 0,
		    "a version 5 q4_0 file of %d resumed differs from scratch", n);
	}
	kv_free(&kv);

	/* as version 4 would hold it: the same layout, no rings (the keys' f16 rows: any bytes) */
	put32(p + 8, 4);
	cut_blocks(p, dir, kmain + ktail, vmain);
	reused = resume_edited(p, len, &kv, ids, more, "version 4");
	CHECK(reused == 0, "a version 4 q4_0 file of %d reused %d: %s", n, reused, llm_err());
	if (reused >= 0) {
		run(&kv, ids, reused, more, got);
		CHECK(memcmp(got, want, (size_t)more * V * sizeof(float)) == 0,
		    "a version 4 q4_0 file of %d resumed differs from scratch", n);
	}
	kv_free(&kv);
	free(p), free(got);
}

static void
q4_0_snapshots_carry_their_rings_and_old_ones_recompute(void)
{
	enum { MORE = 80 };
	float *want = xmalloc(MORE * (size_t)m.c.vocab_size * sizeof(float));
	struct kv kv;
	int ids[MORE];

	for (int i = 0; i < MORE; i++)
		ids[i] = (i * 13 + 5) % m.c.vocab_size;
	for (k_type = KV_Q4_0, v_type = KV_Q4_0; ; v_type = KV_F32) {
		new_cache(&kv);
		run(&kv, ids, 0, MORE, want);
		kv_free(&kv);
		q4_0_file_resumes(64, ids, MORE, want);
		/* an old file's f16 key rows, n % KV_GROUP of them, are all of its positions */
		q4_0_file_resumes(20, ids, MORE, want);
		if (v_type == KV_F32)
			break;
	}
	k_type = v_type = KV_F32;
	free(want);
}

/*
 * This program's own fsync, which the library's calls reach instead of
 * libc's: it fails on demand, as a disk with an I/O error would.
 */
static int fail_fsync;
static int count_temp_files(void);

/* fsync, failing when asked: the library's calls come here, the real one by its system call or the next definition */
#if defined(__linux__)
#include <sys/syscall.h>
static int
real_fsync(int fd)
{
	return (int)syscall(SYS_fsync, fd);
}
#else
#include <dlfcn.h>
static int
real_fsync(int fd)
{
	int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

	return next ? next(fd) : 0;
}
#endif

int
fsync(int fd)
{
	if (fail_fsync) {
		errno = EIO;
		return -1;
	}
	return real_fsync(fd);
}

static void
damaged_window_headers_are_refused(void)
{
	struct kv kv;
	struct snap_meta meta;
	int ids[300];
	float *logits = xmalloc(300 * (size_t)m.c.vocab_size * sizeof *logits);
	unsigned char *p, *good;
	size_t len;
	uint64_t pos_off;

	for (int i = 0; i < 300; i++)
		ids[i] = (i * 13 + 5) % m.c.vocab_size;
	sinks = 4, window = 100;
	new_cache(&kv);
	sinks = window = 0;
	run(&kv, ids, 0, 300, logits);
	meta_of(&kv, &meta);
	CHECK(snapshot_write(snap_path, &meta, &kv, ids, 300) == 0, "%s", llm_err());
	kv_free(&kv);
	free(logits);
	good = read_whole(snap_path, &len);
	CHECK(good && get64(good + 8) == (160ull << 32 | 3), "not a version 3 file of 160 bytes");
	pos_off = get64(good + 144);
	CHECK(pos_off == (160 + 4 * 300 + 7) / 8 * 8, "positions at %llu", (unsigned long long)pos_off);
	p = xmalloc(len);
#define CASE(edit, want) do { \
	memcpy(p, good, len); \
	edit; \
	fix_sum(p); \
	write_bad(p, len); \
	CHECK(refused(want), "%s", #edit); \
} while (0)
	CASE(put32(p + 132, 600), "bad window: 4 sinks and a window of 600 do not fit max_ctx 512");
	CASE(put32(p + 132, 0), "bad window");
	CASE(put32(p + 128, 0xffffffffu), "bad window");
	CASE(put32(p + 136, 299), "window of 299 rows does not match n_pos 300");
	CASE(put32(p + 140, 1), "does not match n_pos");
	CASE(put64(p + 144, pos_off + 8), "does not match n_pos");
	CASE(put32(p + pos_off + 4 * 10, 7), "row 10 holds position 7");
	CASE(put32(p + 12, 128), "bad header size");
#undef CASE
	free(p), free(good);
}

/* Open file descriptors, from /proc; -1 without it. */
static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own descriptor */
}

static void
failed_fsync_leaks_nothing_and_keeps_the_old_snapshot(void)
{
	struct kv kv;
	struct snap_meta meta;
	int ids[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, before, r;
	float *logits = xmalloc(10 * (size_t)m.c.vocab_size * sizeof *logits);

	if (count_fds() < 0)
		SKIP("/proc/self/fd is absent");
	write_bad(img, img_len);
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
	run(&kv, ids, 0, 10, logits);
	meta_of(&kv, &meta);
	before = count_fds();
	fail_fsync = 1;
	r = snapshot_write(bad_path, &meta, &kv, ids, 10);
	fail_fsync = 0;
	CHECK(r < 0 && strstr(llm_err(), "Input/output error"), "r %d: %s", r, llm_err());
	CHECK(count_fds() == before, "%d descriptors open after the failed write, %d before",
	    count_fds(), before);
	size_t n = 0;
	unsigned char *back = read_whole(bad_path, &n);
	CHECK(back && n == img_len && memcmp(back, img, img_len) == 0, "old snapshot changed");
	free(back);
	CHECK(count_temp_files() == 0, "temporary files left behind");
	kv_free(&kv);
	free(logits);
}

/* Run a command; its standard output (up to cap - 1 bytes) and exit status. */
static int
run_tool(const char *cmd, char *out, size_t cap)
{
	FILE *fp = popen(cmd, "r");
	size_t n = 0;
	int status;

	out[0] = '\0';
	if (!fp)
		return -1;
	n = fread(out, 1, cap - 1, fp);
	out[n] = '\0';
	status = pclose(fp);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
kvstat_json_has_null_for_nan_and_infinity(void)
{
	static char out[1 << 16];
	char path[400], cmd[1000];
	struct kv kv;
	struct snap_meta meta;
	int ids[4] = { 1, 2, 3, 4 };
	float *logits = xmalloc(4 * (size_t)m.c.vocab_size * sizeof *logits);

	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
	run(&kv, ids, 0, 4, logits);
	kv_k_write(&kv, 0, 1)[3] = NAN;
	kv_v_write(&kv, 1, 2)[0] = INFINITY;
	meta_of(&kv, &meta);
	snprintf(path, sizeof path, "%s/nan.kv", dir);
	CHECK(snapshot_write(path, &meta, &kv, ids, 4) == 0, "%s", llm_err());
	snprintf(cmd, sizeof cmd, "cmd/llm-kvstat --json %s", path);
	CHECK(run_tool(cmd, out, sizeof out) == 0, "llm-kvstat --json failed: %s", out);
	CHECK(strstr(out, "\"mean_abs\":null") && !strstr(out, ":nan") && !strstr(out, ":inf") &&
	    !strstr(out, ":-nan") && !strstr(out, ":-inf"),
	    "not JSON: %s", out);
	snprintf(cmd, sizeof cmd, "cmd/llm-kvstat --svg %s/nan.svg %s", dir, path);
	CHECK(run_tool(cmd, out, sizeof out) == 0, "llm-kvstat --svg failed");
	snprintf(path, sizeof path, "%s/nan.svg", dir);
	size_t n;
	char *svg = (char *)read_whole(path, &n);
	CHECK(svg && strstr(svg, "#999999"), "NaN not drawn grey");
	free(svg);
	kv_free(&kv);
	free(logits);
}

static int
count_temp_files(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strstr(e->d_name, ".tmp-") != NULL;
	if (d)
		closedir(d);
	return n;
}

static void
failed_write_keeps_the_old_snapshot(void)
{
	struct kv kv;
	struct snap_meta meta;
	int ids[300], status;
	float *logits = xmalloc(300 * (size_t)m.c.vocab_size * sizeof *logits);
	pid_t pid;

	write_bad(img, img_len);	/* the old snapshot, under bad_path */
	for (int i = 0; i < 300; i++)
		ids[i] = i % m.c.vocab_size;
	kv_init(&kv, m.c.n_layers, m.c.kv_dim, 512, 0);
	run(&kv, ids, 0, 300, logits);
	meta_of(&kv, &meta);
	/* A file size limit stands in for a full disk: the write fails part way. */
	if ((pid = fork()) == 0) {
		struct rlimit rl = { 8192, 8192 };
		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		_exit(snapshot_write(bad_path, &meta, &kv, ids, 300) == 0 ? 1 :
		    strstr(llm_err(), "too large") ? 0 : 2);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the limited write did not fail cleanly (%d)", status);
	{
		/* the old snapshot is still there, byte for byte */
		size_t n = 0;
		unsigned char *back = read_whole(bad_path, &n);
		CHECK(back && n == img_len && memcmp(back, img, img_len) == 0, "old snapshot changed");
		free(back);
	}
	CHECK(count_temp_files() == 0, "temporary files left behind");
	/* into a directory that does not exist: an error, not a crash */
	CHECK(snapshot_write("/nonexistent/dir/x.kv", &meta, &kv, ids, 300) < 0, "wrote nowhere");
	kv_free(&kv);
	free(logits);
}

int
main(void)
{
	struct fixture f;

	snprintf(dir, sizeof dir, "%s/snap", getenv("LLM_TEST_TMP") ? getenv("LLM_TEST_TMP") : "tests/tmp");
	mkdir(dir, 0777);
	snprintf(model_path, sizeof model_path, "%s/tiny.gguf", dir);
	snprintf(snap_path, sizeof snap_path, "%s/a.kv", dir);
	snprintf(bad_path, sizeof bad_path, "%s/bad.kv", dir);
	fixture_tiny(&f, GGML_Q8_0);
	if (fixture_write(&f, model_path) < 0 || model_load(&m, model_path) < 0)
		die(1, "%s: %s", model_path, llm_err());
	model_run_init(&mr, &m, NULL);
	make_good_snapshot();

	TEST(resume_with_full_partial_and_no_overlap_is_bitwise_identical);
	TEST(every_cache_type_resumes_bitwise);
	TEST(windowed_caches_resume_bitwise);
	TEST(multi_turn_chat_resumes_bitwise_identically);
	TEST(good_snapshot_loads);
	TEST(every_truncation_is_refused);
	TEST(flipped_byte_in_a_block_is_refused);
	TEST(damaged_headers_are_refused_each_with_its_message);
	TEST(damaged_window_headers_are_refused);
	TEST(f16_snapshots_keep_their_tails_and_old_ones_resume);
	TEST(q4_0_snapshots_carry_their_rings_and_old_ones_recompute);
	TEST(failed_write_keeps_the_old_snapshot);
	TEST(failed_fsync_leaks_nothing_and_keeps_the_old_snapshot);
	TEST(kvstat_json_has_null_for_nan_and_infinity);
	TEST(sliding_layers_are_version_6);
	free(img);
	model_run_free(&mr);
	model_free(&m);
	CHECK_EXIT();
}
