/*
 * avx2.c: the kernels for AVX2 with FMA and F16C (simd.h), compiled
 * for them (SIMD_TARGET_BEGIN); kernels.c takes them only when cpuid
 * says the processor has them.
 *
 * The float rule's 16 lanes (kernels.c) live in two 8-lane vectors, VEC
 * a pair: lanes 0-7 and 8-15, each operation done on both, and the tree
 * adds the halves first (lane i and i + 8), then as within one.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../quant.h"
#include "simd.h"

#if defined(SIMD_X86)
SIMD_TARGET_BEGIN("avx2,fma,f16c")

typedef struct { __m256 lo, hi; } v16;

#define VEC v16
#define LANES 16
#define ROWS 3	/* batch tiles of 3 rows by 4 tokens, a half chunk at a time (HALF8, tile.inc) */
#define TOKS 4
#define HALF8 1
#define HALF_ROWS 2	/* f16 and bf16 decode: rows at a time */
#define DECODE_ROWS 4	/* decode tiles of short rows */
#define PREFIX quant_avx2_

static inline __attribute__((always_inline)) v16
v16_of(__m256 lo, __m256 hi)
{
	v16 v = { lo, hi };
	return v;
}

/* Tails: the first n < 16 elements, the rest zeros. */
static inline __attribute__((always_inline)) v16
tail_f32(const float *p, int n)
{
	float v[16] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return v16_of(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8));
}

static inline __attribute__((always_inline)) void
store_tail(float *p, v16 v, int n)
{
	float t[16];
	_mm256_storeu_ps(t, v.lo);
	_mm256_storeu_ps(t + 8, v.hi);
	memcpy(p, t, (size_t)n * sizeof *t);
}

#define F16_8(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define BF16_8(p) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p))), 16))

static inline __attribute__((always_inline)) v16
load_f16(const uint16_t *p)
{
	return v16_of(F16_8(p), F16_8(p + 8));
}

static inline __attribute__((always_inline)) v16
load_bf16(const uint16_t *p)
{
	return v16_of(BF16_8(p), BF16_8(p + 8));
}

static inline __attribute__((always_inline)) v16
tail_half(const uint16_t *p, int n, int bf)
{
	uint16_t v[16] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return bf ? load_bf16(v) : load_f16(v);
}

/* 8 lanes, for the batch tiles' half-chunk passes: n < 8 elements, then zeros */
static inline __attribute__((always_inline)) __m256
tail8(const float *p, int n)
{
	float v[8] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return _mm256_loadu_ps(v);
}

static inline __attribute__((always_inline)) __m256
tail8_half(const uint16_t *p, int n, int bf)
{
	uint16_t v[8] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return bf ? BF16_8(v) : F16_8(v);
}

#define LOAD8_F32(row, k) _mm256_loadu_ps((const float *)(row) + (k))
#define LOAD8_F32_TAIL(row, k, n) tail8((const float *)(row) + (k), n)
#define LOAD8_F16(row, k) F16_8((const uint16_t *)(row) + (k))
#define LOAD8_F16_TAIL(row, k, n) tail8_half((const uint16_t *)(row) + (k), n, 0)
#define LOAD8_BF16(row, k) BF16_8((const uint16_t *)(row) + (k))
#define LOAD8_BF16_TAIL(row, k, n) tail8_half((const uint16_t *)(row) + (k), n, 1)

#define V2(op, a, b) v16_of(op((a).lo, (b).lo), op((a).hi, (b).hi))
#define ZERO() v16_of(_mm256_setzero_ps(), _mm256_setzero_ps())
#define FMA(a, b, c) v16_of(_mm256_fmadd_ps((a).lo, (b).lo, (c).lo), _mm256_fmadd_ps((a).hi, (b).hi, (c).hi))
#define SET1(a) v16_of(_mm256_set1_ps(a), _mm256_set1_ps(a))
#define STORE(p, v) (_mm256_storeu_ps(p, (v).lo), _mm256_storeu_ps((p) + 8, (v).hi))
#define STORE_TAIL(p, v, n) store_tail(p, v, n)
#define LOADX(p) v16_of(_mm256_loadu_ps(p), _mm256_loadu_ps((p) + 8))
#define LOADX_TAIL(p, n) tail_f32(p, n)
#define LOAD_F32(row, k) LOADX((const float *)(row) + (k))
#define LOAD_F32_TAIL(row, k, n) tail_f32((const float *)(row) + (k), n)
#define LOAD_F16(row, k) load_f16((const uint16_t *)(row) + (k))
#define LOAD_F16_TAIL(row, k, n) tail_half((const uint16_t *)(row) + (k), n, 0)
#define LOAD_BF16(row, k) load_bf16((const uint16_t *)(row) + (k))
#define LOAD_BF16_TAIL(row, k, n) tail_half((const uint16_t *)(row) + (k), n, 1)
#define MUL(a, b) V2(_mm256_mul_ps, a, b)
#define ADD(a, b) V2(_mm256_add_ps, a, b)
#define SUB(a, b) V2(_mm256_sub_ps, a, b)
#define DIV(a, b) V2(_mm256_div_ps, a, b)
#define MAX(a, b) V2(_mm256_max_ps, a, b)

/* Eight nibbles from 8 bytes: the low ones, or the high ones, as 8 int32. */
static inline __attribute__((always_inline)) __m256i
nibbles8(const uint8_t *p, int high)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)p);

	if (high)
		b = _mm_srli_epi16(b, 4);
	return _mm256_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(0x0f)));
}

/* For the KV cache's kernels: 16 signed bytes, or the low or high nibbles of 16 bytes, as floats. */
#define I8_8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define WIDEN_I8(p) v16_of(I8_8(p), I8_8((const int8_t *)(p) + 8))
#define WIDEN_NIB(p, high) v16_of(_mm256_cvtepi32_ps(nibbles8((const uint8_t *)(p), high)), \
	_mm256_cvtepi32_ps(nibbles8((const uint8_t *)(p) + 8, high)))

/* A fixed tree: 8 -> 4 -> 2 -> 1. */
static inline __attribute__((always_inline)) float
reduce256(__m256 v)
{
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

/*
 * Four reductions at once, adding the very same pairs as reduce256 at
 * each level (so the same bits) with fewer shuffles.
 */
static inline __attribute__((always_inline)) void
reduce256x4(__m256 a, __m256 b, __m256 c, __m256 d, float *out)
{
	/* 8 -> 4: [a.lo + a.hi | b.lo + b.hi] */
	__m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
	__m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
	/* 4 -> 2: [a0 a1 c0 c1 | b0 b1 d0 d1] + [a2 a3 c2 c3 | b2 b3 d2 d3] */
	__m256 x = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, 0x44), _mm256_shuffle_ps(ab, cd, 0xee));
	/* 2 -> 1: [a c . . | b d . .] */
	x = _mm256_add_ps(_mm256_shuffle_ps(x, x, 0x08), _mm256_shuffle_ps(x, x, 0x0d));
	__m128 lo = _mm256_castps256_ps128(x), hi = _mm256_extractf128_ps(x, 1);
	_mm_storeu_ps(out, _mm_unpacklo_ps(lo, hi));
}
/* The tree's first level adds the halves (lane i and i + 8); then as in one vector. */
#define REDUCE(v) reduce256(_mm256_add_ps((v).lo, (v).hi))
#define REDUCE4(a, b, c, d, out) reduce256x4(_mm256_add_ps((a).lo, (a).hi), _mm256_add_ps((b).lo, (b).hi), \
	_mm256_add_ps((c).lo, (c).hi), _mm256_add_ps((d).lo, (d).hi), out)

static inline __attribute__((always_inline)) float
reduce_max256(__m256 v)
{
	__m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	b = _mm_max_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
#define REDUCE_MAX(v) reduce_max256(_mm256_max_ps((v).lo, (v).hi))

/* fmath_expf, the same operations lane by lane */
static inline __attribute__((always_inline)) __m256
exp256(__m256 x)
{
	__m256 n, r, p;
	__m256i e;

	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
	n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
	    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
	r = _mm256_sub_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(-2.12194440e-4f)));
	p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	/* 2^n from the exponent bits; n >= -126 after the clamp */
	e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#define EXP(v) v16_of(exp256((v).lo), exp256((v).hi))

/* 16 registers: smaller tiles for the KV cache's kernels than AVX-512 takes */
#define QT 2
#define VH 2
#define VHB 3		/* values: 12 accumulators of the 16 registers */
#define VNC 2
#include "gemm.inc"
#include "attn.inc"

const struct kernels *
simd_avx2(void)
{
	static const struct kernels k = {
		.name = "avx2",
		.gemm = quant_avx2_gemm,
		.rounds_x = quant_avx2_rounds_x,
		.round = quant_avx2_round,
		.gemm_rounded = quant_avx2_gemm_rounded,
		.attn_values = quant_avx2_attn_values,
		.softmax = quant_avx2_softmax,
		.silu_mul = quant_avx2_silu_mul,
		.group_scores = quant_avx2_group_scores,
		.row_values = quant_avx2_row_values,
	};

	return &k;
}
SIMD_TARGET_END
#else
const struct kernels *
simd_avx2(void)
{
	return NULL;
}
#endif
