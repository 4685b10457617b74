/*
 * vnni.c: the block types' products with AVX-512 VNNI's integer dot
 * products (vpdpwssd; the K types' bytes by vpdpbusd, kbytes.inc), the
 * kernels LLM_ISA=avx512vnni adds to avx512's, compiled
 * for avx512's sets and VNNI (SIMD_TARGET_BEGIN); kernels.c takes them
 * only when cpuid says the processor has VNNI.
 *
 * The block-sum rule: x is rounded per block of 32 to int16 at scale
 * max|x| / 32767, ties to even (as gemm.inc's integer rule); for an
 * output (row r, token t), each block b gives the exact integer sum s of
 * its 32 products of weight and x integers; the output is the chain over
 * the blocks in order of o = fma((float)s, d_w * d_x, o) from 0.  No
 * reduction tree: integer sums do not depend on their order, so a kernel
 * may gather them any way it likes.
 *
 * A batch holds 16 rows in the lanes of a vector: their weights, widened
 * to int16 and packed pair by pair ([block][pair][row]), meet a token's
 * pair of x integers broadcast, one vpdpwssd for 32 products; a block
 * ends with one conversion, scaling and multiply-add a vector.  That is
 * 1.6-1.8x the multiply-adds per second of the f32 tiles q8_0 widens into
 * under avx512.  Decode reads rows as they lie in the file and sums each
 * row's products across lanes by horizontal adds, so both give the same
 * bits for a batch, a token at a time and a resumed run.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../quant.h"
#include "simd.h"

#if defined(SIMD_X86)
SIMD_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#include "gather.inc"


#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

#define MASK(n) ((__mmask16)((1u << (n)) - 1))
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define PREFIX quant_vnni_
#include "iload.inc"
#define PANELS 3	/* a batch tile: 3 panels of 16 rows by 4 tokens, 24 accumulators */
#define TOKS 4

/* x[0..32) rounded to int16 at scale max|x| / 32767 (returned), ties to even */
static inline __attribute__((always_inline)) float
round_x(const float *x, int16_t *q)
{
	__m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16), inv;
	float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));

	/* a block below 1e-30 (32767 / amax would overflow near 1e-35) counts as zeros */
	amax = amax >= 1e-30f ? amax : 0.0f;
	inv = _mm512_set1_ps(amax > 0 ? 32767.0f / amax : 0.0f);
	_mm256_storeu_si256((__m256i *)q, _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v0, inv))));
	_mm256_storeu_si256((__m256i *)(q + 16), _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(v1, inv))));
	return amax / 32767.0f;
}

/*
 * 16 rows' 16 dwords (v[r]) into a panel: dword k of row r at k * 16 +
 * r of lo (k < 8) or of hi (k - 8), by a 16x16 transpose; a block of 32
 * int16 in one panel's block (hi = lo + 128), or two blocks of 32 bytes
 * in two.
 */
static inline __attribute__((always_inline)) void
transpose16(__m512i *v, int32_t *lo, int32_t *hi)
{
	__m512i a[16], t[16], d0, d1, e0, e1;
	int i, c;

	/* 32-bit then 64-bit interleaves within 128-bit lanes, then whole lanes */
	UNROLL for (i = 0; i < 8; i++) {
		a[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
		a[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
	}
	UNROLL for (i = 0; i < 4; i++) {
		t[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
		t[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
		t[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
		t[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
	}
	UNROLL for (c = 0; c < 4; c++) {
		d0 = _mm512_shuffle_i32x4(t[c], t[4 + c], 0x44);
		d1 = _mm512_shuffle_i32x4(t[c], t[4 + c], 0xee);
		e0 = _mm512_shuffle_i32x4(t[8 + c], t[12 + c], 0x44);
		e1 = _mm512_shuffle_i32x4(t[8 + c], t[12 + c], 0xee);
		v[c] = _mm512_shuffle_i32x4(d0, e0, 0x88);
		v[4 + c] = _mm512_shuffle_i32x4(d0, e0, 0xdd);
		v[8 + c] = _mm512_shuffle_i32x4(d1, e1, 0x88);
		v[12 + c] = _mm512_shuffle_i32x4(d1, e1, 0xdd);
	}
	UNROLL for (i = 0; i < 16; i++)
		_mm512_store_si512((i < 8 ? lo : hi - 128) + (size_t)i * 16, v[i]);
}

/*
 * The minimums' chains, for the types that have them: out[t * ldo + r]
 * += the chain over b of fma(m[r * nb + b], xsum[b * T + t], p) from 0,
 * R rows, 16 tokens a vector (q2_K: nb and xsum of half blocks), K rows'
 * chains at once (K a constant: 8, so that their latency hides, or 1).
 */
static inline __attribute__((always_inline)) void
mins_k(const float *m, int K, int nb, const float *xsum, int T, float *out, size_t ldo)
{
	__m512 p[8];
	float lane[16];
	int t, b, i, j, n;

	for (t = 0; t < T; t += 16) {
		n = T - t < 16 ? T - t : 16;
		UNROLL for (i = 0; i < K; i++)
			p[i] = _mm512_setzero_ps();
		for (b = 0; b < nb; b++) {
			__m512 x = _mm512_maskz_loadu_ps(MASK(n), xsum + (size_t)b * T + t);
			UNROLL for (i = 0; i < K; i++)
				p[i] = _mm512_fmadd_ps(_mm512_set1_ps(m[(size_t)i * nb + b]), x, p[i]);
		}
		UNROLL for (i = 0; i < K; i++) {
			_mm512_storeu_ps(lane, p[i]);
			for (j = 0; j < n; j++)
				out[(size_t)(t + j) * ldo + i] += lane[j];
		}
	}
}

static void
mins_along_tokens(const float *m, int R, int nb, const float *xsum, int T, float *out, size_t ldo)
{
	int r = 0;

	for (; r + 8 <= R; r += 8)
		mins_k(m + (size_t)r * nb, 8, nb, xsum, T, out + r, ldo);
	for (; r < R; r++)
		mins_k(m + (size_t)r * nb, 1, nb, xsum, T, out + r, ldo);
}

/*
 * A batch tile: P panels (16 rows each, the last with last_rows) by T
 * tokens, P and T constants after inlining.  A block's first pair starts
 * the integer sums (vpmaddwd), the other 15 add to them.
 */
static inline __attribute__((always_inline)) void
tile(const int32_t *panels, const float *scales, int P, int nb, const int16_t *xq, size_t ldq,
    const float *dx, int T, float *out, size_t ldo, int last_rows)
{
	__m512 acc[PANELS][TOKS];
	__m512i sum[PANELS][TOKS], wv[PANELS];
	size_t pstride = (size_t)nb * 256;
	int b, k, p, t;

	UNROLL for (p = 0; p < P; p++)
		UNROLL for (t = 0; t < T; t++)
			acc[p][t] = _mm512_setzero_ps();
	for (b = 0; b < nb; b++) {
		const int32_t *wb = panels + (size_t)b * 256;
		const int16_t *xb = xq + (size_t)b * 32;
		UNROLL for (k = 0; k < 16; k++) {
			UNROLL for (p = 0; p < P; p++)
				wv[p] = _mm512_load_si512(wb + p * pstride + k * 16);
			UNROLL for (t = 0; t < T; t++) {
				int32_t pair;	/* x's integers 2k and 2k + 1, by memcpy: int16 storage */
				__m512i xv;
				memcpy(&pair, xb + (size_t)t * ldq + 2 * k, sizeof pair);
				xv = _mm512_set1_epi32(pair);
				UNROLL for (p = 0; p < P; p++)
					sum[p][t] = k == 0 ? _mm512_madd_epi16(wv[p], xv) :
					    _mm512_dpwssd_epi32(sum[p][t], wv[p], xv);
			}
		}
		UNROLL for (p = 0; p < P; p++) {
			__m512 d = _mm512_load_ps(scales + p * (size_t)nb * 16 + (size_t)b * 16);
			UNROLL for (t = 0; t < T; t++)
				acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[p][t]),
				    _mm512_mul_ps(d, _mm512_set1_ps(dx[(size_t)t * nb + b])), acc[p][t]);
		}
	}
	UNROLL for (p = 0; p < P; p++)
		UNROLL for (t = 0; t < T; t++)
			_mm512_mask_storeu_ps(out + (size_t)t * ldo + 16 * p,
			    p == P - 1 ? MASK(last_rows) : MASK(16), acc[p][t]);
}

/* n rows (at most 16 * PANELS), packed, against every token. */
static void
batch_rows(const int32_t *panels, const float *scales, int n, int nb, const int16_t *xq, size_t ldq,
    const float *dx, int T, float *out, size_t ldo)
{
	int P = (n + 15) / 16, last = n - 16 * (P - 1), t, tt;

	for (t = 0; t < T; t += TOKS) {
		const int16_t *xt = xq + (size_t)t * ldq;
		const float *dt = dx + (size_t)t * nb;
		float *ot = out + (size_t)t * ldo;
		tt = T - t < TOKS ? T - t : TOKS;
		/* constant shapes, so the accumulators stay in registers */
#define TILE(p, k) tile(panels, scales, p, nb, xt, ldq, dt, k, ot, ldo, last)
#define TILES(p) switch (tt) { case 1: TILE(p, 1); break; case 2: TILE(p, 2); break; \
	case 3: TILE(p, 3); break; default: TILE(p, TOKS); break; }
		switch (P) {
		case 1: TILES(1); break;
		case 2: TILES(2); break;
		default: TILES(PANELS); break;
		}
#undef TILES
#undef TILE
	}
}

/*
 * Batches of SIMD_LANES_MIN to SIMD_LANES_MAX tokens put the tokens in
 * the lanes instead (vblock.inc's vlanes_rows): packing the rows cost 35% of a
 * 16-token product, whose every weight is used only 16 times.  (The K
 * types' raw bytes pack cheaper: up to KBATCH_MAX tokens, kbytes.inc's
 * panels.)
 */
static void
round_tokens(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	float *dx, *xsum;
	int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	float *xsum16 = (float *)kernels_rounded_sums(xsum, T, cols, 2);
	int nb = cols / 32, t, b;

	for (t = t0; t < t1; t++)
		for (b = 0; b < nb; b++) {
			int16_t *q = xq + (size_t)t * cols + 32 * b;
			float d = round_x(x + (size_t)t * ldx + 32 * b, q);
			dx[(size_t)t * nb + b] = d;
			/* the blocks' x sums (or half blocks'), for the types whose weights have a minimum */
			if (!sums)
				continue;
			__m512i s = _mm512_madd_epi16(_mm512_loadu_si512(q), _mm512_set1_epi16(1));
			if (sums & 1)
				xsum[(size_t)b * T + t] = d * (float)_mm512_reduce_add_epi32(s);
			if (sums & 2) {
				xsum16[(size_t)(2 * b) * T + t] = d * (float)_mm512_mask_reduce_add_epi32(0x00ff, s);
				xsum16[(size_t)(2 * b + 1) * T + t] = d * (float)_mm512_mask_reduce_add_epi32(0xff00, s);
			}
		}
}

static void
quant_vnni_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	float *dx, *xsum, *dxl;
	int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	int32_t *xl = kernels_rounded_lanes(xr, T, cols, &dxl);
	int nb = cols / 32, t, b, lanes = (T + 15) / 16 * 16;

	round_tokens(x, ldx, t0, t1, T, cols, xr, sums);
	if (!simd_in_lanes(T))
		return;
	/* the same integers and scales by groups of 16 tokens, pair by pair; the lanes past T zero */
	__m512i apart = lanes_times(16);
	for (t = t0; t < (t1 == T ? lanes : t1); t++) {
		size_t g = (size_t)(t / 16) * nb;
		for (b = 0; b < nb; b++) {
			/* the block's 16 pairs, 16 dwords apart */
			__m512i v = t < T ? _mm512_loadu_si512(xq + (size_t)t * cols + 32 * b) : _mm512_setzero_si512();
			_mm512_i32scatter_epi32(xl + (g + (size_t)b) * 256 + (size_t)(t % 16), apart, v, 4);
			dxl[(g + (size_t)b) * 16 + (size_t)(t % 16)] = t < T ? dx[(size_t)t * nb + b] : 0.0f;
		}
	}
}

/*
 * acc + the products of x's pairs with the pair at p in every lane, the
 * pair an operand broadcast from memory ({1to16}): the compilers load it
 * into a register first, an instruction more for each vpdpwssd.
 */
static inline __attribute__((always_inline)) __m512i
dpwssd_bcst(__m512i acc, __m512i x, const int32_t *p)
{
	__asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "m"(*p));
	return acc;
}

/*
 * The next rows of a batch in the lanes, widened block by block while
 * the current ones compute (vblock.inc's vlanes_tile): R of them (0 for
 * none) from w, into wide, dw and mw in vwiden's layout; [ahead, end),
 * the rows after them, fetched a few lines a block.
 */
struct vnext {
	const char *w, *ahead, *end;
	size_t row_bytes;
	int R;
	int16_t *wide;
	float *dw, *mw;
};

#include "kbytes.inc"

/* kquad's 4 quads (q[i]'s quarter j: rows 4i..4i+3's sums of their quarter j) into lane r: row r's whole sum */
static inline __attribute__((always_inline)) __m512i
vsum16(const __m512i *q)
{
	__m512i x = _mm512_add_epi32(_mm512_shuffle_i64x2(q[0], q[1], 0x44), _mm512_shuffle_i64x2(q[0], q[1], 0xee));
	__m512i y = _mm512_add_epi32(_mm512_shuffle_i64x2(q[2], q[3], 0x44), _mm512_shuffle_i64x2(q[2], q[3], 0xee));

	return _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x88), _mm512_shuffle_i64x2(x, y, 0xdd));
}

/*
 * Floats of scratch a batch takes: its panels, their scales and minimums,
 * or twice 8 widened rows with their scales and minimums.
 */
static size_t
pack_floats(int cols)
{
	size_t panels = (size_t)PANELS * (cols / 32) * (256 + 16 + 32) + 16;	/* minimums: two a block (q2_K) */
	size_t lanes = 2 * ((size_t)24 * (cols / 32) + (size_t)8 * cols / 2 + 16);	/* two sets, as vgemm's lanes take them */
	size_t k = KBATCH_FLOATS(KBATCH_MAX, cols);

	return panels > lanes ? (panels > k ? panels : k) : (lanes > k ? lanes : k);
}

/* The products of every block type, one instance of vblock.inc a type;
 * VD_OFF(b): where block b's scale d lies in a row, VSCALES_OF what
 * converts 16 rows' 2 bytes from there copied side by side (f16, or
 * mxfp4's E8M0 byte); VZLOAD, where defined, a block's weights widened
 * in one instruction */
#define BLOCK_TYPES(X) X(GGML_Q8_0, q8_0) X(GGML_Q4_0, q4_0) X(GGML_Q4_1, q4_1) \
	X(GGML_Q5_0, q5_0) X(GGML_Q5_1, q5_1) X(GGML_Q4_K, q4_K) X(GGML_Q5_K, q5_K) X(GGML_Q6_K, q6_K) \
	X(GGML_Q3_K, q3_K) X(GGML_Q2_K, q2_K) X(GGML_IQ4_NL, iq4_nl) X(GGML_IQ4_XS, iq4_xs) \
	X(GGML_MXFP4, mxfp4)
#define VSCALES_OF(dd) _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(dd)))
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_q8_0))
#define VZLOAD(row, b) _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)(row) + (b))->qs))
#define ITYPE q8_0
#define HAS_MIN 0
#include "vblock.inc"
#undef VZLOAD
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_q4_0))
#define ITYPE q4_0
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_q4_1))
#define ITYPE q4_1
#define HAS_MIN 1
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_q5_0))
#define ITYPE q5_0
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_q5_1))
#define ITYPE q5_1
#define HAS_MIN 1
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_q4_K))
#define ITYPE q4_K
#define HAS_MIN 1
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_q5_K))
#define ITYPE q5_K
#define HAS_MIN 1
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_q6_K) + offsetof(struct block_q6_K, d))
#define ITYPE q6_K
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_q3_K) + offsetof(struct block_q3_K, d))
#define ITYPE q3_K
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_q2_K) + offsetof(struct block_q2_K, d))
#define ITYPE q2_K
#define HAS_MIN 2
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_iq4_nl))
#define ITYPE iq4_nl
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#define VD_OFF(b) ((size_t)(b) / 8 * sizeof(struct block_iq4_xs))
#define ITYPE iq4_xs
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#undef VSCALES_OF
#define VSCALES_OF(dd) e8m0_floats(_mm512_and_si512(_mm512_cvtepu16_epi32(_mm256_load_si256((const __m256i *)(dd))), \
	_mm512_set1_epi32(0xff)))
#define VD_OFF(b) ((size_t)(b) * sizeof(struct block_mxfp4))
#define ITYPE mxfp4
#define HAS_MIN 0
#include "vblock.inc"
#undef ITYPE
#undef HAS_MIN
#undef VD_OFF
#undef VSCALES_OF

/*
 * One token of iq4_nl or mxfp4 (a table of 16 values a code) by VNNI's
 * byte products, as kbytes.inc's K types: x = 256 h + l, l unsigned and
 * h signed bytes (tx_split).  A row's blocks go by pairs (A, B): their 32
 * bytes of codes in one vector, the second copy shifted right by 4, so
 * its 64 nibbles are A's values 0-15, B's 0-15, A's 16-31, B's 16-31 (x's
 * bytes lie in that order).  One lookup: the values (signed) against l,
 * the values raised by off (iq4_nl 127, mxfp4 12: none negative) against
 * h, as kdot; 256 (w + off) h + w l summed is the block's integer plus
 * 256 off times its h's sum, taken off once for the 16 rows (corr).  The
 * 16 rows' quarters by kquad's tree, A's sum the quarters 0 and 2, B's 1
 * and 3, then the rule's chain, A then B.  A row's two scales are stored
 * as one word (A's low, B's high) as its codes are loaded, the 16 words
 * then read as a vector (a gather of the 16 took a fifth of the time;
 * gcc, left to itself, built the vector by byte inserts and moved the row
 * offsets between vector and integer registers: 0.86-0.89x this speed).  The
 * same integers as the widening decode (avx512's, 8 rows a pass): 1.75-1.9x
 * its speed, iq4_nl and mxfp4 alike (a 2-core Zen 5, a matrix in cache).
 * Rows of an odd number of blocks (none of the families' shapes) go by
 * that decode.
 */
static void
tx_split(const int16_t *xq, int nb, int off, int8_t *xb, int32_t *corr)
{
	for (int b = 0; b < nb; b++) {
		__m512i v = _mm512_loadu_si512(xq + 32 * b), h = _mm512_srai_epi16(v, 8);
		__m256i l8 = _mm512_cvtepi16_epi8(v), h8 = _mm512_cvtepi16_epi8(h);
		int8_t *o = xb + (size_t)b / 2 * 128 + (size_t)(b % 2) * 16;

		_mm_storeu_si128((__m128i *)o, _mm256_castsi256_si128(l8));
		_mm_storeu_si128((__m128i *)(o + 32), _mm256_extracti128_si256(l8, 1));
		_mm_storeu_si128((__m128i *)(o + 64), _mm256_castsi256_si128(h8));
		_mm_storeu_si128((__m128i *)(o + 96), _mm256_extracti128_si256(h8, 1));
		corr[b] = (int32_t)((uint32_t)_mm512_reduce_add_epi32(_mm512_madd_epi16(h, _mm512_set1_epi16(1))) *
		    (uint32_t)(256 * off));
	}
}

static inline __attribute__((always_inline)) void
tdecode_rows(uint32_t type, const char *w, size_t row_bytes, int R, int nb, const int8_t *xb, const int32_t *corr,
    const float *dx, __m512i vals, __m512i offs, float *out, int fetch)
{
	size_t bs = type == GGML_MXFP4 ? sizeof(struct block_mxfp4) : sizeof(struct block_iq4_nl);
	size_t qs = type == GGML_MXFP4 ? offsetof(struct block_mxfp4, qs) : offsetof(struct block_iq4_nl, qs);
	__m512 acc = _mm512_setzero_ps();
	const char *ahead = w + (size_t)16 * row_bytes, *end = ahead + (size_t)fetch * row_bytes;
	int lines = (int)(((size_t)fetch * row_bytes / 64 + (size_t)nb) / (size_t)nb) * 2;
	size_t rb3 = 3 * row_bytes;
	int b, l, r;

	for (b = 0; b < nb; b += 2) {
		__m512i xl = _mm512_loadu_si512(xb + (size_t)b * 64), xh = _mm512_loadu_si512(xb + (size_t)b * 64 + 64);
		__m512i p[4], q[4], t[4], s, sc;
		uint32_t dd[16] __attribute__((aligned(64)));
		const char *base[4];
		__m512 d;

		UNROLL for (r = 0; r < 4; r++)	/* rows 4r to 4r + 3 from base[r] by one index register */
			base[r] = w + (size_t)(4 * r) * row_bytes + (size_t)b * bs + qs;
		for (l = 0; l < lines && ahead < end; l++, ahead += 64)
			_mm_prefetch(ahead, _MM_HINT_T0);
		UNROLL for (r = 0; r < 16; r++) {
			p[r % 4] = _mm512_setzero_si512();
			dd[r] = 0;
			if (r < R) {
				const char *a = base[r / 4] + (r % 4 == 3 ? rb3 : (size_t)(r % 4) * row_bytes);
				uint16_t da, db;
				uint32_t two;

				if (type == GGML_MXFP4)
					da = (uint8_t)a[-1], db = (uint8_t)a[bs - 1];
				else
					memcpy(&da, a - 2, 2), memcpy(&db, a + bs - 2, 2);
				two = (uint32_t)da | (uint32_t)db << 16;
				__asm__("" : "+r"(two));	/* stored as it is: gcc built the vector by inserts */
				dd[r] = two;
				__m512i y = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a)),
				    0xf0f0, _mm_loadu_si128((const __m128i *)(a + bs)));
				__m512i z = _mm512_and_si512(_mm512_srlv_epi64(y, _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4)),
				    _mm512_set1_epi8(0x0f));
				__m512i v = _mm512_shuffle_epi8(vals, z);
				__m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_add_epi8(v, offs), xh);
				p[r % 4] = _mm512_dpbusd_epi32(_mm512_slli_epi32(hi, 8), xl, v);
			}
			if (r % 4 == 3)
				q[r / 4] = kquad(p[0], p[1], p[2], p[3]);
		}
		kquads(q, t);
		sc = _mm512_load_si512(dd);
		UNROLL for (int j = 0; j < 2; j++) {	/* A, then B */
			__m512i h = j ? _mm512_srli_epi32(sc, 16) : sc;

			s = _mm512_sub_epi32(_mm512_add_epi32(t[j], t[j + 2]), _mm512_set1_epi32(corr[b + j]));
			d = type == GGML_MXFP4 ? e8m0_floats(_mm512_and_si512(h, _mm512_set1_epi32(0xff))) :
			    _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
			acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(dx[b + j])), acc);
		}
	}
	_mm512_mask_storeu_ps(out, MASK(R), acc);
}

#define TDECODE_OF(ID, TY) \
static void \
tdecode_##TY(const char *w, size_t row_bytes, int R, int nb, const int8_t *xb, const int32_t *corr, \
    const float *dx, __m512i vals, __m512i offs, float *out, int fetch) \
{ \
	if (R == 16)	/* whole tiles: no test a row */ \
		tdecode_rows(ID, w, row_bytes, 16, nb, xb, corr, dx, vals, offs, out, fetch); \
	else \
		tdecode_rows(ID, w, row_bytes, R, nb, xb, corr, dx, vals, offs, out, fetch); \
}
TDECODE_OF(GGML_IQ4_NL, iq4_nl)
TDECODE_OF(GGML_MXFP4, mxfp4)
#undef TDECODE_OF

/* Rows [r0, r1) of iq4_nl or mxfp4 against one token of xr; 0 where this does not take the type or shape */
static int
tdecode(uint32_t type, const char *w, size_t row_bytes, int r0, int r1, int cols, const float *xr, float *out,
    float *pack)
{
	int nb = cols / 32, off = type == GGML_MXFP4 ? IOFFSET_mxfp4 : IOFFSET_iq4_nl, r;
	const int8_t *values = type == GGML_MXFP4 ? quant_mxfp4_values : quant_iq4_values;
	void (*rows)(const char *, size_t, int, int, const int8_t *, const int32_t *, const float *, __m512i, __m512i,
	    float *, int) = type == GGML_MXFP4 ? tdecode_mxfp4 : tdecode_iq4_nl;
	float *dx, *xsum;
	const int16_t *xq;
	int8_t *xb = (int8_t *)(((uintptr_t)pack + 63) & ~(uintptr_t)63);
	int32_t *corr = (int32_t *)(xb + (size_t)2 * cols);
	__m128i t = _mm_loadu_si128((const __m128i *)values);

	if ((type != GGML_IQ4_NL && type != GGML_MXFP4) || nb % 2)
		return 0;
	xq = kernels_rounded_parts(xr, 1, cols, &dx, &xsum);
	tx_split(xq, nb, off, xb, corr);
	for (r = r0; r + 16 <= r1; r += 16)
		rows(w + (size_t)r * row_bytes, row_bytes, 16, nb, xb, corr, dx, _mm512_broadcast_i32x4(t),
		    _mm512_set1_epi8((char)off), out + r, 16);
	if (r < r1)
		rows(w + (size_t)r * row_bytes, row_bytes, r1 - r, nb, xb, corr, dx, _mm512_broadcast_i32x4(t),
		    _mm512_set1_epi8((char)off), out + r, 0);
	return 1;
}

/*
 * One token, or 2 to 24 (KBATCH_MAX), of the K types whose rows are whole
 * super-blocks go by their bytes (kbytes.inc: q2_K's decode 1.6x, q4_K's
 * 1.5x), one token of iq4_nl and mxfp4 by theirs (tdecode: 1.5x).  One
 * token of q8_0 and q4_0 goes by vdecode, 16 rows a pass (q8_0 1.8x a
 * block in cache, q4_0 1.28x; Llama-3.2-1B's Q4_0 decode 1.2x); of the
 * other types by avx512's kernels (int.inc's decode, 8 rows a pass by
 * horizontal adds), with the same bits: as fast as vdecode (q4_1, q5_0)
 * or faster (q5_1, iq4_xs: 1.1x).
 */
static void
vnni_gemm_by_type(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo, float *pack)
{
	if (T == 1 && type != GGML_Q8_0 && type != GGML_Q4_0) {
		if (tdecode(type, w, row_bytes, r0, r1, cols, xr, out, pack))
			return;
		if (kdecode(type, w, row_bytes, r0, r1, cols, xr, out, pack))
			return;
		simd_avx512()->gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
		return;
	}
	if (kbatch(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo, pack))
		return;
#define VGEMM_BY(ID, TY) case ID: CAT(vgemm_, TY)(w, row_bytes, r0, r1, cols, xr, T, out, ldo, pack); break;
	switch (type) {
	BLOCK_TYPES(VGEMM_BY)
	}
#undef VGEMM_BY
}

static void
quant_vnni_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	vnni_gemm_by_type(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo, kernels_scratch(pack_floats(cols)));
}

/* avx512's kernels, but the block types' products by these */
static void
vnni_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	size_t n;
	float *xr;

	if (type == GGML_F32 || type == GGML_F16 || type == GGML_BF16) {
		simd_avx512()->gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
		return;
	}
	n = simd_rounded_floats(T, cols);
	xr = kernels_scratch(n + pack_floats(cols));
	quant_vnni_round(x, ldx, 0, T, T, cols, xr, quant_has_min(type));
	vnni_gemm_by_type(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo, xr + n);
}

const struct kernels *
simd_avx512vnni(void)
{
	static struct kernels k;
	const struct kernels *base = simd_avx512();

	if (!base)
		return NULL;
	/* a copy of avx512's table, made when kernels.c first asks (quant_init, one thread) */
	if (!k.name) {
		k = *base;
		k.gemm = vnni_gemm;
		k.round = quant_vnni_round;
		k.gemm_rounded = quant_vnni_gemm_rounded;
		k.name = "avx512vnni";
	}
	return &k;
}
SIMD_TARGET_END
#else
const struct kernels *
simd_avx512vnni(void)
{
	return NULL;
}
#endif
