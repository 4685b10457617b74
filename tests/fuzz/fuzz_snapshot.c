/*
 * fuzz_snapshot: an llm-kv(5) file from someone else's machine.  Open,
 * verify every block, load and resume it into a cache: a damaged file
 * is refused, and nothing is read outside the map.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/kvpriv.h"
#include "../../lib/kv.h"
#include "../../lib/snapshot.h"
#include "../../lib/util.h"
#include "fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	return 0;
}

/* Read what llm-kvdump --head H would print of layer L, as it does, and sum it. */
static float
read_slice(const struct snapshot *s, long layer, long head)
{
	struct snap_slice sl = { .which = -1, .layer = layer, .head = head };
	float sum = 0, *row;
	uint32_t l, p, d, p0, p1;
	int w;

	if (snapshot_slice_check(s, &sl) < 0)
		return 0;
	row = xmalloc(s->meta.kv_dim * sizeof *row);
	for (l = sl.l0; l < sl.l1; l++)
		for (w = 0; w < 2; w++)
			for (snapshot_slice_rows(s, &sl, l, &p0, &p1), p = p0; p < p1; p++) {
				snapshot_row(s, l, w, snapshot_row_at(s, l, p), row);
				for (d = sl.d0; d < sl.d1; d++)
					sum += row[d];
			}
	free(row);
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snapshot s;
	struct kv kv;
	volatile float sum = 0;
	int *ids;
	uint32_t l, p;

	if (snapshot_open(&s, fuzz_file(data, size)) < 0)
		return 0;
	for (l = 0; l < s.meta.n_layers; l++) {
		snapshot_verify_block(&s, l, 0);
		snapshot_verify_block(&s, l, 1);
	}
	/* As llm-kvstat and llm-kvdump read it: every value, then single heads. */
	sum += read_slice(&s, -1, -1);
	sum += read_slice(&s, 0, 0);
	sum += read_slice(&s, (long)s.meta.n_layers - 1, (long)s.meta.n_kv_heads - 1);
	/* Resume with the stored tokens, the last one changed: a partial prefix. */
	ids = xmalloc(((size_t)s.n_pos + 1) * sizeof *ids);
	for (p = 0; p < s.n_pos; p++)
		ids[p] = (int)(snapshot_token(&s, p) & 0x7fffffff);
	ids[s.n_pos] = 7;
	if (s.n_pos)
		ids[s.n_pos - 1] ^= 1;
	if (kv_init_types(&kv, (int)s.meta.n_layers, (int)s.meta.n_kv_heads, (int)s.meta.head_dim,
	    (int)s.meta.max_ctx, 0, s.meta.k_type, s.meta.v_type) == 0 &&
	    (!s.meta.window || kv_set_window(&kv, (int)s.meta.sinks, (int)s.meta.window) == 0) &&
	    (!s.meta.slides || kv_set_sliding(&kv, s.meta.slides, (int)s.meta.swa) == 0)) {
		snapshot_resume(&s, &kv, ids, (int)s.n_pos + 1);
		snapshot_load(&s, &kv, s.n_pos);
		kv_free(&kv);
	}
	free(ids);
	snapshot_close(&s);
	(void)sum;	/* volatile: the reads happen; read here so compilers see it used */
	return 0;
}
