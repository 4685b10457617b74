/*
 * quant_simd.h: the template of the matmul kernels, included by
 * quant_avx2.c and quant_avx512.c with their vector type and intrinsics.
 *
 * The rule that keeps runs reproducible: each output (row r, token t) is
 * one chain of fused multiply-adds over k in LANES-wide chunks, then one
 * fixed reduction tree.  Weights are widened to f32 exactly (q8_0: the
 * f32 product d * q) before they meet x.  Tile shapes only decide which
 * outputs are computed together, never how, so a batch, a single token
 * and a resumed run agree bit for bit.  Types with an integer loader
 * follow the integer rule instead (further down), with the same promise.
 *
 * The including file defines: VEC, LANES, ZERO(), LOADX(p), LOADX_TAIL(p, n),
 * FMA(a, b, c), REDUCE(v), and LOAD_F32/F16/BF16(row, k), LOAD_*_TAIL(row, k, n),
 * LOAD_Q8_0(row, k), and PREFIX for the function names.
 */

/*
 * The tile loops must unroll fully so the accumulators live in registers.
 * clang's plain "unroll" unrolls a loop whose count is not yet constant
 * (before the tile is inlined) by 2 and then never fully: its decode ran
 * a third slower than gcc's, accumulators on the stack.  "unroll(full)"
 * waits for the constant.
 */
#if !defined(__OPTIMIZE__)
#define UNROLL	/* -O0 does not unroll: gcc would warn that it ignores the annotation */
#elif defined(__clang__)
#define UNROLL _Pragma("clang loop unroll(full)")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 16")
#else
#define UNROLL
#endif

/* A batch's f32 weight rows go in blocks of about this many bytes, which stay in L2. */
#define BLOCK_BYTES (128 * 1024)

/* Four reductions into out[0..3]; a file may define a faster one with the same bits. */
#ifndef REDUCE4
#define REDUCE4(a, b, c, d, out) \
	((out)[0] = REDUCE(a), (out)[1] = REDUCE(b), (out)[2] = REDUCE(c), (out)[3] = REDUCE(d))
#endif

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

/* The block types, as X(GGML type, kernel name): one list for the type switches. */
#define BLOCK_TYPES(X) X(GGML_Q8_0, q8_0) X(GGML_Q4_0, q4_0) X(GGML_Q4_1, q4_1) \
	X(GGML_Q5_0, q5_0) X(GGML_Q5_1, q5_1) X(GGML_Q4_K, q4_K) X(GGML_Q5_K, q5_K) X(GGML_Q6_K, q6_K)

/* The multiply-adds of the weights wv (a vector per row) at k, for every token. */
#define TILE_FMAS(wv, k)                                                                 \
	UNROLL for (t = 0; t < T; t++) {                                                 \
		VEC xv = LOADX(x + (size_t)t * ldx + (k));                               \
		UNROLL for (r = 0; r < R; r++)                                           \
			acc[r][t] = FMA(wv[r], xv, acc[r][t]);                           \
	}

/* One chunk of LANES weights at k for each of the tile's R rows and T tokens. */
#define TILE_STEP(LOAD, k)                                                               \
	do {                                                                             \
		UNROLL for (r = 0; r < R; r++)                                           \
			wv[r] = LOAD(w + (size_t)r * row_bytes, k);                      \
		TILE_FMAS(wv, k)                                                         \
	} while (0)

/* The next n lines of the tile after next, into L2. */
#define FETCH_AHEAD(n)                                                                   \
	do {                                                                             \
		for (j = 0; fetch && j < (n); j++, ahead += 64)                          \
			_mm_prefetch(ahead, _MM_HINT_T1);                                \
	} while (0)

/* One tile: R rows by T tokens, R and T constants after inlining. */
#define DEFINE_TILE(TYPE, LOAD, LOAD_TAIL)                                              \
static inline __attribute__((always_inline)) void                                        \
CAT(PREFIX, tile_##TYPE)(const char *w, size_t row_bytes, int R, int cols,               \
    const float *x, size_t ldx, int T, float *out, size_t ldo, int fetch)                \
{                                                                                        \
	VEC acc[8][8], wv[8];                                                            \
	int r, t, k = 0, j, c;                                                           \
	/* The tile after next, a few lines a step in address order: the rows  \
	 * are short and read side by side, a pattern the hardware prefetcher  \
	 * does not follow (one line per row per step read 9 GB/s, this 15).    \
	 * Not for rows widened into scratch: those are in cache. */             \
	const char *ahead = w + (size_t)2 * R * row_bytes;                               \
	int steps = cols / LANES > 0 ? cols / LANES : 1;                                 \
	int lines = (int)(((size_t)R * row_bytes / 64 + (size_t)steps) / (size_t)steps); \
                                                                                         \
	UNROLL for (r = 0; r < R; r++)                                                   \
		UNROLL for (t = 0; t < T; t++)                                           \
			acc[r][t] = ZERO();                                              \
	/* decode, a block of 32 at a time where the file has a block loader:   \
	 * each row's scales are read once.  BLOCK_BY_ROW (AVX2, 16 registers): \
	 * a row's block meets the block's x chunks, loaded once, as soon as it \
	 * is loaded.  Otherwise (AVX-512, 32): every row's block, then the     \
	 * multiply-adds.  The same multiply-adds in the same order either way. */ \
	for (; T == 1 && HAS_BLOCK_##TYPE && k + 32 <= cols; k += 32) {                 \
		VEC wb[8][32 / LANES], xb[32 / LANES];                                   \
		FETCH_AHEAD(32 / LANES * lines);                                         \
		UNROLL for (c = 0; c < 32 / LANES; c++)                                  \
			xb[c] = BLOCK_BY_ROW ? LOADX(x + k + c * LANES) : ZERO();        \
		UNROLL for (r = 0; r < R; r++) {                                         \
			BLOCK_##TYPE(w + (size_t)r * row_bytes, k, wb[r]);               \
			UNROLL for (c = 0; BLOCK_BY_ROW && c < 32 / LANES; c++)          \
				acc[r][0] = FMA(wb[r][c], xb[c], acc[r][0]);             \
		}                                                                        \
		UNROLL for (c = 0; !BLOCK_BY_ROW && c < 32 / LANES; c++) {               \
			VEC xv = LOADX(x + k + c * LANES);                               \
			UNROLL for (r = 0; r < R; r++)                                   \
				acc[r][0] = FMA(wb[r][c], xv, acc[r][0]);                \
		}                                                                        \
	}                                                                                \
	/* decode, other types: two chunks a pass (batch tiles are short of     \
	 * registers for it: AVX2 lost 30%) */                                   \
	for (; T == 1 && k + 2 * LANES <= cols; k += 2 * LANES) {                        \
		FETCH_AHEAD(2 * lines);                                                  \
		TILE_STEP(LOAD, k);                                                      \
		TILE_STEP(LOAD, k + LANES);                                              \
	}                                                                                \
	for (; k + LANES <= cols; k += LANES) {                                          \
		FETCH_AHEAD(lines);                                                      \
		TILE_STEP(LOAD, k);                                                      \
	}                                                                                \
	if (k < cols) {                                                                  \
		UNROLL for (r = 0; r < R; r++)                                           \
			wv[r] = LOAD_TAIL(w + (size_t)r * row_bytes, k, cols - k);       \
		UNROLL for (t = 0; t < T; t++) {                                         \
			VEC xv = LOADX_TAIL(x + (size_t)t * ldx + k, cols - k);          \
			UNROLL for (r = 0; r < R; r++)                                   \
				acc[r][t] = FMA(wv[r], xv, acc[r][t]);                   \
		}                                                                        \
	}                                                                                \
	/* four sums at once: a token's four rows, or (fewer rows) a row's four tokens */ \
	UNROLL for (t = 0; R >= 4 && t < T; t++) {                                       \
		r = 0;                                                                   \
		UNROLL for (; r + 4 <= R; r += 4)                                        \
			REDUCE4(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t],   \
			    out + (size_t)t * ldo + r);                                  \
		UNROLL for (; r < R; r++)                                                \
			out[(size_t)t * ldo + r] = REDUCE(acc[r][t]);                    \
	}                                                                                \
	UNROLL for (r = 0; R < 4 && r < R; r++) {                                        \
		float s[4];                                                              \
		t = 0;                                                                   \
		UNROLL for (; t + 4 <= T; t += 4) {                                      \
			REDUCE4(acc[r][t], acc[r][t + 1], acc[r][t + 2], acc[r][t + 3], s); \
			UNROLL for (c = 0; c < 4; c++)                                   \
				out[(size_t)(t + c) * ldo + r] = s[c];                   \
		}                                                                        \
		UNROLL for (; t < T; t++)                                                \
			out[(size_t)t * ldo + r] = REDUCE(acc[r][t]);                    \
	}                                                                                \
}                                                                                        \
                                                                                         \
/* Widen rows to f32 by the kernel's loaders, blocks if it has them: same bits. */       \
static void                                                                              \
CAT(PREFIX, widen_##TYPE)(const char *w, size_t row_bytes, int R, int cols, float *out)  \
{                                                                                        \
	int r, k;                                                                        \
                                                                                         \
	for (r = 0; r < R; r++) {                                                        \
		k = 0;                                                                   \
		for (; HAS_BLOCK_##TYPE && k + 32 <= cols; k += 32) {                    \
			VEC wb[32 / LANES];                                              \
			int c;                                                           \
			BLOCK_##TYPE(w + (size_t)r * row_bytes, k, wb);                  \
			UNROLL for (c = 0; c < 32 / LANES; c++)                          \
				STORE(out + (size_t)r * cols + k + c * LANES, wb[c]);    \
		}                                                                        \
		for (; k + LANES <= cols; k += LANES)                                    \
			STORE(out + (size_t)r * cols + k, LOAD(w + (size_t)r * row_bytes, k)); \
		if (k < cols)                                                            \
			STORE_TAIL(out + (size_t)r * cols + k,                           \
			    LOAD_TAIL(w + (size_t)r * row_bytes, k, cols - k), cols - k); \
	}                                                                                \
}                                                                                        \
                                                                                         \
static void                                                                              \
CAT(PREFIX, gemm_##TYPE)(const char *w, size_t row_bytes, int r0, int r1, int cols,      \
    const float *x, size_t ldx, int T, float *out, size_t ldo, int fetch)                \
{                                                                                        \
	int r = r0, t, rr, end, block;                                                   \
                                                                                         \
	if (T >= 2 * TOKS && !IS_F32_##TYPE) {                                           \
		/*                                                                       \
		 * a batch: widen each row tile once, not once per token group (in     \
		 * blocks of rows as the f32 weights below, no faster: 50-51 GMAC/s)    \
		 */                                                                      \
		float *tile = quant_scratch((size_t)ROWS * cols);                        \
		for (; r + ROWS <= r1; r += ROWS) {                                      \
			CAT(PREFIX, widen_##TYPE)(w + (size_t)r * row_bytes, row_bytes, ROWS, cols, tile); \
			/* the next tile's rows come from memory while this one computes */ \
			if (r + 2 * ROWS <= r1)                                          \
				for (size_t b = 0; b < ROWS * row_bytes; b += 64)        \
					_mm_prefetch(w + (size_t)(r + ROWS) * row_bytes + b, _MM_HINT_T1); \
			CAT(PREFIX, gemm_f32)((const char *)tile, (size_t)cols * 4, 0, ROWS, cols, \
			    x, ldx, T, out + r, ldo, 0);                                 \
		}                                                                        \
	} else if (T == 1) {                                                             \
		/*                                                                       \
		 * decode: rows of 256 or more (a model's weights, read from memory)   \
		 * in as few streams as their chains' latency allows: f32 one row at a  \
		 * time (one chain still outruns the memory twice), f16 and bf16        \
		 * HALF_ROWS (their conversion lengthens the chain); 8-20% faster than  \
		 * eight.  Other types eight rows at a time (q8_0 is slower with four   \
		 * or two); attention's rows are short, in cache, and eight too.        \
		 */                                                                      \
		for (; IS_F32_##TYPE && cols >= 256 && r < r1; r++)                      \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 1,  \
			    cols, x, ldx, 1, out + r, ldo, fetch);                       \
		for (; IS_HALF_##TYPE && cols >= 256 && r + HALF_ROWS <= r1; r += HALF_ROWS) \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, HALF_ROWS, \
			    cols, x, ldx, 1, out + r, ldo, fetch);                       \
		for (; r + 8 <= r1; r += 8)                                              \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 8,  \
			    cols, x, ldx, 1, out + r, ldo, fetch);                       \
	} else {                                                                         \
		/*                                                                       \
		 * a block of rows stays in L2 while every token group passes over     \
		 * it, so x is read once a block, not once a tile: f32 products of 128  \
		 * tokens 4-6% faster on AVX2, 2% on AVX-512.  The tiles are the same.  \
		 */                                                                      \
		block = (int)(BLOCK_BYTES / ((size_t)cols * 4)) / ROWS * ROWS;          \
		if (block < ROWS)                                                        \
			block = ROWS;                                                    \
		for (; r + ROWS <= r1; r = end) {                                        \
		    end = r1 - r < block ? r + (r1 - r) / ROWS * ROWS : r + block;       \
		    for (t = 0; t < T; t += TOKS)                                        \
			for (rr = r; rr < end; rr += ROWS) {                             \
				const char *wr = w + (size_t)rr * row_bytes;             \
				const float *xt = x + (size_t)t * ldx;                   \
				float *ot = out + (size_t)t * ldo + rr;                  \
				/* constant shapes, so the accumulators stay in registers */ \
				switch (T - t < TOKS ? T - t : TOKS) {                   \
				case 1: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 1, ot, ldo, fetch && !t); break; \
				case 2: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 2, ot, ldo, fetch && !t); break; \
				case 3: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 3, ot, ldo, fetch && !t); break; \
				case 4: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 4, ot, ldo, fetch && !t); break; \
				case 5: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 5, ot, ldo, fetch && !t); break; \
				case 6: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 6, ot, ldo, fetch && !t); break; \
				case 7: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, 7, ot, ldo, fetch && !t); break; \
				default: CAT(PREFIX, tile_##TYPE)(wr, row_bytes, ROWS, cols, xt, ldx, TOKS, ot, ldo, fetch && !t); break; \
				}                                                        \
			}                                                                \
		}                                                                        \
	}                                                                                \
	for (; r < r1; r++)                                                              \
		for (t = 0; t < T; t++)                                                  \
			CAT(PREFIX, tile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 1,  \
			    cols, x + (size_t)t * ldx, ldx, 1, out + (size_t)t * ldo + r, ldo, fetch); \
}

/* Weights of 16-bit floats (decode reads them HALF_ROWS rows at a time). */
#define IS_HALF_f32 0
#define IS_HALF_f16 1
#define IS_HALF_bf16 1
#define IS_HALF_q8_0 0
#define IS_HALF_q4_0 0
#define IS_HALF_q4_1 0
#define IS_HALF_q5_0 0
#define IS_HALF_q5_1 0
#define IS_HALF_q4_K 0
#define IS_HALF_q5_K 0
#define IS_HALF_q6_K 0

#define IS_F32_f32 1
#define IS_F32_f16 0
#define IS_F32_bf16 0
#define IS_F32_q8_0 0
#define IS_F32_q4_0 0
#define IS_F32_q4_1 0
#define IS_F32_q5_0 0
#define IS_F32_q5_1 0
#define IS_F32_q4_K 0
#define IS_F32_q5_K 0
#define IS_F32_q6_K 0

/* Any type, through the reference: slower, and the same bits. */
static inline __attribute__((always_inline)) VEC
load_generic(uint32_t type, const void *row, int k)
{
	float v[LANES];

	quant_dequant_chunk(type, row, k, LANES, v);
	return LOADX(v);
}
#ifndef LOAD_Q4_0
#define LOAD_Q4_0(row, k, ...) load_generic(GGML_Q4_0, row, k)
#endif
#ifndef LOAD_Q5_0
#define LOAD_Q5_0(row, k, ...) load_generic(GGML_Q5_0, row, k)
#endif
#ifndef LOAD_Q4_K
#define LOAD_Q4_K(row, k, ...) load_generic(GGML_Q4_K, row, k)
#endif
#ifndef LOAD_Q6_K
#define LOAD_Q6_K(row, k, ...) load_generic(GGML_Q6_K, row, k)
#endif
#ifndef LOAD_Q4_1
#define LOAD_Q4_1(row, k, ...) load_generic(GGML_Q4_1, row, k)
#endif
#ifndef LOAD_Q5_1
#define LOAD_Q5_1(row, k, ...) load_generic(GGML_Q5_1, row, k)
#endif
#ifndef LOAD_Q5_K
#define LOAD_Q5_K(row, k, ...) load_generic(GGML_Q5_K, row, k)
#endif

/* Types without a block loader (HAS_BLOCK_type 0) load their chunks one by one. */
#ifndef BLOCK_BY_ROW
#define BLOCK_BY_ROW 0
#endif
#define NO_BLOCK(row, k, wb) ((void)(row), (void)(k), (void)(wb))
#ifndef BLOCK_f32
#define BLOCK_f32 NO_BLOCK
#define HAS_BLOCK_f32 0
#endif
#ifndef BLOCK_f16
#define BLOCK_f16 NO_BLOCK
#define HAS_BLOCK_f16 0
#endif
#ifndef BLOCK_bf16
#define BLOCK_bf16 NO_BLOCK
#define HAS_BLOCK_bf16 0
#endif
#ifndef BLOCK_q8_0
#define BLOCK_q8_0 NO_BLOCK
#define HAS_BLOCK_q8_0 0
#endif
#ifndef BLOCK_q4_0
#define BLOCK_q4_0 NO_BLOCK
#define HAS_BLOCK_q4_0 0
#endif
#ifndef BLOCK_q4_1
#define BLOCK_q4_1 NO_BLOCK
#define HAS_BLOCK_q4_1 0
#endif
#ifndef BLOCK_q5_0
#define BLOCK_q5_0 NO_BLOCK
#define HAS_BLOCK_q5_0 0
#endif
#ifndef BLOCK_q5_1
#define BLOCK_q5_1 NO_BLOCK
#define HAS_BLOCK_q5_1 0
#endif
#ifndef BLOCK_q4_K
#define BLOCK_q4_K NO_BLOCK
#define HAS_BLOCK_q4_K 0
#endif
#ifndef BLOCK_q5_K
#define BLOCK_q5_K NO_BLOCK
#define HAS_BLOCK_q5_K 0
#endif
#ifndef BLOCK_q6_K
#define BLOCK_q6_K NO_BLOCK
#define HAS_BLOCK_q6_K 0
#endif

/* Block types have no tail: rows are whole blocks. */
DEFINE_TILE(f32, LOAD_F32, LOAD_F32_TAIL)
DEFINE_TILE(f16, LOAD_F16, LOAD_F16_TAIL)
DEFINE_TILE(bf16, LOAD_BF16, LOAD_BF16_TAIL)
DEFINE_TILE(q8_0, LOAD_Q8_0, LOAD_Q8_0)
DEFINE_TILE(q4_0, LOAD_Q4_0, LOAD_Q4_0)
DEFINE_TILE(q4_1, LOAD_Q4_1, LOAD_Q4_1)
DEFINE_TILE(q5_0, LOAD_Q5_0, LOAD_Q5_0)
DEFINE_TILE(q5_1, LOAD_Q5_1, LOAD_Q5_1)
DEFINE_TILE(q4_K, LOAD_Q4_K, LOAD_Q4_K)
DEFINE_TILE(q5_K, LOAD_Q5_K, LOAD_Q5_K)
DEFINE_TILE(q6_K, LOAD_Q6_K, LOAD_Q6_K)

/*
 * The integer rule, for the types whose file gives an integer block loader
 * (IBLOCK_type, HAS_IBLOCK_type 1): x is rounded per block of 32 to int16,
 * with scale max|x| / 32767 and ties to even (ROUND_X); a block's 32
 * products of weight and x integers are summed exactly in int32 lanes; an
 * output's chain is one fused multiply-add a block, of those lanes as
 * floats and (weight scale * x scale), then the fixed tree.  Types whose
 * weights are d * q + m (DEFINE_IGEMM's HAS_MIN: q4_1, q5_1, q4_K, q5_K)
 * then add a second chain, over blocks in order, of m times the block's x sum
 * (its integers' exact sum times its scale).  A decode tile and a batch
 * tile do just that for each output, so they agree bit for bit.  Rounding
 * x moves an output by about 1e-5 of its size, far below the weights' own
 * rounding; in exchange a block costs a widening and two integer
 * multiply-adds instead of four conversions, scalings and multiply-adds
 * (AVX2 q4_0 decode 15.7 -> 24 GMAC/s a core).  Types without a loader
 * keep the f32 rule.
 */
/* NO_IBLOCK (below, with the integer rule) zeroes the weights: its calls fold away. */
#ifndef IBLOCK_q8_0
#define IBLOCK_q8_0 NO_IBLOCK
#define HAS_IBLOCK_q8_0 0
#endif
#ifndef IBLOCK_q4_0
#define IBLOCK_q4_0 NO_IBLOCK
#define HAS_IBLOCK_q4_0 0
#endif
#ifndef IOFFSET_q4_0
#define IOFFSET_q4_0 0
#endif
#ifndef IBLOCK_q4_1
#define IBLOCK_q4_1 NO_IBLOCK
#define HAS_IBLOCK_q4_1 0
#endif
#ifndef IBLOCK_q5_0
#define IBLOCK_q5_0 NO_IBLOCK
#define HAS_IBLOCK_q5_0 0
#endif
#ifndef IBLOCK_q5_1
#define IBLOCK_q5_1 NO_IBLOCK
#define HAS_IBLOCK_q5_1 0
#endif
#ifndef IBLOCK_q4_K
#define IBLOCK_q4_K NO_IBLOCK
#define HAS_IBLOCK_q4_K 0
#endif
#ifndef IBLOCK_q5_K
#define IBLOCK_q5_K NO_IBLOCK
#define HAS_IBLOCK_q5_K 0
#endif
#ifndef IBLOCK_q6_K
#define IBLOCK_q6_K NO_IBLOCK
#define HAS_IBLOCK_q6_K 0
#endif
#ifdef IVEC
#define NI (32 / (2 * LANES))	/* int16 vectors a block */

/* Tokens [t0, t1) of x rounded into xr's parts (quant_rounded_parts), with
 * the blocks' sums if sums (the offsets' chains run along tokens). */
static void
CAT(PREFIX, round_x)(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	float *dx, *xsum;
	int16_t *xq = quant_rounded_parts(xr, T, cols, &dx, &xsum);
	int t, b, i, sum, nb = cols / 32;

	for (t = t0; t < t1; t++)
		for (b = 0; b < nb; b++) {
			int16_t *q = xq + (size_t)t * cols + 32 * b;
			float *d = dx + (size_t)t * nb + b;
			*d = ROUND_X(x + (size_t)t * ldx + 32 * b, q);
			if (sums) {
				for (sum = 0, i = 0; i < 32; i++)
					sum += q[i];
				xsum[(size_t)b * T + t] = *d * (float)sum;
			}
		}
}

/* quant_round: every type's sums, for one rounding serves them all */
void
CAT(PREFIX, round)(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr)
{
	CAT(PREFIX, round_x)(x, ldx, t0, t1, T, cols, xr, 1);
}

/*
 * out[t * ldo + r] += the chain over b of offsets m[r][b] times x sums
 * xsum[b][t], a fused multiply-add each: along tokens, LANES chains a
 * vector (m by rows, nb apart), or for one token along rows (m by
 * blocks, 8 apart).
 */
static void
CAT(PREFIX, ioffsets)(const float *m, int R, int nb, const float *xsum, int T, float *out, size_t ldo)
{
	VEC off[8];	/* 8 chains of LANES side by side, so their latencies overlap */
	float lane[8 * LANES], o;
	int r, t, b, c, j;

	if (T == 1) {	/* along rows */
		off[0] = ZERO();
		for (b = 0; b < nb; b++)
			off[0] = FMA(R == LANES ? LOADX(m + (size_t)b * 8) : LOADX_TAIL(m + (size_t)b * 8, R),
			    SET1(xsum[b]), off[0]);
		STORE(lane, off[0]);
		for (j = 0; j < R; j++)
			out[j] += lane[j];
		return;
	}
	for (r = 0; r < R; r++) {
		const float *mr = m + (size_t)r * nb;
		for (t = 0; t + 8 * LANES <= T; t += 8 * LANES) {
			UNROLL for (c = 0; c < 8; c++)
				off[c] = ZERO();
			for (b = 0; b < nb; b++) {
				VEC mv = SET1(mr[b]);
				UNROLL for (c = 0; c < 8; c++)
					off[c] = FMA(mv, LOADX(xsum + (size_t)b * T + t + c * LANES), off[c]);
			}
			UNROLL for (c = 0; c < 8; c++)
				STORE(lane + c * LANES, off[c]);
			for (j = 0; j < 8 * LANES; j++)
				out[(size_t)(t + j) * ldo + r] += lane[j];
		}
		for (; t < T; t++) {	/* the rest one at a time: the same fused multiply-adds */
			for (o = 0, b = 0; b < nb; b++)
				o = fmaf(mr[b], xsum[(size_t)b * T + t], o);
			out[(size_t)t * ldo + r] += o;
		}
	}
}

/* One block's products of int16 weights wi and x xv, exact in int32 lanes. */
static inline __attribute__((always_inline)) IVEC
CAT(PREFIX, idot)(const IVEC *wi, const IVEC *xv)
{
	IVEC p = IMADD(wi[0], xv[0]);
	int i;

	UNROLL for (i = 1; i < NI; i++)
		p = IADD(p, IMADD(wi[i], xv[i]));
	return p;
}

/* The outputs of a tile's chains, by the fixed tree. */
#define IREDUCE(R, T, acc, out, ldo) do {                                                 \
	int r_, t_;                                                                      \
	UNROLL for (t_ = 0; t_ < (T); t_++) {                                            \
		r_ = 0;                                                                  \
		UNROLL for (; r_ + 4 <= (R); r_ += 4)                                    \
			REDUCE4(acc[r_][t_], acc[r_ + 1][t_], acc[r_ + 2][t_], acc[r_ + 3][t_], \
			    (out) + (size_t)t_ * (ldo) + r_);                            \
		UNROLL for (; r_ < (R); r_++)                                            \
			(out)[(size_t)t_ * (ldo) + r_] = REDUCE(acc[r_][t_]);            \
	}                                                                                \
} while (0)

/* Batch tiles: IR widened rows by IT tokens, constants after inlining. */
static inline __attribute__((always_inline)) void
CAT(PREFIX, imicro)(const int16_t *wq, const float *dw, int R, int nb,
    const int16_t *xq, const float *dx, int T, float *out, size_t ldo)
{
	VEC acc[IR][IT];
	IVEC xv[IT][NI], wi[NI];
	int r, t, b, i;

	UNROLL for (r = 0; r < R; r++)
		UNROLL for (t = 0; t < T; t++)
			acc[r][t] = ZERO();
	for (b = 0; b < nb; b++) {
		UNROLL for (t = 0; t < T; t++)
			UNROLL for (i = 0; i < NI; i++)
				xv[t][i] = ILOAD(xq + (size_t)t * nb * 32 + 32 * b + i * 2 * LANES);
		UNROLL for (r = 0; r < R; r++) {
			VEC d = SET1(dw[(size_t)r * nb + b]);
			UNROLL for (i = 0; i < NI; i++)
				wi[i] = ILOAD(wq + ((size_t)r * nb + b) * 32 + i * 2 * LANES);
			UNROLL for (t = 0; t < T; t++)
				acc[r][t] = FMA(ICVT(CAT(PREFIX, idot)(wi, xv[t])),
				    MUL(d, SET1(dx[(size_t)t * nb + b])), acc[r][t]);
		}
	}
	IREDUCE(R, T, acc, out, ldo);
}

/* IR widened rows (or fewer) against every token. */
static void
CAT(PREFIX, ibatch)(const int16_t *wq, const float *dw, int R, int nb,
    const int16_t *xq, const float *dx, int T, float *out, size_t ldo)
{
	int t;

	for (t = 0; t < T; t += IT) {
		const int16_t *xt = xq + (size_t)t * nb * 32;
		const float *dt = dx + (size_t)t * nb;
		float *ot = out + (size_t)t * ldo;
		int n = T - t < IT ? T - t : IT;

		if (R == IR && n == IT)
			CAT(PREFIX, imicro)(wq, dw, IR, nb, xt, dt, IT, ot, ldo);
		else if (R == IR)
			for (; n > 0; n--, xt += (size_t)nb * 32, dt += nb, ot += ldo)
				CAT(PREFIX, imicro)(wq, dw, IR, nb, xt, dt, 1, ot, ldo);
		else
			for (int r = 0; r < R; r++)
				for (int j = 0; j < n; j++)
					CAT(PREFIX, imicro)(wq + (size_t)r * nb * 32, dw + (size_t)r * nb, 1, nb,
					    xt + (size_t)j * nb * 32, dt + (size_t)j * nb, 1, ot + (size_t)j * ldo + r, ldo);
	}
}

/* A widened batch tile's int16 weights (IR rows) and its scales or offsets (IR or, for decode, 8 rows), in floats */
#define ITILE_W(cols) QUANT_LINES((size_t)IR * (cols) / 2)
#define ITILE_M(cols) ((size_t)(IR > 8 ? IR : 8) * ((cols) / 32))
#define ITILE_FLOATS(cols) (ITILE_W(cols) + 2 * ITILE_M(cols) + 16)

#define DEFINE_IGEMM(TYPE, HAS_MIN, OFFSET)                                              \
/* Decode: R rows (8 or 1) against one token, each row's block as it is loaded. */   \
static inline __attribute__((always_inline)) void                                        \
CAT(PREFIX, itile_##TYPE)(const char *w, size_t row_bytes, int R, int nb,                \
    const int16_t *xq, const float *dx, float *mw, float *out, int fetch)                \
{                                                                                        \
	VEC acc[8][1];                                                                   \
	IVEC xv[NI], wi[NI], off[NI], xo = ISETZERO();                                   \
	int r, b, i, j;                                                                  \
	const char *ahead = w + (size_t)2 * R * row_bytes; /* as in the f32 tiles */     \
	int lines = (int)(((size_t)R * row_bytes / 64 + (size_t)nb) / (size_t)nb);       \
                                                                                         \
	UNROLL for (r = 0; r < R; r++)                                                   \
		acc[r][0] = ZERO();                                                      \
	UNROLL for (i = 0; i < NI; i++)                                                  \
		off[i] = ISET16(OFFSET);                                                 \
	for (b = 0; b < nb; b++) {                                                       \
		VEC s = SET1(dx[b]);                                                     \
		FETCH_AHEAD(lines);                                                      \
		UNROLL for (i = 0; i < NI; i++)                                          \
			xv[i] = ILOAD(xq + 32 * b + i * 2 * LANES);                      \
		if ((OFFSET))                                                            \
			xo = CAT(PREFIX, idot)(off, xv);	/* the offset times x */   \
		UNROLL for (r = 0; r < R; r++) {                                         \
			VEC d = SET1(IBLOCK_##TYPE(w + (size_t)r * row_bytes, b, wi, &mw[(size_t)b * 8 + r])); \
			IVEC p = CAT(PREFIX, idot)(wi, xv);                              \
			if ((OFFSET))                                                    \
				p = ISUB(p, xo);                                         \
			acc[r][0] = FMA(ICVT(p), MUL(d, s), acc[r][0]);                  \
		}                                                                        \
	}                                                                                \
	IREDUCE(R, 1, acc, out, 1);                                                      \
}                                                                                        \
                                                                                         \
static void                                                                              \
CAT(PREFIX, iwiden_##TYPE)(const char *w, size_t row_bytes, int R, int nb, int16_t *wq,   \
    float *dw, float *mw)                                                                \
{                                                                                        \
	IVEC wi[NI];                                                                     \
	int r, b, i;                                                                     \
                                                                                         \
	for (r = 0; r < R; r++)                                                          \
		for (b = 0; b < nb; b++) {                                               \
			dw[(size_t)r * nb + b] = IBLOCK_##TYPE(w + (size_t)r * row_bytes, b, wi, \
			    &mw[(size_t)r * nb + b]);                                    \
			UNROLL for (i = 0; i < NI; i++)                                  \
				ISTORE(wq + ((size_t)r * nb + b) * 32 + i * 2 * LANES,   \
				    (OFFSET) ? ISUB16(wi[i], ISET16(OFFSET)) : wi[i]);   \
		}                                                                        \
}                                                                                        \
                                                                                         \
/* x rounded (quant_round's xr); s: ITILE_FLOATS(cols) floats of scratch */        \
static void                                                                              \
CAT(PREFIX, igemm_rounded_##TYPE)(const char *w, size_t row_bytes, int r0, int r1, int cols, \
    const float *xr, int T, float *out, size_t ldo, float *s)                             \
{                                                                                        \
	int r = r0, R, nb = cols / 32;                                                   \
	float *dx, *xsum;                                                                \
	const int16_t *xq = quant_rounded_parts(xr, T, cols, &dx, &xsum);                \
	/* a widened tile, 64-byte aligned, its scales, and its (or decode's) offsets */ \
	int16_t *wq = (int16_t *)(((uintptr_t)s + 63) & ~(uintptr_t)63);                 \
	float *dw = (float *)wq + ITILE_W(cols), *mw = dw + ITILE_M(cols);               \
                                                                                         \
	if (T == 1) {                                                                    \
		for (; r < r1; r += R) {                                                 \
			R = r + 8 <= r1 ? 8 : 1;                                         \
			if (R == 8)                                                      \
				CAT(PREFIX, itile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 8, nb, xq, dx, mw, out + r, 1); \
			else                                                             \
				CAT(PREFIX, itile_##TYPE)(w + (size_t)r * row_bytes, row_bytes, 1, nb, xq, dx, mw, out + r, 0); \
			if ((HAS_MIN))                                             \
				CAT(PREFIX, ioffsets)(mw, R, nb, xsum, 1, out + r, ldo); \
		}                                                                        \
		return;                                                                  \
	}                                                                                \
	for (; r < r1; r += R) {                                                         \
		R = r1 - r < IR ? r1 - r : IR;                                           \
		CAT(PREFIX, iwiden_##TYPE)(w + (size_t)r * row_bytes, row_bytes, R, nb, wq, dw, mw); \
		CAT(PREFIX, ibatch)(wq, dw, R, nb, xq, dx, T, out + r, ldo);             \
		if ((HAS_MIN))                                                     \
			CAT(PREFIX, ioffsets)(mw, R, nb, xsum, T, out + r, ldo);         \
	}                                                                                \
}                                                                                        \
                                                                                         \
static void                                                                              \
CAT(PREFIX, igemm_##TYPE)(const char *w, size_t row_bytes, int r0, int r1, int cols,     \
    const float *x, size_t ldx, int T, float *out, size_t ldo)                           \
{                                                                                        \
	size_t n = quant_rounded_floats(T, cols);                                        \
	float *s = quant_scratch(n + ITILE_FLOATS(cols));                                \
                                                                                         \
	CAT(PREFIX, round_x)(x, ldx, 0, T, T, cols, s, (HAS_MIN));                       \
	CAT(PREFIX, igemm_rounded_##TYPE)(w, row_bytes, r0, r1, cols, s, T, out, ldo, s + n); \
}

static inline __attribute__((always_inline)) float
no_iblock(IVEC *wi, float *m)
{
	int i;

	for (i = 0; i < NI; i++)
		wi[i] = ISETZERO();
	*m = 0;
	return 0;
}
#define NO_IBLOCK(row, b, wi, m) ((void)(row), (void)(b), no_iblock(wi, m))
#define GEMM_BY(TYPE) (HAS_IBLOCK_##TYPE ? CAT(PREFIX, igemm_##TYPE)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo) : \
	CAT(PREFIX, gemm_##TYPE)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo, 1))
/*
 * every type; 1 where its weights have a minimum, which its loader returns;
 * then the integer its loader's weights sit above their values (IOFFSET:
 * AVX2's q4_0 nibbles, 8).  Decode takes that offset times the block's x
 * integers off each row's products, one subtraction a row instead of one
 * a weight, the same integers (AVX2 q4_0 decode 175 -> 195 tok/s);
 * widening takes it off the weights.
 */
DEFINE_IGEMM(q8_0, 0, 0)
DEFINE_IGEMM(q4_0, 0, IOFFSET_q4_0)
DEFINE_IGEMM(q4_1, 1, 0)
DEFINE_IGEMM(q5_0, 0, 0)
DEFINE_IGEMM(q5_1, 1, 0)
DEFINE_IGEMM(q4_K, 1, 0)
DEFINE_IGEMM(q5_K, 1, 0)
DEFINE_IGEMM(q6_K, 0, 0)

/* quant_gemm_rounded: only for the types this file's products round x for (rounds_x) */
void
CAT(PREFIX, gemm_rounded)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	float *s = quant_scratch(ITILE_FLOATS(cols));

#define ROUNDED_BY(ID, TYPE) case ID: { if (HAS_IBLOCK_##TYPE) \
	CAT(PREFIX, igemm_rounded_##TYPE)(w, row_bytes, r0, r1, cols, xr, T, out, ldo, s); } break;
	switch (type) {
	BLOCK_TYPES(ROUNDED_BY)
	}
#undef ROUNDED_BY
}
#else
#define GEMM_BY(TYPE) CAT(PREFIX, gemm_##TYPE)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo, 1)
#endif

/*
 * Attention's weighted sum of values for heads that share them (GQA):
 * out[h][d] = sum over t of att[h][t] * v[t][d], one fused multiply-add
 * per position in order.  A pass takes up to VHB heads and VNC chunks of
 * dim: each value row is loaded once per pass and meets every head of it,
 * and VHB * VNC accumulators plus the row stay in registers.
 */
#ifndef VHB
#define VHB 6
#endif
#ifndef VNC
#define VNC 4
#endif

static inline __attribute__((always_inline)) void
CAT(PREFIX, values_block)(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int nc, int n, float *out, size_t ld_out, int accumulate)
{
	VEC acc[VHB][VNC], vv[VNC];
	int t, h, c;

	/*
	 * The loops run to the constants, guarded, so they unroll whatever
	 * heads and nc are; with constant ones the guards fold away and the
	 * chains live in registers.
	 */
	UNROLL for (h = 0; h < VHB; h++)
		UNROLL for (c = 0; c < VNC; c++)
			acc[h][c] = vv[c] = ZERO();
	/* accumulate: go on with the chains stored in out, as if never stopped */
	if (accumulate)
		UNROLL for (h = 0; h < VHB; h++)
			UNROLL for (c = 0; c < VNC; c++) {
				const float *o = out + (size_t)h * ld_out + c * LANES;
				if (h < heads && c < nc)
					acc[h][c] = c < nc - 1 || n == LANES ? LOADX(o) : LOADX_TAIL(o, n);
			}
	for (t = 0; t < n_pos; t++) {
		const float *row = v + (size_t)t * ld_v;
		UNROLL for (c = 0; c < VNC; c++)
			if (c < nc)
				vv[c] = c < nc - 1 || n == LANES ? LOADX(row + c * LANES) :
				    LOADX_TAIL(row + c * LANES, n);
		UNROLL for (h = 0; h < VHB; h++) {
			if (h < heads) {
				VEC a = SET1(att[(size_t)h * ld_att + t]);
				UNROLL for (c = 0; c < VNC; c++)
					if (c < nc)
						acc[h][c] = FMA(a, vv[c], acc[h][c]);
			}
		}
	}
	UNROLL for (h = 0; h < VHB; h++)
		UNROLL for (c = 0; c < VNC; c++) {
			float *o = out + (size_t)h * ld_out + c * LANES;
			if (h >= heads || c >= nc)
				continue;
			if (c < nc - 1 || n == LANES)
				STORE(o, acc[h][c]);
			else
				STORE_TAIL(o, acc[h][c], n);
		}
}

/* Any number of heads; each output's chain is the same whatever its company. */
void
CAT(PREFIX, attn_values)(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate)
{
	int d, h, hb, nc, n;

	for (d = 0; d < dim; d += VNC * LANES) {
		nc = (dim - d + LANES - 1) / LANES;
		nc = nc > VNC ? VNC : nc;
		n = dim - d - (nc - 1) * LANES;	/* lanes in the last chunk */
		n = n > LANES ? LANES : n;
		for (h = 0; h < heads; h += VHB) {
			const float *a = att + (size_t)h * ld_att;
			float *o = out + (size_t)h * ld_out + d;
			hb = heads - h < VHB ? heads - h : VHB;
			if (nc < VNC || n < LANES) {
				CAT(PREFIX, values_block)(n_pos, hb, a, ld_att, v + d, ld_v, nc, n, o, ld_out, accumulate);
				continue;
			}
			/* the common shapes with constants, so the chains stay in registers */
#define VALUES_CASE(k) case k: CAT(PREFIX, values_block)(n_pos, k, a, ld_att, v + d, ld_v, VNC, LANES, o, ld_out, accumulate); break
			switch (hb) {
			VALUES_CASE(1);
#if VHB > 1
			VALUES_CASE(2);
#endif
#if VHB > 2
			VALUES_CASE(3);
#endif
#if VHB > 3
			VALUES_CASE(4);
#endif
#if VHB > 4
			VALUES_CASE(5);
#endif
#if VHB > 5
			VALUES_CASE(6);
#endif
#if VHB > 6
#error "VHB is at most 6"
#endif
			}
#undef VALUES_CASE
		}
	}
}

/*
 * x[0..n) = softmax(scale * x): the scaled maximum, then exp and a lane-wise
 * sum reduced by the fixed tree, then a division.
 */
void
CAT(PREFIX, softmax)(float *x, int n, float scale)
{
	VEC sv = SET1(scale), mv = SET1(-INFINITY), acc = ZERO(), v;
	float max, sum;
	int k;

	for (k = 0; k + LANES <= n; k += LANES) {
		v = MUL(LOADX(x + k), sv);
		STORE(x + k, v);
		mv = MAX(mv, v);
	}
	for (; k < n; k++)
		x[k] *= scale;
	max = REDUCE_MAX(mv);
	for (k -= k % LANES; k < n; k++)	/* the tail */
		max = x[k] > max ? x[k] : max;
	mv = SET1(max);
	for (k = 0; k + LANES <= n; k += LANES) {
		v = EXP(SUB(LOADX(x + k), mv));
		STORE(x + k, v);
		acc = ADD(acc, v);
	}
	if (k < n) {
		/* masked-off lanes are exp(-inf) = 0 */
		v = EXP(SUB(LOADX_TAIL_PAD(x + k, n - k, -INFINITY), mv));
		STORE_TAIL(x + k, v, n - k);
		acc = ADD(acc, v);
	}
	sum = REDUCE(acc);
	sv = SET1(sum);
	for (k = 0; k + LANES <= n; k += LANES)
		STORE(x + k, DIV(LOADX(x + k), sv));
	for (; k < n; k++)
		x[k] /= sum;
}

/*
 * SwiGLU's g[i] = g[i] / (1 + exp(-g[i])) * u[i], with the vector exp.
 * exp's argument stops at 88, where it is near the largest float: below
 * -88 the quotient is a few 1e-37 either way.
 */
void
CAT(PREFIX, silu_mul)(float *g, const float *u, size_t n)
{
	VEC one = SET1(1.0f), lo = SET1(-88.0f), x;
	size_t k;

	for (k = 0; k + LANES <= n; k += LANES) {
		x = LOADX(g + k);
		x = DIV(x, ADD(one, EXP(SUB(ZERO(), MAX(x, lo)))));
		STORE(g + k, MUL(x, LOADX(u + k)));
	}
	if (k < n) {
		x = LOADX_TAIL(g + k, (int)(n - k));
		x = DIV(x, ADD(one, EXP(SUB(ZERO(), MAX(x, lo)))));
		STORE_TAIL(g + k, MUL(x, LOADX_TAIL(u + k, (int)(n - k))), (int)(n - k));
	}
}

/*
 * The KV cache's attention kernels (quant.h says what they compute).
 * Group scores: the 32 positions of a group are 32 / LANES vectors of
 * accumulators per query; each channel's 32 quants are widened once and
 * meet every query of the chunk, one fused multiply-add per channel in
 * order, so a query's scores do not depend on its company.
 */
#define NV (32 / LANES)
#ifndef QT
#define QT 12		/* queries per pass over a group */
#endif
#if QT > 12
#error "QT is at most 12"
#endif

/* A switch over the counts 1..MAX (at most 12) with each a constant: CASES(MAX, n, CALL) calls CALL(k). */
#define CASE_IF(MAX, k, CALL) case k: if (k <= MAX) { CALL(k); } break;
#define CASES(MAX, n, CALL) switch (n) { \
	CASE_IF(MAX, 1, CALL) CASE_IF(MAX, 2, CALL) CASE_IF(MAX, 3, CALL) CASE_IF(MAX, 4, CALL) \
	CASE_IF(MAX, 5, CALL) CASE_IF(MAX, 6, CALL) CASE_IF(MAX, 7, CALL) CASE_IF(MAX, 8, CALL) \
	CASE_IF(MAX, 9, CALL) CASE_IF(MAX, 10, CALL) CASE_IF(MAX, 11, CALL) CASE_IF(MAX, 12, CALL) }

static inline __attribute__((always_inline)) void
CAT(PREFIX, group_block)(int q4, const char *grp, int dim, const float *q, size_t ldq, int nt,
    float *out, size_t ld_out)
{
	size_t bb = q4 ? sizeof(struct block_q4_1) : sizeof(struct block_q8_0);
	VEC acc[QT][NV], kq[NV];
	float base[QT] = { 0 };
	int c, t, v;

	UNROLL for (t = 0; t < nt; t++)
		UNROLL for (v = 0; v < NV; v++)
			acc[t][v] = ZERO();
	for (c = 0; c < dim; c++) {
		const char *b = grp + (size_t)c * bb;
		VEC d;
		/* the channel's 32 keys as d * quant, exact in f32 */
		if (q4) {
			const struct block_q4_1 *b4 = (const struct block_q4_1 *)b;
			d = SET1(quant_f16_table[b4->d]);
			UNROLL for (v = 0; v < NV; v++)
				kq[v] = MUL(d, WIDEN_NIB(b4->qs + (v * LANES) % 16, v * LANES >= 16));
			UNROLL for (t = 0; t < nt; t++)
				base[t] += q[(size_t)t * ldq + c] * quant_f16_table[b4->m];
		} else {
			const struct block_q8_0 *b8 = (const struct block_q8_0 *)b;
			d = SET1(quant_f16_table[b8->d]);
			UNROLL for (v = 0; v < NV; v++)
				kq[v] = MUL(d, WIDEN_I8(b8->qs + v * LANES));
		}
		UNROLL for (t = 0; t < nt; t++) {
			VEC w = SET1(q[(size_t)t * ldq + c]);
			UNROLL for (v = 0; v < NV; v++)
				acc[t][v] = FMA(w, kq[v], acc[t][v]);
		}
	}
	UNROLL for (t = 0; t < nt; t++)
		UNROLL for (v = 0; v < NV; v++)
			STORE(out + (size_t)t * ld_out + v * LANES, ADD(acc[t][v], SET1(base[t])));
}

void
CAT(PREFIX, group_scores)(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out)
{
	int g, t;

	for (g = 0; g < n_groups; g++)
		for (t = 0; t < T; t += QT) {
			const char *grp = (const char *)groups + (size_t)g * group_bytes;
			float *o = out + (size_t)t * ld_out + (size_t)g * 32;
			const float *qt = q + (size_t)t * ldq;
			/* constant counts, so the accumulators stay in registers */
#define GROUP_CALL(k) CAT(PREFIX, group_block)(q4, grp, dim, qt, ldq, k, o, ld_out)
			CASES(QT, T - t < QT ? T - t : QT, GROUP_CALL)
#undef GROUP_CALL
		}
}

/*
 * Values from quantized rows, a block of 32 dimensions at a time: each
 * row's block is widened once, as d * quant (exact in f32), and meets up
 * to VH heads; one chain per output over the positions in order.  Whole
 * blocks only; quant.c takes the rest.
 */
#ifndef VH
#define VH 12
#endif
#if VH > 12
#error "VH is at most 12"
#endif

static inline __attribute__((always_inline)) void
CAT(PREFIX, values_rows)(int type, int n_pos, int nh, const float *att, size_t ld_att,
    const char *rows, size_t row_bytes, int e0, float *out, size_t ld_out, int accumulate)
{
	VEC acc[VH][NV], x[NV];
	int t, h, v;

	UNROLL for (h = 0; h < nh; h++)
		UNROLL for (v = 0; v < NV; v++)
			acc[h][v] = accumulate ? LOADX(out + (size_t)h * ld_out + v * LANES) : ZERO();
	for (t = 0; t < n_pos; t++) {
		const char *row = rows + (size_t)t * row_bytes;
		if (type == GGML_F16) {
			UNROLL for (v = 0; v < NV; v++)
				x[v] = LOAD_F16(row, e0 + v * LANES);
		} else if (type == GGML_Q8_0) {
			const struct block_q8_0 *b = (const struct block_q8_0 *)row + e0 / 32;
			VEC d = SET1(quant_f16_table[b->d]);
			UNROLL for (v = 0; v < NV; v++)
				x[v] = MUL(d, WIDEN_I8(b->qs + v * LANES));
		} else {
			const struct block_q4_0 *b = (const struct block_q4_0 *)row + e0 / 32;
			VEC d = SET1(quant_f16_table[b->d]);
			UNROLL for (v = 0; v < NV; v++)
				x[v] = MUL(d, SUB(WIDEN_NIB(b->qs + (v * LANES) % 16, v * LANES >= 16), SET1(8)));
		}
		UNROLL for (h = 0; h < nh; h++) {
			VEC w = SET1(att[(size_t)h * ld_att + t]);
			UNROLL for (v = 0; v < NV; v++)
				acc[h][v] = FMA(w, x[v], acc[h][v]);
		}
	}
	UNROLL for (h = 0; h < nh; h++)
		UNROLL for (v = 0; v < NV; v++)
			STORE(out + (size_t)h * ld_out + v * LANES, acc[h][v]);
}

/* 0 if the shape is not whole blocks: the caller then uses the portable kernel. */
int
CAT(PREFIX, row_values)(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out, int accumulate)
{
	int e, h;

	if (d0 % 32 || dim % 32)
		return 0;
	for (e = 0; e < dim; e += 32)
		for (h = 0; h < heads; h += VH) {
			const float *a = att + (size_t)h * ld_att;
			float *o = out + (size_t)h * ld_out + e;
#define VALUES_CALL(k) CAT(PREFIX, values_rows)((int)type, n_pos, k, a, ld_att, rows, row_bytes, d0 + e, o, ld_out, accumulate)
			CASES(VH, heads - h < VH ? heads - h : VH, VALUES_CALL)
#undef VALUES_CALL
		}
	return 1;
}

/* 1 if this file's products with the type round x (the integer rule). */
int
CAT(PREFIX, rounds_x)(uint32_t type)
{
#define ROUNDS(ID, TYPE) case ID: return HAS_IBLOCK_##TYPE;
	switch (type) {
	BLOCK_TYPES(ROUNDS)
	}
#undef ROUNDS
	return 0;
}

void
CAT(PREFIX, gemm)(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	switch (type) {
	case GGML_F32: CAT(PREFIX, gemm_f32)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo, 1); break;
	case GGML_F16: CAT(PREFIX, gemm_f16)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo, 1); break;
	case GGML_BF16: CAT(PREFIX, gemm_bf16)(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo, 1); break;
#define GEMM_CASE(ID, TYPE) case ID: GEMM_BY(TYPE); break;
	BLOCK_TYPES(GEMM_CASE)
#undef GEMM_CASE
	}
}
