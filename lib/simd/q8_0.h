/*
 * q8_0.h: what the AVX-512 q8_0 kernels (vnni.c, amx.c) share.  Include
 * after ../quant.h, in a file built with AVX-512 and F16C.
 */
#ifndef LLM_SIMD_Q8_0_H
#define LLM_SIMD_Q8_0_H

#include <immintrin.h>
#include <stdint.h>

/*
 * The f16 scales of R rows' blocks (blk in the first row, the next
 * row_bytes on; 16 or fewer rows, the rest 0) as floats, in one gather:
 * each block starts with its scale.  f16 to f32 is exact, as the table.
 */
static inline __attribute__((always_inline)) __m512
q8_0_scales16(const char *blk, size_t row_bytes, int R)
{
	__m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
	    _mm512_set1_epi32((int)row_bytes));
	float s[16];
	int r;

	if (row_bytes > INT32_MAX / 16) {	/* offsets past 32 bits (a file's absurd rows): one at a time */
		for (r = 0; r < 16; r++)
			s[r] = r < R ? _cvtsh_ss(((const struct block_q8_0 *)(blk + (size_t)r * row_bytes))->d) : 0.0f;
		return _mm512_loadu_ps(s);
	}
	return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(),
	    (__mmask16)((1u << R) - 1), rows, blk, 1)));
}

#endif
