/* test_kv: the KV cache follows the founding design. */
#include <stdlib.h>
#include <string.h>

#include "../lib/kv.h"
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
	TEST(reads_never_grow);
	TEST(set_seq_len_grows_ahead_and_clear_keeps_capacity);
	TEST(prealloc_commits_max_ctx);
	CHECK_EXIT();
}
