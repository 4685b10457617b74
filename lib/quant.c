/*
 * quant.c: the weight types the forward pass reads directly from the
 * map.  Weights are never converted at load time; each kernel expands
 * a block as it multiplies, so the f32 copy never exists.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"
#include "util.h"

/* f16 to f32 for every bit pattern; the SIMD kernels share it. */
float quant_f16_table[1 << 16];
#define f16_table quant_f16_table
/* A byte as a signed int, in float: the kernels' scales without an int-to-float conversion each. */
float quant_i8_table[256];
/* iq4_nl's and iq4_xs's 16 values, ggml's kvalues_iq4nl */
const int8_t quant_iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
/* E2M1's values doubled, ggml's kvalues_mxfp4 */
const int8_t quant_mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

float
f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);	/* inf, NaN */
	} else if (exp == 0) {
		/* zero or subnormal: man * 2^-24 */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
f32_to_f16(float f)
{
	uint32_t x, sign, man;
	int32_t exp;
	uint16_t h;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)		/* inf, NaN */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		/* subnormal in f16, round to nearest even */
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t half = 1u << (shift - 1);
		uint32_t rest = man & ((1u << shift) - 1);
		h = (uint16_t)(man >> shift);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	h = (uint16_t)(sign | ((uint32_t)exp << 10) | (man >> 13));
	/* round to nearest even; a carry into the exponent is correct */
	if ((man & 0x1fff) > 0x1000 || ((man & 0x1fff) == 0x1000 && (h & 1)))
		h++;
	return h;
}

float
bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)	/* keep NaN a NaN */
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);	/* round to nearest even */
	return (uint16_t)(x >> 16);
}

/*
 * The quantizers of the cache types, ggml's reference rules: q8_0 takes
 * d = max|x| / 127 and q = round(x / d); q4_0 takes d = m / -8, m the
 * value of largest magnitude, and q = x / d + 8 rounded, within 0..15.
 */
void
quant_quantize_q8_0(const float *x, struct block_q8_0 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * QK8_0;
		float amax = 0, d, id;

		for (j = 0; j < QK8_0; j++)
			if (fabsf(xb[j]) > amax)
				amax = fabsf(xb[j]);
		d = amax / 127;
		id = d ? 1 / d : 0;
		out[i].d = f32_to_f16(d);
		for (j = 0; j < QK8_0; j++)
			out[i].qs[j] = (int8_t)roundf(xb[j] * id);
	}
}

void
quant_quantize_q4_0(const float *x, struct block_q4_0 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * QK4_0;
		float m = 0, d, id;
		int q[QK4_0];

		for (j = 0; j < QK4_0; j++)
			if (fabsf(xb[j]) > fabsf(m))
				m = xb[j];
		d = m / -8;
		id = d ? 1 / d : 0;
		for (j = 0; j < QK4_0; j++) {
			int v = (int)(xb[j] * id + 8.5f);
			q[j] = v < 0 ? 0 : v > 15 ? 15 : v;
		}
		out[i].d = f32_to_f16(d);
		for (j = 0; j < QK4_0 / 2; j++)
			out[i].qs[j] = (uint8_t)(q[j] | q[j + QK4_0 / 2] << 4);
	}
}

void
quant_quantize_q4_1(const float *x, struct block_q4_1 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * 32;
		float lo = xb[0], hi = xb[0], d, id, m;
		int q[32];

		for (j = 1; j < 32; j++) {
			lo = xb[j] < lo ? xb[j] : lo;
			hi = xb[j] > hi ? xb[j] : hi;
		}
		/* the stored (f16) minimum and scale, so the rounding sees what dequantizing will */
		out[i].m = f32_to_f16(lo);
		m = f16_to_f32(out[i].m);
		d = (hi - m) / 15;
		out[i].d = f32_to_f16(d);
		d = f16_to_f32(out[i].d);
		id = d ? 1 / d : 0;
		for (j = 0; j < 32; j++) {
			int v = (int)((xb[j] - m) * id + 0.5f);
			q[j] = v < 0 ? 0 : v > 15 ? 15 : v;
		}
		for (j = 0; j < 16; j++)
			out[i].qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
	}
}

void
quant_hadamard(float *x, size_t n, int r)
{
	float scale = 1 / sqrtf((float)r);
	size_t b;
	int h, i, j;

	for (b = 0; b + (size_t)r <= n; b += (size_t)r) {
		float *y = x + b;
		/* the fast Walsh-Hadamard butterflies, then the 1/sqrt(r) that makes it orthonormal */
		for (h = 1; h < r; h *= 2)
			for (i = 0; i < r; i += 2 * h)
				for (j = i; j < i + h; j++) {
					float a = y[j], c = y[j + h];
					y[j] = a + c;
					y[j + h] = a - c;
				}
		for (i = 0; i < r; i++)
			y[i] *= scale;
	}
}

void
quant_init(void)
{
	static int done;
	uint32_t i;

	if (done)
		return;
	for (i = 0; i < (1u << 16); i++)
		f16_table[i] = f16_to_f32((uint16_t)i);
	for (i = 0; i < 256; i++)
		quant_i8_table[i] = (float)(int8_t)i;
	done = 1;
}

int
quant_supported(uint32_t type)
{
	switch (type) {
	case GGML_F32: case GGML_F16: case GGML_BF16: case GGML_Q8_0:
	case GGML_Q4_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1:
	case GGML_Q2_K: case GGML_Q3_K: case GGML_Q4_K: case GGML_Q5_K: case GGML_Q6_K:
	case GGML_IQ4_NL: case GGML_IQ4_XS: case GGML_MXFP4:
		return 1;
	}
	return 0;
}

const char *
quant_supported_list(void)
{
	return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, mxfp4";
}

size_t
quant_row_bytes(uint32_t type, size_t n)
{
	const struct gguf_type_info *ti = gguf_type_info(type);

	return n / ti->block * ti->bytes;
}

/*
 * Each type's weights, exactly as ggml's dequantizers compute them:
 * products and sums in f32, left to right, each rounded.
 */
void
quant_dequant_chunk(uint32_t type, const void *row, int k, int n, float *out)
{
	const uint16_t *h = row;
	int i, j, off, sc, mn, g, l, shift;
	float d, m;

	switch (type) {
	case GGML_F32:
		memcpy(out, (const float *)row + k, (size_t)n * sizeof *out);
		return;
	case GGML_F16:
		for (i = 0; i < n; i++)
			out[i] = f16_table[h[k + i]];
		return;
	case GGML_BF16:
		for (i = 0; i < n; i++)
			out[i] = bf16_to_f32(h[k + i]);
		return;
	case GGML_Q8_0: {
		const struct block_q8_0 *b = (const struct block_q8_0 *)row + k / QK8_0;
		d = f16_table[b->d];
		for (i = 0, off = k % QK8_0; i < n; i++)
			out[i] = d * (float)b->qs[off + i];
		return;
	}
	case GGML_Q4_0: case GGML_Q4_1: {
		const struct block_q4_0 *b0 = (const struct block_q4_0 *)row + k / 32;
		const struct block_q4_1 *b1 = (const struct block_q4_1 *)row + k / 32;
		const uint8_t *qs = type == GGML_Q4_0 ? b0->qs : b1->qs;
		off = k % 32;
		for (i = 0; i < n; i++) {
			j = off + i;
			int q = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
			if (type == GGML_Q4_0)
				out[i] = f16_table[b0->d] * (float)(q - 8);
			else
				out[i] = f16_table[b1->d] * (float)q + f16_table[b1->m];
		}
		return;
	}
	case GGML_Q5_0: case GGML_Q5_1: {
		const struct block_q5_0 *b0 = (const struct block_q5_0 *)row + k / 32;
		const struct block_q5_1 *b1 = (const struct block_q5_1 *)row + k / 32;
		const uint8_t *qs = type == GGML_Q5_0 ? b0->qs : b1->qs;
		uint32_t qh;
		memcpy(&qh, type == GGML_Q5_0 ? b0->qh : b1->qh, 4);
		off = k % 32;
		for (i = 0; i < n; i++) {
			j = off + i;
			int q = (j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4) | (int)((qh >> j) & 1) << 4;
			if (type == GGML_Q5_0)
				out[i] = f16_table[b0->d] * (float)(q - 16);
			else
				out[i] = f16_table[b1->d] * (float)q + f16_table[b1->m];
		}
		return;
	}
	case GGML_Q4_K: case GGML_Q5_K: {
		const struct block_q4_K *b4 = (const struct block_q4_K *)row + k / QK_K;
		const struct block_q5_K *b5 = (const struct block_q5_K *)row + k / QK_K;
		const uint8_t *scales = type == GGML_Q4_K ? b4->scales : b5->scales;
		const uint8_t *qs = type == GGML_Q4_K ? b4->qs : b5->qs;
		uint16_t dd = type == GGML_Q4_K ? b4->d : b5->d, dm = type == GGML_Q4_K ? b4->dmin : b5->dmin;
		off = k % QK_K;
		j = off / 32;			/* sub-block */
		g = j / 2;			/* 64-weight group: its 32 bytes of qs */
		shift = (j % 2) * 4;		/* low nibbles first, then high */
		quant_k4_scale_min(j, scales, &sc, &mn);
		d = f16_table[dd] * (float)sc;
		m = f16_table[dm] * (float)mn;
		for (i = 0; i < n; i++) {
			l = off % 32 + i;
			int q = (qs[32 * g + l] >> shift) & 0xf;
			if (type == GGML_Q5_K)
				q |= ((b5->qh[l] >> j) & 1) << 4;
			out[i] = d * (float)q - m;
		}
		return;
	}
	case GGML_Q2_K: {
		const struct block_q2_K *b = (const struct block_q2_K *)row + k / QK_K;
		off = k % QK_K;
		sc = b->scales[off / 16];
		d = f16_table[b->d] * (float)(sc & 0xf);
		m = f16_table[b->dmin] * (float)(sc >> 4);
		for (i = 0; i < n; i++)
			out[i] = d * (float)quant_k2_bits(b->qs, off / 32, off % 32 + i) - m;
		return;
	}
	case GGML_Q3_K: {
		const struct block_q3_K *b = (const struct block_q3_K *)row + k / QK_K;
		off = k % QK_K;
		int half[2];
		j = off / 32;
		quant_k3_pair(j, b->scales, &half[0], &half[1]);
		d = f16_table[b->d] * (float)half[off % 32 / 16];
		for (i = 0; i < n; i++) {
			l = off % 32 + i;
			out[i] = d * (float)(quant_k2_bits(b->qs, j, l) - ((b->hmask[l] >> j) & 1 ? 0 : 4));
		}
		return;
	}
	case GGML_MXFP4: {
		const struct block_mxfp4 *bl = (const struct block_mxfp4 *)row + k / 32;
		d = quant_e8m0_half(bl->e);
		for (i = 0, off = k % 32; i < n; i++) {
			j = off + i;
			out[i] = (float)quant_mxfp4_values[j < 16 ? bl->qs[j] & 0xf : bl->qs[j - 16] >> 4] * d;
		}
		return;
	}
	case GGML_IQ4_NL: case GGML_IQ4_XS: {
		const struct block_iq4_nl *bn = (const struct block_iq4_nl *)row + k / 32;
		const struct block_iq4_xs *bx = (const struct block_iq4_xs *)row + k / QK_K;
		const uint8_t *qs = type == GGML_IQ4_NL ? bn->qs : bx->qs + 16 * (k % QK_K / 32);
		d = type == GGML_IQ4_NL ? f16_table[bn->d] :
		    f16_table[bx->d] * (float)(quant_xs_scale(k % QK_K / 32, bx) - 32);
		for (i = 0, off = k % 32; i < n; i++) {
			j = off + i;
			out[i] = d * (float)quant_iq4_values[j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4];
		}
		return;
	}
	case GGML_Q6_K: {
		const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
		off = k % QK_K;
		int half = off / 128, quarter = off % 128 / 32;	/* which 32 of the half */
		const uint8_t *ql = b->ql + 64 * half + (quarter & 1) * 32;
		const uint8_t *qh = b->qh + 32 * half;
		d = f16_table[b->d] * (float)b->scales[off / 16];
		for (i = 0; i < n; i++) {
			l = off % 32 + i;
			int lo = quarter < 2 ? ql[l] & 0xf : ql[l] >> 4;
			int hi = (qh[l] >> (2 * quarter)) & 3;
			out[i] = d * (float)((lo | hi << 4) - 32);
		}
		return;
	}
	}
}

float
quant_round_block(const float *x, int16_t *q)
{
	float amax = 0, a, inv, v;
	int i;

	for (i = 0; i < 32; i++) {
		a = fabsf(x[i]);
		amax = amax > a ? amax : a;
	}
	/* a block below 1e-30 (32767 / amax would overflow near 1e-35) counts as zeros */
	amax = amax >= 1e-30f ? amax : 0.0f;
	inv = amax > 0 ? 32767.0f / amax : 0.0f;
	for (i = 0; i < 32; i++) {
		v = x[i] * inv;
		/* |v| < 2^22: adding and taking away 1.5 * 2^23 rounds to nearest, ties to even */
		v = v != v ? -32768.0f : (v + 12582912.0f) - 12582912.0f;
		q[i] = (int16_t)(v > 32767.0f ? 32767 : v < -32768.0f ? -32768 : (int)v);
	}
	return amax / 32767.0f;
}


/*
 * The integer rule's weights (kernels.c): block b of 32 weights as int16
 * q, with w = d * q + m; d returned, m in m[0] (0 without a minimum;
 * q2_K's second half's in m[1]).  The sub-block scales of the K types
 * and iq4_xs go into the integers (at most 63 * 31 for q5_K, 128 * 32
 * for q6_K, 32 * 4 for q3_K, 32 * 127 for iq4_xs), their super-block's d
 * stays a float.
 */
float
quant_iblock(uint32_t type, const void *row, int b, int16_t *q, float *m)
{
	int i, j, sc, mn;
	uint32_t qh;

	m[0] = m[1] = 0;
	switch (type) {
	case GGML_Q8_0: {
		const struct block_q8_0 *bl = (const struct block_q8_0 *)row + b;
		for (i = 0; i < 32; i++)
			q[i] = bl->qs[i];
		return f16_table[bl->d];
	}
	case GGML_Q4_0: case GGML_Q4_1: {
		const struct block_q4_0 *b0 = (const struct block_q4_0 *)row + b;
		const struct block_q4_1 *b1 = (const struct block_q4_1 *)row + b;
		const uint8_t *qs = type == GGML_Q4_0 ? b0->qs : b1->qs;
		int off = type == GGML_Q4_0 ? 8 : 0;
		for (i = 0; i < 16; i++) {
			q[i] = (int16_t)((qs[i] & 0xf) - off);
			q[i + 16] = (int16_t)((qs[i] >> 4) - off);
		}
		if (type == GGML_Q4_0)
			return f16_table[b0->d];
		m[0] = f16_table[b1->m];
		return f16_table[b1->d];
	}
	case GGML_Q5_0: case GGML_Q5_1: {
		const struct block_q5_0 *b0 = (const struct block_q5_0 *)row + b;
		const struct block_q5_1 *b1 = (const struct block_q5_1 *)row + b;
		const uint8_t *qs = type == GGML_Q5_0 ? b0->qs : b1->qs;
		int off = type == GGML_Q5_0 ? 16 : 0;
		memcpy(&qh, type == GGML_Q5_0 ? b0->qh : b1->qh, 4);
		for (i = 0; i < 32; i++)
			q[i] = (int16_t)(((i < 16 ? qs[i] & 0xf : qs[i - 16] >> 4) | (int)((qh >> i) & 1) << 4) - off);
		if (type == GGML_Q5_0)
			return f16_table[b0->d];
		m[0] = f16_table[b1->m];
		return f16_table[b1->d];
	}
	case GGML_Q4_K: case GGML_Q5_K: {
		const struct block_q4_K *b4 = (const struct block_q4_K *)row + b / 8;
		const struct block_q5_K *b5 = (const struct block_q5_K *)row + b / 8;
		const uint8_t *qs = type == GGML_Q4_K ? b4->qs : b5->qs;
		j = b % 8;
		quant_k4_scale_min(j, type == GGML_Q4_K ? b4->scales : b5->scales, &sc, &mn);
		for (i = 0; i < 32; i++) {
			int v = (qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 0xf;
			if (type == GGML_Q5_K)
				v |= ((b5->qh[i] >> j) & 1) << 4;
			q[i] = (int16_t)(sc * v);
		}
		m[0] = -(f16_table[type == GGML_Q4_K ? b4->dmin : b5->dmin] * (float)mn);
		return f16_table[type == GGML_Q4_K ? b4->d : b5->d];
	}
	case GGML_Q2_K: {
		const struct block_q2_K *bl = (const struct block_q2_K *)row + b / 8;
		const uint8_t *sc2 = bl->scales + 2 * (b % 8);
		for (i = 0; i < 32; i++)
			q[i] = (int16_t)((sc2[i / 16] & 0xf) * quant_k2_bits(bl->qs, b % 8, i));
		m[0] = -(f16_table[bl->dmin] * (float)(sc2[0] >> 4));
		m[1] = -(f16_table[bl->dmin] * (float)(sc2[1] >> 4));
		return f16_table[bl->d];
	}
	case GGML_Q3_K: {
		const struct block_q3_K *bl = (const struct block_q3_K *)row + b / 8;
		int half[2];
		j = b % 8;
		quant_k3_pair(j, bl->scales, &half[0], &half[1]);
		for (i = 0; i < 32; i++)
			q[i] = (int16_t)(half[i / 16] * (quant_k2_bits(bl->qs, j, i) - ((bl->hmask[i] >> j) & 1 ? 0 : 4)));
		return f16_table[bl->d];
	}
	case GGML_IQ4_NL: {
		const struct block_iq4_nl *bl = (const struct block_iq4_nl *)row + b;
		for (i = 0; i < 16; i++) {
			q[i] = quant_iq4_values[bl->qs[i] & 0xf];
			q[i + 16] = quant_iq4_values[bl->qs[i] >> 4];
		}
		return f16_table[bl->d];
	}
	case GGML_MXFP4: {
		const struct block_mxfp4 *bl = (const struct block_mxfp4 *)row + b;
		for (i = 0; i < 16; i++) {
			q[i] = quant_mxfp4_values[bl->qs[i] & 0xf];
			q[i + 16] = quant_mxfp4_values[bl->qs[i] >> 4];
		}
		return quant_e8m0_half(bl->e);
	}
	case GGML_IQ4_XS: {
		const struct block_iq4_xs *bl = (const struct block_iq4_xs *)row + b / 8;
		const uint8_t *qs = bl->qs + 16 * (b % 8);
		sc = quant_xs_scale(b % 8, bl) - 32;
		for (i = 0; i < 16; i++) {
			q[i] = (int16_t)(sc * quant_iq4_values[qs[i] & 0xf]);
			q[i + 16] = (int16_t)(sc * quant_iq4_values[qs[i] >> 4]);
		}
		return f16_table[bl->d];
	}
	case GGML_Q6_K: {
		const struct block_q6_K *bl = (const struct block_q6_K *)row + b / 8;
		int off = b % 8 * 32, half = off / 128, quarter = off % 128 / 32;
		const uint8_t *ql = bl->ql + 64 * half + (quarter & 1) * 32, *qhp = bl->qh + 32 * half;
		for (i = 0; i < 32; i++) {
			int lo = quarter < 2 ? ql[i] & 0xf : ql[i] >> 4, hi = (qhp[i] >> (2 * quarter)) & 3;
			q[i] = (int16_t)(bl->scales[(off + i) / 16] * ((lo | hi << 4) - 32));
		}
		return f16_table[bl->d];
	}
	}
	memset(q, 0, 32 * sizeof *q);
	return 0;
}

int
quant_has_min(uint32_t type)
{
	if (type == GGML_Q2_K)
		return 2;
	return type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K;
}

void
quant_dequant_row(uint32_t type, const void *row, float *out, size_t n)
{
	size_t k;

	if (type == GGML_F32) {
		memcpy(out, row, n * sizeof *out);
		return;
	}
	for (k = 0; k + 16 <= n; k += 16)
		quant_dequant_chunk(type, row, (int)k, 16, out + k);
	if (k < n)
		quant_dequant_chunk(type, row, (int)k, (int)(n - k), out + k);
}


















