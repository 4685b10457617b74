/*
 * neon.c: the kernels for AArch64's Advanced SIMD (NEON), three sets
 * (simd.h) that give exactly the portable kernels' bits:
 *
 *   neon     every AArch64 processor: the float rule in 4-lane vectors,
 *            the integer rule by widening multiplies (SMLAL);
 *   dotprod  with SDOT, the 8-bit dot product of ARMv8.2 (Apple's M1 on,
 *            Graviton 2 on, the Raspberry Pi 5's Cortex-A76);
 *   i8mm     with dotprod's and ARMv8.6's 8-bit matrix multiplies: USDOT
 *            for one token, SMMLA and USMMLA for two rows by two tokens
 *            (Apple's M2 on, Graviton 3 on, Neoverse V1, V2 and N2).
 *
 * kernels.c takes dotprod and i8mm only when the processor says it has
 * them (Linux's getauxval, macOS's sysctl).  Their instructions are
 * written as inline assembly in functions compiled for them (a target
 * pragma, so that the assembler takes them), so no compiler needs a flag
 * or intrinsics of a given age: clang 14's arm_neon.h has SDOT's only
 * under -march.
 *
 * The float rule's 16 lanes (kernels.c) live in four 4-lane vectors, VEC
 * a quartet: lanes 0-3, 4-7, 8-11 and 12-15.  The tree adds vectors 0
 * and 2, 1 and 3 (h = 8), then those two (h = 4), then within one.
 *
 * The integer rule: x's 16-bit integers meet a weight block's 32 weights,
 * every type's a signed byte (q4_0 as q - 8, q6_K as q - 32) with the
 * sub-block scales of the K types and iq4_xs apart: s = sc0 * (the sum
 * of weights 0-15's products) + sc1 * (16-31's), which is quant_iblock's
 * integer sum, for integers add and multiply exactly (modulo 2^32, as
 * every set's lanes); q2_K's minimums, one a half, are the chain of
 * kernels.c's rule beside it.
 * neon widens the weights to 16 bits and multiplies them with x's
 * integers.  dotprod and i8mm take x's integers as two bytes, x = 256 h +
 * l, h signed and l unsigned, split once when x is rounded: s = 256 (the
 * products with h) + (those with l).  SDOT multiplies signed bytes only,
 * so dotprod takes l - 128 and adds 128 times the weights' sum (an SDOT
 * with ones); USDOT, SMMLA and USMMLA take l as it is.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "../quant.h"
#include "simd.h"

#if defined(__aarch64__) && defined(SIMD_TARGET_BEGIN)

#define AI inline __attribute__((always_inline))

typedef struct { float32x4_t q[4]; } v16;

#define VEC v16
#define LANES 16
#define ROWS 2		/* batch tiles: 2 rows by 2 tokens, 16 of the 32 registers accumulating */
#define TOKS 2
#define HALF_ROWS 2
#define DECODE_ROWS 2
#define PREFIX quant_neon_
#define PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 2)
#define INT_INC "nint.inc"

static AI v16
v16_dup(float a)
{
	v16 v = { { vdupq_n_f32(a), vdupq_n_f32(a), vdupq_n_f32(a), vdupq_n_f32(a) } };
	return v;
}

static AI v16
v16_load(const float *p)
{
	v16 v = { { vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12) } };
	return v;
}

static AI void
v16_store(float *p, v16 v)
{
	vst1q_f32(p, v.q[0]);
	vst1q_f32(p + 4, v.q[1]);
	vst1q_f32(p + 8, v.q[2]);
	vst1q_f32(p + 12, v.q[3]);
}

/* Tails: the first n < 16 elements, the rest zeros. */
static AI v16
tail_f32(const float *p, int n)
{
	float v[16] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return v16_load(v);
}

static AI void
store_tail(float *p, v16 v, int n)
{
	float t[16];
	v16_store(t, v);
	memcpy(p, t, (size_t)n * sizeof *t);
}

/* 16-bit floats: f16 to f32 exactly (FCVTL), bf16 by its bits shifted up */
static AI v16
load_f16(const uint16_t *p)
{
	v16 v;
	for (int i = 0; i < 4; i++)
		v.q[i] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p + 4 * i)));
	return v;
}

static AI v16
load_bf16(const uint16_t *p)
{
	v16 v;
	for (int i = 0; i < 4; i++)
		v.q[i] = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p + 4 * i), 16));
	return v;
}

static AI v16
tail_half(const uint16_t *p, int n, int bf)
{
	uint16_t v[16] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return bf ? load_bf16(v) : load_f16(v);
}

#define V16_OP(name, f) \
	static AI v16 name(v16 a, v16 b) \
	{ \
		v16 v = { { f(a.q[0], b.q[0]), f(a.q[1], b.q[1]), f(a.q[2], b.q[2]), f(a.q[3], b.q[3]) } }; \
		return v; \
	}
V16_OP(v16_mul, vmulq_f32)
V16_OP(v16_add, vaddq_f32)
V16_OP(v16_sub, vsubq_f32)
V16_OP(v16_div, vdivq_f32)
/* max(x, lo) where NaN gives lo, as the portable x > lo ? x : lo (FMAXNM) */
V16_OP(v16_max, vmaxnmq_f32)

/* c + a * b, fused (FMLA) */
static AI v16
v16_fma(v16 a, v16 b, v16 c)
{
	v16 v = { { vfmaq_f32(c.q[0], a.q[0], b.q[0]), vfmaq_f32(c.q[1], a.q[1], b.q[1]),
	    vfmaq_f32(c.q[2], a.q[2], b.q[2]), vfmaq_f32(c.q[3], a.q[3], b.q[3]) } };
	return v;
}

/* The float rule's tree: lanes i and i + 8, i + 4, i + 2, i + 1 */
static AI float
v16_reduce(v16 v)
{
	float32x4_t b = vaddq_f32(vaddq_f32(v.q[0], v.q[2]), vaddq_f32(v.q[1], v.q[3]));
	float32x2_t c = vadd_f32(vget_low_f32(b), vget_high_f32(b));

	return vget_lane_f32(c, 0) + vget_lane_f32(c, 1);
}

static AI float
v16_reduce_max(v16 v)
{
	return vmaxnmvq_f32(vmaxnmq_f32(vmaxnmq_f32(v.q[0], v.q[1]), vmaxnmq_f32(v.q[2], v.q[3])));
}

/* fmath_expf, the same operations lane by lane */
static AI float32x4_t
exp4(float32x4_t x)
{
	float32x4_t n, r, p;
	int32x4_t e;

	x = vminnmq_f32(vmaxnmq_f32(x, vdupq_n_f32(-87.3f)), vdupq_n_f32(88.0f));
	n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504089f)));
	r = vsubq_f32(x, vmulq_f32(n, vdupq_n_f32(0.693359375f)));
	r = vsubq_f32(r, vmulq_f32(n, vdupq_n_f32(-2.12194440e-4f)));
	p = vdupq_n_f32(1.9875691500e-4f);
	p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.3981999507e-3f));
	p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(8.3334519073e-3f));
	p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(4.1665795894e-2f));
	p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(1.6666665459e-1f));
	p = vaddq_f32(vmulq_f32(p, r), vdupq_n_f32(5.0000001201e-1f));
	p = vaddq_f32(vmulq_f32(vmulq_f32(p, r), r), vaddq_f32(r, vdupq_n_f32(1.0f)));
	/* 2^n from the exponent bits; n >= -126 after the clamp */
	e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
	return vmulq_f32(p, vreinterpretq_f32_s32(e));
}

static AI v16
v16_exp(v16 x)
{
	v16 v = { { exp4(x.q[0]), exp4(x.q[1]), exp4(x.q[2]), exp4(x.q[3]) } };
	return v;
}

/* For the KV cache's kernels: 16 signed bytes, or the low or high nibbles of 16 bytes, as floats */
static AI v16
widen_s8(const int8_t *p)
{
	int8x16_t b = vld1q_s8(p);
	int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
	v16 v = { { vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))), vcvtq_f32_s32(vmovl_high_s16(lo)),
	    vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))), vcvtq_f32_s32(vmovl_high_s16(hi)) } };
	return v;
}

static AI v16
widen_nibbles(const uint8_t *p, int high)
{
	uint8x16_t b = vld1q_u8(p);
	b = high ? vshrq_n_u8(b, 4) : vandq_u8(b, vdupq_n_u8(0x0f));
	uint16x8_t lo = vmovl_u8(vget_low_u8(b)), hi = vmovl_high_u8(b);
	v16 v = { { vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))), vcvtq_f32_u32(vmovl_high_u16(lo)),
	    vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))), vcvtq_f32_u32(vmovl_high_u16(hi)) } };
	return v;
}

#define ZERO() v16_dup(0.0f)
#define SET1(a) v16_dup(a)
#define FMA(a, b, c) v16_fma(a, b, c)
#define MUL(a, b) v16_mul(a, b)
#define ADD(a, b) v16_add(a, b)
#define SUB(a, b) v16_sub(a, b)
#define DIV(a, b) v16_div(a, b)
#define MAX(a, b) v16_max(a, b)
#define EXP(v) v16_exp(v)
#define REDUCE(v) v16_reduce(v)
#define REDUCE_MAX(v) v16_reduce_max(v)
#define STORE(p, v) v16_store(p, v)
#define STORE_TAIL(p, v, n) store_tail(p, v, n)
#define LOADX(p) v16_load(p)
#define LOADX_TAIL(p, n) tail_f32(p, n)
#define LOAD_F32(row, k) v16_load((const float *)(row) + (k))
#define LOAD_F32_TAIL(row, k, n) tail_f32((const float *)(row) + (k), n)
#define LOAD_F16(row, k) load_f16((const uint16_t *)(row) + (k))
#define LOAD_F16_TAIL(row, k, n) tail_half((const uint16_t *)(row) + (k), n, 0)
#define LOAD_BF16(row, k) load_bf16((const uint16_t *)(row) + (k))
#define LOAD_BF16_TAIL(row, k, n) tail_half((const uint16_t *)(row) + (k), n, 1)
#define WIDEN_I8(p) widen_s8((const int8_t *)(p))
#define WIDEN_NIB(p, high) widen_nibbles((const uint8_t *)(p), high)

/* 32 registers of 4 lanes: tiles of the KV cache's kernels as AVX2's 16 of 8 */
#define QT 2
#define VH 2
#define VHB 2
#define VNC 2

/*
 * The integer rule's weights: block b of a row of a block type as 32
 * signed bytes (w[0]: weights 0-15, w[1]: 16-31), the sub-block scales
 * of its halves in sc[0] and sc[1] (1 where there are none), its scale d
 * returned and its minimum (0 without one) in *m: with the scales put
 * in, quant_iblock's integers.  type is a constant where it is called.
 */
static AI int
has_scales(int type)
{
	return type == GGML_Q2_K || type == GGML_Q3_K || type == GGML_Q4_K || type == GGML_Q5_K ||
	    type == GGML_Q6_K || type == GGML_IQ4_XS;
}

/* a scale for each half: sub-blocks of 16 */
static AI int
two_scales(int type)
{
	return type == GGML_Q2_K || type == GGML_Q3_K || type == GGML_Q6_K;
}

/* quant_has_min, inline: type is a constant */
static AI int
has_min(int type)
{
	if (type == GGML_Q2_K)
		return 2;
	return type == GGML_Q4_1 || type == GGML_Q5_1 || type == GGML_Q4_K || type == GGML_Q5_K;
}

/* 32 bits of qh as 32 bytes: 16 where bit j is set, 0 where clear */
static AI void
fifth_bits(uint32_t qh, uint8x16_t *lo, uint8x16_t *hi)
{
	static const uint8_t pick[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 };
	static const uint8_t bit[16] = { 1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128 };
	uint8x16_t q = vreinterpretq_u8_u32(vdupq_n_u32(qh)), p = vld1q_u8(pick), m = vld1q_u8(bit);

	*lo = vandq_u8(vtstq_u8(vqtbl1q_u8(q, p), m), vdupq_n_u8(16));
	*hi = vandq_u8(vtstq_u8(vqtbl1q_u8(q, vaddq_u8(p, vdupq_n_u8(2))), m), vdupq_n_u8(16));
}

/* Block j's 2-bit fields of q2_K and q3_K (quant_k2_bits), weights 0-15 in w[0], 16-31 in w[1] */
static AI void
k2_bits(const uint8_t *qs, int j, uint8x16_t *w)
{
	int8x16_t sh = vdupq_n_s8((int8_t)(-2 * (j % 4)));

	w[0] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (j / 4)), sh), vdupq_n_u8(3));
	w[1] = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * (j / 4) + 16), sh), vdupq_n_u8(3));
}

static AI float
nload(int type, const char *row, int b, int8x16_t *w, int *sc, float *m)
{
	sc[0] = sc[1] = 1;
	m[0] = m[1] = 0;
	switch (type) {
	case GGML_Q2_K: {
		const struct block_q2_K *bl = (const struct block_q2_K *)row + b / 8;
		const uint8_t *s2 = bl->scales + 2 * (b % 8);
		uint8x16_t q[2];
		k2_bits(bl->qs, b % 8, q);
		w[0] = vreinterpretq_s8_u8(q[0]);
		w[1] = vreinterpretq_s8_u8(q[1]);
		sc[0] = s2[0] & 0xf;
		sc[1] = s2[1] & 0xf;
		m[0] = -(quant_f16_table[bl->dmin] * quant_i8_table[s2[0] >> 4]);
		m[1] = -(quant_f16_table[bl->dmin] * quant_i8_table[s2[1] >> 4]);
		return quant_f16_table[bl->d];
	}
	case GGML_Q8_0: {
		const struct block_q8_0 *bl = (const struct block_q8_0 *)row + b;
		w[0] = vld1q_s8(bl->qs);
		w[1] = vld1q_s8(bl->qs + 16);
		return quant_f16_table[bl->d];
	}
	case GGML_Q4_0: case GGML_Q4_1: {
		const struct block_q4_0 *b0 = (const struct block_q4_0 *)row + b;
		const struct block_q4_1 *b1 = (const struct block_q4_1 *)row + b;
		uint8x16_t q = vld1q_u8(type == GGML_Q4_0 ? b0->qs : b1->qs);
		int8x16_t off = vdupq_n_s8(type == GGML_Q4_0 ? 8 : 0);
		w[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), off);
		w[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), off);
		if (type == GGML_Q4_0)
			return quant_f16_table[b0->d];
		*m = quant_f16_table[b1->m];
		return quant_f16_table[b1->d];
	}
	case GGML_Q5_0: case GGML_Q5_1: {
		const struct block_q5_0 *b0 = (const struct block_q5_0 *)row + b;
		const struct block_q5_1 *b1 = (const struct block_q5_1 *)row + b;
		uint8x16_t q = vld1q_u8(type == GGML_Q5_0 ? b0->qs : b1->qs), lo, hi;
		int8x16_t off = vdupq_n_s8(type == GGML_Q5_0 ? 16 : 0);
		uint32_t qh;
		memcpy(&qh, type == GGML_Q5_0 ? b0->qh : b1->qh, 4);
		fifth_bits(qh, &lo, &hi);
		w[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, vdupq_n_u8(0x0f)), lo)), off);
		w[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hi)), off);
		if (type == GGML_Q5_0)
			return quant_f16_table[b0->d];
		*m = quant_f16_table[b1->m];
		return quant_f16_table[b1->d];
	}
	case GGML_Q4_K: case GGML_Q5_K: {
		const struct block_q4_K *b4 = (const struct block_q4_K *)row + b / 8;
		const struct block_q5_K *b5 = (const struct block_q5_K *)row + b / 8;
		const uint8_t *qs = (type == GGML_Q4_K ? b4->qs : b5->qs) + 32 * (b % 8 / 2);
		int j = b % 8, s, mn;
		uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
		if (j % 2) {
			q0 = vshrq_n_u8(q0, 4);
			q1 = vshrq_n_u8(q1, 4);
		} else {
			q0 = vandq_u8(q0, vdupq_n_u8(0x0f));
			q1 = vandq_u8(q1, vdupq_n_u8(0x0f));
		}
		if (type == GGML_Q5_K) {	/* bit j of qh[i] as 16: shifted left by 4 - j (right, if negative) */
			int8x16_t sh = vdupq_n_s8((int8_t)(4 - j));
			uint8x16_t h0 = vshlq_u8(vld1q_u8(b5->qh), sh), h1 = vshlq_u8(vld1q_u8(b5->qh + 16), sh);
			q0 = vorrq_u8(q0, vandq_u8(h0, vdupq_n_u8(16)));
			q1 = vorrq_u8(q1, vandq_u8(h1, vdupq_n_u8(16)));
		}
		w[0] = vreinterpretq_s8_u8(q0);
		w[1] = vreinterpretq_s8_u8(q1);
		quant_k4_scale_min(j, type == GGML_Q4_K ? b4->scales : b5->scales, &s, &mn);
		sc[0] = sc[1] = s;
		*m = -(quant_f16_table[type == GGML_Q4_K ? b4->dmin : b5->dmin] * quant_i8_table[mn]);
		return quant_f16_table[type == GGML_Q4_K ? b4->d : b5->d];
	}
	case GGML_Q3_K: {
		const struct block_q3_K *bl = (const struct block_q3_K *)row + b / 8;
		int j = b % 8;
		int8x16_t hs = vdupq_n_s8((int8_t)(2 - j));
		uint8x16_t q[2];
		k2_bits(bl->qs, j, q);
		for (int i = 0; i < 2; i++) {
			/* q - 4 + (bit j of hmask, moved to bit 2) */
			uint8x16_t h = vandq_u8(vshlq_u8(vld1q_u8(bl->hmask + 16 * i), hs), vdupq_n_u8(4));
			w[i] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(q[i], h)), vdupq_n_s8(4));
		}
		quant_k3_pair(j, bl->scales, &sc[0], &sc[1]);
		return quant_f16_table[bl->d];
	}
	case GGML_IQ4_NL: case GGML_IQ4_XS: {
		const struct block_iq4_nl *bn = (const struct block_iq4_nl *)row + b;
		const struct block_iq4_xs *bx = (const struct block_iq4_xs *)row + b / 8;
		uint8x16_t q = vld1q_u8(type == GGML_IQ4_NL ? bn->qs : bx->qs + 16 * (b % 8));
		int8x16_t table = vld1q_s8(quant_iq4_values);
		w[0] = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0f)));
		w[1] = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
		if (type == GGML_IQ4_NL)
			return quant_f16_table[bn->d];
		sc[0] = sc[1] = quant_xs_scale(b % 8, bx) - 32;
		return quant_f16_table[bx->d];
	}
	case GGML_MXFP4: {
		const struct block_mxfp4 *bl = (const struct block_mxfp4 *)row + b;
		uint8x16_t q = vld1q_u8(bl->qs);
		int8x16_t table = vld1q_s8(quant_mxfp4_values);
		w[0] = vqtbl1q_s8(table, vandq_u8(q, vdupq_n_u8(0x0f)));
		w[1] = vqtbl1q_s8(table, vshrq_n_u8(q, 4));
		return quant_e8m0_half(bl->e);
	}
	case GGML_Q6_K: {
		const struct block_q6_K *bl = (const struct block_q6_K *)row + b / 8;
		int off = b % 8 * 32, half = off / 128, quarter = off % 128 / 32;
		const uint8_t *ql = bl->ql + 64 * half + (quarter & 1) * 32, *qhp = bl->qh + 32 * half;
		int8x16_t sh = vdupq_n_s8((int8_t)(-2 * quarter));
		uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
		uint8x16_t h0 = vandq_u8(vshlq_u8(vld1q_u8(qhp), sh), vdupq_n_u8(3));
		uint8x16_t h1 = vandq_u8(vshlq_u8(vld1q_u8(qhp + 16), sh), vdupq_n_u8(3));
		if (quarter < 2) {
			l0 = vandq_u8(l0, vdupq_n_u8(0x0f));
			l1 = vandq_u8(l1, vdupq_n_u8(0x0f));
		} else {
			l0 = vshrq_n_u8(l0, 4);
			l1 = vshrq_n_u8(l1, 4);
		}
		w[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l0, vshlq_n_u8(h0, 4))), vdupq_n_s8(32));
		w[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l1, vshlq_n_u8(h1, 4))), vdupq_n_s8(32));
		sc[0] = bl->scales[off / 16];
		sc[1] = bl->scales[off / 16 + 1];
		return quant_f16_table[bl->d];
	}
	}
	w[0] = w[1] = vdupq_n_s8(0);
	return 0;
}

/*
 * The instructions of dotprod and i8mm.  sdot: acc's lane i plus the
 * four products of bytes 4i to 4i + 3 of a and b, signed; usdot: a
 * unsigned, b signed.  smmla, usmmla: a and b as two rows of 8 bytes
 * each (a's unsigned for usmmla), acc's lane 2i + j plus the 8 products
 * of a's row i and b's row j.
 */
#define NEON_ASM(name, a_type) \
	static AI int32x4_t \
	name(int32x4_t acc, a_type a, int8x16_t b) \
	{ \
		__asm__(#name " %0.4s, %1.16b, %2.16b" : "+w"(acc) : "w"(a), "w"(b)); \
		return acc; \
	}
NEON_ASM(sdot, int8x16_t)
NEON_ASM(usdot, uint8x16_t)
NEON_ASM(smmla, int8x16_t)
NEON_ASM(usmmla, uint8x16_t)

/*
 * A token's block of x as each set takes it: its 32 integers (neon), or
 * their high bytes h and low bytes l (dotprod, i8mm), and l - 128 as
 * signed bytes (dotprod).
 */
struct nx {
	int16x8_t q[4];
	int8x16_t h[2], lp[2];
	uint8x16_t l[2];
};

#define NLEVEL 0	/* gemm.inc's integer products (nint.inc): neon's */
#include "gemm.inc"
#undef NLEVEL
#include "attn.inc"

/*
 * The dotprod set's integer products, then i8mm's, compiled for them:
 * GNU as takes SDOT from ARMv8.2 on, and every processor with it is one.
 */
#if defined(__clang__)
#define NEON_DOTPROD "dotprod"
#define NEON_I8MM "dotprod,i8mm"
#else
#define NEON_DOTPROD "arch=armv8.2-a+dotprod"
#define NEON_I8MM "arch=armv8.2-a+dotprod+i8mm"
#endif
#undef PREFIX
#define PREFIX quant_ndot_
#define NLEVEL 1
SIMD_TARGET_BEGIN(NEON_DOTPROD)
#include "nint.inc"
SIMD_TARGET_END
#undef NLEVEL
#undef PREFIX
#define PREFIX quant_nmm_
#define NLEVEL 2
SIMD_TARGET_BEGIN(NEON_I8MM)
#include "nint.inc"
SIMD_TARGET_END
#undef NLEVEL

const struct kernels *
simd_neon(void)
{
	static const struct kernels k = {
		.name = "neon",
		.gemm = quant_neon_gemm,
		.rounds_x = quant_neon_rounds_x,
		.round = quant_neon_round,
		.gemm_rounded = quant_neon_gemm_rounded,
		.attn_values = quant_neon_attn_values,
		.softmax = quant_neon_softmax,
		.silu_mul = quant_neon_silu_mul,
		.group_scores = quant_neon_group_scores,
		.row_values = quant_neon_row_values,
	};

	return &k;
}

/* neon's table with the block types' products and x's rounding of another set (one thread, at start) */
static const struct kernels *
neon_with(struct kernels *k, const char *name,
    void (*gemm)(uint32_t, const void *, size_t, int, int, int, const float *, size_t, int, float *, size_t),
    void (*round)(const float *, size_t, int, int, int, int, float *, int),
    void (*gemm_rounded)(uint32_t, const void *, size_t, int, int, int, const float *, int, float *, size_t))
{
	if (!k->name) {
		*k = *simd_neon();
		k->gemm = gemm;
		k->round = round;
		k->gemm_rounded = gemm_rounded;
		k->name = name;
	}
	return k;
}

const struct kernels *
simd_dotprod(void)
{
	static struct kernels k;

	return neon_with(&k, "dotprod", quant_ndot_gemm, quant_ndot_round, quant_ndot_gemm_rounded);
}

const struct kernels *
simd_i8mm(void)
{
	static struct kernels k;

	return neon_with(&k, "i8mm", quant_nmm_gemm, quant_nmm_round, quant_nmm_gemm_rounded);
}
#else
const struct kernels *
simd_neon(void)
{
	return NULL;
}

const struct kernels *
simd_dotprod(void)
{
	return NULL;
}

const struct kernels *
simd_i8mm(void)
{
	return NULL;
}
#endif
