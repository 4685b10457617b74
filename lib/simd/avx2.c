/*
 * avx2.c: the kernels for AVX2 with FMA and F16C (simd.h).  Built
 * with -mavx2 -mfma -mf16c; kernels.c takes them only when cpuid says
 * the processor has them.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../gguf.h"
#include "../quant.h"
#include "simd.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

/* A scale byte (signed) as a float, by table: a scalar int-to-float conversion
 * waits on its destination register's last writer, which cost q6_K 10%. */
#define I8F(x) quant_i8_table[(uint8_t)(x)]

#define VEC __m256
#define LANES 8
#define ROWS 3	/* 3 rows by 4 tokens: 12 accumulators, 3 weights and a token in the 16 registers */
#define TOKS 4
#define HALF_ROWS 4	/* f16 and bf16 decode: rows at a time (4: 8% faster than 8, 2: 5%) */
#define BLOCK_BY_ROW 1	/* decode tiles multiply a row's block as they load it: 16 registers */
#define PREFIX quant_avx2_
#define ZERO() _mm256_setzero_ps()
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)

/* Tails: copy the last n < 8 elements into a zeroed vector. */
static inline __attribute__((always_inline)) __m256
tail_f32(const float *p, int n)
{
	float v[8] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return _mm256_loadu_ps(v);
}

static inline __attribute__((always_inline)) __m128i
tail_u16(const uint16_t *p, int n)
{
	uint16_t v[8] = { 0 };
	memcpy(v, p, (size_t)n * sizeof *v);
	return _mm_loadu_si128((const __m128i *)v);
}

static inline __attribute__((always_inline)) void
store_tail(float *p, __m256 v, int n)
{
	float t[8];
	_mm256_storeu_ps(t, v);
	memcpy(p, t, (size_t)n * sizeof *t);
}

#define SET1(a) _mm256_set1_ps(a)
#define STORE(p, v) _mm256_storeu_ps(p, v)
#define STORE_TAIL(p, v, n) store_tail(p, v, n)
#define LOADX(p) _mm256_loadu_ps(p)
#define LOADX_TAIL(p, n) tail_f32(p, n)
#define LOAD_F32(row, k) _mm256_loadu_ps((const float *)(row) + (k))
#define LOAD_F32_TAIL(row, k, n) tail_f32((const float *)(row) + (k), n)
#define LOAD_F16(row, k) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)(row) + (k))))
#define LOAD_F16_TAIL(row, k, n) _mm256_cvtph_ps(tail_u16((const uint16_t *)(row) + (k), n))
#define BF16_WIDEN(v) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
#define LOAD_BF16(row, k) BF16_WIDEN(_mm_loadu_si128((const __m128i *)((const uint16_t *)(row) + (k))))
#define LOAD_BF16_TAIL(row, k, n) BF16_WIDEN(tail_u16((const uint16_t *)(row) + (k), n))

/* For the weights and the KV cache's kernels: LANES signed bytes, or the low or high nibbles of LANES bytes, as floats. */
#define WIDEN_I8(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define WIDEN_NIB(p, high) _mm256_cvtepi32_ps(nibbles8((const uint8_t *)(p), high))

static inline __attribute__((always_inline)) __m256
load_q8_0(const void *row, int k)
{
	const struct block_q8_0 *b = (const struct block_q8_0 *)row + k / QK8_0;
	__m128i q = _mm_loadl_epi64((const __m128i *)(b->qs + k % QK8_0));

	return _mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d]),
	    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
}
#define LOAD_Q8_0(row, k, ...) load_q8_0(row, k)

/* A whole q8_0 block, four chunks, for a decode tile: one scale. */
static inline __attribute__((always_inline)) void
block_q8_0(const void *row, int k, __m256 *wb)
{
	const struct block_q8_0 *b = (const struct block_q8_0 *)row + k / QK8_0;
	__m256 d = _mm256_set1_ps(quant_f16_table[b->d]);

	wb[0] = _mm256_mul_ps(d, WIDEN_I8(b->qs));
	wb[1] = _mm256_mul_ps(d, WIDEN_I8(b->qs + 8));
	wb[2] = _mm256_mul_ps(d, WIDEN_I8(b->qs + 16));
	wb[3] = _mm256_mul_ps(d, WIDEN_I8(b->qs + 24));
}
#define BLOCK_q8_0(row, k, wb) block_q8_0(row, k, wb)
#define HAS_BLOCK_q8_0 1

/* Eight nibbles from 8 bytes: the low ones, or the high ones, as 8 int32. */
static inline __attribute__((always_inline)) __m256i
nibbles8(const uint8_t *p, int high)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)p);

	if (high)
		b = _mm_srli_epi16(b, 4);
	return _mm256_cvtepu8_epi32(_mm_and_si128(b, _mm_set1_epi8(0x0f)));
}


/* q4_0: d * (q - 8); weights 0-15 are low nibbles, 16-31 high ones */
static inline __attribute__((always_inline)) __m256
load_q4_0(const void *row, int k)
{
	const struct block_q4_0 *b = (const struct block_q4_0 *)row + k / 32;
	int off = k % 32;
	__m256i q = nibbles8(b->qs + off % 16, off >= 16);

	return _mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d]),
	    _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(8))));
}
#define LOAD_Q4_0(row, k, ...) load_q4_0(row, k)

/*
 * The fifth bits of eight weights, bits 0-7 of b, as an int32 a lane from
 * an 8 KiB table instead of a broadcast, a mask and a compare: 16 or 0
 * (q5_1), or with q5_0's offset taken off, 0 or -16.
 */
#define FIFTH(b, i, o) ((((int32_t)((b) >> (i) & 1)) << 4) - (o))
#define FIFTHS(b, o) { FIFTH(b, 0, o), FIFTH(b, 1, o), FIFTH(b, 2, o), FIFTH(b, 3, o), \
	FIFTH(b, 4, o), FIFTH(b, 5, o), FIFTH(b, 6, o), FIFTH(b, 7, o) }
#define FIFTHS4(b, o) FIFTHS(b, o), FIFTHS((b) + 1, o), FIFTHS((b) + 2, o), FIFTHS((b) + 3, o)
#define FIFTHS16(b, o) FIFTHS4(b, o), FIFTHS4((b) + 4, o), FIFTHS4((b) + 8, o), FIFTHS4((b) + 12, o)
#define FIFTHS64(b, o) FIFTHS16(b, o), FIFTHS16((b) + 16, o), FIFTHS16((b) + 32, o), FIFTHS16((b) + 48, o)
#define FIFTHS256(o) FIFTHS64(0u, o), FIFTHS64(64u, o), FIFTHS64(128u, o), FIFTHS64(192u, o)
static const int32_t fifth_table[256][8] __attribute__((aligned(32))) = { FIFTHS256(0) };
static const int32_t fifth_less16_table[256][8] __attribute__((aligned(32))) = { FIFTHS256(16) };

static inline __attribute__((always_inline)) __m256i
fifth_bits8(uint32_t b)
{
	return _mm256_load_si256((const __m256i *)fifth_table[b & 0xff]);
}

static inline __attribute__((always_inline)) __m256i
fifth_less16(uint32_t b)
{
	return _mm256_load_si256((const __m256i *)fifth_less16_table[b & 0xff]);
}

/* q5_0: d * (q - 16), the fifth bit of weight j is bit j of qh */

static inline __attribute__((always_inline)) __m256
load_q5_0(const void *row, int k)
{
	const struct block_q5_0 *b = (const struct block_q5_0 *)row + k / 32;
	int off = k % 32;
	__m256i q = nibbles8(b->qs + off % 16, off >= 16);
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	q = _mm256_add_epi32(q, fifth_less16(qh >> off));
	return _mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d]), _mm256_cvtepi32_ps(q));
}
#define LOAD_Q5_0(row, k, ...) load_q5_0(row, k)


/* q4_K: (d * sc) * q - dmin * m, per sub-block of 32; its two factors, broadcast */
static inline __attribute__((always_inline)) void
q4_K_scales(const struct block_q4_K *b, int j, __m256 *d, __m256 *m)
{
	int sc, mn;

	quant_k4_scale_min(j, b->scales, &sc, &mn);
	*d = _mm256_set1_ps(quant_f16_table[b->d] * I8F(sc));
	*m = _mm256_set1_ps(quant_f16_table[b->dmin] * I8F(mn));
}
#define Q4_K_WIDEN(d, m, q) _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q)), m)

static inline __attribute__((always_inline)) __m256
load_q4_K(const void *row, int k)
{
	const struct block_q4_K *b = (const struct block_q4_K *)row + k / QK_K;
	int off = k % QK_K, j = off / 32;
	__m256 d, m;

	q4_K_scales(b, j, &d, &m);
	return Q4_K_WIDEN(d, m, nibbles8(b->qs + 32 * (j / 2) + off % 32, j % 2));
}
#define LOAD_Q4_K(row, k, ...) load_q4_K(row, k)


/* q4_1: d * q + m */
static inline __attribute__((always_inline)) __m256
load_q4_1(const void *row, int k)
{
	const struct block_q4_1 *b = (const struct block_q4_1 *)row + k / 32;
	int off = k % 32;
	__m256i q = nibbles8(b->qs + off % 16, off >= 16);

	return _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d]), _mm256_cvtepi32_ps(q)),
	    _mm256_set1_ps(quant_f16_table[b->m]));
}
#define LOAD_Q4_1(row, k, ...) load_q4_1(row, k)

/* q5_1: d * q + m, the fifth bit of weight j is bit j of qh */
static inline __attribute__((always_inline)) __m256
load_q5_1(const void *row, int k)
{
	const struct block_q5_1 *b = (const struct block_q5_1 *)row + k / 32;
	int off = k % 32;
	__m256i q = nibbles8(b->qs + off % 16, off >= 16);
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	q = _mm256_add_epi32(q, fifth_bits8(qh >> off));
	return _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d]), _mm256_cvtepi32_ps(q)),
	    _mm256_set1_ps(quant_f16_table[b->m]));
}
#define LOAD_Q5_1(row, k, ...) load_q5_1(row, k)

/* q5_K: (d * sc) * q - dmin * m, per sub-block j of 32; the fifth bit is bit j of qh[l] */
static inline __attribute__((always_inline)) __m256
load_q5_K(const void *row, int k)
{
	const struct block_q5_K *b = (const struct block_q5_K *)row + k / QK_K;
	int off = k % QK_K, j = off / 32, l = off % 32, sc, m;
	__m256i q = nibbles8(b->qs + 32 * (j / 2) + l, j % 2);
	__m128i hb = _mm_loadl_epi64((const __m128i *)(b->qh + l));
	/* bit j of each byte to bit 4, then widened */
	__m128i h = _mm_and_si128(_mm_srl_epi16(hb, _mm_cvtsi32_si128(j)), _mm_set1_epi8(1));

	q = _mm256_add_epi32(q, _mm256_slli_epi32(_mm256_cvtepu8_epi32(h), 4));
	quant_k4_scale_min(j, b->scales, &sc, &m);
	return _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d] * I8F(sc)),
	    _mm256_cvtepi32_ps(q)), _mm256_set1_ps(quant_f16_table[b->dmin] * I8F(m)));
}
#define LOAD_Q5_K(row, k, ...) load_q5_K(row, k)

/* q6_K: (d * sc) * (q - 32), per sub-block of 16 */
static inline __attribute__((always_inline)) __m256
load_q6_K(const void *row, int k)
{
	const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
	int off = k % QK_K, half = off / 128, quarter = off % 128 / 32, l = off % 32;
	__m128i lo = _mm_loadl_epi64((const __m128i *)(b->ql + 64 * half + (quarter & 1) * 32 + l));
	__m128i hi = _mm_loadl_epi64((const __m128i *)(b->qh + 32 * half + l));
	__m256i q;

	if (quarter >= 2)
		lo = _mm_srli_epi16(lo, 4);
	lo = _mm_and_si128(lo, _mm_set1_epi8(0x0f));
	hi = _mm_and_si128(_mm_srl_epi16(hi, _mm_cvtsi32_si128(2 * quarter)), _mm_set1_epi8(3));
	q = _mm256_cvtepu8_epi32(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)));
	return _mm256_mul_ps(_mm256_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16])),
	    _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(32))));
}
#define LOAD_Q6_K(row, k, ...) load_q6_K(row, k)

/*
 * Block loaders for decode tiles (BLOCK_type in gemm.inc): the 32
 * weights of a block or sub-block at k as four chunks, from one load of
 * its bytes and one look at its scales, and the very same values as four
 * LOAD_type calls.
 */

/* 16 or 32 small signed ints in bytes, as two or four chunks of floats */
static inline __attribute__((always_inline)) void
ints16(__m128i q, __m256 *v)
{
	v[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
	v[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
}

static inline __attribute__((always_inline)) void
ints32(__m256i q, __m256 *v)
{
	ints16(_mm256_castsi256_si128(q), v);
	ints16(_mm256_extracti128_si256(q, 1), v + 2);
}

/* wb[c] = expr for the four chunks, unrolled (gcc keeps a loop's array in memory) */
#define SCALE4(wb, expr) do { int c; \
	c = 0; (wb)[c] = (expr); c = 1; (wb)[c] = (expr); c = 2; (wb)[c] = (expr); c = 3; (wb)[c] = (expr); \
} while (0)

/* The 32 nibbles of a 16-byte block as 4 chunks of int32 (weights 0-15 are
 * the low ones): bytes 0-7 and 8-15 widened once each, then split */
#define NIBBLES_OF_BLOCK(qs, q) do { \
	__m256i b0_ = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(qs))); \
	__m256i b1_ = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((qs) + 8))); \
	(q)[0] = _mm256_and_si256(b0_, _mm256_set1_epi32(0x0f)); \
	(q)[1] = _mm256_and_si256(b1_, _mm256_set1_epi32(0x0f)); \
	(q)[2] = _mm256_srli_epi32(b0_, 4); \
	(q)[3] = _mm256_srli_epi32(b1_, 4); \
} while (0)
/* The low or high nibbles of 32 bytes */
#define NIBBLES32(q, high) _mm256_and_si256((high) ? _mm256_srli_epi16(q, 4) : (q), _mm256_set1_epi8(0x0f))

/* The 32 nibbles of q4_K sub-block j, as bytes */
static inline __attribute__((always_inline)) __m256i
q4_K_nibbles(const struct block_q4_K *b, int j)
{
	return NIBBLES32(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 2))), j % 2);
}

/* The 32 weights of q6_K at off (a multiple of 32) as signed bytes q - 32 */
static inline __attribute__((always_inline)) __m256i
q6_K_bytes(const struct block_q6_K *b, int off)
{
	int half = off / 128, quarter = off % 128 / 32;
	__m256i lo = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * half + (quarter & 1) * 32));
	__m256i hi = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * half));

	hi = _mm256_and_si256(_mm256_srl_epi16(hi, _mm_cvtsi32_si128(2 * quarter)), _mm256_set1_epi8(3));
	lo = _mm256_or_si256(NIBBLES32(lo, quarter >= 2), _mm256_slli_epi16(hi, 4));
	return _mm256_sub_epi8(lo, _mm256_set1_epi8(32));
}

static inline __attribute__((always_inline)) void
block_q4_0(const void *row, int k, __m256 *wb)
{
	const struct block_q4_0 *b = (const struct block_q4_0 *)row + k / 32;
	__m256 d = _mm256_set1_ps(quant_f16_table[b->d]);
	__m256i q[4], eight = _mm256_set1_epi32(8);

	NIBBLES_OF_BLOCK(b->qs, q);
	SCALE4(wb, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q[c], eight))));
}
#define BLOCK_q4_0(row, k, wb) block_q4_0(row, k, wb)
#define HAS_BLOCK_q4_0 1

static inline __attribute__((always_inline)) void
block_q4_1(const void *row, int k, __m256 *wb)
{
	const struct block_q4_1 *b = (const struct block_q4_1 *)row + k / 32;
	__m256 d = _mm256_set1_ps(quant_f16_table[b->d]), m = _mm256_set1_ps(quant_f16_table[b->m]);
	__m256i q[4];

	NIBBLES_OF_BLOCK(b->qs, q);
	SCALE4(wb, _mm256_add_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(q[c])), m));
}
#define BLOCK_q4_1(row, k, wb) block_q4_1(row, k, wb)
#define HAS_BLOCK_q4_1 1

static inline __attribute__((always_inline)) void
block_q5_0(const void *row, int k, __m256 *wb)
{
	const struct block_q5_0 *b = (const struct block_q5_0 *)row + k / 32;
	__m256 d = _mm256_set1_ps(quant_f16_table[b->d]);
	__m256i q[4];
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	NIBBLES_OF_BLOCK(b->qs, q);
	SCALE4(wb, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(q[c], fifth_less16(qh >> 8 * c)))));
}
#define BLOCK_q5_0(row, k, wb) block_q5_0(row, k, wb)
#define HAS_BLOCK_q5_0 1

static inline __attribute__((always_inline)) void
block_q5_1(const void *row, int k, __m256 *wb)
{
	const struct block_q5_1 *b = (const struct block_q5_1 *)row + k / 32;
	__m256 d = _mm256_set1_ps(quant_f16_table[b->d]), m = _mm256_set1_ps(quant_f16_table[b->m]);
	__m256i q[4];
	uint32_t qh;

	memcpy(&qh, b->qh, 4);
	NIBBLES_OF_BLOCK(b->qs, q);
	SCALE4(wb, _mm256_add_ps(_mm256_mul_ps(d,
	    _mm256_cvtepi32_ps(_mm256_add_epi32(q[c], fifth_bits8(qh >> 8 * c)))), m));
}
#define BLOCK_q5_1(row, k, wb) block_q5_1(row, k, wb)
#define HAS_BLOCK_q5_1 1

/* q4_K and q5_K: sub-block j of 32 */
static inline __attribute__((always_inline)) void
block_q4_K(const void *row, int k, __m256 *wb)
{
	const struct block_q4_K *b = (const struct block_q4_K *)row + k / QK_K;
	int j = k % QK_K / 32;
	__m256 d, m;

	q4_K_scales(b, j, &d, &m);
	ints32(q4_K_nibbles(b, j), wb);
	SCALE4(wb, _mm256_sub_ps(_mm256_mul_ps(d, wb[c]), m));
}
#define BLOCK_q4_K(row, k, wb) block_q4_K(row, k, wb)
#define HAS_BLOCK_q4_K 1

static inline __attribute__((always_inline)) void
block_q5_K(const void *row, int k, __m256 *wb)
{
	const struct block_q5_K *b = (const struct block_q5_K *)row + k / QK_K;
	int j = k % QK_K / 32, sc, mn;
	__m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * (j / 2)));
	__m256i h = _mm256_loadu_si256((const __m256i *)b->qh);
	__m256 d, m;

	/* bit j of each qh byte, moved to bit 4 */
	h = _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(j)), _mm256_set1_epi8(1));
	q = _mm256_add_epi8(NIBBLES32(q, j % 2), _mm256_slli_epi16(h, 4));
	quant_k4_scale_min(j, b->scales, &sc, &mn);
	d = _mm256_set1_ps(quant_f16_table[b->d] * I8F(sc));
	m = _mm256_set1_ps(quant_f16_table[b->dmin] * I8F(mn));
	ints32(q, wb);
	SCALE4(wb, _mm256_sub_ps(_mm256_mul_ps(d, wb[c]), m));
}
#define BLOCK_q5_K(row, k, wb) block_q5_K(row, k, wb)
#define HAS_BLOCK_q5_K 1

/* q6_K: 32 weights of one quarter of a half, two sub-blocks of 16 */
static inline __attribute__((always_inline)) void
block_q6_K(const void *row, int k, __m256 *wb)
{
	const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
	int off = k % QK_K;
	__m256 d0 = _mm256_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16]));
	__m256 d1 = _mm256_set1_ps(quant_f16_table[b->d] * I8F(b->scales[off / 16 + 1]));

	ints32(q6_K_bytes(b, off), wb);
	wb[0] = _mm256_mul_ps(d0, wb[0]);
	wb[1] = _mm256_mul_ps(d0, wb[1]);
	wb[2] = _mm256_mul_ps(d1, wb[2]);
	wb[3] = _mm256_mul_ps(d1, wb[3]);
}
#define BLOCK_q6_K(row, k, wb) block_q6_K(row, k, wb)
#define HAS_BLOCK_q6_K 1

/* A fixed tree: 8 -> 4 -> 2 -> 1. */
static inline __attribute__((always_inline)) float
reduce256(__m256 v)
{
	__m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	__m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}
#define REDUCE(v) reduce256(v)

/*
 * Four reductions at once, adding the very same pairs as reduce256 at
 * each level (so the same bits) with fewer shuffles: the batch tiles have
 * three rows, so they reduce a row's four tokens together.
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
#define REDUCE4(a, b, c, d, out) reduce256x4(a, b, c, d, out)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define ADD(a, b) _mm256_add_ps(a, b)
#define SUB(a, b) _mm256_sub_ps(a, b)
#define DIV(a, b) _mm256_div_ps(a, b)
#define MAX(a, b) _mm256_max_ps(a, b)

static inline __attribute__((always_inline)) float
reduce_max256(__m256 v)
{
	__m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	b = _mm_max_ps(b, _mm_movehl_ps(b, b));
	return _mm_cvtss_f32(_mm_max_ss(b, _mm_movehdup_ps(b)));
}
#define REDUCE_MAX(v) reduce_max256(v)

/*
 * The integer rule (gemm.inc): a block of x as 32 int16, and weights
 * as int16 in two vectors of 16 (0-15, 16-31) with their scale.
 */
#define IVEC __m256i
#define IR 4	/* batch tiles: 4 rows by 2 tokens, 8 accumulators */
#define IT 2
#define ILOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define ISTORE(p, v) _mm256_storeu_si256((__m256i *)(p), v)
#define IMADD(a, b) _mm256_madd_epi16(a, b)
#define IADD(a, b) _mm256_add_epi32(a, b)
#define ISUB(a, b) _mm256_sub_epi32(a, b)
#define ISET16(v) _mm256_set1_epi16(v)
#define ISUB16(a, b) _mm256_sub_epi16(a, b)
#define ICVT(v) _mm256_cvtepi32_ps(v)
#define ISETZERO() _mm256_setzero_si256()

/* x[0..32) rounded to int16 at scale max|x| / 32767 (returned), ties to even */
static inline __attribute__((always_inline)) float
round_x(const float *x, int16_t *q)
{
	__m256 v[4], m = _mm256_setzero_ps(), inv;
	__m256i i[4];
	float amax;
	int c;

	for (c = 0; c < 4; c++) {
		v[c] = _mm256_loadu_ps(x + 8 * c);
		m = _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[c]));
	}
	amax = reduce_max256(m);
	/* a block below 1e-30 (32767 / amax would overflow near 1e-35) counts as zeros */
	amax = amax >= 1e-30f ? amax : 0.0f;
	inv = _mm256_set1_ps(amax > 0 ? 32767.0f / amax : 0.0f);
	for (c = 0; c < 4; c++)
		i[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], inv));
	/* packs interleaves the halves; the permute puts them back in order */
	_mm256_storeu_si256((__m256i *)q, _mm256_permute4x64_epi64(_mm256_packs_epi32(i[0], i[1]), 0xd8));
	_mm256_storeu_si256((__m256i *)(q + 16), _mm256_permute4x64_epi64(_mm256_packs_epi32(i[2], i[3]), 0xd8));
	return amax / 32767.0f;
}
#define ROUND_X(x, q) round_x(x, q)

/* 32 bytes, signed or not, as two vectors of 16 int16; if scaled, the first times s0, the second s1 */
static inline __attribute__((always_inline)) void
int16s(__m256i q, int is_signed, int scaled, int s0, int s1, __m256i *wi)
{
	__m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);

	wi[0] = is_signed ? _mm256_cvtepi8_epi16(a) : _mm256_cvtepu8_epi16(a);
	wi[1] = is_signed ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
	if (scaled) {
		wi[0] = _mm256_mullo_epi16(wi[0], _mm256_set1_epi16((short)s0));
		wi[1] = _mm256_mullo_epi16(wi[1], _mm256_set1_epi16((short)s1));
	}
}

/*
 * q4_0: the nibbles q as they are, 8 above the weights (IOFFSET, taken off
 * by the tiles); byte j's low nibble is weight j, its high one j + 16
 */
static inline __attribute__((always_inline)) float
iblock_q4_0(const void *row, int b, __m256i *wi, float *mn)
{
	const struct block_q4_0 *bl = (const struct block_q4_0 *)row + b;
	__m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)bl->qs));

	wi[0] = _mm256_and_si256(v, _mm256_set1_epi16(0x0f));
	wi[1] = _mm256_srli_epi16(v, 4);
	*mn = 0;
	return quant_f16_table[bl->d];
}
#define IBLOCK_q4_0(row, b, wi, m) iblock_q4_0(row, b, wi, m)
#define IOFFSET_q4_0 8
#define HAS_IBLOCK_q4_0 1

/* q5_0: (nibble | fifth bit << 4) - 16, the bits spread to bytes by a shuffle */
static inline __attribute__((always_inline)) float
iblock_q5_0(const void *row, int b, __m256i *wi, float *mn)
{
	const struct block_q5_0 *bl = (const struct block_q5_0 *)row + b;
	__m128i v = _mm_loadu_si128((const __m128i *)bl->qs);
	__m256i q, bits;
	uint32_t qh;

	memcpy(&qh, bl->qh, 4);
	q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
	/* byte j gets qh's byte j / 8, then tests its bit j % 8 */
	bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), _mm256_set_epi64x(
	    0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
	bits = _mm256_cmpeq_epi8(_mm256_or_si256(bits, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)),
	    _mm256_set1_epi8(-1));
	/* q - 16 where the bit is clear, q where it is set */
	int16s(_mm256_sub_epi8(q, _mm256_andnot_si256(bits, _mm256_set1_epi8(16))), 1, 0, 0, 0, wi);
	*mn = 0;
	return quant_f16_table[bl->d];
}
#define IBLOCK_q5_0(row, b, wi, m) iblock_q5_0(row, b, wi, m)
#define HAS_IBLOCK_q5_0 1

/* q4_K: sc * q, the sub-block's scale in the integers; w = d * that - dmin * m */
static inline __attribute__((always_inline)) float
iblock_q4_K(const void *row, int b, __m256i *wi, float *mn)
{
	const struct block_q4_K *bl = (const struct block_q4_K *)row + b / 8;
	int j = b % 8, sc, m;

	quant_k4_scale_min(j, bl->scales, &sc, &m);
	int16s(q4_K_nibbles(bl, j), 0, 1, sc, sc, wi);
	*mn = -(quant_f16_table[bl->dmin] * I8F(m));
	return quant_f16_table[bl->d];
}
#define IBLOCK_q4_K(row, b, wi, m) iblock_q4_K(row, b, wi, m)
#define HAS_IBLOCK_q4_K 1

/* q6_K: sc * (q - 32), two sub-blocks of 16 with a scale each (at most 128 * 32) */
static inline __attribute__((always_inline)) float
iblock_q6_K(const void *row, int b, __m256i *wi, float *mn)
{
	const struct block_q6_K *bl = (const struct block_q6_K *)row + b / 8;
	int off = b % 8 * 32;

	int16s(q6_K_bytes(bl, off), 1, 1, bl->scales[off / 16], bl->scales[off / 16 + 1], wi);
	*mn = 0;
	return quant_f16_table[bl->d];
}
#define IBLOCK_q6_K(row, b, wi, m) iblock_q6_K(row, b, wi, m)
#define HAS_IBLOCK_q6_K 1


static inline __attribute__((always_inline)) __m256
tail_pad(const float *p, int n, float pad)
{
	float v[8] = { pad, pad, pad, pad, pad, pad, pad, pad };
	memcpy(v, p, (size_t)n * sizeof *v);
	return _mm256_loadu_ps(v);
}
#define LOADX_TAIL_PAD(p, n, pad) tail_pad(p, n, pad)

/* exp(x) for x <= 0, as in Cephes; see quant_avx512.c. */
static inline __attribute__((always_inline)) __m256
exp256(__m256 x)
{
	__m256 n, r, p;
	__m256i e;

	x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
	n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
	    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	/* 2^n from the exponent bits; n >= -126 after the clamp */
	e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#define EXP(v) exp256(v)

/* 16 registers: smaller tiles for the KV cache's kernels than AVX-512 takes */
#define QT 2
#define VH 2
#define VHB 6		/* values: 12 accumulators of the 16 registers */
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
#else
const struct kernels *
simd_avx2(void)
{
	return NULL;
}
#endif
