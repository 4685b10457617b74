/* ggufw.c: the GGUF writer and the reference quantizers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/quant.h"
#include "../cmd/tool.h"
#include "../lib/util.h"
#include "ggufw.h"

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

struct wtensor {
	char *name;
	uint32_t type;
	int n_dims;
	uint64_t ne[4];
	uint8_t *data;
	size_t nbytes;
};

struct ggufw {
	struct wbuf kv;
	uint64_t n_kv;
	struct wtensor *t;
	size_t n_t;
};

static void
put(struct wbuf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 256;
		if (!(b->p = realloc(b->p, b->cap)))
			die(1, "out of memory");
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void put_u32(struct wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct wbuf *b, uint64_t v) { put(b, &v, 8); }

static void
put_str(struct wbuf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void
key(struct ggufw *w, const char *k, uint32_t type)
{
	put_str(&w->kv, k);
	put_u32(&w->kv, type);
	w->n_kv++;
}

struct ggufw *
ggufw_new(void)
{
	quant_init();
	return xcalloc(1, sizeof(struct ggufw));
}

void
ggufw_free(struct ggufw *w)
{
	size_t i;

	for (i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->kv.p);
	free(w);
}

void ggufw_u32(struct ggufw *w, const char *k, uint32_t v) { key(w, k, GGUF_UINT32); put_u32(&w->kv, v); }
void ggufw_f32(struct ggufw *w, const char *k, float v) { key(w, k, GGUF_FLOAT32); put(&w->kv, &v, 4); }
void ggufw_str(struct ggufw *w, const char *k, const char *v) { key(w, k, GGUF_STRING); put_str(&w->kv, v); }

void
ggufw_bool(struct ggufw *w, const char *k, int v)
{
	uint8_t b = v != 0;

	key(w, k, GGUF_BOOL);
	put(&w->kv, &b, 1);
}

void
ggufw_str_arr(struct ggufw *w, const char *k, const char *const *v, size_t n)
{
	size_t i;

	key(w, k, GGUF_ARRAY);
	put_u32(&w->kv, GGUF_STRING);
	put_u64(&w->kv, n);
	for (i = 0; i < n; i++)
		put_str(&w->kv, v[i]);
}

/* An array of n 4-byte elements of a type. */
static void
arr4(struct ggufw *w, const char *k, uint32_t type, const void *v, size_t n)
{
	key(w, k, GGUF_ARRAY);
	put_u32(&w->kv, type);
	put_u64(&w->kv, n);
	put(&w->kv, v, n * 4);
}

void
ggufw_f32_arr(struct ggufw *w, const char *k, const float *v, size_t n)
{
	arr4(w, k, GGUF_FLOAT32, v, n);
}

void
ggufw_i32_arr(struct ggufw *w, const char *k, const int32_t *v, size_t n)
{
	arr4(w, k, GGUF_INT32, v, n);
}

/* The value of largest magnitude, with its sign. */
static float
signed_max(const float *x, int n)
{
	float m = 0;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > fabsf(m))
			m = x[i];
	return m;
}

/* Each of n sub-blocks' signed_max over div into scale[j]; the one of largest magnitude returned */
static float
sub_scales(const float *x, int n, int len, float div, float *scale)
{
	float max = 0;

	for (int j = 0; j < n; j++) {
		scale[j] = signed_max(x + len * j, len) / div;
		if (fabsf(scale[j]) > fabsf(max))
			max = scale[j];
	}
	return max;
}

static int
clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* 32 quants into nibbles (j and j + 16 share qs[j]) and, for 5 bits, qh. */
static void
pack32(const int *q, uint8_t *qs, uint8_t *qh)
{
	uint32_t h = 0;
	int j;

	for (j = 0; j < 16; j++)
		qs[j] = (uint8_t)((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
	if (qh) {
		for (j = 0; j < 32; j++)
			h |= (uint32_t)(q[j] >> 4) << j;
		memcpy(qh, &h, 4);
	}
}

/* q5_0: d = max / -16, as ggml's reference quantizer (q4_0 is the library's). */
static void
quantize_q5_0(const float *x, void *out, size_t n)
{
	int i, j;

	for (i = 0; i < (int)n / 32; i++) {
		const float *xb = x + 32 * i;
		float d = signed_max(xb, 32) / -16, id = d ? 1 / d : 0;
		struct block_q5_0 *b = (struct block_q5_0 *)out + i;
		int q[32];

		for (j = 0; j < 32; j++)
			q[j] = clampi((int)(xb[j] * id + 16.5f), 0, 31);
		b->d = f32_to_f16(d);
		pack32(q, b->qs, b->qh);
	}
}

/* q4_1 / q5_1: from min to max in 2^bits - 1 steps. */
static void
quantize_q4_1_q5_1(const float *x, void *out, size_t n, int bits)
{
	int top = (1 << bits) - 1, i, j;

	for (i = 0; i < (int)n / 32; i++) {
		const float *xb = x + 32 * i;
		float lo = xb[0], hi = xb[0], d, id;
		int q[32];

		for (j = 1; j < 32; j++)
			lo = fminf(lo, xb[j]), hi = fmaxf(hi, xb[j]);
		d = (hi - lo) / top;
		id = d ? 1 / d : 0;
		for (j = 0; j < 32; j++)
			q[j] = clampi((int)((xb[j] - lo) * id + 0.5f), 0, top);
		if (bits == 4) {
			struct block_q4_1 *b = (struct block_q4_1 *)out + i;
			b->d = f32_to_f16(d), b->m = f32_to_f16(lo);
			pack32(q, b->qs, NULL);
		} else {
			struct block_q5_1 *b = (struct block_q5_1 *)out + i;
			b->d = f32_to_f16(d), b->m = f32_to_f16(lo);
			pack32(q, b->qs, b->qh);
		}
	}
}

/*
 * q4_K / q5_K: eight sub-blocks of 32, each with a 6-bit scale and min
 * relative to the block's d and dmin.  Simple rather than optimal: the
 * tests need correct blocks, not the best ones.
 */
static void
quantize_q4_K_q5_K(const float *x, void *out, size_t n, int bits)
{
	int top = (1 << bits) - 1, i, j, l;

	for (i = 0; i < (int)n / QK_K; i++) {
		const float *xb = x + QK_K * i;
		float scale[8], minv[8], max_scale = 0, max_min = 0, d, dmin;
		uint8_t sc[8], m[8], scales[12] = { 0 };
		int q[QK_K];

		for (j = 0; j < 8; j++) {
			float lo = 0, hi = 0;	/* the min is at most 0, as in ggml */
			for (l = 0; l < 32; l++)
				lo = fminf(lo, xb[32 * j + l]), hi = fmaxf(hi, xb[32 * j + l]);
			scale[j] = (hi - lo) / top;
			minv[j] = -lo;
			max_scale = fmaxf(max_scale, scale[j]);
			max_min = fmaxf(max_min, minv[j]);
		}
		d = f16_to_f32(f32_to_f16(max_scale / 63));
		dmin = f16_to_f32(f32_to_f16(max_min / 63));
		for (j = 0; j < 8; j++) {
			sc[j] = (uint8_t)clampi(d ? (int)lrintf(scale[j] / d) : 0, 0, 63);
			m[j] = (uint8_t)clampi(dmin ? (int)lrintf(minv[j] / dmin) : 0, 0, 63);
			float ds = d * sc[j], dm = dmin * m[j];
			for (l = 0; l < 32; l++)
				q[32 * j + l] = ds ? clampi((int)lrintf((xb[32 * j + l] + dm) / ds), 0, top) : 0;
		}
		for (j = 0; j < 4; j++) {
			scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
			scales[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
			scales[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (m[j + 4] & 0xf) << 4);
		}
		if (bits == 4) {
			struct block_q4_K *b = (struct block_q4_K *)out + i;
			b->d = f32_to_f16(d), b->dmin = f32_to_f16(dmin);
			memcpy(b->scales, scales, 12);
			for (j = 0; j < 4; j++)
				for (l = 0; l < 32; l++)
					b->qs[32 * j + l] = (uint8_t)((q[64 * j + l] & 0xf) | (q[64 * j + 32 + l] & 0xf) << 4);
		} else {
			struct block_q5_K *b = (struct block_q5_K *)out + i;
			b->d = f32_to_f16(d), b->dmin = f32_to_f16(dmin);
			memcpy(b->scales, scales, 12);
			memset(b->qh, 0, sizeof b->qh);
			for (j = 0; j < 4; j++)
				for (l = 0; l < 32; l++) {
					int q1 = q[64 * j + l], q2 = q[64 * j + 32 + l];
					b->qs[32 * j + l] = (uint8_t)((q1 & 0xf) | (q2 & 0xf) << 4);
					b->qh[l] |= (uint8_t)((q1 >> 4) << (2 * j) | (q2 >> 4) << (2 * j + 1));
				}
		}
	}
}

/* q6_K: sixteen sub-blocks of 16 with int8 scales relative to d. */
static void
quantize_q6_K(const float *x, void *out, size_t n)
{
	int i, j, l;

	for (i = 0; i < (int)n / QK_K; i++) {
		struct block_q6_K *b = (struct block_q6_K *)out + i;
		const float *xb = x + QK_K * i;
		float scale[16], d;
		int q[QK_K];

		d = f16_to_f32(f32_to_f16(sub_scales(xb, 16, 16, -32, scale) / -128));
		b->d = f32_to_f16(d);
		for (j = 0; j < 16; j++) {
			b->scales[j] = (int8_t)clampi(d ? (int)lrintf(scale[j] / d) : 0, -128, 127);
			float ds = d * b->scales[j];
			for (l = 0; l < 16; l++)
				q[16 * j + l] = ds ? clampi((int)lrintf(xb[16 * j + l] / ds) + 32, 0, 63) : 32;
		}
		for (j = 0; j < 2; j++)
			for (l = 0; l < 32; l++) {
				int q1 = q[128 * j + l], q2 = q[128 * j + l + 32];
				int q3 = q[128 * j + l + 64], q4 = q[128 * j + l + 96];
				b->ql[64 * j + l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
				b->ql[64 * j + l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
				b->qh[32 * j + l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
			}
	}
}

/*
 * q3_K: sixteen sub-blocks of 16, each a 6-bit scale (less 32) relative
 * to d, weights from -4 to 3: the sign bit of q + 4 goes in hmask.
 */
static void
quantize_q3_K(const float *x, void *out, size_t n)
{
	int i, j, l;

	for (i = 0; i < (int)n / QK_K; i++) {
		struct block_q3_K *b = (struct block_q3_K *)out + i;
		const float *xb = x + QK_K * i;
		float scale[16], d;
		int q[QK_K], sc[16];

		d = f16_to_f32(f32_to_f16(sub_scales(xb, 16, 16, -4, scale) / -32));
		memset(b, 0, sizeof *b);
		b->d = f32_to_f16(d);
		for (j = 0; j < 16; j++) {
			sc[j] = clampi(d ? (int)lrintf(scale[j] / d) : 0, -32, 31);
			float ds = d * (float)sc[j];
			for (l = 0; l < 16; l++)
				q[16 * j + l] = ds ? clampi((int)lrintf(xb[16 * j + l] / ds), -4, 3) : 0;
			sc[j] += 32;
			b->scales[j % 8] |= (uint8_t)((sc[j] & 0xf) << (j < 8 ? 0 : 4));
			b->scales[8 + j % 4] |= (uint8_t)((sc[j] >> 4) << (2 * (j / 4)));
		}
		for (j = 0; j < QK_K; j++) {	/* weight 32 k + l: bits 2 (k % 4) of qs[32 (k / 4) + l], bit k of hmask[l] */
			int k = j / 32, u = q[j] + 4;
			l = j % 32;
			b->qs[32 * (k / 4) + l] |= (uint8_t)((u & 3) << (2 * (k % 4)));
			b->hmask[l] |= (uint8_t)((u >> 2) << k);
		}
	}
}

/*
 * q2_K: sixteen sub-blocks of 16, each from its min (at most 0) to its
 * max in 3 steps; 4-bit scales and mins relative to d and dmin.
 */
static void
quantize_q2_K(const float *x, void *out, size_t n)
{
	int i, j, l;

	for (i = 0; i < (int)n / QK_K; i++) {
		struct block_q2_K *b = (struct block_q2_K *)out + i;
		const float *xb = x + QK_K * i;
		float scale[16], minv[16], max_scale = 0, max_min = 0, d, dmin;

		for (j = 0; j < 16; j++) {
			float lo = 0, hi = 0;
			for (l = 0; l < 16; l++)
				lo = fminf(lo, xb[16 * j + l]), hi = fmaxf(hi, xb[16 * j + l]);
			scale[j] = (hi - lo) / 3;
			minv[j] = -lo;
			max_scale = fmaxf(max_scale, scale[j]);
			max_min = fmaxf(max_min, minv[j]);
		}
		d = f16_to_f32(f32_to_f16(max_scale / 15));
		dmin = f16_to_f32(f32_to_f16(max_min / 15));
		memset(b, 0, sizeof *b);
		b->d = f32_to_f16(d), b->dmin = f32_to_f16(dmin);
		for (j = 0; j < 16; j++) {
			int sc = clampi(d ? (int)lrintf(scale[j] / d) : 0, 0, 15);
			int mn = clampi(dmin ? (int)lrintf(minv[j] / dmin) : 0, 0, 15);
			float ds = d * (float)sc, dm = dmin * (float)mn;
			b->scales[j] = (uint8_t)(sc | mn << 4);
			for (l = 0; l < 16; l++) {	/* weight 32 k + u: bits 2 (k % 4) of qs[32 (k / 4) + u] */
				int k = (16 * j + l) / 32, u = (16 * j + l) % 32;
				int q = ds ? clampi((int)lrintf((xb[16 * j + l] + dm) / ds), 0, 3) : 0;
				b->qs[32 * (k / 4) + u] |= (uint8_t)(q << (2 * (k % 4)));
			}
		}
	}
}

/* The index of the value of a table of 16 (iq4's, mxfp4's) nearest v */
static int
table_nearest(const int8_t *values, float v)
{
	int best = 0, k;

	for (k = 1; k < 16; k++)
		if (fabsf(v - values[k]) < fabsf(v - values[best]))
			best = k;
	return best;
}

/* 32 weights to nibbles of a table at scale d (q4_0's order) */
static void
table_pack(const int8_t *values, const float *xb, float d, uint8_t *qs)
{
	float id = d ? 1 / d : 0;
	int q[32], j;

	for (j = 0; j < 32; j++)
		q[j] = table_nearest(values, xb[j] * id);
	pack32(q, qs, NULL);
}

/* mxfp4: the scale as ggml's reference quantizer picks it, 2^(floor(log2 amax) - 2) halved */
static void
quantize_mxfp4(const float *x, void *out, size_t n)
{
	for (int i = 0; i < (int)n / 32; i++) {
		struct block_mxfp4 *b = (struct block_mxfp4 *)out + i;
		float amax = fabsf(signed_max(x + 32 * i, 32));
		int e = amax > 0 ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
		b->e = (uint8_t)clampi(e, 0, 255);
		table_pack(quant_mxfp4_values, x + 32 * i, quant_e8m0_half(b->e), b->qs);
	}
}

/* iq4_nl: d maps the block's largest magnitude to -127, the table's end */
static void
quantize_iq4_nl(const float *x, void *out, size_t n)
{
	for (int i = 0; i < (int)n / 32; i++) {
		struct block_iq4_nl *b = (struct block_iq4_nl *)out + i;
		float d = f16_to_f32(f32_to_f16(signed_max(x + 32 * i, 32) / -127));
		b->d = f32_to_f16(d);
		table_pack(quant_iq4_values, x + 32 * i, d, b->qs);
	}
}

/* iq4_xs: eight blocks of 32 with 6-bit scales (less 32) relative to d */
static void
quantize_iq4_xs(const float *x, void *out, size_t n)
{
	int i, j;

	for (i = 0; i < (int)n / QK_K; i++) {
		struct block_iq4_xs *b = (struct block_iq4_xs *)out + i;
		const float *xb = x + QK_K * i;
		float scale[8], d;

		d = f16_to_f32(f32_to_f16(sub_scales(xb, 8, 32, -127, scale) / -32));
		memset(b, 0, sizeof *b);
		b->d = f32_to_f16(d);
		for (j = 0; j < 8; j++) {
			int ls = clampi(d ? (int)lrintf(scale[j] / d) : 0, -32, 31) + 32;
			b->scales_l[j / 2] |= (uint8_t)((ls & 0xf) << (4 * (j % 2)));
			b->scales_h |= (uint16_t)((ls >> 4) << (2 * j));
			table_pack(quant_iq4_values, xb + 32 * j, d * (float)(ls - 32), b->qs + 16 * j);
		}
	}
}

void
quantize_row(uint32_t type, const float *x, void *out, size_t n)
{
	uint16_t *h = out;
	struct block_q8_0 *b = out;
	size_t i;

	switch (type) {
	case GGML_F32:
		memcpy(out, x, n * 4);
		break;
	case GGML_F16:
		for (i = 0; i < n; i++)
			h[i] = f32_to_f16(x[i]);
		break;
	case GGML_BF16:
		for (i = 0; i < n; i++)
			h[i] = f32_to_bf16(x[i]);
		break;
	case GGML_Q8_0: quant_quantize_q8_0(x, b, n / QK8_0); break;
	case GGML_Q4_0: quant_quantize_q4_0(x, out, n / QK4_0); break;
	case GGML_Q5_0: quantize_q5_0(x, out, n); break;
	case GGML_Q4_1: quantize_q4_1_q5_1(x, out, n, 4); break;
	case GGML_Q5_1: quantize_q4_1_q5_1(x, out, n, 5); break;
	case GGML_Q4_K: quantize_q4_K_q5_K(x, out, n, 4); break;
	case GGML_Q5_K: quantize_q4_K_q5_K(x, out, n, 5); break;
	case GGML_Q6_K: quantize_q6_K(x, out, n); break;
	case GGML_Q3_K: quantize_q3_K(x, out, n); break;
	case GGML_Q2_K: quantize_q2_K(x, out, n); break;
	case GGML_IQ4_NL: quantize_iq4_nl(x, out, n); break;
	case GGML_IQ4_XS: quantize_iq4_xs(x, out, n); break;
	case GGML_MXFP4: quantize_mxfp4(x, out, n); break;
	default:
		die(1, "quantize_row: no quantizer for %s", gguf_type_name(type));
	}
}

void
ggufw_tensor(struct ggufw *w, const char *name, uint32_t type, int n_dims,
    const uint64_t *ne, const float *data)
{
	const struct gguf_type_info *ti = gguf_type_info(type);
	struct wtensor *t;
	uint64_t rows = 1;
	int d;

	if (!(w->t = realloc(w->t, (w->n_t + 1) * sizeof *w->t)))
		die(1, "out of memory");
	t = &w->t[w->n_t++];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	t->type = type;
	t->n_dims = n_dims;
	for (d = 0; d < n_dims; d++) {
		t->ne[d] = ne[d];
		if (d > 0)
			rows *= ne[d];
	}
	t->nbytes = rows * (ne[0] / ti->block) * ti->bytes;
	t->data = xcalloc(1, t->nbytes);
	if (data)
		for (uint64_t r = 0; r < rows; r++)
			quantize_row(type, data + r * ne[0],
			    t->data + r * (t->nbytes / rows), ne[0]);
}

int
ggufw_write(struct ggufw *w, const char *path, uint32_t version, uint32_t alignment)
{
	struct wbuf h = { 0 };
	static const uint8_t zeros[4096];
	uint64_t off = 0, pad;
	size_t i;
	FILE *fp;
	int d, ok;

	put(&h, GGUF_MAGIC, 4);
	put_u32(&h, version);
	put_u64(&h, w->n_t);
	put_u64(&h, w->n_kv);
	put(&h, w->kv.p, w->kv.n);
	for (i = 0; i < w->n_t; i++) {
		put_str(&h, w->t[i].name);
		put_u32(&h, (uint32_t)w->t[i].n_dims);
		for (d = 0; d < w->t[i].n_dims; d++)
			put_u64(&h, w->t[i].ne[d]);
		put_u32(&h, w->t[i].type);
		put_u64(&h, off);
		off += (w->t[i].nbytes + alignment - 1) / alignment * alignment;
	}
	pad = (alignment - h.n % alignment) % alignment;
	put(&h, zeros, pad);
	if (!(fp = fopen(path, "wb"))) {
		free(h.p);
		return -1;
	}
	ok = fwrite(h.p, 1, h.n, fp) == h.n;
	for (i = 0; ok && i < w->n_t; i++) {
		pad = (alignment - w->t[i].nbytes % alignment) % alignment;
		ok = fwrite(w->t[i].data, 1, w->t[i].nbytes, fp) == w->t[i].nbytes &&
		    fwrite(zeros, 1, pad, fp) == pad;
	}
	free(h.p);
	if (fclose(fp) != 0)
		ok = 0;
	return ok ? 0 : -1;
}
