/* quant.h: weight types: half floats, block layouts, dequantization, products (kernels.c). */
#ifndef LLM_QUANT_H
#define LLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define QK8_0 32

/* Q8_0: 32 weights share one f16 scale d; w[i] = d * qs[i]. */
struct block_q8_0 {
	uint16_t d;
	int8_t qs[QK8_0];
};

/*
 * The block layouts of the GGUF specification (ggml's).  Each block
 * holds 32 weights (256 for the K types) and f16 scales.
 */
#define QK4_0 32
struct block_q4_0 {		/* w = d * (q - 8), q a nibble */
	uint16_t d;
	uint8_t qs[QK4_0 / 2];	/* weight j in the low nibble of qs[j % 16], j >= 16 in the high */
};

struct block_q4_1 {		/* w = d * q + m */
	uint16_t d, m;
	uint8_t qs[16];
};

struct block_q5_0 {		/* w = d * (q - 16), q = nibble | bit j of qh << 4 */
	uint16_t d;
	uint8_t qh[4];
	uint8_t qs[16];
};

struct block_q5_1 {		/* w = d * q + m */
	uint16_t d, m;
	uint8_t qh[4];
	uint8_t qs[16];
};

#define QK_K 256
struct block_q4_K {		/* 8 sub-blocks of 32: w = d * sc * q - dmin * m */
	uint16_t d, dmin;
	uint8_t scales[12];	/* 6-bit sc and m for each sub-block, packed */
	uint8_t qs[QK_K / 2];
};

struct block_q5_K {
	uint16_t d, dmin;
	uint8_t scales[12];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
};

struct block_q6_K {		/* 16 sub-blocks of 16: w = d * sc * (q - 32) */
	uint8_t ql[QK_K / 2];
	uint8_t qh[QK_K / 4];
	int8_t scales[QK_K / 16];
	uint16_t d;
};

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* Quantize nblocks blocks of 32 floats (the KV cache's rows and groups). */
void quant_quantize_q8_0(const float *x, struct block_q8_0 *out, size_t nblocks);
void quant_quantize_q4_0(const float *x, struct block_q4_0 *out, size_t nblocks);
void quant_quantize_q4_1(const float *x, struct block_q4_1 *out, size_t nblocks);

/*
 * The normalized Hadamard transform of each block of r floats in x[0..n),
 * r a power of two: orthonormal and its own inverse, so rotating keys and
 * queries alike keeps their dot products, and rotating twice gives back
 * the values (to rounding).  It spreads an outlier over the block, which
 * quantizes better.
 */
void quant_hadamard(float *x, size_t n, int r);

/* Fill lookup tables; call once before any kernel runs. */
void quant_init(void);

/*
 * For the SIMD kernels: a buffer of n floats that belongs to the calling
 * thread, grown as needed and freed when the thread exits.
 */
float *quant_scratch(size_t n);

/* 1 if the forward pass has kernels for this ggml type. */
int quant_supported(uint32_t type);
const char *quant_supported_list(void);

/* Bytes taken by one row of n weights of this type. */
size_t quant_row_bytes(uint32_t type, size_t n);

/* Expand one row of n weights to f32. */
void quant_dequant_row(uint32_t type, const void *row, float *out, size_t n);

/*
 * Expand weights [k, k + n) of a row, n <= 16, k a multiple of n: the
 * reference every kernel agrees with bit for bit.
 */
void quant_dequant_chunk(uint32_t type, const void *row, int k, int n, float *out);

/*
 * The integer rule's pieces (kernels.c states the rule): x[0..32)
 * rounded to int16 into q, its scale returned; block b of a row as 32
 * int16 weights q, w = d * q + m, d returned and m in *m (0 where the
 * type has no minimum); and whether it has one.
 */
float quant_round_block(const float *x, int16_t *q);
float quant_iblock(uint32_t type, const void *row, int b, int16_t *q, float *m);
int quant_has_min(uint32_t type);

/* The 6-bit scale and min of sub-block j of a q4_K or q5_K block (inline: the kernels call it per 16 weights). */
static inline void
quant_k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
	/* Loads chosen without a branch, into unsigned ints: with byte
	 * temporaries gcc spilled a byte and reloaded a word (a store-forwarding
	 * stall that cost the q4_K kernel 2.5x). */
	unsigned a = q[j < 4 ? j : j + 4], b = q[j < 4 ? j + 4 : j - 4], c = q[j];

	*sc = (int)(j < 4 ? a & 63 : (a & 0xf) | (b >> 6) << 4);
	*m = (int)(j < 4 ? b & 63 : (a >> 4) | (c >> 6) << 4);
}

/*
 * out[t * ldo + r] = W[r] . X[t] for rows [r0, r1) of W (cols weights
 * each, row_bytes apart) and tokens [0, T) of X (ldx floats apart).
 * Each output is computed with the same operations whatever the rows and
 * tokens computed with it, so a batch of tokens and the same tokens one
 * at a time give bitwise the same results.
 */
void quant_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo);
/*
 * 1 if quant_gemm rounds x to 16-bit integers, a block of 32 at a time,
 * for this type with the kernels in use (simd/gemm.inc's integer rule):
 * still bitwise the same for a batch and one token at a time, and within
 * about 1e-5 of the largest output of the exact products.
 */
int quant_rounds_x(uint32_t type);

/*
 * x rounded once, for a batch whose products round it (several matrices,
 * several threads, a token's rows in parts): quant_rounds_once says which
 * types take it, all those quant_rounds_x names, for one rounding serves
 * every type.  xr holds quant_rounded_floats(T, cols) floats; quant_round
 * fills tokens [t0, t1) of it (threads may share the tokens out), and
 * quant_gemm_rounded then gives quant_gemm's bits with xr in place of x.
 */
int quant_rounds_once(uint32_t type);
size_t quant_rounded_floats(int T, int cols);
void quant_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr);
void quant_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo);

/*
 * For the kernels, the parts of xr: x's integers xq[t * cols + k] from
 * the first 64-byte boundary, their scales dx[t * nb + b] (nb = cols / 32
 * blocks), and each block's sum xsum[b * T + t], its integers' exact sum
 * times its scale (for the types whose weights have a minimum).
 */
#define QUANT_LINES(floats) (((size_t)(floats) + 15) / 16 * 16)	/* in whole 64-byte lines */

static inline int16_t *
quant_rounded_parts(const float *xr, int T, int cols, float **dx, float **xsum)
{
	int16_t *xq = (int16_t *)(((uintptr_t)xr + 63) & ~(uintptr_t)63);

	*dx = (float *)xq + QUANT_LINES((size_t)T * cols / 2);
	*xsum = *dx + QUANT_LINES((size_t)T * (cols / 32));
	return xq;
}

/*
 * After them, for kernels that put tokens in a vector's lanes (vnni.c,
 * for some T): x's integer pairs by groups of 16 tokens, dword
 * xl[((g * nb + b) * 16 + k) * 16 + t % 16] for pair k of block b of
 * token t of group g = t / 16, and their scales dxl[(g * nb + b) * 16 +
 * t % 16]; the lanes past T zero.
 */
static inline int32_t *
quant_rounded_lanes(const float *xr, int T, int cols, float **dxl)
{
	float *dx, *xsum;
	size_t lanes = ((size_t)T + 15) / 16 * 16;

	quant_rounded_parts(xr, T, cols, &dx, &xsum);
	int32_t *xl = (int32_t *)(xsum + QUANT_LINES((size_t)T * (cols / 32)));
	*dxl = (float *)xl + lanes * (size_t)(cols / 2);
	return xl;
}

#endif
