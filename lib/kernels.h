/*
 * kernels.h: the kernels in use, one set per instruction set, chosen at
 * start (kernels_init): the weight products, attention's kernels, the
 * activations.  kernels.c states the rules that make every set give the
 * same bits.
 */
#ifndef LLM_KERNELS_H
#define LLM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/*
 * The instruction sets the kernels can use, each architecture's best
 * last.  x86-64: avx512vnni is avx512 with the block types' products by
 * integer dot products (simd/vnni.c); amx is avx512vnni with q8_0
 * batches by tile multiplies (simd/amx.c).  AArch64 (simd/neon.c): neon,
 * dotprod with SDOT, i8mm with dotprod's and the 8-bit matrix multiplies.
 */
enum { KERNELS_SCALAR, KERNELS_AVX2, KERNELS_AVX512, KERNELS_AVX512VNNI, KERNELS_AMX,
	KERNELS_NEON, KERNELS_DOTPROD, KERNELS_I8MM, KERNELS_SETS };

/*
 * Fill quant.h's tables and take the best set the processor and the build
 * have, or $LLM_ISA (scalar, avx2, avx512, avx512vnni, amx, neon,
 * dotprod, i8mm) if the processor has it; call once before any kernel
 * runs.
 */
void kernels_init(void);
int kernels_isa(void);
const char *kernels_isa_name(int isa);
/* Use another set; -1 if this processor or build cannot (another architecture's, say).  For tests. */
int kernels_set_isa(int isa);

/*
 * out[t * ldo + r] = W[r] . X[t] for rows [r0, r1) of W (cols weights
 * each, row_bytes apart) and tokens [0, T) of X (ldx floats apart).
 * Each output is computed with the same operations whatever the rows and
 * tokens computed with it, so a batch of tokens and the same tokens one
 * at a time give bitwise the same results.
 */
void kernels_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo);
/*
 * 1 if kernels_gemm rounds x to 16-bit integers, a block of 32 at a time,
 * for this type with the kernels in use (simd/gemm.inc's integer rule):
 * still bitwise the same for a batch and one token at a time, and within
 * about 1e-5 of the largest output of the exact products.
 */
int kernels_rounds_x(uint32_t type);

/*
 * x rounded once, for a batch whose products round it (several matrices,
 * several threads, a token's rows in parts): kernels_rounds_once says which
 * types take it, all those kernels_rounds_x names, for one rounding serves
 * every type.  xr holds kernels_rounded_floats(T, cols) floats; kernels_round
 * fills tokens [t0, t1) of it (threads may share the tokens out; with sums,
 * the blocks' x sums that the types with a minimum take), and
 * kernels_gemm_rounded then gives kernels_gemm's bits with xr in place of x.
 */
int kernels_rounds_once(uint32_t type);
size_t kernels_rounded_floats(int T, int cols);
void kernels_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums);
void kernels_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo);

/*
 * Attention's weighted sum of values for the heads that share them:
 * out[h * ld_out + d] = sum over t < n_pos of att[h * ld_att + t] *
 * v[t * ld_v + d], summed in order of t.  With accumulate, the sums go
 * on from what out holds, so positions given in several calls, in order,
 * give the bits of one call over them all.
 */
void kernels_attn_values(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate);

/*
 * Scores against keys quantized per channel over groups of 32 positions
 * (the KV cache's q8_0 keys, or with q4 its q4_1 ones): groups points at
 * the block of the head's first channel in group 0, the next group
 * group_bytes on, the next channel one block on.  For T queries of dim
 * floats, ldq apart: out[t * ld_out + 32 g + j] = the dot product with
 * position j of group g, summed over channels in order, as
 * q[c] * (d * quant), d * quant exact (plus the sum of q[c] * m, for q4_1).
 */
void kernels_group_scores(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out);

/*
 * kernels_attn_values for rows of f16 values or of q8_0 or q4_0 blocks,
 * row_bytes apart: elements [d0, d0 + dim) of each.
 */
void kernels_row_values(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out, int accumulate);

/* SwiGLU: g[i] = silu(g[i]) * u[i] for i < n, with the kernels in use. */
void kernels_silu_mul(float *g, const float *u, size_t n);
/*
 * GeGLU: g[i] = gelu(g[i]) * u[i] for i < n, GELU in its tanh form,
 * 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as Gemma's
 * gelu_pytorch_tanh; portable C on every machine.
 */
void kernels_gelu_mul(float *g, const float *u, size_t n);

/*
 * gpt-oss's clamped SwiGLU: with x = min(g[i], 7) and y = u[i] clamped
 * to [-7, 7], g[i] = x / (1 + exp(-1.702 x)) * (y + 1), as its reference
 * and llama.cpp's swiglu_oai; portable C on every machine.
 */
void kernels_swiglu_oai_mul(float *g, const float *u, size_t n);

/*
 * x[0..n) = softmax(scale * x[0..n)), with the kernels in use.  A sink
 * other than -INFINITY is one more logit (unscaled) that joins the
 * maximum and, last, the sum, and takes no output: gpt-oss's learned
 * attention sinks.
 */
void kernels_softmax(float *x, int n, float scale, float sink);

#endif
