/*
 * kvtype.c: the cache's types, a row each in one table, and their
 * codecs: a row of floats into a row of the type, and back (kv.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvpriv.h"
#include "quant.h"

/*
 * Everything the cache knows of a type, a row each; a new type is a row
 * here and its kernels.  Rows are blocks of 32 elements (f32 and f16:
 * 32 plain elements); grouped keys take a block of KV_GROUP positions
 * per channel (q8_0 blocks for q8_0 keys, q4_1 for q4_0's).  A store
 * with a ring keeps its newest KV_GROUP + back + KV_PUT rows in the
 * ring's type too (kv.h).  format: the first llm-kv(5) version that
 * holds the type's layout as this build writes it (snapshot.c reads the
 * older ones).
 */
static const struct kv_type {
	int type;
	const char *name;
	size_t elem;		/* bytes of an element of a plain row; 0: blocks of 32 */
	size_t block;		/* bytes of a block of 32 elements */
	size_t group_block;	/* grouped keys: bytes of a channel's group; 0: keys are rows */
	int ring[2];		/* K's and V's ring type, -1 if none */
	int back;		/* positions before a query's group it reads from the ring */
	int rotated;		/* values are Hadamard-rotated before they are quantized */
	int format;
} types[] = {
	{ KV_F32, "f32", 4, 0, 0, { -1, -1 }, 0, 0, 1 },
	{ KV_F16, "f16", 2, 0, 0, { KV_F32, KV_F32 }, 0, 0, 4 },
	{ KV_Q8_0, "q8_0", 0, sizeof(struct block_q8_0), sizeof(struct block_q8_0), { KV_F16, -1 },
	    0, 1, 2 },
	{ KV_Q4_0, "q4_0", 0, sizeof(struct block_q4_0), sizeof(struct block_q4_1),
	    { KV_Q8_0, KV_Q8_0 }, KV_BACK, 1, 5 },
};

static const struct kv_type *
type_of(int type)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (types[i].type == type)
			return &types[i];	/* four rows: a search is as quick as an index */
	return NULL;
}

const char *
kv_type_name(int type)
{
	return type_of(type) ? type_of(type)->name : NULL;
}

const char *
kv_type_names(void)
{
	static char names[64];
	size_t n = sizeof types / sizeof types[0], i;

	if (!names[0])
		for (i = 0; i < n; i++)
			snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
			    i == 0 ? "" : i + 1 == n ? " or " : ", ", types[i].name);
	return names;
}

int
kv_type_parse(const char *name)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcmp(name, types[i].name) == 0)
			return types[i].type;
	return -1;
}

int
kv_type_grouped(int type, int which)
{
	return which == KV_K && type_of(type) && type_of(type)->group_block > 0;
}

int
kv_type_ring(int type, int which)
{
	return type_of(type) ? type_of(type)->ring[which] : -1;
}

int
kv_type_back(int type)
{
	return type_of(type) ? type_of(type)->back : 0;
}

size_t
kv_type_row_bytes(int type, int kv_dim)
{
	const struct kv_type *t = type_of(type);

	return t->elem ? (size_t)kv_dim * t->elem : ((size_t)kv_dim + 31) / 32 * t->block;
}

size_t
kv_type_unit(int type, int which, int kv_dim)
{
	if (kv_type_grouped(type, which))
		return (size_t)kv_dim * type_of(type)->group_block;
	return kv_type_row_bytes(type, kv_dim);
}

int
kv_rot_of(int v_type, int head_dim)
{
	int rot = head_dim & -head_dim;

	if (!type_of(v_type) || !type_of(v_type)->rotated)
		return 0;
	return rot > 32 ? 32 : rot > 1 ? rot : 0;
}

int
kv_window_group(int k_type, int v_type)
{
	return kv_type_grouped(k_type, KV_K) || kv_type_ring(k_type, KV_K) >= 0 ||
	    kv_type_ring(v_type, KV_V) >= 0 ? KV_GROUP : 1;
}

void
kv_encode_row(int type, int kv_dim, int rot, const float *x, void *dst, float *scratch)
{
	size_t nb = ((size_t)kv_dim + 31) / 32, i;
	uint16_t *h = dst;
	float *tmp = scratch;	/* nb * 32 floats, the padding zero */

	switch (type) {
	case KV_F32:
		memcpy(dst, x, (size_t)kv_dim * 4);
		return;
	case KV_F16:
		for (i = 0; i < (size_t)kv_dim; i++)
			h[i] = f32_to_f16(x[i]);
		return;
	}
	memcpy(tmp, x, (size_t)kv_dim * sizeof *tmp);
	if (rot)
		quant_hadamard(tmp, (size_t)kv_dim, rot);
	if (type == KV_Q8_0)
		quant_quantize_q8_0(tmp, dst, nb);
	else
		quant_quantize_q4_0(tmp, dst, nb);
}

/* ---- reading ---- */

/* Elements [e0, e0 + n) of a row of the type, as stored (not rotated back). */
void
kv_decode_span(int type, const void *row, int e0, int n, float *out)
{
	const uint16_t *h = row;
	const struct block_q8_0 *q8 = row;
	const struct block_q4_0 *q4 = row;
	int e, j;

	if (type == KV_Q8_0) {	/* a scale a block: q4_0 stores' rings are read this way */
		for (e = e0; e < e0 + n; ) {
			const struct block_q8_0 *b = &q8[e / 32];
			float d = f16_to_f32(b->d);
			int end = (e / 32 + 1) * 32 < e0 + n ? (e / 32 + 1) * 32 : e0 + n;
			for (; e < end; e++)
				out[e - e0] = d * b->qs[e % 32];
		}
		return;
	}
	for (e = e0; e < e0 + n; e++) {
		switch (type) {
		case KV_F32:
			out[e - e0] = ((const float *)row)[e];
			break;
		case KV_F16:
			out[e - e0] = f16_to_f32(h[e]);
			break;
		case KV_Q4_0:
			j = e % 32;
			out[e - e0] = f16_to_f32(q4[e / 32].d) *
			    (float)((j < 16 ? q4[e / 32].qs[j] & 0xf : q4[e / 32].qs[j - 16] >> 4) - 8);
			break;
		}
	}
}

/* Position j of a group of grouped keys of the type, channels [c0, c0 + n). */
void
kv_decode_group(int type, const void *group, int j, int c0, int n, float *out)
{
	const struct block_q8_0 *q8 = (const struct block_q8_0 *)group + c0;
	const struct block_q4_1 *q4 = (const struct block_q4_1 *)group + c0;
	int c;

	if (type == KV_Q8_0)
		for (c = 0; c < n; c++)
			out[c] = f16_to_f32(q8[c].d) * q8[c].qs[j];
	else
		for (c = 0; c < n; c++)
			out[c] = f16_to_f32(q4[c].d) *
			    (float)(j < 16 ? q4[c].qs[j] & 0xf : q4[c].qs[j - 16] >> 4) +
			    f16_to_f32(q4[c].m);
}

