/*
 * avx512.c: the kernels for AVX-512 (F, BW, VL) with FMA (simd.h),
 * compiled for them (SIMD_TARGET_BEGIN); kernels.c takes them only when
 * cpuid says the processor has them.
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
SIMD_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx2,fma,f16c")

#define VEC __m512
#define LANES 16
#define ROWS 4
#define TOKS 6
#define HALF_ROWS 2	/* f16 and bf16 decode: rows at a time (2: 16% faster than 8, 4: 11%) */
#define PREFIX quant_avx512_
#define ZERO() _mm512_setzero_ps()
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define MASK(n) ((__mmask16)((1u << (n)) - 1))
#define SET1(a) _mm512_set1_ps(a)
#define STORE(p, v) _mm512_storeu_ps(p, v)
#define STORE_TAIL(p, v, n) _mm512_mask_storeu_ps(p, MASK(n), v)
#define LOADX(p) _mm512_loadu_ps(p)
#define LOADX_TAIL(p, n) _mm512_maskz_loadu_ps(MASK(n), p)
#define LOAD_F32(row, k) _mm512_loadu_ps((const float *)(row) + (k))
#define LOAD_F32_TAIL(row, k, n) _mm512_maskz_loadu_ps(MASK(n), (const float *)(row) + (k))
#define LOAD_F16(row, k) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)(row) + (k))))
#define LOAD_F16_TAIL(row, k, n) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(MASK(n), (const uint16_t *)(row) + (k)))
#define BF16_WIDEN(v) _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16))
#define LOAD_BF16(row, k) BF16_WIDEN(_mm256_loadu_si256((const __m256i *)((const uint16_t *)(row) + (k))))
#define LOAD_BF16_TAIL(row, k, n) BF16_WIDEN(_mm256_maskz_loadu_epi16(MASK(n), (const uint16_t *)(row) + (k)))

/* For the KV cache's kernels: LANES signed bytes, or the low or high nibbles of LANES bytes, as floats. */
#define WIDEN_I8(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define WIDEN_NIB(p, high) _mm512_cvtepi32_ps(nibbles(_mm_loadu_si128((const __m128i *)(p)), high))

/* Nibbles of 16 bytes: the low ones, or the high ones (shift 4), as 16 int32. */
static inline __attribute__((always_inline)) __m512i
nibbles(__m128i bytes, int high)
{
	if (high)
		bytes = _mm_srli_epi16(bytes, 4);
	return _mm512_cvtepu8_epi32(_mm_and_si128(bytes, _mm_set1_epi8(0x0f)));
}

/* A fixed tree: 16 -> 8 -> 4 -> 2 -> 1. */
static inline __attribute__((always_inline)) float
reduce512(__m512 v)
{
	__m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
	__m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}
#define REDUCE(v) reduce512(v)
#define MUL(a, b) _mm512_mul_ps(a, b)
#define ADD(a, b) _mm512_add_ps(a, b)
#define SUB(a, b) _mm512_sub_ps(a, b)
#define DIV(a, b) _mm512_div_ps(a, b)
#define MAX(a, b) _mm512_max_ps(a, b)
#define REDUCE_MAX(v) _mm512_reduce_max_ps(v)

/* fmath_expf, the same operations lane by lane (scalef by 2^n is the product by it) */
static inline __attribute__((always_inline)) __m512
exp512(__m512 x)
{
	__m512 n, r, p;

	x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.0f));
	n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
	    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
	r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(-2.12194440e-4f)));
	p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	return _mm512_scalef_ps(p, n);
}
#define EXP(v) exp512(v)

/*
 * Four reductions at once, adding the very same pairs as reduce512 at
 * each level (so the same bits), with a quarter of the shuffles.
 */
static inline __attribute__((always_inline)) void
reduce512x4(__m512 a, __m512 b, __m512 c, __m512 d, float *out)
{
	/* 16 -> 8: [a.lo + a.hi | b.lo + b.hi] */
	__m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
	__m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
	/* 8 -> 4: 128-bit lanes [a0 b0 c0 d0] + [a1 b1 c1 d1] */
	__m512 x = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
	/* 4 -> 2 -> 1 within each 128-bit lane */
	x = _mm512_add_ps(x, _mm512_permute_ps(x, 0xee));
	x = _mm512_add_ps(x, _mm512_permute_ps(x, 0x55));
	out[0] = _mm512_cvtss_f32(x);
	out[1] = _mm_cvtss_f32(_mm512_extractf32x4_ps(x, 1));
	out[2] = _mm_cvtss_f32(_mm512_extractf32x4_ps(x, 2));
	out[3] = _mm_cvtss_f32(_mm512_extractf32x4_ps(x, 3));
}
#define REDUCE4(a, b, c, d, out) reduce512x4(a, b, c, d, out)

#include "gemm.inc"
#include "attn.inc"

const struct kernels *
simd_avx512(void)
{
	static const struct kernels k = {
		.name = "avx512",
		.gemm = quant_avx512_gemm,
		.rounds_x = quant_avx512_rounds_x,
		.round = quant_avx512_round,
		.gemm_rounded = quant_avx512_gemm_rounded,
		.attn_values = quant_avx512_attn_values,
		.softmax = quant_avx512_softmax,
		.silu_mul = quant_avx512_silu_mul,
		.group_scores = quant_avx512_group_scores,
		.row_values = quant_avx512_row_values,
	};

	return &k;
}
SIMD_TARGET_END
#else
const struct kernels *
simd_avx512(void)
{
	return NULL;
}
#endif
