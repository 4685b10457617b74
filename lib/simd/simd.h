/*
 * simd.h: one kernel set per instruction set, behind one table that the
 * compiler checks against each set's definitions.  Private to lib/: the
 * rest of the library calls the kernels through kernels.h and quant.h.
 *
 * Each set lives in its own file, built with its instruction set's flags
 * (config.mk) and compiled to nothing but a NULL getter where the
 * compiler lacks them; kernels.c asks cpuid which sets the processor
 * has before it takes one.  The type-generic code is plain C in the .inc
 * templates, instantiated per instruction set (gemm.inc, attn.inc) and
 * per weight type (tile.inc, igemm.inc).
 */
#ifndef LLM_SIMD_H
#define LLM_SIMD_H

#include <stddef.h>
#include <stdint.h>

struct kernels {
	const char *name;	/* as LLM_ISA names it */
	/* quant_gemm (quant.h), and quant_rounds_x */
	void (*gemm)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
	    const float *x, size_t ldx, int T, float *out, size_t ldo);
	int (*rounds_x)(uint32_t type);
	/* quant_round and quant_gemm_rounded; NULL where no type rounds x */
	void (*round)(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr);
	void (*gemm_rounded)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1,
	    int cols, const float *xr, int T, float *out, size_t ldo);
	/* the attention kernels of kernels.h */
	void (*attn_values)(int n_pos, int heads, const float *att, size_t ld_att,
	    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate);
	void (*softmax)(float *x, int n, float scale);
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
/* avx512vnni's rounding of tokens [t0, t1) of x into xr's integers, scales and sums, no lanes */
void simd_vnni_round_tokens(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr);

/* The tables that the kernels share, filled by quant_init (quant.c). */
extern float quant_f16_table[1 << 16];
extern float quant_i8_table[256];

#endif
