/*
 * simd.h: one kernel set per instruction set, behind one table that the
 * compiler checks against each set's definitions.  Private to lib/: the
 * rest of the library calls the kernels through kernels.h.
 *
 * Each set lives in its own file, compiled for its instruction set by a
 * pragma at its top (SIMD_TARGET_BEGIN), not by the build's flags: the
 * same make and config.mk serve every machine, and a file for another
 * architecture compiles to nothing but a NULL getter.  kernels.c asks
 * the processor which sets it has before it takes one.  The type-generic
 * code is plain C in the .inc templates, instantiated per instruction set
 * (gemm.inc, attn.inc) and per weight type (tile.inc, iblock.inc).
 */
#ifndef LLM_SIMD_H
#define LLM_SIMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * SIMD_TARGET_BEGIN("avx2,fma,f16c") ... SIMD_TARGET_END: the functions
 * between are compiled for those instruction sets (GCC's target pragma,
 * clang's target attribute on every function).  A file includes its
 * system headers (immintrin.h, arm_neon.h) and this one before, so that
 * only its own functions take the target.
 */
#define SIMD_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SIMD_TARGET_BEGIN(t) SIMD_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define SIMD_TARGET_END SIMD_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define SIMD_TARGET_BEGIN(t) SIMD_PRAGMA(GCC push_options) SIMD_PRAGMA(GCC target(t))
#define SIMD_TARGET_END SIMD_PRAGMA(GCC pop_options)
#endif

/* x86-64 kernels: where the compiler takes the pragmas above (gcc, clang, Apple's clang); AArch64's need none */
#if defined(__x86_64__) && defined(SIMD_TARGET_BEGIN)
#define SIMD_X86 1
#endif

struct kernels {
	const char *name;	/* as LLM_ISA names it */
	/* kernels_gemm (quant.h), and kernels_rounds_x */
	void (*gemm)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
	    const float *x, size_t ldx, int T, float *out, size_t ldo);
	int (*rounds_x)(uint32_t type);
	/* kernels_round and kernels_gemm_rounded; NULL where no type rounds x */
	void (*round)(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums);
	void (*gemm_rounded)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1,
	    int cols, const float *xr, int T, float *out, size_t ldo);
	/* the attention kernels of kernels.h */
	void (*attn_values)(int n_pos, int heads, const float *att, size_t ld_att,
	    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate);
	void (*softmax)(float *x, int n, float scale, float sink);
	void (*silu_mul)(float *g, const float *u, size_t n);
	void (*group_scores)(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
	    const float *q, size_t ldq, int T, float *out, size_t ld_out);
	/* 0 where the shape is not whole blocks of 32: the portable kernel takes it */
	int (*row_values)(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
	    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out,
	    int accumulate);
};

/* Each set's table, or NULL where this build has no kernels for it. */
const struct kernels *simd_avx2(void);
const struct kernels *simd_avx512(void);
/* avx512's, with q8_0 products by VNNI's integer dot products (vnni.c) */
const struct kernels *simd_avx512vnni(void);
/* avx512vnni's, with q8_0 batches by AMX's tile multiplies (amx.c) */
const struct kernels *simd_amx(void);
/* AArch64's (neon.c): NEON, with SDOT, with SDOT and the 8-bit matrix multiplies */
const struct kernels *simd_neon(void);
const struct kernels *simd_dotprod(void);
const struct kernels *simd_i8mm(void);

/*
 * A buffer of n floats that belongs to the calling thread, grown as needed
 * and freed when the thread exits (kernels.c).
 */
float *kernels_scratch(size_t n);

/*
 * For the kernels, the parts of xr: x's integers xq[t * cols + k] from
 * the first 64-byte boundary, their scales dx[t * nb + b] (nb = cols / 32
 * blocks), and the sums that the types whose weights have a minimum take
 * (kernels_round's sums, a mask of quant_has_min's): with bit 1, each
 * block's xsum[b * T + t], its integers' exact sum times its scale; with
 * bit 2 (q2_K, a minimum a half block), each half block's, after them
 * (kernels_rounded_sums).
 */
#define KERNELS_LINES(floats) (((size_t)(floats) + 15) / 16 * 16)	/* in whole 64-byte lines */

/*
 * Batches of SIMD_LANES_MIN to SIMD_LANES_MAX tokens: vnni.c's products
 * put the tokens in a vector's lanes, and its rounding fills
 * kernels_rounded_lanes for them.
 */
#define SIMD_LANES_MIN 12
#define SIMD_LANES_MAX 48

static inline int
simd_in_lanes(int T)
{
	return T >= SIMD_LANES_MIN && T <= SIMD_LANES_MAX;
}

/* Floats of x's integers in lanes or tiles (kernels_rounded_lanes, _tiles), with their scales. */
static inline size_t
simd_lanes_floats(int T, int cols)
{
	size_t lanes = ((size_t)T + 15) / 16 * 16;

	return lanes * (size_t)(cols / 2) + lanes * (size_t)(cols / 32);
}

/* Floats of xr for T tokens of cols (kernels_rounded_floats, kernels.h). */
static inline size_t
simd_rounded_floats(int T, int cols)
{
	/*
	 * kernels_rounded_parts' parts, kernels_rounded_lanes', where they
	 * are needed beside them kernels_rounded_tiles', and 16 floats to
	 * align them
	 */
	return KERNELS_LINES((size_t)T * cols / 2) + 2 * KERNELS_LINES((size_t)T * (cols / 32)) +
	    KERNELS_LINES((size_t)T * (cols / 16)) +
	    (simd_in_lanes(T) ? 2 : 1) * simd_lanes_floats(T, cols) + 16;
}

static inline int16_t *
kernels_rounded_parts(const float *xr, int T, int cols, float **dx, float **xsum)
{
	int16_t *xq = (int16_t *)(((uintptr_t)xr + 63) & ~(uintptr_t)63);

	*dx = (float *)xq + KERNELS_LINES((size_t)T * cols / 2);
	*xsum = *dx + KERNELS_LINES((size_t)T * (cols / 32));
	return xq;
}

/* The x sums a type with nm minimums a block takes (quant_has_min): xsum's by block, or by half block after them */
static inline const float *
kernels_rounded_sums(const float *xsum, int T, int cols, int nm)
{
	return nm == 2 ? xsum + KERNELS_LINES((size_t)T * (cols / 32)) : xsum;
}

/*
 * After them, for kernels that put tokens in a vector's lanes (vnni.c,
 * for simd_in_lanes(T)): x's integer pairs by groups of 16 tokens, dword
 * xl[((g * nb + b) * 16 + k) * 16 + t % 16] for pair k of block b of
 * token t of group g = t / 16, and their scales dxl[(g * nb + b) * 16 +
 * t % 16]; the lanes past T zero.
 */
static inline int32_t *
kernels_rounded_lanes(const float *xr, int T, int cols, float **dxl)
{
	float *dx, *xsum;
	size_t lanes = ((size_t)T + 15) / 16 * 16;

	kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	int32_t *xl = (int32_t *)(xsum + KERNELS_LINES((size_t)T * (cols / 32)) + KERNELS_LINES((size_t)T * (cols / 16)));
	*dxl = (float *)xl + lanes * (size_t)(cols / 2);
	return xl;
}

/*
 * For AMX's tiles (amx.c): x's integers as bytes by groups of 16 tokens
 * (amx.c says how), with scales laid out as the lanes' (dxt).  In the
 * lanes' place where vnni.c's products take none, after them where a
 * batch of mixed types takes both: AMX multiplies only q8_0, and the
 * other types of its batch go by avx512vnni's kernels.
 */
static inline uint8_t *
kernels_rounded_tiles(const float *xr, int T, int cols, float **dxt)
{
	int32_t *xl = kernels_rounded_lanes(xr, T, cols, dxt);
	uint8_t *xt = (uint8_t *)xl;

	if (simd_in_lanes(T)) {
		xt += simd_lanes_floats(T, cols) * sizeof(float);
		*dxt = (float *)xt + ((size_t)T + 15) / 16 * 16 * (size_t)(cols / 2);
	}
	return xt;
}

/* The tables that the kernels share, filled by quant_init (quant.c). */
extern float quant_f16_table[1 << 16];
extern float quant_i8_table[256];

#endif
