/* test_kv: the KV cache follows the founding design. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/kvpriv.h"
#include "../lib/kv.h"
#include "../lib/quant.h"
#include "../lib/util.h"
#include "check.h"

enum { LAYERS = 3, KV_DIM = 8 };

static float
value(int layer, int pos, int i)
{
	return layer * 1000000.0f + pos * 100.0f + i;
}

static void
write_pos(struct kv *kv, int pos)
{
	for (int l = 0; l < LAYERS; l++) {
		float *k = kv_k_write(kv, l, pos), *v = kv_v_write(kv, l, pos);
		for (int i = 0; i < KV_DIM; i++) {
			k[i] = value(l, pos, i);
			v[i] = -value(l, pos, i);
		}
	}
}

static void
capacity_doubles_from_64_to_max_ctx(void)
{
	static const int want[] = { 64, 128, 256, 512, 1000 };
	struct kv kv;
	int pos, step = 0;

	CHECK(kv_init(&kv, LAYERS, KV_DIM, 1000, 0) == 0, "%s", llm_err());
	CHECK(kv.cap == 64, "initial cap %d", kv.cap);
	for (pos = 0; pos < 1000; pos++) {
		int before = kv.cap;
		write_pos(&kv, pos);
		if (kv.cap != before) {
			step++;
			CHECK(step < 5 && kv.cap == want[step], "growth %d gave cap %d", step, kv.cap);
			CHECK(pos == before, "grew at pos %d with cap %d", pos, before);
		}
		CHECK(kv_bytes(&kv) == 2ul * LAYERS * kv.cap * KV_DIM * sizeof(float),
		    "bytes %zu at cap %d", kv_bytes(&kv), kv.cap);
	}
	CHECK(step == 4, "%d growths", step);
	CHECK(kv_k_write(&kv, 0, 1000) == NULL, "write past max_ctx succeeded");
	CHECK(kv.cap == 1000, "cap %d after refused write", kv.cap);
	kv_free(&kv);
}

static void
max_ctx_100_gives_64_then_100(void)
{
	struct kv kv;

	kv_init(&kv, LAYERS, KV_DIM, 100, 0);
	CHECK(kv.cap == 64, "cap %d", kv.cap);
	CHECK(kv_bytes(&kv) == 2ul * LAYERS * 64 * KV_DIM * 4, "bytes %zu", kv_bytes(&kv));
	write_pos(&kv, 64);
	CHECK(kv.cap == 100, "cap %d", kv.cap);
	CHECK(kv_bytes(&kv) == 2ul * LAYERS * 100 * KV_DIM * 4, "bytes %zu", kv_bytes(&kv));
	kv_free(&kv);
}

static void
small_max_ctx_starts_at_max_ctx(void)
{
	struct kv kv;

	kv_init(&kv, LAYERS, KV_DIM, 10, 0);
	CHECK(kv.cap == 10, "cap %d", kv.cap);
	kv_free(&kv);
}

static void
growth_copies_rows_verbatim_in_layer_pos_layout(void)
{
	struct kv kv;
	int l, pos, i, bad = 0;

	kv_init(&kv, LAYERS, KV_DIM, 4096, 0);
	for (pos = 0; pos < 300; pos++)
		write_pos(&kv, pos);
	CHECK(kv.cap == 512, "cap %d", kv.cap);
	for (l = 0; l < LAYERS; l++)
		for (pos = 0; pos < 300; pos++)
			for (i = 0; i < KV_DIM; i++) {
				/* offset = ((layer * cap) + pos) * kv_dim */
				size_t off = ((size_t)l * kv.cap + pos) * KV_DIM + i;
				bad += kv.k[off] != value(l, pos, i) || kv.v[off] != -value(l, pos, i);
				bad += kv_k_read(&kv, l, pos)[i] != value(l, pos, i);
			}
	CHECK(bad == 0, "%d values moved or changed", bad);
	kv_free(&kv);
}

/*
 * Every shape of move: rows that do not fill whole pages (kv_dim 7 and
 * 1000 floats), a last step that is not a doubling (2048 to 3000, where
 * a layer's old and new places overlap), and a cache filled to max_ctx.
 */
static void
growth_is_verbatim_for_odd_shapes(void)
{
	static const struct { int layers, dim, max_ctx, fill; } shape[] = {
		{ 5, 7, 3000, 3000 }, { 4, 1000, 200, 200 }, { 2, 3, 130, 100 }, { 1, 16, 5000, 4097 },
	};
	struct kv kv;
	size_t i;
	int l, pos, d, bad;

	for (i = 0; i < sizeof shape / sizeof shape[0]; i++) {
		CHECK(kv_init(&kv, shape[i].layers, shape[i].dim, shape[i].max_ctx, 0) == 0, "%s", llm_err());
		for (pos = 0; pos < shape[i].fill; pos++)
			for (l = 0; l < shape[i].layers; l++)
				for (d = 0; d < shape[i].dim; d++) {
					kv_k_write(&kv, l, pos)[d] = value(l, pos, d);
					kv_v_write(&kv, l, pos)[d] = -value(l, pos, d);
				}
		for (bad = 0, l = 0; l < shape[i].layers; l++)
			for (pos = 0; pos < shape[i].fill; pos++)
				for (d = 0; d < shape[i].dim; d++)
					bad += kv_k_read(&kv, l, pos)[d] != value(l, pos, d) ||
					    kv_v_read(&kv, l, pos)[d] != -value(l, pos, d);
		CHECK(bad == 0, "%d layers x %d, max_ctx %d: %d values moved or changed",
		    shape[i].layers, shape[i].dim, shape[i].max_ctx, bad);
		kv_free(&kv);
	}
}

/* A number from /proc/self/status, in KiB; -1 if there is none. */
static long
status_kib(const char *key)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	while (fp && fgets(line, sizeof line, fp))
		if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':')
			v = atol(line + strlen(key) + 1);
	if (fp)
		fclose(fp);
	return v;
}

/* Reset the peak resident set (VmHWM) to the current one; 0 or -1. */
static int
reset_peak_rss(void)
{
	FILE *fp = fopen("/proc/self/clear_refs", "w");
	int ok = fp && fputs("5", fp) >= 0;

	if (fp && fclose(fp) != 0)
		ok = 0;
	return ok ? 0 : -1;
}

/*
 * Under AddressSanitizer the moved rows' shadow (an eighth of them) may
 * become resident as well (Linux 6.18 and gcc 12's ASan: +2.1 MB moving
 * 32 MB); a second copy would still be all of them.
 */
#if defined(__SANITIZE_ADDRESS__)
#define SHADOW(bytes) ((bytes) / 8)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SHADOW(bytes) ((bytes) / 8)
#endif
#endif
#ifndef SHADOW
#define SHADOW(bytes) ((size_t)0)
#endif

/*
 * The founding design's promise at every length: growing never holds a
 * second copy of the cache.  Each growth is watched through the kernel's
 * peak resident set: it may add a little (one copy chunk, the boundary
 * pages of each layer), never what the old allocate-and-copy did (the
 * whole new store next to the old one), and the cache's resident bytes
 * are the rows written, not its capacity.
 */
static void
growing_holds_no_second_copy(void)
{
	enum { L = 8, DIM = 256, MAX = 8192, FILL = 4100 };
	size_t row = DIM * sizeof(float), page = (size_t)sysconf(_SC_PAGESIZE);
	long before, peak, allowed;
	struct kv kv;
	int pos, l, d, growths = 0;

	if (status_kib("VmHWM") < 0 || reset_peak_rss() < 0)
		SKIP("/proc/self/status or /proc/self/clear_refs is not available");
	CHECK(kv_init(&kv, L, DIM, MAX, 0) == 0, "%s", llm_err());
	for (pos = 0; pos < FILL; pos++) {
		int grows = pos == kv.cap;
		if (grows) {
			reset_peak_rss();
			before = status_kib("VmRSS");
		}
		for (l = 0; l < L; l++) {
			float *k = kv_k_write(&kv, l, pos), *v = kv_v_write(&kv, l, pos);
			for (d = 0; d < DIM; d++)
				k[d] = v[d] = (float)(pos + d);
		}
		if (grows) {
			size_t filled = 2ul * L * pos * row;
			peak = status_kib("VmHWM");
			/* the written row, a copy chunk, two boundary pages per layer, some slack */
			allowed = (long)((2 * L * (row + 3 * page) + (64 << 10) + (1 << 20) + SHADOW(filled)) / 1024);
			CHECK(peak - before <= allowed, "growing from %d positions (%zu KiB filled): "
			    "peak rss +%ld KiB, allowed %ld", pos, filled >> 10, peak - before, allowed);
			growths++;
		}
	}
	CHECK(growths == 7, "%d growths", growths);
	/* resident: the rows written and at most two partial pages per layer */
	size_t res = kv_resident_bytes(&kv), filled = 2ul * L * FILL * row;
	CHECK(res >= filled && res <= filled + 2 * 2 * L * page, "resident %zu, filled %zu, capacity %zu",
	    res, filled, kv_bytes(&kv));
	CHECK(kv_bytes(&kv) == 2ul * L * 8192 * row, "kv_bytes %zu", kv_bytes(&kv));
	kv_free(&kv);
}

/*
 * Every type reads back what was written, within its precision: rows
 * with a mean per channel (as keys have) and noise, through kv_row
 * (dequantized, rotated back).
 */
static void
typed_rows_read_back_as_written(void)
{
	/* relative RMS error allowed, K and V: about twice what each type gives */
	static const struct { int k, v; double limit[2]; } types[] = {
		{ KV_F32, KV_F32, { 0, 0 } }, { KV_F16, KV_F16, { 5e-4, 5e-4 } },
		{ KV_Q8_0, KV_Q8_0, { 0.006, 0.016 } }, { KV_Q4_0, KV_Q4_0, { 0.035, 0.26 } },
	};
	enum { L = 2, HEADS = 3, HD = 16, P = 100, DIM = HEADS * HD };
	float *x = xmalloc((size_t)L * P * DIM * 2 * sizeof *x), row[DIM];
	uint64_t rng = 1;
	struct kv kv;
	size_t t;
	int l, p, d, w, i;

	for (i = 0; i < L * P * DIM * 2; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		/* a mean per channel, the size of the noise around it */
		x[i] = (float)(i % DIM) / DIM * 3 - 1 + (float)(rng >> 40) / 16777216.0f - 0.5f;
	}
	for (t = 0; t < sizeof types / sizeof types[0]; t++) {
		double err[2] = { 0, 0 }, ss[2] = { 0, 0 };
		CHECK(kv_init_types(&kv, L, HEADS, HD, 200, 0, types[t].k, types[t].v) == 0, "%s", llm_err());
		/* in batches of 17: groups complete within and across batches */
		for (p = 0; p < P; p += 17)
			for (l = 0; l < L; l++) {
				int n = P - p < 17 ? P - p : 17;
				CHECK(kv_put_k(&kv, l, p, n, x + ((size_t)l * P + p) * DIM, DIM) == 0, "%s", llm_err());
				CHECK(kv_put_v(&kv, l, p, n, x + ((size_t)(L + l) * P + p) * DIM, DIM) == 0, "%s",
				    llm_err());
			}
		kv_set_seq_len(&kv, P);
		for (l = 0; l < L; l++)
			for (w = 0; w < 2; w++)
				for (p = 0; p < P; p++) {
					const float *want = x + ((size_t)(w * L + l) * P + p) * DIM;
					kv_row(&kv, l, w, p, row);
					for (d = 0; d < DIM; d++) {
						err[w] += (row[d] - want[d]) * (row[d] - want[d]);
						ss[w] += want[d] * want[d];
					}
				}
		for (w = 0; w < 2; w++)
			CHECK(sqrt(err[w] / ss[w]) <= types[t].limit[w], "k %s v %s: %c relative RMS error %g",
			    kv_type_name(types[t].k), kv_type_name(types[t].v), w ? 'V' : 'K',
			    sqrt(err[w] / ss[w]));
		kv_free(&kv);
	}
	free(x);
}

/* A cleared cache of any type keeps its capacity and, refilled, holds what a new one does. */
static void
typed_clear_keeps_capacity_and_refills_alike(void)
{
	static const int types[] = { KV_F16, KV_Q8_0, KV_Q4_0 };
	float rows[100 * 32];
	struct kv a, b;

	for (int i = 0; i < 100 * 32; i++)
		rows[i] = (float)((i * 37) % 101) / 50 - 1;
	for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
		kv_init_types(&a, 1, 2, 16, 1000, 0, types[t], types[t]);
		kv_init_types(&b, 1, 2, 16, 1000, 0, types[t], types[t]);
		CHECK(kv_set_seq_len(&a, 200) == 0 && a.cap == 256 && a.seq_len == 200, "cap %d", a.cap);
		for (int p = 0; p < 100; p += 25)	/* something to forget */
			CHECK(kv_put_k(&a, 0, p, 25, rows, 32) == 0 && kv_put_v(&a, 0, p, 25, rows, 32) == 0,
			    "%s", llm_err());
		kv_clear(&a);
		CHECK(a.cap == 256 && a.seq_len == 0 && a.groups == 0, "%s: cap %d len %d groups %d",
		    kv_type_name(types[t]), a.cap, a.seq_len, a.groups);
		for (int p = 0; p < 100; p += 25) {
			const float *r = rows + (size_t)(99 - p) * 32 - 24 * 32;
			CHECK(kv_put_k(&a, 0, p, 25, r, 32) == 0 && kv_put_v(&a, 0, p, 25, r, 32) == 0 &&
			    kv_put_k(&b, 0, p, 25, r, 32) == 0 && kv_put_v(&b, 0, p, 25, r, 32) == 0,
			    "%s", llm_err());
		}
		kv_set_seq_len(&a, 100), kv_set_seq_len(&b, 100);
		for (int w = 0; w < 2; w++)
			for (int p = 0; p < 100; p++) {
				float ra[32], rb[32];
				kv_row(&a, 0, w, p, ra);
				kv_row(&b, 0, w, p, rb);
				CHECK(memcmp(ra, rb, sizeof ra) == 0, "%s: %c row %d differs after clear",
				    kv_type_name(types[t]), w ? 'V' : 'K', p);
			}
		kv_free(&a), kv_free(&b);
	}
}

/* Grouped keys keep their newest rows in a ring: going back before them is refused. */
static void
grouped_keys_refuse_going_far_back(void)
{
	enum { MOST = KV_GROUP + KV_PUT };	/* positions a write from a group's start may take */
	float rows[(MOST + 1) * 32] = { 0 };
	struct kv kv;

	kv_init_types(&kv, 1, 2, 16, 1000, 0, KV_Q8_0, KV_F32);
	for (int p = 0; p < 320; p += MOST)
		CHECK(kv_put_k(&kv, 0, p, MOST, rows, 32) == 0, "%s", llm_err());
	CHECK(kv_put_k(&kv, 0, 300, 1, rows, 32) == 0, "within the ring: %s", llm_err());
	CHECK(kv_put_k(&kv, 0, 100, 1, rows, 32) < 0 && strstr(llm_err(), "cannot rewrite"),
	    "went back to 100: %s", llm_err());
	CHECK(kv_put_k(&kv, 0, 320, MOST + 1, rows, 32) < 0, "a write of %d positions", MOST + 1);
	CHECK(kv_put_k(&kv, 0, 321, MOST, rows, 32) < 0, "a write of %d positions from 321", MOST);
	CHECK(kv_put_k(&kv, 0, 320, MOST, rows, 32) == 0, "a write of %d positions: %s", MOST, llm_err());
	kv_free(&kv);
}

/*
 * Issue 13's memory targets at 2000 positions, on SmolLM2-135M's shape
 * (30 layers of 3 KV heads of 64), rings included: q8_0 at most 28% of
 * f32's bytes, q4_0 17%.
 */
static void
quantized_caches_meet_their_memory_targets(void)
{
	static const int types[] = { KV_Q8_0, KV_Q4_0 };
	static const double most[] = { 0.28, 0.17 };
	struct kv a, f;

	kv_init_types(&f, 30, 3, 64, 8192, 0, KV_F32, KV_F32);
	CHECK(kv_set_seq_len(&f, 2000) == 0, "%s", llm_err());
	for (int t = 0; t < 2; t++) {
		kv_init_types(&a, 30, 3, 64, 8192, 0, types[t], types[t]);
		CHECK(kv_set_seq_len(&a, 2000) == 0, "%s", llm_err());
		CHECK(kv_bytes(&a) <= most[t] * kv_bytes(&f), "%s: %zu bytes, %.1f%% of f32's",
		    kv_type_name(types[t]), kv_bytes(&a), 100.0 * kv_bytes(&a) / kv_bytes(&f));
		kv_free(&a);
	}
	kv_free(&f);
}

/*
 * An f16 cache, its ring of exact rows included, takes no more bytes than
 * an f32 one from 65 positions on and about half at length; below that,
 * at most the ring's 64 f32 rows a layer more.
 */
static void
f16_never_costs_more_than_f32(void)
{
	static const int lengths[] = { 1, 16, 64, 65, 100, 500, 2000 };
	struct kv a, b;

	for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
		int n = lengths[i];
		kv_init_types(&a, 3, 2, 64, 4096, 0, KV_F16, KV_F16);
		kv_init_types(&b, 3, 2, 64, 4096, 0, KV_F32, KV_F32);
		CHECK(kv_set_seq_len(&a, n) == 0 && kv_set_seq_len(&b, n) == 0, "%s", llm_err());
		CHECK(n <= 64 ? kv_bytes(&a) <= kv_bytes(&b) + 2 * 3 * 64 * 128 * sizeof(float) :
		    kv_bytes(&a) <= kv_bytes(&b), "%d positions: f16 %zu bytes, f32 %zu", n,
		    kv_bytes(&a), kv_bytes(&b));
		CHECK(n < 2000 || kv_bytes(&a) < kv_bytes(&b) * 0.54, "%d positions: f16 %zu, f32 %zu",
		    n, kv_bytes(&a), kv_bytes(&b));
		kv_free(&a), kv_free(&b);
	}
}

static void
reads_never_grow(void)
{
	struct kv kv;

	kv_init(&kv, LAYERS, KV_DIM, 4096, 0);
	(void)kv_k_read(&kv, LAYERS - 1, 63);
	(void)kv_v_read(&kv, 0, 0);
	CHECK(kv.cap == 64, "cap %d after reads", kv.cap);
	kv_free(&kv);
}

static void
set_seq_len_grows_ahead_and_clear_keeps_capacity(void)
{
	struct kv kv;

	kv_init(&kv, LAYERS, KV_DIM, 4096, 0);
	CHECK(kv_set_seq_len(&kv, 200) == 0, "%s", llm_err());
	CHECK(kv.cap == 256 && kv.seq_len == 200, "cap %d len %d", kv.cap, kv.seq_len);
	kv_clear(&kv);
	CHECK(kv.cap == 256 && kv.seq_len == 0, "cap %d len %d", kv.cap, kv.seq_len);
	CHECK(kv_set_seq_len(&kv, 5000) < 0, "grew past max_ctx");
	kv_free(&kv);
}

static void
prealloc_commits_max_ctx(void)
{
	struct kv kv;

	kv_init(&kv, LAYERS, KV_DIM, 3000, 1);
	CHECK(kv.cap == 3000, "cap %d", kv.cap);
	CHECK(kv_bytes(&kv) == 2ul * LAYERS * 3000 * KV_DIM * 4, "bytes %zu", kv_bytes(&kv));
	kv_free(&kv);
}

int
main(void)
{
	TEST(capacity_doubles_from_64_to_max_ctx);
	TEST(max_ctx_100_gives_64_then_100);
	TEST(small_max_ctx_starts_at_max_ctx);
	TEST(growth_copies_rows_verbatim_in_layer_pos_layout);
	TEST(growth_is_verbatim_for_odd_shapes);
	TEST(growing_holds_no_second_copy);
	TEST(typed_rows_read_back_as_written);
	TEST(grouped_keys_refuse_going_far_back);
	TEST(typed_clear_keeps_capacity_and_refills_alike);
	TEST(f16_never_costs_more_than_f32);
	TEST(quantized_caches_meet_their_memory_targets);
	TEST(reads_never_grow);
	TEST(set_seq_len_grows_ahead_and_clear_keeps_capacity);
	TEST(prealloc_commits_max_ctx);
	CHECK_EXIT();
}
