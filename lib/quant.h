/*
 * quant.h: the weight types: half floats, block layouts, reference
 * dequantization, the quantizers, and the integer rule's pieces.  A
 * leaf: the products that use them are kernels.h's.
 */
#ifndef LLM_QUANT_H
#define LLM_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf.h"	/* the types' numbers (GGML_*) are the file format's */

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

/*
 * q2_K: 16 sub-blocks of 16, w = d * sc * q - dmin * mn: sc the low
 * nibble of scales[k / 16] for weight k, mn the high one; q the 2 bits
 * of qs[32 * (j / 4) + l] at 2 * (j % 4) for weight 32 j + l.
 */
struct block_q2_K {
	uint8_t scales[QK_K / 16];
	uint8_t qs[QK_K / 4];
	uint16_t d, dmin;
};

/*
 * q3_K: 16 sub-blocks of 16, w = d * (sc - 32) * (q - 4 * !h): q the 2
 * bits of qs[32 * (j / 4) + l] at 2 * (j % 4) for weight 32 j + l, h bit
 * j of hmask[l], sc the 6-bit scale of the sub-block (quant_k3_pair).
 */
struct block_q3_K {
	uint8_t hmask[QK_K / 8];
	uint8_t qs[QK_K / 4];
	uint8_t scales[12];
	uint16_t d;
};

/*
 * iq4_nl and iq4_xs: a nibble picks one of 16 fixed values
 * (quant_iq4_values), w = d * value; iq4_xs's eight blocks of 32 have
 * 6-bit scales, w = d * (ls - 32) * value, ls 4 bits of scales_l and 2
 * of scales_h.  Nibbles are q4_0's: weight j low in qs[j], j + 16 high.
 */
struct block_iq4_nl {
	uint16_t d;
	uint8_t qs[16];
};

struct block_iq4_xs {
	uint16_t d;
	uint16_t scales_h;
	uint8_t scales_l[QK_K / 64];
	uint8_t qs[QK_K / 2];
};

extern const int8_t quant_iq4_values[16];

/*
 * mxfp4 (OCP Microscaling, as gpt-oss's experts come): 32 FP4 (E2M1)
 * values sharing an E8M0 scale e, w = 2^(e - 127) * fp4.  ggml stores
 * each value doubled, an integer (quant_mxfp4_values: 0, 1, 2, 3, 4, 6,
 * 8, 12 and their negatives), with the scale halved: w = value *
 * quant_e8m0_half(e).  Nibbles are q4_0's.
 */
struct block_mxfp4 {
	uint8_t e;
	uint8_t qs[16];
};

extern const int8_t quant_mxfp4_values[16];

/*
 * 2^(e - 128), exactly (e = 0 and 1 are subnormal), as ggml's
 * GGML_E8M0_TO_FP32_HALF.  Inline: decode takes it a block a row (a
 * call each was 40% of an mxfp4 row's time).
 */
static inline float
quant_e8m0_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

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

/* Fill the lookup tables (f16 to f32, bytes to floats); kernels_init calls it. */
void quant_init(void);

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
 * int16 weights q, w = d * q + m, d returned and m in m[0] (0 where the
 * type has no minimum; q2_K: weights 0-15's in m[0], 16-31's in m[1]);
 * and the minimums a block has: 0, 1, or 2 (q2_K).
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
 * The 6-bit scales of block j's halves (sub-blocks 2 j and 2 j + 1) of a
 * q3_K block, less 32: sub-block k's low 4 bits are the low nibble of
 * s[k] (k < 8) or the high one of s[k - 8], its high 2 bits those at 2 (k
 * / 4) of s[8 + k % 4]; the halves' are neighbours, read as 16 bits (a
 * load each: the kernels call it a block).
 */
static inline void
quant_k3_pair(int j, const uint8_t *s, int *s0, int *s1)
{
	uint16_t lo, hi;
	unsigned v;

	memcpy(&lo, s + 2 * j % 8, 2);	/* one load each (bytes ORed together took 14% of q3_K's decode) */
	memcpy(&hi, s + 8 + 2 * j % 4, 2);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	lo = __builtin_bswap16(lo), hi = __builtin_bswap16(hi);
#endif
	v = ((unsigned)lo >> (j >= 4 ? 4 : 0) & 0x0f0f) | ((unsigned)hi >> (2 * (j / 2)) & 0x0303) << 4;

	*s0 = (int)(v & 0xff) - 32;
	*s1 = (int)(v >> 8) - 32;
}

/* Weight l (0-31) of block j (0-7) of the 2-bit fields of q2_K and q3_K: bits 2 (j % 4) of qs[32 (j / 4) + l] */
static inline int
quant_k2_bits(const uint8_t *qs, int j, int l)
{
	return (qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3;
}

/* The 6-bit scale of block ib (0-7) of an iq4_xs block, from 0 to 63 (less 32 for the weights). */
static inline int
quant_xs_scale(int ib, const struct block_iq4_xs *b)
{
	return ((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((b->scales_h >> (2 * ib)) & 3) << 4;
}

#endif
