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

/* The dot product of one row of n weights with the f32 vector x. */
float quant_dot_row(uint32_t type, const void *row, const float *x, size_t n);

#endif
