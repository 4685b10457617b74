/*
 * vnni.c: q8_0 products with AVX-512 VNNI's integer dot products
 * (vpdpwssd), the kernels LLM_ISA=avx512vnni adds to avx512's.  Built with
 * avx512's flags and -mavx512vnni; kernels.c takes them only when cpuid
 * says the processor has VNNI.
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

#include "../quant.h"
#include "simd.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>


#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

#define MASK(n) ((__mmask16)((1u << (n)) - 1))
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

/* Row i's products with x's block (lo, hi) in 8 int32 lanes; 0 past R rows. */
static inline __attribute__((always_inline)) __m256i
row_dot(const char *blk, size_t row_bytes, int i, int R, __m256i lo, __m256i hi)
{
	const int8_t *q;

	if (i >= R)
		return _mm256_setzero_si256();
	q = ((const struct block_q8_0 *)(blk + (size_t)i * row_bytes))->qs;
	return _mm256_dpwssd_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q)), lo),
	    _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + 16))), hi);
}

/*
 * Lane r = the sum of row r's products, r < 16, by horizontal adds of
 * rows as they come (an array of 16 was spilled to the stack): pairs give
 * each 128-bit half [row 0 lanes 0+1, 2+3, row 1 lanes 0+1, 2+3], pairs of
 * those each half's sums of four rows, and the halves added eight rows.
 */
static inline __attribute__((always_inline)) __m512i
block_sums(const char *blk, size_t row_bytes, int R, __m256i lo, __m256i hi)
{
	__m256i a[4], b[2], c[2];
	int h, i;

	UNROLL for (h = 0; h < 2; h++) {
		UNROLL for (i = 0; i < 4; i++)
			a[i] = _mm256_hadd_epi32(row_dot(blk, row_bytes, 8 * h + 2 * i, R, lo, hi),
			    row_dot(blk, row_bytes, 8 * h + 2 * i + 1, R, lo, hi));
		b[0] = _mm256_hadd_epi32(a[0], a[1]);
		b[1] = _mm256_hadd_epi32(a[2], a[3]);
		c[h] = _mm256_add_epi32(_mm256_permute2x128_si256(b[0], b[1], 0x20),
		    _mm256_permute2x128_si256(b[0], b[1], 0x31));
	}
	return _mm512_inserti64x4(_mm512_castsi256_si512(c[0]), c[1], 1);
}

/*
 * Decode: R rows (16, or fewer at the end) against one token.  The rows
 * after next are fetched a few lines a block, in address order, as in
 * the f32 tiles (the hardware prefetcher does not follow 16 rows read
 * side by side).
 */
static inline __attribute__((always_inline)) void
decode_rows(const char *w, size_t row_bytes, int R, int nb, const int16_t *xq, const float *dx,
    float *out, int fetch)
{
	__m512 acc = _mm512_setzero_ps();
	const char *ahead = w + (size_t)2 * 16 * row_bytes, *end = ahead + (size_t)16 * row_bytes;
	int lines = (int)(((size_t)16 * row_bytes / 64 + (size_t)nb) / (size_t)nb);
	int b, l;

	for (b = 0; b < nb; b++) {
		const char *blk = w + (size_t)b * sizeof(struct block_q8_0);
		__m256i lo = _mm256_loadu_si256((const __m256i *)(xq + 32 * b));
		__m256i hi = _mm256_loadu_si256((const __m256i *)(xq + 32 * b + 16));

		for (l = 0; fetch && l < lines && ahead < end; l++, ahead += 64)
			_mm_prefetch(ahead, _MM_HINT_T1);
		acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(block_sums(blk, row_bytes, R, lo, hi)),
		    _mm512_mul_ps(q8_0_scales16(blk, row_bytes, R), _mm512_set1_ps(dx[b])), acc);
	}
	_mm512_mask_storeu_ps(out, MASK(R), acc);
}

/*
 * Up to 16 rows to a panel: block b's pair k of row r (two int16, a
 * 32-bit lane) at dwords (b * 16 + k) * 16 + r, by a 16x16 transpose of
 * the widened rows; the rows' scales at scale[b * 16 + r].  Missing rows
 * are zeros.
 */
static void
pack_panel(const char *w, size_t row_bytes, int R, int nb, int32_t *panel, float *scale)
{
	__m512i v[16], a[16], t[16], d0, d1, e0, e1;
	int b, r, i, c;

	for (b = 0; b < nb; b++) {
		const char *blk = w + (size_t)b * sizeof(struct block_q8_0);
		UNROLL for (r = 0; r < 16; r++)
			v[r] = r < R ? _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)
			    ((const struct block_q8_0 *)(blk + (size_t)r * row_bytes))->qs)) : _mm512_setzero_si512();
		_mm512_store_ps(scale + (size_t)b * 16, q8_0_scales16(blk, row_bytes, R));
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
			_mm512_store_si512(panel + ((size_t)b * 16 + i) * 16, v[i]);
	}
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
 * Batches of LANES_MIN to LANES_MAX tokens put the tokens in the lanes
 * instead (lanes_rows): packing the rows cost 35% of a 16-token product,
 * whose every weight is used only 16 times.
 */
#define LANES_MIN 12
#define LANES_MAX 48

static int
in_lanes(int T)
{
	return T >= LANES_MIN && T <= LANES_MAX;
}

void
simd_vnni_round_tokens(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr)
{
	float *dx, *xsum;
	int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	int nb = cols / 32, t, b;

	for (t = t0; t < t1; t++)
		for (b = 0; b < nb; b++) {
			int16_t *q = xq + (size_t)t * cols + 32 * b;
			float d = round_x(x + (size_t)t * ldx + 32 * b, q);
			/* the blocks' x sums, for the types whose weights have a minimum */
			int s = _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_loadu_si512(q), _mm512_set1_epi16(1)));
			dx[(size_t)t * nb + b] = d;
			xsum[(size_t)b * T + t] = d * (float)s;
		}
}

static void
quant_vnni_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr)
{
	float *dx, *xsum, *dxl;
	int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	int32_t *xl = kernels_rounded_lanes(xr, T, cols, &dxl);
	int nb = cols / 32, t, b, lanes = (T + 15) / 16 * 16;

	simd_vnni_round_tokens(x, ldx, t0, t1, T, cols, xr);
	if (!in_lanes(T))
		return;
	/* the same integers and scales by groups of 16 tokens, pair by pair; the lanes past T zero */
	__m512i apart = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
	    13, 14, 15), _mm512_set1_epi32(16));
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
 * R rows' weights widened to int16, [r][cols], and their scales [r][nb]:
 * not inlined, so that the tile reads each pair from memory as an
 * operand broadcast to the lanes (held in registers, the pairs took a
 * shuffle each).
 */
static __attribute__((noinline)) void
widen_rows(const char *w, size_t row_bytes, int R, int nb, int16_t *wide, float *dw)
{
	for (int r = 0; r < R; r++)
		for (int b = 0; b < nb; b++) {
			const struct block_q8_0 *blk = (const struct block_q8_0 *)(w + (size_t)r * row_bytes +
			    (size_t)b * sizeof(struct block_q8_0));
			_mm512_store_si512(wide + ((size_t)r * nb + b) * 32,
			    _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)blk->qs)));
			dw[r * nb + b] = _cvtsh_ss(blk->d);
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
 * R widened rows (a constant after inlining) against a group of 16
 * tokens in the lanes: each row's pairs broadcast against the tokens'
 * pairs, one vpdpwssd for 32 products; per row a vector of its 16
 * tokens' outputs, by the block-sum rule (the same integer sums, the
 * chain of fma(s, d_w * d_x, o) over blocks in order), into out.
 * tokens: the lanes that are tokens.
 */
static inline __attribute__((always_inline)) void
lanes_tile(const int16_t *wide, const float *dw, int R, int nb, const int32_t *xl, const float *dxl,
    float *out, size_t ldo, int tokens)
{
	__m512 acc[8];
	__m512i sum[8], xv;
	float tile[8][16] __attribute__((aligned(64)));
	int b, k, r;

	UNROLL for (r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	for (b = 0; b < nb; b++) {
		const int32_t *wb = (const int32_t *)(wide + (size_t)b * 32);
		UNROLL for (k = 0; k < 16; k++) {
			xv = _mm512_load_si512(xl + ((size_t)b * 16 + k) * 16);
			UNROLL for (r = 0; r < R; r++) {
				const int32_t *wp = wb + (size_t)r * nb * 16 + k;
				sum[r] = k == 0 ? _mm512_madd_epi16(xv, _mm512_set1_epi32(*wp)) :
				    dpwssd_bcst(sum[r], xv, wp);
			}
		}
		__m512 d = _mm512_load_ps(dxl + (size_t)b * 16);
		UNROLL for (r = 0; r < R; r++)
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]),
			    _mm512_mul_ps(_mm512_set1_ps(dw[r * nb + b]), d), acc[r]);
	}
	/* by way of a tile: a scatter a row took longer than a block's products */
	UNROLL for (r = 0; r < R; r++)
		_mm512_store_ps(tile[r], acc[r]);
	for (int t = 0; t < tokens; t++)
		UNROLL for (r = 0; r < R; r++)
			out[(size_t)t * ldo + r] = tile[r][t];
}

/* Rows [r0, r1) against T tokens in the lanes, 16 at a time; wide: 8 rows' scratch. */
static void
lanes_rows(const char *wc, size_t row_bytes, int r0, int r1, int nb, const float *xr, int T, int cols,
    float *out, size_t ldo, float *scratch)
{
	float *dxl, *dw = scratch;
	const int32_t *xl = kernels_rounded_lanes(xr, T, cols, &dxl);
	int16_t *wide = (int16_t *)(((uintptr_t)(scratch + 8 * nb) + 63) & ~(uintptr_t)63);
	int g, r, n;

	for (r = r0; r < r1; r += n) {
		n = r1 - r < 8 ? (r1 - r < 4 ? 1 : 4) : 8;
		widen_rows(wc + (size_t)r * row_bytes, row_bytes, n, nb, wide, dw);
		/* the next rows come from memory while these compute */
		for (size_t a = 0; r + n < r1 && a < (size_t)8 * row_bytes; a += 64)
			_mm_prefetch(wc + (size_t)(r + n) * row_bytes + a, _MM_HINT_T1);
		for (g = 0; g < (T + 15) / 16; g++) {
			const int32_t *xg = xl + (size_t)g * nb * 256;
			const float *dg = dxl + (size_t)g * nb * 16;
			int tokens = T - 16 * g < 16 ? T - 16 * g : 16;
			float *og = out + (size_t)16 * g * ldo + r;
			switch (n) {
			case 8: lanes_tile(wide, dw, 8, nb, xg, dg, og, ldo, tokens); break;
			case 4: lanes_tile(wide, dw, 4, nb, xg, dg, og, ldo, tokens); break;
			default: lanes_tile(wide, dw, 1, nb, xg, dg, og, ldo, tokens); break;
			}
		}
	}
}

/* Floats of scratch a batch's tile takes: its panels and their scales, or 8 widened rows. */
static size_t
pack_floats(int cols)
{
	size_t panels = (size_t)PANELS * (cols / 32) * (256 + 16) + 16;
	size_t lanes = (size_t)8 * (cols / 32) + (size_t)8 * cols / 2 + 16;

	return panels > lanes ? panels : lanes;
}

static void
gemm_rounded(const char *wc, size_t row_bytes, int r0, int r1, int cols, const float *xr, int T,
    float *out, size_t ldo, float *pack)
{
	int nb = cols / 32, r, n, p;
	float *dx, *xsum, *scales;
	const int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	int32_t *panels;

	if (in_lanes(T)) {
		lanes_rows(wc, row_bytes, r0, r1, nb, xr, T, cols, out, ldo, pack);
		return;
	}
	/* one token: rows as they lie (two tokens packed run 25% faster than one at a time) */
	if (T == 1) {
		for (r = r0; r + 16 <= r1; r += 16)
			decode_rows(wc + (size_t)r * row_bytes, row_bytes, 16, nb, xq, dx, out + r, 1);
		if (r < r1)
			decode_rows(wc + (size_t)r * row_bytes, row_bytes, r1 - r, nb, xq, dx, out + r, 0);
		return;
	}
	panels = (int32_t *)(((uintptr_t)pack + 63) & ~(uintptr_t)63);
	scales = (float *)(panels + (size_t)PANELS * nb * 256);
	for (r = r0; r < r1; r += n) {
		n = r1 - r < 16 * PANELS ? r1 - r : 16 * PANELS;
		for (p = 0; 16 * p < n; p++)
			pack_panel(wc + (size_t)(r + 16 * p) * row_bytes, row_bytes, n - 16 * p < 16 ? n - 16 * p : 16,
			    nb, panels + (size_t)p * nb * 256, scales + (size_t)p * nb * 16);
		/* the next tile's rows come from memory while this one computes */
		if (r + n < r1)
			for (size_t a = 0; a < (size_t)n * row_bytes; a += 64)
				_mm_prefetch(wc + (size_t)(r + n) * row_bytes + a, _MM_HINT_T1);
		batch_rows(panels, scales, n, nb, xq, (size_t)cols, dx, T, out + r, ldo);
	}
}

static void
quant_vnni_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	if (type != GGML_Q8_0) {
		simd_avx512()->gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
		return;
	}
	gemm_rounded(w, row_bytes, r0, r1, cols, xr, T, out, ldo,
	    T == 1 ? NULL : kernels_scratch(pack_floats(cols)));
}

static void
quant_vnni_gemm_q8_0(const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	size_t n = simd_rounded_floats(T, cols);
	float *xr = kernels_scratch(n + pack_floats(cols));

	quant_vnni_round(x, ldx, 0, T, T, cols, xr);
	gemm_rounded(w, row_bytes, r0, r1, cols, xr, T, out, ldo, xr + n);
}

/* avx512's kernels, but q8_0 products by the block-sum rule */
static void
vnni_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	if (type == GGML_Q8_0)
		quant_vnni_gemm_q8_0(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
	else
		simd_avx512()->gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
}

static int
vnni_rounds_x(uint32_t type)
{
	return type == GGML_Q8_0 || simd_avx512()->rounds_x(type);
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
		k.rounds_x = vnni_rounds_x;
		k.round = quant_vnni_round;
		k.gemm_rounded = quant_vnni_gemm_rounded;
		k.name = "avx512vnni";
	}
	return &k;
}
#else
const struct kernels *
simd_avx512vnni(void)
{
	return NULL;
}
#endif
