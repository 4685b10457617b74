/*
 * fuzz_kvsel: llm-kvdump's selection.  The input is its option strings,
 * --layer, --head and --pos, one per line, after a byte that picks a
 * snapshot shape and K, V or both.  A selection that snapshot_slice_check
 * accepts is then read whole: nothing it names may lie outside the file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../lib/kvpriv.h"
#include "../../cmd/tool.h"
#include "../../lib/kv.h"
#include "../../lib/snapshot.h"
#include "../../lib/util.h"
#include "fuzz.h"

/*
 * Two are windowed (4 sinks, a window of 40), their rings wrapped; the
 * last two have sliding layers 0 and 2 (a window of 24 or 32), wrapped.
 */
static const struct { int layers, heads, head_dim, n_pos, k_type, v_type, window, swa; } shape[] = {
	{ 1, 1, 2, 0, KV_F32, KV_F32, 0, 0 }, { 3, 2, 16, 10, KV_F32, KV_F32, 0, 0 },
	{ 2, 5, 8, 70, KV_Q4_0, KV_Q8_0, 0, 0 }, { 4, 1, 64, 1, KV_F16, KV_Q4_0, 0, 0 },
	{ 3, 2, 16, 90, KV_F32, KV_F32, 40, 0 }, { 2, 2, 8, 150, KV_Q8_0, KV_F16, 40, 0 },
	{ 3, 2, 16, 100, KV_F32, KV_F32, 0, 24 }, { 3, 1, 32, 120, KV_Q8_0, KV_F32, 40, 32 },
};
static const unsigned char slides[3] = { 1, 0, 1 };
enum { NSHAPE = sizeof shape / sizeof shape[0] };
static struct snapshot snap[NSHAPE];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[256];
	int i, l, p, d, ids[160];	/* the longest n_pos */

	(void)argc, (void)argv;
	for (i = 0; i < NSHAPE; i++) {
		struct snap_meta meta = { .n_layers = (uint32_t)shape[i].layers,
			.n_kv_heads = (uint32_t)shape[i].heads, .head_dim = (uint32_t)shape[i].head_dim,
			.kv_dim = (uint32_t)(shape[i].heads * shape[i].head_dim), .max_ctx = 128,
			.rope_dim = (uint32_t)shape[i].head_dim, .rope_base = 10000,
			.k_type = shape[i].k_type, .v_type = shape[i].v_type };
		float k[64], v[64];
		struct kv kv;

		kv_init_types(&kv, shape[i].layers, shape[i].heads, shape[i].head_dim, 128, 0,
		    shape[i].k_type, shape[i].v_type);
		if (shape[i].window)
			kv_set_window(&kv, 4, shape[i].window);
		if (shape[i].swa && kv_set_sliding(&kv, slides, shape[i].swa) < 0)
			abort();
		meta.swa = (uint32_t)shape[i].swa;
		meta.slides = kv.slides;
		meta.rot = (uint32_t)kv.rot;
		meta.sinks = (uint32_t)kv.win[0].sinks;
		meta.window = (uint32_t)kv.win[0].window;
		for (p = 0; p < shape[i].n_pos; p++) {
			ids[p] = p;
			for (l = 0; l < shape[i].layers; l++) {
				for (d = 0; d < (int)meta.kv_dim; d++) {
					k[d] = (float)(l * 1000 + p + d);
					v[d] = -(float)(l * 1000 + p + d);
				}
				kv_put_k(&kv, l, p, 1, k, meta.kv_dim);
				kv_put_v(&kv, l, p, 1, v, meta.kv_dim);
			}
		}
		kv_set_seq_len(&kv, shape[i].n_pos);
		snprintf(path, sizeof path, "%s/shape-%d.kv", fuzz_dir(), i);
		if (snapshot_write(path, &meta, &kv, ids, shape[i].n_pos) < 0 ||
		    snapshot_open(&snap[i], path) < 0) {
			fprintf(stderr, "fuzz_kvsel: %s: %s\n", path, llm_err());
			abort();
		}
		unlink(path);
		kv_free(&kv);
	}
	return 0;
}

/* The next line of the input, as a C string in buf. */
static const char *
line(const uint8_t **p, const uint8_t *end, char *buf, size_t cap)
{
	size_t n = 0;

	while (*p < end && **p != '\n') {
		if (n + 1 < cap)
			buf[n++] = (char)**p;
		(*p)++;
	}
	if (*p < end)
		(*p)++;
	buf[n] = '\0';
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap_slice sl = { .which = -1, .layer = -1, .head = -1 };
	const uint8_t *p = data + 1, *end = data + size;
	const struct snapshot *s;
	char layer[64], head[64], pos[64];
	float row[1024];	/* the largest kv_dim of the shapes */
	int f32;
	volatile float sum = 0;
	long a, b;
	uint32_t l, q, d, p0, p1;
	int w;

	if (size < 1)
		return 0;
	s = &snap[data[0] % NSHAPE];
	f32 = s->meta.k_type == KV_F32 && s->meta.v_type == KV_F32;
	sl.which = (int)(data[0] / NSHAPE % 3) - 1;
	line(&p, end, layer, sizeof layer);
	line(&p, end, head, sizeof head);
	line(&p, end, pos, sizeof pos);
	if (layer[0] && opt_range(layer, &a, &b) == 0)
		sl.layer = a;
	if (head[0] && opt_range(head, &a, &b) == 0)
		sl.head = a;
	if (pos[0] && opt_range(pos, &sl.pos_a, &sl.pos_b) == 0)
		sl.have_pos = 1;
	if (snapshot_slice_check(s, &sl) < 0)
		return 0;
	for (l = sl.l0; l < sl.l1; l++)
		for (w = 0; w < 2; w++) {
			if (sl.which >= 0 && w != sl.which)
				continue;
			if (snapshot_verify_block(s, l, w) < 0)
				abort();	/* the file is whole */
			snapshot_slice_rows(s, &sl, l, &p0, &p1);
			for (q = p0; q < p1; q++) {
				uint32_t r = snapshot_row_at(s, l, q), pos = snapshot_row_pos(s, l, r);
				snapshot_row(s, l, w, r, row);
				for (d = sl.d0; d < sl.d1; d++) {
					sum += row[d];
					/* f32 rows hold exactly what was written for their position */
					if (f32 && row[d] != (w ? -1.0f : 1.0f) * (float)(l * 1000 + pos + d))
						abort();
				}
			}
		}
	(void)sum;	/* volatile: the reads happen; read here so compilers see it used */
	return 0;
}
