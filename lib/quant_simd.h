/*
 * quant_simd.h: the template of the matmul kernels, included by
 * quant_avx2.c and quant_avx512.c with their vector type and intrinsics.
 *
 * The rule that keeps runs reproducible: each output (row r, token t) is
 * one chain of fused multiply-adds over k in LANES-wide chunks, then one
 * fixed reduction tree.  Weights are widened to f32 exactly (q8_0: the
 * f32 product d * q) before they meet x.  Tile shapes only decide which
 * outputs are computed together, never how, so a batch, a single token
 * and a resumed run agree bit for bit.
 *
 * The including file defines: VEC, LANES, ZERO(), LOADX(p), LOADX_TAIL(p, n),
 * FMA(a, b, c), REDUCE(v), and LOAD_F32/F16/BF16(row, k), LOAD_*_TAIL(row, k, n),
 * LOAD_Q8_0(row, k), and PREFIX for the function names.
 */

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

/* One tile: R rows by T tokens, R and T constants after inlining. */
#define DEFINE_TILE(TYPE, LOAD, LOAD_TAIL)                                              \
static inline __attribute__((always_inline)) void                                        \
CAT(PREFIX, tile_##TYPE)(const char *w, size_t row_bytes, int R, int cols,               \
    const float *x, size_t ldx, int T, float *out, size_t ldo)                           \
{                                                                                        \
	VEC acc[8][4], wv[8];                                                            \
	int r, t, k = 0;                                                                 \
                                                                                         \
	for (r = 0; r < R; r++)                                                          \
		for (t = 0; t < T; t++)                                                  \
			acc[r][t] = ZERO();                                              \
	for (; k + LANES <= cols; k += LANES) {                                          \
		for (r = 0; r < R; r++)                                                  \
			wv[r] = LOAD(w + (size_t)r * row_bytes, k);                      \
		for (t = 0; t < T; t++) {                                                \
			VEC xv = LOADX(x + (size_t)t * ldx + k);                         \
			for (r = 0; r < R; r++)                                          \
				acc[r][t] = FMA(wv[r], xv, acc[r][t]);                   \
		}                                                                        \
	}                                                                                \
	if (k < cols) {                                                                  \
		for (r = 0; r < R; r++)                                                  \
			wv[r] = LOAD_TAIL(w + (size_t)r * row_bytes, k, cols - k);       \
		for (t = 0; t < T; t++) {                                                \
			VEC xv = LOADX_TAIL(x + (size_t)t * ldx + k, cols - k);          \
			for (r = 0; r < R; r++)                                          \
				acc[r][t] = FMA(wv[r], xv, acc[r][t]);                   \
		}                                                                        \
	}                                                                                \
	for (r = 0; r < R; r++)                                                          \
		for (t = 0; t < T; t++)                                                  \
			out[(size_t)t * ldo + r] = REDUCE(acc[r][t]);                    \
}                                                                                        \
                                                                                         \
static void                                                                              \
CAT(PREFIX, gemm_##TYPE)(const char *w, size_t row_bytes, int r0, int r1, int cols,      \
    const float *x, size_t ldx, int T, float *out, size_t ldo)                           \
{                                                                                        \
	int r = r0, t;                                                                   \
                                                                                         \
	if (T == 1) {                                                                    \
		/* decode: eight rows at a time hide the FMA latency */                  \
		for (; r + 8 <= r1; r += 8)                                              \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 8,  \
			    cols, x, ldx, 1, out + r, ldo);                              \
	} else {                                                                         \
		for (; r + ROWS <= r1; r += ROWS) {                                      \
			const char *wr = w + (size_t)r * row_bytes;                      \
			for (t = 0; t + TOKS <= T; t += TOKS)                            \
				CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols,      \
				    x + (size_t)t * ldx, ldx, TOKS, out + (size_t)t * ldo + r, ldo); \
			for (; t < T; t++)                                               \
				CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols,      \
				    x + (size_t)t * ldx, ldx, 1, out + (size_t)t * ldo + r, ldo); \
		}                                                                        \
	}                                                                                \
	for (; r < r1; r++)                                                              \
		for (t = 0; t < T; t++)                                                  \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 1,  \
			    cols, x + (size_t)t * ldx, ldx, 1, out + (size_t)t * ldo + r, ldo); \
}

DEFINE_TILE(f32, LOAD_F32, LOAD_F32_TAIL)
DEFINE_TILE(f16, LOAD_F16, LOAD_F16_TAIL)
DEFINE_TILE(bf16, LOAD_BF16, LOAD_BF16_TAIL)
DEFINE_TILE(q8_0, LOAD_Q8_0, LOAD_Q8_0)	/* rows are whole blocks: no tail */

void
CAT(PREFIX, gemm)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	switch (type) {
	case GGML_F32: CAT(PREFIX, gemm_f32)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo); break;
	case GGML_F16: CAT(PREFIX, gemm_f16)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo); break;
	case GGML_BF16: CAT(PREFIX, gemm_bf16)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo); break;
	case GGML_Q8_0: CAT(PREFIX, gemm_q8_0)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo); break;
	}
}
