/*
 * avx512.c: the kernels for AVX-512 (F, BW, VL) with FMA (simd.h).
 * Built with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c; kernels.c
 * takes them only when cpuid says the processor has them.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf.h"
#include "../quant.h"
#include "simd.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
#include <immintrin.h>

/* A scale byte (signed) as a float, by table: a scalar int-to-float conversion
 * waits on its destination register's last writer, which cost q6_K 10%. */
#define I8F(x) quant_i8_table[(uint8_t)(x)]

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

/* 16 weights of a q8_0 row from element k: the f32 products d * q. */
static inline __attribute__((always_inline)) __m512
load_q8_0(const void *row, int k)
{
	const struct block_q8_0 *b = (const struct block_q8_0 *)row + k / QK8_0;
	__m128i q = _mm_loadu_si128((const __m128i *)(b->qs + k % QK8_0));

	return _mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d]),
	    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}
#define LOAD_Q8_0(row, k, ...) load_q8_0(row, k)

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

/*
 * 4-bit weights by table: the 16 values a block can hold, computed once
 * with the same operations as one at a time (so the same bits), then
 * looked up by nibble.  vpermps reads only an index's low 4 bits, so the
 * low nibbles need no mask.
 */
static inline __attribute__((always_inline)) __m512
by_nibble(__m128i bytes, int high, __m512 table)
{
	__m512i i = _mm512_cvtepu8_epi32(bytes);

	return _mm512_permutexvar_ps(high ? _mm512_srli_epi32(i, 4) : i, table);
}
#define NIBBLE_VALUES _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)

/* Both nibbles of 16 bytes by table: low ones to *lo, high ones to *hi. */
static inline __attribute__((always_inline)) void
by_nibbles(__m128i bytes, __m512 table, __m512 *lo, __m512 *hi)
{
	__m512i i = _mm512_cvtepu8_epi32(bytes);

	*lo = _mm512_permutexvar_ps(i, table);
	*hi = _mm512_permutexvar_ps(_mm512_srli_epi32(i, 4), table);
}

/* q4_0: d * (q - 8) */
static inline __attribute__((always_inline)) __m512
q4_0_table(const struct block_q4_0 *b)
{
	return _mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d]), _mm512_sub_ps(NIBBLE_VALUES, _mm512_set1_ps(8)));
}

static inline __attribute__((always_inline)) __m512
load_q4_0(const void *row, int k)
{
	const struct block_q4_0 *b = (const struct block_q4_0 *)row + k / 32;

	return by_nibble(_mm_loadu_si128((const __m128i *)b->qs), k % 32 != 0, q4_0_table(b));
}
#define LOAD_Q4_0(row, k, ...) load_q4_0(row, k)

/* A q4_0 block, both chunks (BLOCK_type): one load and widening, one table. */
static inline __attribute__((always_inline)) void
block_q4_0(const void *row, int k, __m512 *wb)
{
	const struct block_q4_0 *b = (const struct block_q4_0 *)row + k / 32;

	by_nibbles(_mm_loadu_si128((const __m128i *)b->qs), q4_0_table(b), &wb[0], &wb[1]);
}
#define BLOCK_q4_0(row, k, wb) block_q4_0(row, k, wb)
#define HAS_BLOCK_q4_0 1

/*
 * q5_0: d * (q - 16), the fifth bit from qh.  By the 4-bit table d * (n - 16)
 * plus 16 d where the fifth bit is set: every term is exact, so the sum is
 * d * (q - 16) exactly, the same bits.
 */
static inline __attribute__((always_inline)) __m512
q5_0_table(float d)
{
	return _mm512_mul_ps(_mm512_set1_ps(d), _mm512_sub_ps(NIBBLE_VALUES, _mm512_set1_ps(16)));
}

/* 16 d added to the weights whose fifth bit (bit i of fifth) is set */
#define ADD_FIFTH(v, fifth, d) _mm512_mask_add_ps(v, (__mmask16)(fifth), v, _mm512_set1_ps(16 * (d)))

static inline __attribute__((always_inline)) __m512
load_q5_0(const void *row, int k)
{
	const struct block_q5_0 *b = (const struct block_q5_0 *)row + k / 32;
	float d = quant_f16_table[b->d];
	__m512 v = by_nibble(_mm_loadu_si128((const __m128i *)b->qs), k % 32 != 0, q5_0_table(d));
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	return ADD_FIFTH(v, qh >> (k % 32), d);
}
#define LOAD_Q5_0(row, k, ...) load_q5_0(row, k)

/* A q5_0 block: one widening, one table, one qh. */
static inline __attribute__((always_inline)) void
block_q5_0(const void *row, int k, __m512 *wb)
{
	const struct block_q5_0 *b = (const struct block_q5_0 *)row + k / 32;
	float d = quant_f16_table[b->d];
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	by_nibbles(_mm_loadu_si128((const __m128i *)b->qs), q5_0_table(d), &wb[0], &wb[1]);
	wb[0] = ADD_FIFTH(wb[0], qh, d);
	wb[1] = ADD_FIFTH(wb[1], qh >> 16, d);
}
#define BLOCK_q5_0(row, k, wb) block_q5_0(row, k, wb)
#define HAS_BLOCK_q5_0 1

/* q4_K: (d * sc) * q - dmin * m, per sub-block of 32 */
static inline __attribute__((always_inline)) __m512
q4_K_table(const struct block_q4_K *b, int j)
{
	int sc, m;

	quant_k4_scale_min(j, b->scales, &sc, &m);
	return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d] * I8F(sc)), NIBBLE_VALUES),
	    _mm512_set1_ps(quant_f16_table[b->dmin] * I8F(m)));
}

static inline __attribute__((always_inline)) __m512
load_q4_K(const void *row, int k)
{
	const struct block_q4_K *b = (const struct block_q4_K *)row + k / QK_K;
	int off = k % QK_K, j = off / 32;

	return by_nibble(_mm_loadu_si128((const __m128i *)(b->qs + 32 * (j / 2) + off % 32)), j % 2,
	    q4_K_table(b, j));
}
#define LOAD_Q4_K(row, k, ...) load_q4_K(row, k)

/* A q4_K sub-block of 32: its scale and table once. */
static inline __attribute__((always_inline)) void
block_q4_K(const void *row, int k, __m512 *wb)
{
	const struct block_q4_K *b = (const struct block_q4_K *)row + k / QK_K;
	int j = k % QK_K / 32;
	const uint8_t *q = b->qs + 32 * (j / 2);
	__m512 table = q4_K_table(b, j);

	wb[0] = by_nibble(_mm_loadu_si128((const __m128i *)q), j % 2, table);
	wb[1] = by_nibble(_mm_loadu_si128((const __m128i *)(q + 16)), j % 2, table);
}
#define BLOCK_q4_K(row, k, wb) block_q4_K(row, k, wb)
#define HAS_BLOCK_q4_K 1

/* q4_1: d * q + m */
static inline __attribute__((always_inline)) __m512
load_q4_1(const void *row, int k)
{
	const struct block_q4_1 *b = (const struct block_q4_1 *)row + k / 32;
	__m512 table = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d]), NIBBLE_VALUES),
	    _mm512_set1_ps(quant_f16_table[b->m]));

	return by_nibble(_mm_loadu_si128((const __m128i *)b->qs), k % 32 != 0, table);
}
#define LOAD_Q4_1(row, k, ...) load_q4_1(row, k)

/* q5_1: d * q + m, the fifth bit from qh */
static inline __attribute__((always_inline)) __m512
load_q5_1(const void *row, int k)
{
	const struct block_q5_1 *b = (const struct block_q5_1 *)row + k / 32;
	__m512i q = nibbles(_mm_loadu_si128((const __m128i *)b->qs), k % 32 != 0);
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	q = _mm512_mask_add_epi32(q, (__mmask16)(qh >> (k % 32)), q, _mm512_set1_epi32(16));
	return _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d]), _mm512_cvtepi32_ps(q)),
	    _mm512_set1_ps(quant_f16_table[b->m]));
}
#define LOAD_Q5_1(row, k, ...) load_q5_1(row, k)

/* q5_K: (d * sc) * q - dmin * m, per sub-block j of 32; the fifth bit is bit j of qh[l] */
static inline __attribute__((always_inline)) __m512
load_q5_K(const void *row, int k)
{
	const struct block_q5_K *b = (const struct block_q5_K *)row + k / QK_K;
	int off = k % QK_K, j = off / 32, l = off % 32, sc, m;
	__m512i q = nibbles(_mm_loadu_si128((const __m128i *)(b->qs + 32 * (j / 2) + l)), j % 2);
	__mmask16 h = _mm_test_epi8_mask(_mm_loadu_si128((const __m128i *)(b->qh + l)),
	    _mm_set1_epi8((char)(1 << j)));

	q = _mm512_mask_add_epi32(q, h, q, _mm512_set1_epi32(16));
	quant_k4_scale_min(j, b->scales, &sc, &m);
	return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d] * I8F(sc)),
	    _mm512_cvtepi32_ps(q)), _mm512_set1_ps(quant_f16_table[b->dmin] * I8F(m)));
}
#define LOAD_Q5_K(row, k, ...) load_q5_K(row, k)

/* q6_K: (d * sc) * (q - 32), per sub-block of 16 */
static inline __attribute__((always_inline)) __m512
load_q6_K(const void *row, int k)
{
	const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
	int off = k % QK_K, half = off / 128, quarter = off % 128 / 32, l = off % 32;
	__m128i lo = _mm_loadu_si128((const __m128i *)(b->ql + 64 * half + (quarter & 1) * 32 + l));
	__m128i hi = _mm_loadu_si128((const __m128i *)(b->qh + 32 * half + l));
	__m512i q;

	if (quarter >= 2)
		lo = _mm_srli_epi16(lo, 4);
	lo = _mm_and_si128(lo, _mm_set1_epi8(0x0f));
	hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * quarter)), _mm_set1_epi8(3));
	q = _mm512_cvtepu8_epi32(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
	return _mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16])),
	    _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(32))));
}
#define LOAD_Q6_K(row, k, ...) load_q6_K(row, k)

/* 32 weights of q6_K, two sub-blocks of 16: one load of their bits */
static inline __attribute__((always_inline)) void
block_q6_K(const void *row, int k, __m512 *wb)
{
	const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
	int off = k % QK_K, half = off / 128, quarter = off % 128 / 32;
	__m256i lo = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * half + (quarter & 1) * 32));
	__m256i hi = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));

	if (quarter >= 2)
		lo = _mm256_srli_epi16(lo, 4);
	lo = _mm256_and_si256(lo, _mm256_set1_epi8(0x0f));
	hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
	lo = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
	wb[0] = _mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16])),
	    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(lo))));
	wb[1] = _mm512_mul_ps(_mm512_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16 + 1])),
	    _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(lo, 1))));
}
#define BLOCK_q6_K(row, k, wb) block_q6_K(row, k, wb)
#define HAS_BLOCK_q6_K 1

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
#define LOADX_TAIL_PAD(p, n, pad) _mm512_mask_loadu_ps(_mm512_set1_ps(pad), MASK(n), p)

/*
 * exp(x) for x <= 0, as in Cephes: x = n ln 2 + r with |r| <= ln2/2, a
 * degree-6 polynomial for e^r, then scaled by 2^n.  Relative error about
 * 2e-7; below -87 it is 0.
 */
static inline __attribute__((always_inline)) __m512
exp512(__m512 x)
{
	__m512 n, r, p;

	x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
	n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
	    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
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
		.attn_values = quant_avx512_attn_values,
		.softmax = quant_avx512_softmax,
		.silu_mul = quant_avx512_silu_mul,
		.group_scores = quant_avx512_group_scores,
		.row_values = quant_avx512_row_values,
	};

	return &k;
}
#else
const struct kernels *
simd_avx512(void)
{
	return NULL;
}
#endif
