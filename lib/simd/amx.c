/*
 * amx.c: q8_0 products of batches by AMX's tile multiplies (TDPBSSD,
 * TDPBSUD), the kernels LLM_ISA=amx adds to avx512vnni's, compiled for
 * avx512vnni's sets and AMX-TILE and AMX-INT8 (SIMD_TARGET_BEGIN);
 * kernels.c takes them only when cpuid says the processor has AMX and
 * Linux grants the process its tile state (arch_prctl
 * ARCH_REQ_XCOMP_PERM).
 *
 * The products keep vnni.c's block-sum rule, so every output has the
 * same bits under amx and avx512vnni: x rounded to int16 a block of 32,
 * each block's exact integer sum s of its 32 products, and the chain
 * o = fma((float)s, d_w * d_x, o) over the blocks in order.  A tile
 * multiply takes bytes, so x's integers go in two: x = 256 h + l, h
 * signed and l unsigned bytes, and s = 256 s_h + s_l, each an exact
 * int32 sum (|s| < 32 * 128 * 32768 = 2^27).  For 16 rows and 16 tokens,
 * a block is two tile multiplies: the rows' 32 weights, read where they
 * lie in the file (a tile loads rows a stride apart), against the
 * tokens' high bytes (TDPBSSD) and low bytes (TDPBSUD); then per row
 * one shift, add, conversion and multiply-add of a vector of its 16
 * tokens.  Nothing is packed: vnni.c's batches widened or transposed
 * every row they read.
 *
 * One token (decode) and batches of fewer than AMX_MIN tokens go to
 * avx512vnni's kernels, whose bits these are.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#include "../quant.h"
#include "simd.h"

/* Linux only: the process asks Linux for the tiles' state (arch_prctl) */
#if defined(SIMD_X86) && defined(__linux__)
SIMD_TARGET_BEGIN("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")
#include "gather.inc"


#if defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#else
#define UNROLL _Pragma("GCC unroll 16")
#endif

#define AMX_MIN 5		/* fewer tokens go to avx512vnni's kernels (as fast at 4, 0.7x at 6) */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/*
 * The tiles: 0 sixteen rows' block of weights (16 x 32 bytes), 1 and 2
 * the tokens' high and low bytes of a block (8 x 64: four bytes of each
 * of 16 tokens a row), 3 and 4, or 5 and 6, the two sums (16 rows x 16
 * int32).
 */
struct tilecfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static _Thread_local int configured;

/* Each thread loads the tiles' shapes once before its first multiply. */
static void
configure(void)
{
	struct tilecfg cfg __attribute__((aligned(64)));

	memset(&cfg, 0, sizeof cfg);
	cfg.palette = 1;
	cfg.rows[0] = 16, cfg.colsb[0] = 32;
	cfg.rows[1] = 8, cfg.colsb[1] = 64;
	cfg.rows[2] = 8, cfg.colsb[2] = 64;
	cfg.rows[3] = 16, cfg.colsb[3] = 64;
	cfg.rows[4] = 16, cfg.colsb[4] = 64;
	cfg.rows[5] = 16, cfg.colsb[5] = 64;
	cfg.rows[6] = 16, cfg.colsb[6] = 64;
	_tile_loadconfig(&cfg);
	configured = 1;
}

/* Token t's block (32 int16 at q, or zeros) as its high and low bytes, 8 dwords each. */
static inline __attribute__((always_inline)) void
split_bytes(const int16_t *q, __m256i *h, __m256i *l)
{
	__m512i v = q ? _mm512_loadu_si512(q) : _mm512_setzero_si512();

	*h = _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8));
	*l = _mm512_cvtepi16_epi8(_mm512_and_si512(v, _mm512_set1_epi16(0xff)));
}

/*
 * A tile of x's bytes from 16 tokens' 8 dwords each, d[k] holding token
 * k's in its low half and token k + 8's in its high half: row j (64
 * bytes at out + 64 j) the dwords j of tokens 0 to 15.  An 8x8 transpose
 * in each half, by interleaves within 128-bit lanes, then the lanes.
 */
static inline __attribute__((always_inline)) void
transpose_tile(const __m512i d[8], uint8_t *out)
{
	__m512i t[8], u[8];
	int i;

	UNROLL for (i = 0; i < 4; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(d[2 * i], d[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(d[2 * i], d[2 * i + 1]);
	}
	UNROLL for (i = 0; i < 2; i++) {
		u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	/* u[i] lane L: dword i of tokens 0-3 (u[0..3]) or 4-7 (u[4..7]) in lanes 0, 2, dword i + 4 in 1, 3 */
	UNROLL for (i = 0; i < 4; i++) {
		__m512i lo = _mm512_shuffle_i64x2(u[i], u[4 + i], 0x88);	/* lanes 0, 2 of each */
		__m512i hi = _mm512_shuffle_i64x2(u[i], u[4 + i], 0xdd);	/* lanes 1, 3 of each */
		_mm512_store_si512(out + 64 * i, _mm512_shuffle_i64x2(lo, lo, 0xd8));
		_mm512_store_si512(out + 64 * (i + 4), _mm512_shuffle_i64x2(hi, hi, 0xd8));
	}
}

/*
 * The layout of x for the tiles, in xr's tiles part (simd.h): for group
 * g of 16 tokens and block b, 1024 bytes at ((g * nb + b) * 1024): the
 * high bytes, row j holding x's integers 4j to 4j + 3 of each token in
 * turn, then the low bytes alike; the lanes past T zero.  The scales as
 * avx512vnni's lanes have them.  avx512vnni's rounding comes first: a
 * batch's other types go by its kernels.  A group whose 16 tokens are
 * all this call's goes by transposes; the others a token at a time
 * (4-byte stores: 2-4% of a prompt).
 */
static void
amx_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	float *dx, *xsum, *dxl;
	int16_t *xq;
	uint8_t *xa;
	int nb = cols / 32, lanes = (T + 15) / 16 * 16, t, b, j, k;
	__m256i h[16], l[16];

	simd_avx512vnni()->round(x, ldx, t0, t1, T, cols, xr, sums);
	if (T < AMX_MIN)
		return;
	xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	xa = kernels_rounded_tiles(xr, T, cols, &dxl);
	for (t = t0; t < (t1 == T ? lanes : t1); ) {
		size_t g = (size_t)(t / 16) * nb;
		if (t % 16 == 0 && t + 16 <= t1) {
			for (b = 0; b < nb; b++) {
				__m512i d[8];
				uint8_t *tile = xa + (g + (size_t)b) * 1024;
				UNROLL for (k = 0; k < 16; k++)
					split_bytes(xq + (size_t)(t + k) * cols + 32 * b, &h[k], &l[k]);
				UNROLL for (k = 0; k < 8; k++)
					d[k] = _mm512_inserti64x4(_mm512_castsi256_si512(h[k]), h[k + 8], 1);
				transpose_tile(d, tile);
				UNROLL for (k = 0; k < 8; k++)
					d[k] = _mm512_inserti64x4(_mm512_castsi256_si512(l[k]), l[k + 8], 1);
				transpose_tile(d, tile + 512);
				UNROLL for (k = 0; k < 16; k++)
					dxl[(g + (size_t)b) * 16 + (size_t)k] = dx[(size_t)(t + k) * nb + b];
			}
			t += 16;
			continue;
		}
		for (b = 0; b < nb; b++) {
			uint8_t *hi = xa + (g + (size_t)b) * 1024 + (size_t)(t % 16) * 4, *lo = hi + 512;
			uint32_t hw[8], lw[8];
			split_bytes(t < T ? xq + (size_t)t * cols + 32 * b : NULL, &h[0], &l[0]);
			_mm256_storeu_si256((__m256i *)hw, h[0]);
			_mm256_storeu_si256((__m256i *)lw, l[0]);
			for (j = 0; j < 8; j++) {
				memcpy(hi + 64 * j, &hw[j], 4);
				memcpy(lo + 64 * j, &lw[j], 4);
			}
			dxl[(g + (size_t)b) * 16 + (size_t)(t % 16)] = t < T ? dx[(size_t)t * nb + b] : 0.0f;
		}
		t++;
	}
}

/*
 * Block b's two sums into c (high, low) by the tile pair (hi, lo).  The
 * pairs alternate, so a block's multiplies need not wait for the last
 * block's sums to be read out.
 */
#define SUMS(hi, lo, b, c) do { \
	const char *a_ = w + (size_t)(b) * sizeof(struct block_q8_0) + offsetof(struct block_q8_0, qs); \
	if (R == 16) \
		_tile_loadd(0, a_, row_bytes); \
	else { \
		for (i = 0; i < R; i++) \
			memcpy(stage + 32 * i, a_ + (size_t)i * row_bytes, 32); \
		_tile_loadd(0, stage, 32); \
	} \
	_tile_loadd(1, xa + (size_t)(b) * 1024, 64); \
	_tile_loadd(2, xa + (size_t)(b) * 1024 + 512, 64); \
	_tile_zero(hi); \
	_tile_zero(lo); \
	_tile_dpbssd(hi, 0, 1); \
	_tile_dpbsud(lo, 0, 2); \
	_tile_stored(hi, (c)[0], 64); \
	_tile_stored(lo, (c)[1], 64); \
} while (0)

#define LAG 2	/* blocks whose sums are stored ahead of the block read out */

/*
 * Sixteen rows (R of them real: the others are read from stage, zeros)
 * against a group of 16 tokens (tokens of them real): out[t * ldo + i]
 * for row i.  dw: the rows' scales, [b][16], gathered as it goes if
 * fill.  A tile's stored sums are read LAG blocks later: a load waits
 * for a tile store to reach the cache, and read at once, each block
 * waited for its own (2.5x the time).
 */
static void
rows16(const char *w, size_t row_bytes, int R, int nb, const uint8_t *xa, const float *dxl,
    float *dw, int fill, float *out, size_t ldo, int tokens, uint8_t *stage, const char *ahead, size_t fetch)
{
	int32_t c[LAG + 1][2][256] __attribute__((aligned(64)));
	float tile[16][16] __attribute__((aligned(64)));
	__m512 acc[16];
	size_t lines = (fetch / 64 + (size_t)nb - 1) / (size_t)nb, l;
	int b, i, t, n;

	UNROLL for (i = 0; i < 16; i++)
		acc[i] = _mm512_setzero_ps();
	for (n = 0; n < LAG && n < nb; n++)
		if (n & 1)
			SUMS(5, 6, n, c[n]);
		else
			SUMS(3, 4, n, c[n]);
	for (b = 0; b < nb; b++) {
		int32_t (*cb)[256] = c[b % (LAG + 1)];
		for (l = 0; l < lines && fetch >= 64; l++, ahead += 64, fetch -= 64)
			_mm_prefetch(ahead, _MM_HINT_T1);
		if (n < nb) {
			if (n & 1)
				SUMS(5, 6, n, c[n % (LAG + 1)]);
			else
				SUMS(3, 4, n, c[n % (LAG + 1)]);
			n++;
		}
		if (fill)
			_mm512_store_ps(dw + (size_t)b * 16, scales16(w + (size_t)b * sizeof(struct block_q8_0),
			    row_bytes, R));
		__m512 d = _mm512_load_ps(dxl + (size_t)b * 16);
		UNROLL for (i = 0; i < 16; i++) {
			__m512i s = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(cb[0] + 16 * i), 8),
			    _mm512_load_si512(cb[1] + 16 * i));
			acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s),
			    _mm512_mul_ps(_mm512_set1_ps(dw[(size_t)b * 16 + i]), d), acc[i]);
		}
	}
	UNROLL for (i = 0; i < 16; i++)
		_mm512_store_ps(tile[i], acc[i]);
	for (t = 0; t < tokens; t++)
		for (i = 0; i < R; i++)
			out[(size_t)t * ldo + i] = tile[i][t];
}

/* Floats of scratch the rows take: their scales and a stage of 16 x 32 bytes. */
static size_t
amx_floats(int cols)
{
	return (size_t)16 * (cols / 32) + 16 * 32 / sizeof(float) + 16;
}

static void
gemm_rounded(const char *wc, size_t row_bytes, int r0, int r1, int cols, const float *xr, int T,
    float *out, size_t ldo, float *scratch)
{
	int nb = cols / 32, r, R, g;
	float *dxl, *dw = scratch;
	const uint8_t *xa = kernels_rounded_tiles(xr, T, cols, &dxl);
	uint8_t *stage = (uint8_t *)(((uintptr_t)(scratch + (size_t)16 * nb) + 63) & ~(uintptr_t)63);

	if (!configured)
		configure();
	if ((r1 - r0) % 16)	/* the last rows go by the stage, its other rows zeros */
		memset(stage, 0, 16 * 32);
	for (r = r0; r < r1; r += 16) {
		const char *w = wc + (size_t)r * row_bytes;
		R = r1 - r < 16 ? r1 - r : 16;
		/* the next rows come from memory while these compute, fetched with the first group */
		for (g = 0; g < (T + 15) / 16; g++)
			rows16(w, row_bytes, R, nb, xa + (size_t)g * nb * 1024, dxl + (size_t)g * nb * 16, dw, g == 0,
			    out + (size_t)16 * g * ldo + r, ldo, T - 16 * g < 16 ? T - 16 * g : 16, stage,
			    w + 16 * row_bytes, g == 0 && r1 - r > 16 ? (size_t)(r1 - r - 16 < 16 ? r1 - r - 16 : 16) * row_bytes : 0);
	}
}

static void
amx_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	if (type != GGML_Q8_0 || T < AMX_MIN) {
		simd_avx512vnni()->gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
		return;
	}
	gemm_rounded(w, row_bytes, r0, r1, cols, xr, T, out, ldo, kernels_scratch(amx_floats(cols)));
}

static void
amx_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	size_t n;
	float *xr;

	if (type != GGML_Q8_0 || T < AMX_MIN) {
		simd_avx512vnni()->gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
		return;
	}
	n = simd_rounded_floats(T, cols);
	xr = kernels_scratch(n + amx_floats(cols));
	amx_round(x, ldx, 0, T, T, cols, xr, 0);
	gemm_rounded(w, row_bytes, r0, r1, cols, xr, T, out, ldo, xr + n);
}

/* 1 if Linux lets this process use the tiles' state (asked once, by quant_init's thread). */
static int
permitted(void)
{
	static int asked, granted;

	if (!asked) {
		granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
		asked = 1;
	}
	return granted;
}

const struct kernels *
simd_amx(void)
{
	static struct kernels k;
	const struct kernels *base = simd_avx512vnni();

	if (!base || !permitted())
		return NULL;
	if (!k.name) {
		k = *base;
		k.gemm = amx_gemm;
		k.round = amx_round;
		k.gemm_rounded = amx_gemm_rounded;
		k.name = "amx";
	}
	return &k;
}
SIMD_TARGET_END
#else
const struct kernels *
simd_amx(void)
{
	return NULL;
}
#endif
