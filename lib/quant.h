/* quant.h: weight types: half floats, block layouts, dequantization, dot kernels. */
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

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

/* Fill lookup tables; call once before any kernel runs. */
void quant_init(void);

/* 1 if the forward pass has kernels for this ggml type. */
int quant_supported(uint32_t type);
const char *quant_supported_list(void);

/* Bytes taken by one row of n weights of this type. */
size_t quant_row_bytes(uint32_t type, size_t n);

/* Expand one row of n weights to f32. */
void quant_dequant_row(uint32_t type, const void *row, float *out, size_t n);

/* The instruction sets the kernels can use, best last. */
enum { QUANT_SCALAR, QUANT_AVX2, QUANT_AVX512 };

/* The kernels in use: the best the processor has, or $LLM_ISA (scalar, avx2, avx512) if lower. */
int quant_isa(void);
const char *quant_isa_name(int isa);
/* Use another set; -1 if this processor or build cannot. For tests. */
int quant_set_isa(int isa);

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
 * Attention's weighted sum of values for up to 8 heads that share them:
 * out[h * ld_out + d] = sum over t < n_pos of att[h * ld_att + t] *
 * v[t * ld_v + d], summed in order of t.
 */
void quant_attn_values(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out);

/* The dot product of one row of n weights with the f32 vector x. */
float quant_dot_row(uint32_t type, const void *row, const float *x, size_t n);

#endif
