/*
 * test_quant: the weight types.  Hand-computed blocks pin down the
 * layouts; the reference quantizers round-trip; every SIMD path agrees
 * with the portable one.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/kernels.h"
#include "../lib/quant.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/ggufw.h"

enum { ONE = 0x3c00, HALF = 0x3800, QUARTER = 0x3400, TWO = 0x4000, MINUS_ONE = 0xbc00 };

static float
at(uint32_t type, const void *row, int k)
{
	float v;

	quant_dequant_chunk(type, row, k, 1, &v);
	return v;
}

#define EXPECT(type, row, k, want) \
	CHECK(at(type, row, k) == (float)(want), "%s weight %d: %g, want %g", \
	    gguf_type_name(type), k, at(type, row, k), (double)(want))

static void
hand_computed_blocks_dequantize_as_the_spec_says(void)
{
	struct block_q8_0 q8 = { .d = TWO };
	struct block_q4_0 q40 = { .d = HALF };
	struct block_q4_1 q41 = { .d = HALF, .m = MINUS_ONE };
	struct block_q5_0 q50 = { .d = QUARTER, .qh = { 0x01, 0x00, 0x01, 0x00 } };
	struct block_q5_1 q51 = { .d = HALF, .m = ONE, .qh = { 0x01, 0x00, 0x01, 0x00 } };
	struct block_q4_K q4k = { .d = ONE, .dmin = HALF };
	struct block_q5_K q5k = { .d = ONE, .dmin = HALF };
	struct block_q6_K q6k = { .d = HALF };
	struct block_q3_K q3k = { .d = HALF };
	struct block_q2_K q2k = { .d = HALF, .dmin = QUARTER };
	struct block_iq4_nl iq4nl = { .d = HALF };
	struct block_iq4_xs iq4xs = { .d = TWO };
	struct block_mxfp4 mx = { .e = 130 };

	q8.qs[3] = -5;
	EXPECT(GGML_Q8_0, &q8, 3, -10);
	/* weight j < 16 is the low nibble of qs[j], weight j + 16 the high one */
	q40.qs[0] = 0x3a, q40.qs[15] = 0xf0;
	EXPECT(GGML_Q4_0, &q40, 0, 0.5 * (10 - 8));
	EXPECT(GGML_Q4_0, &q40, 16, 0.5 * (3 - 8));
	EXPECT(GGML_Q4_0, &q40, 15, 0.5 * (0 - 8));
	EXPECT(GGML_Q4_0, &q40, 31, 0.5 * (15 - 8));
	q41.qs[0] = 0x3a;
	EXPECT(GGML_Q4_1, &q41, 0, 0.5 * 10 - 1);
	EXPECT(GGML_Q4_1, &q41, 16, 0.5 * 3 - 1);
	/* the fifth bit of weight j is bit j of qh */
	q50.qs[0] = 0x3a;
	EXPECT(GGML_Q5_0, &q50, 0, 0.25 * (26 - 16));
	EXPECT(GGML_Q5_0, &q50, 16, 0.25 * (19 - 16));
	EXPECT(GGML_Q5_0, &q50, 1, 0.25 * (0 - 16));
	q51.qs[0] = 0x3a;
	EXPECT(GGML_Q5_1, &q51, 0, 26 * 0.5 + 1);
	EXPECT(GGML_Q5_1, &q51, 16, 19 * 0.5 + 1);
	EXPECT(GGML_Q5_1, &q51, 1, 1);
	/*
	 * q4_K: sub-block 0 has sc 3, m 2 (scales[0], scales[4]); sub-block 5
	 * has sc 7 + 16 and m 4 + 32 (scales[9], with the top bits of
	 * scales[1] and scales[5]).  Weight 0 is the low nibble of qs[0];
	 * weight 161 (sub-block 5, the high half of group 2) the high nibble
	 * of qs[65].
	 */
	uint8_t sc[12] = { 3, 0x40, 0, 0, 2, 0x80, 0, 0, 0, 0x47, 0, 0 };
	memcpy(q4k.scales, sc, 12);
	q4k.qs[0] = 0x05, q4k.qs[65] = 0x90;
	EXPECT(GGML_Q4_K, &q4k, 0, 1.0 * 3 * 5 - 0.5 * 2);
	EXPECT(GGML_Q4_K, &q4k, 161, 1.0 * 23 * 9 - 0.5 * 36);
	memcpy(q5k.scales, sc, 12);
	q5k.qs[0] = 0x05, q5k.qs[65] = 0x90, q5k.qh[1] = 1 << 5;
	EXPECT(GGML_Q5_K, &q5k, 0, 1.0 * 3 * 5 - 0.5 * 2);
	EXPECT(GGML_Q5_K, &q5k, 161, 1.0 * 23 * 25 - 0.5 * 36);
	/*
	 * q6_K: weight 0 is the low nibble of ql[0] with bits 0-1 of qh[0];
	 * weight 160 (second half, second quarter) the low nibble of ql[96]
	 * with bits 2-3 of qh[32]; scales per 16 weights.
	 */
	q6k.scales[0] = 2, q6k.scales[10] = -3;
	q6k.ql[0] = 0x07, q6k.qh[0] = 0x01;
	q6k.ql[96] = 0x0a, q6k.qh[32] = 0x08;
	EXPECT(GGML_Q6_K, &q6k, 0, 0.5 * 2 * (23 - 32));
	EXPECT(GGML_Q6_K, &q6k, 160, 0.5 * -3 * (42 - 32));
	/*
	 * q3_K: weight 0 is bits 0-1 of qs[0] with bit 0 of hmask[0] (set: no
	 * 4 taken away), sub-block 0's scale the low nibble of scales[0] with
	 * bits 0-1 of scales[8]; weight 208 (block 6, l 16) bits 4-5 of
	 * qs[48] and bit 6 of hmask[16], sub-block 13's scale the high nibble
	 * of scales[5] with bits 6-7 of scales[9].
	 */
	q3k.qs[0] = 0x02, q3k.hmask[0] = 0x01;
	q3k.scales[0] = 0x05, q3k.scales[8] = 0x02;		/* 5 + 32 */
	q3k.qs[48] = 0x10, q3k.hmask[16] = 0x00;
	q3k.scales[5] = 0x30, q3k.scales[9] = 0x40;		/* 3 + 16 */
	EXPECT(GGML_Q3_K, &q3k, 0, 0.5 * (37 - 32) * 2);
	EXPECT(GGML_Q3_K, &q3k, 208, 0.5 * (19 - 32) * (1 - 4));
	EXPECT(GGML_Q3_K, &q3k, 1, 0.5 * (37 - 32) * (0 - 4));
	/* iq4_nl: q4_0's nibbles through the table; iq4_xs: block 3's scale is scales_l[1]'s high nibble with bits 6-7 of scales_h */
	iq4nl.qs[0] = 0xf0, iq4nl.qs[2] = 0x09;
	EXPECT(GGML_IQ4_NL, &iq4nl, 0, 0.5 * -127);
	EXPECT(GGML_IQ4_NL, &iq4nl, 16, 0.5 * 113);
	EXPECT(GGML_IQ4_NL, &iq4nl, 2, 0.5 * 13);
	iq4xs.scales_l[1] = 0x70, iq4xs.scales_h = 3 << 6;	/* 7 + 48 */
	iq4xs.qs[16 * 3 + 1] = 0x3e;
	EXPECT(GGML_IQ4_XS, &iq4xs, 97, 2.0 * (55 - 32) * 89);
	EXPECT(GGML_IQ4_XS, &iq4xs, 113, 2.0 * (55 - 32) * -65);
	EXPECT(GGML_IQ4_XS, &iq4xs, 0, 2.0 * (0 - 32) * -127);
	/*
	 * q2_K: weight 0 is bits 0-1 of qs[0], its scale and min scales[0]'s
	 * nibbles; weight 200 (block 6, l 8) bits 4-5 of qs[40], sub-block 12.
	 */
	q2k.qs[0] = 0x03, q2k.scales[0] = 0x25;		/* sc 5, mn 2 */
	q2k.qs[40] = 0x20, q2k.scales[12] = 0xf7;	/* sc 7, mn 15 */
	EXPECT(GGML_Q2_K, &q2k, 0, 0.5 * 5 * 3 - 0.25 * 2);
	EXPECT(GGML_Q2_K, &q2k, 200, 0.5 * 7 * 2 - 0.25 * 15);
	EXPECT(GGML_Q2_K, &q2k, 1, 0.5 * 5 * 0 - 0.25 * 2);
	/*
	 * mxfp4: q4_0's nibbles, each an E2M1 value (code 9: -0.5, 15: -6, 7:
	 * 6) times 2^(e - 127); e = 130: 8.  Every scale and code against the
	 * OCP definition as ggml computes it: the code's value doubled times
	 * 2^(e - 128), e = 0 and 1 subnormal, e = 255 ggml's 2^127 (OCP's NaN
	 * is no value ggml gives), code 8 (-0) ggml's +0.
	 */
	mx.qs[0] = 0xf9, mx.qs[1] = 0x07;
	EXPECT(GGML_MXFP4, &mx, 0, -0.5 * 8);
	EXPECT(GGML_MXFP4, &mx, 16, -6.0 * 8);
	EXPECT(GGML_MXFP4, &mx, 1, 6.0 * 8);
	static const double e2m1[16] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6 };
	int bad = 0;
	for (int e = 0; e < 256; e++)
		for (int c = 0; c < 16; c++) {
			float got;
			mx.e = (uint8_t)e;
			mx.qs[0] = (uint8_t)c;
			quant_dequant_chunk(GGML_MXFP4, &mx, 0, 1, &got);
			bad += got != (float)ldexp(e2m1[c], e - 127) || (got == 0 && signbit(got));
		}
	CHECK(bad == 0, "mxfp4: %d of 4096 scale and code pairs differ from 2^(e - 127) * E2M1", bad);
	CHECK(sizeof mx == 17, "block size of mxfp4");
	CHECK(sizeof q2k == 84, "block size of q2_K");
	CHECK(sizeof q3k == 110 && sizeof iq4nl == 18 && sizeof iq4xs == 136, "block sizes of q3_K, iq4_nl, iq4_xs");
	CHECK(sizeof q40 == 18 && sizeof q41 == 20 && sizeof q50 == 22 && sizeof q51 == 24 &&
	    sizeof q4k == 144 && sizeof q5k == 176 && sizeof q6k == 210, "block sizes");
}

static const uint32_t all_types[] = { GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0, GGML_Q4_0,
	GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_Q3_K, GGML_IQ4_NL,
	GGML_IQ4_XS, GGML_Q2_K, GGML_MXFP4 };
enum { NTYPES = sizeof all_types / sizeof all_types[0] };

static uint64_t seed = 99;

static float
rnd(void)
{
	seed = seed * 6364136223846793005ull + 1442695040888963407ull;
	return (float)(seed >> 40) / 8388608.0f - 1;
}

static void
reference_quantizers_round_trip(void)
{
	/* relative RMS error allowed per type: about half a step */
	static const double limit[NTYPES] = { 0, 1e-3, 5e-3, 0.01, 0.1, 0.1, 0.05, 0.05, 0.1, 0.06, 0.04, 0.2, 0.1,
	    0.1, 0.4, 0.15 };
	enum { N = 1024 };
	float x[N], y[N];
	unsigned char q[N * 4];
	double err, ss;
	int t, i;

	for (i = 0; i < N; i++)
		x[i] = rnd() * (1 + (i % 7));
	for (t = 0; t < NTYPES; t++) {
		quantize_row(all_types[t], x, q, N);
		quant_dequant_row(all_types[t], q, y, N);
		for (err = ss = 0, i = 0; i < N; i++) {
			err += (x[i] - y[i]) * (x[i] - y[i]);
			ss += x[i] * x[i];
		}
		CHECK(sqrt(err / ss) <= limit[t], "%s: relative RMS error %g", gguf_type_name(all_types[t]),
		    sqrt(err / ss));
	}
}

/* Every instruction set the processor has against the portable kernel. */
static void
simd_kernels_give_the_portable_bits(void)
{
	/*
	 * T past 64: the batch's vector paths; ROWS past two blocks of f32 rows
	 * (BLOCK_BYTES); FFN-down's 1536 columns, and 1004 with a tail
	 */
	enum { ROWS = 150, T = 75, MAXC = 1536 };
	static const int cols_list[] = { 512, 576, 96, 40, 13, 1004, 1536 };	/* whole chunks and tails */
	int best = kernels_isa(), isa, ti, ci, r, t, i;
	float *w = xmalloc(ROWS * MAXC * sizeof *w), *x = xmalloc(T * MAXC * sizeof *x);
	float ref[T][ROWS], got[T][ROWS], one, dec[ROWS];
	unsigned char *q = xmalloc(ROWS * MAXC * 4);

	for (i = 0; i < ROWS * MAXC; i++)
		w[i] = rnd();
	for (i = 0; i < T * MAXC; i++)
		x[i] = rnd();
	for (ti = 0; ti < NTYPES; ti++)
		for (ci = 0; ci < (int)(sizeof cols_list / sizeof *cols_list); ci++) {
			uint32_t type = all_types[ti];
			int cols = cols_list[ci];
			size_t rb;
			if (cols % (int)gguf_type_info(type)->block)
				continue;
			rb = quant_row_bytes(type, (size_t)cols);
			for (r = 0; r < ROWS; r++)
				quantize_row(type, w + r * MAXC, q + r * rb, (size_t)cols);
			kernels_set_isa(KERNELS_SCALAR);
			kernels_gemm(type, q, rb, 0, ROWS, cols, x, MAXC, T, &ref[0][0], ROWS);
			for (isa = KERNELS_SCALAR; isa <= best; isa++) {
				/* relative to the largest output, as the logits tests measure */
				double worst = 0, scale = 0;
				if (kernels_set_isa(isa) != 0)	/* another architecture's */
					continue;
				kernels_gemm(type, q, rb, 0, ROWS, cols, x, MAXC, T, &got[0][0], ROWS);
				for (t = 0; t < T; t++)
					for (r = 0; r < ROWS; r++)
						scale = worst_of(scale, fabs(ref[t][r]));
				/* one token, all rows (decode's tiles of eight, then the rest): the batch's bits */
				for (t = 0; t < T; t++) {
					kernels_gemm(type, q, rb, 0, ROWS, cols, x + t * MAXC, MAXC, 1, dec, ROWS);
					for (r = 0; r < ROWS; r++)
						CHECK(memcmp(&dec[r], &got[t][r], 4) == 0, "%s %s cols %d: (%d,%d) decoded differs",
						    kernels_isa_name(isa), gguf_type_name(type), cols, r, t);
				}
				for (t = 0; t < T; t++)
					for (r = 0; r < ROWS; r++) {
						double e = fabs(got[t][r] - ref[t][r]) / scale;
						worst = worst_of(worst, e);
						/* one row, one token: the same bits as in the batch */
						if (t >= 11 && r % 8)
							continue;
						kernels_gemm(type, q + r * rb, rb, 0, 1, cols, x + t * MAXC, MAXC, 1, &one, 1);
						CHECK(memcmp(&one, &got[t][r], 4) == 0, "%s %s cols %d: (%d,%d) alone differs",
						    kernels_isa_name(isa), gguf_type_name(type), cols, r, t);
					}
				/* the portable kernel is the specification: its very bits */
				CHECK(memcmp(got, ref, sizeof got) == 0 && worst == 0,
				    "%s %s cols %d: differs from the portable kernel (by %g of the largest)",
				    kernels_isa_name(isa), gguf_type_name(type), cols, worst);
			}
		}
	kernels_set_isa(best);
	printf("# kernels checked: scalar to %s\n", kernels_isa_name(best));
	free(w), free(x), free(q);
}

/*
 * mxfp4's scales at their ends: subnormal (e = 0, 1), the smallest
 * normal, around 1, the largest (254, 255), in rows of 16 and tails,
 * decoded and in batches of 20 and 75: every set gives the portable bits
 * (avx512vnni's panels gather them, the subnormals by a shift).
 */
static void
mxfp4_scales_at_their_ends_give_the_portable_bits(void)
{
	enum { R = 21, C = 96, T = 75 };
	static const uint8_t es[] = { 0, 1, 2, 3, 126, 127, 128, 150, 254, 255, 100 };
	struct block_mxfp4 w[R][C / 32];
	float x[T * C], ref[T][R], got[T][R];
	int best = kernels_isa(), isa, r, b, i, n;

	for (r = 0; r < R; r++)
		for (b = 0; b < C / 32; b++) {
			w[r][b].e = es[(r * 3 + b) % sizeof es];
			for (i = 0; i < 16; i++)
				w[r][b].qs[i] = (uint8_t)(rnd() * 128 + 128);
		}
	for (i = 0; i < T * C; i++)
		x[i] = rnd();
	for (n = 1; n <= T; n = n == 1 ? 20 : n == 20 ? T : T + 1) {	/* decode, the lanes, panels */
		kernels_set_isa(KERNELS_SCALAR);
		kernels_gemm(GGML_MXFP4, w, sizeof w[0], 0, R, C, x, C, n, &ref[0][0], R);
		for (isa = KERNELS_SCALAR + 1; isa <= best; isa++) {
			if (kernels_set_isa(isa) != 0)
				continue;
			kernels_gemm(GGML_MXFP4, w, sizeof w[0], 0, R, C, x, C, n, &got[0][0], R);
			CHECK(memcmp(got, ref, (size_t)n * sizeof ref[0]) == 0, "%s mxfp4, %d tokens: differs from the "
			    "portable kernel", kernels_isa_name(isa), n);
		}
	}
	for (i = 0, n = 0; i < R; i++)
		n += ref[0][i] != 0 && isfinite(ref[0][i]);
	CHECK(n > R / 2, "only %d finite, non-zero outputs", n);
	kernels_set_isa(best);
}

/*
 * Batches of every size a decode step of many sequences makes (vnni.c
 * puts 12 to 48 tokens in the lanes, two groups of 16 and a part one at
 * 33, but the K types' up to 24 in kbytes.inc's panels, 4 tokens a tile;
 * the rows in tiles of 8, 4 and 1; amx.c takes 5 tokens and more, in
 * groups of 16, and its last 13 rows from a stage) give each token the
 * bits it has alone, on every instruction set.
 */
static void
small_batches_give_each_token_its_bits(void)
{
	/* 576 columns: blocks of 32 and the K types' part super-block; 512: whole super-blocks of 256 */
	enum { ROWS = 157, MAXT = 49, MAXC = 576 };
	static const int Ts[] = { 2, 3, 4, 5, 7, 11, 12, 16, 17, 20, 24, 25, 33, 48, 49 }, Cs[] = { 576, 512 };
	float *w = xmalloc(ROWS * MAXC * sizeof *w), *x = xmalloc(MAXT * MAXC * sizeof *x);
	float *got = xmalloc(MAXT * ROWS * sizeof *got), one[ROWS];
	unsigned char *q = xmalloc(ROWS * quant_row_bytes(GGML_F32, MAXC));
	int best = kernels_isa(), isa, ti, k, t, i, c, bad;

	for (i = 0; i < ROWS * MAXC; i++)
		w[i] = rnd();
	for (i = 0; i < MAXT * MAXC; i++)
		x[i] = rnd() * (i % 5 + 1);
	for (isa = KERNELS_SCALAR; isa <= best; isa++) {
		if (kernels_set_isa(isa) != 0)
			continue;
		for (c = 0; c < 2; c++)
			for (ti = 0; ti < NTYPES; ti++) {
				uint32_t type = all_types[ti];
				int cols = Cs[c];
				size_t rb = quant_row_bytes(type, cols);
				for (i = 0; i < ROWS; i++)
					quantize_row(type, w + i * MAXC, q + i * rb, cols);
				for (k = 0; k < (int)(sizeof Ts / sizeof *Ts); k++) {
					kernels_gemm(type, q, rb, 0, ROWS, cols, x, MAXC, Ts[k], got, ROWS);
					for (bad = 0, t = 0; t < Ts[k]; t++) {
						kernels_gemm(type, q, rb, 0, ROWS, cols, x + t * MAXC, MAXC, 1, one, ROWS);
						for (i = 0; i < ROWS; i++)
							bad += memcmp(&one[i], &got[t * ROWS + i], 4) != 0 ||
							    got[t * ROWS + i] != got[t * ROWS + i];
					}
					CHECK(bad == 0, "%s %s, %d columns, %d tokens: %d outputs differ from the tokens alone",
					    kernels_isa_name(isa), gguf_type_name(type), cols, Ts[k], bad);
				}
			}
	}
	kernels_set_isa(best);
	free(w), free(x), free(got), free(q);
}

/*
 * x rounded once (kernels_round, its tokens in two pieces as two threads
 * share them) and products of row ranges (kernels_gemm_rounded, as a
 * batch's claims or a token's parts) give kernels_gemm's bits, for every
 * type that the kernels of each instruction set take rounded once, from
 * one rounding of x: a batch and one token.
 */
static void
rounding_once_gives_the_same_bits(void)
{
	enum { ROWS = 100, T = 37, COLS = 512, LDX = 517 };
	static const int cuts[] = { 0, 48, 61, 64, ROWS };	/* a tile of 48 rows, part-filled ones, 8-row decode tiles */
	float *w = xmalloc(ROWS * COLS * sizeof *w), *x = xmalloc(T * LDX * sizeof *x);
	float *ref = xmalloc(T * ROWS * sizeof *ref), *got = xmalloc(T * ROWS * sizeof *got), *xr;
	unsigned char *q = xmalloc(ROWS * quant_row_bytes(GGML_F32, COLS));
	int best = kernels_isa(), isa, ti, n, i, bad, checked = 0;

	for (i = 0; i < ROWS * COLS; i++)
		w[i] = rnd();
	for (i = 0; i < T * LDX; i++)
		x[i] = rnd() * (i % 7 + 1);
	xr = xmalloc(kernels_rounded_floats(T, COLS) * sizeof *xr);
	for (isa = KERNELS_SCALAR; isa <= best; isa++) {
		if (kernels_set_isa(isa) != 0)
			continue;
		for (ti = 0; ti < NTYPES; ti++) {
			uint32_t type = all_types[ti];
			size_t rb = quant_row_bytes(type, COLS);

			if (!kernels_rounds_once(type))
				continue;
			for (i = 0; i < ROWS; i++)
				quantize_row(type, w + i * COLS, q + i * rb, COLS);
			for (n = 1; n <= T; n += T - 1) {	/* one token, then the batch */
				kernels_gemm(type, q, rb, 0, ROWS, COLS, x, LDX, n, ref, ROWS);
				kernels_round(x, LDX, 0, n / 2, n, COLS, xr, quant_has_min(type));
				kernels_round(x, LDX, n / 2, n, n, COLS, xr, quant_has_min(type));
				for (i = 0; i < 4; i++)
					kernels_gemm_rounded(type, q, rb, cuts[i], cuts[i + 1], COLS, xr, n, got, ROWS);
				for (bad = 0, i = 0; i < n * ROWS; i++)
					bad += memcmp(&ref[i], &got[i], sizeof *ref) != 0;
				CHECK(bad == 0, "%s %s, %d tokens: %d of %d outputs differ from kernels_gemm's",
				    kernels_isa_name(isa), gguf_type_name(type), n, bad, n * ROWS);
			}
			checked++;
		}
	}
	kernels_set_isa(best);
	free(w), free(x), free(ref), free(got), free(q), free(xr);
	if (!checked)
		SKIP("the kernels here (up to %s) take no type rounded once", kernels_isa_name(best));
	printf("# %d pairs of instruction set and type checked\n", checked);
}

/*
 * Activations the integer rule rounds with care: zeros give exact zeros,
 * a block too small to scale (below 1e-30) counts as zeros, and one
 * huge block does not overflow; on every instruction set, finite.
 */
static void
extreme_activations_stay_finite(void)
{
	enum { ROWS = 9, COLS = 256 };
	static const float vals[] = { 0, 1e-36f, 3e-30f, 1e30f };
	int best = kernels_isa(), isa, ti, vi, r, i;
	float w[COLS], x[COLS], out[ROWS];
	unsigned char q[ROWS * COLS * 4];

	for (i = 0; i < COLS; i++)
		w[i] = rnd();
	for (ti = 0; ti < NTYPES; ti++) {
		uint32_t type = all_types[ti];
		size_t rb = quant_row_bytes(type, COLS);
		for (r = 0; r < ROWS; r++)
			quantize_row(type, w, q + r * rb, COLS);
		for (isa = KERNELS_SCALAR; isa <= best; isa++)
			for (vi = 0; vi < 4 && kernels_set_isa(isa) == 0; vi++) {
				for (i = 0; i < COLS; i++)	/* half the block at v, the rest 0 */
					x[i] = i % 32 < 16 ? vals[vi] * (i % 2 ? -1 : 1) : 0;
				kernels_gemm(type, q, rb, 0, ROWS, COLS, x, COLS, 1, out, ROWS);
				for (r = 0; r < ROWS; r++)
					CHECK(isfinite(out[r]) && (vals[vi] > 0 || out[r] == 0) &&
					    fabs(out[r]) <= 1e3 * vals[vi] * COLS,
					    "%s %s: x of %g gives %g", kernels_isa_name(isa), gguf_type_name(type),
					    vals[vi], out[r]);
			}
	}
	kernels_set_isa(best);
}

/*
 * The KV cache's kernels, on every instruction set: scores from per-channel
 * groups and values from quantized rows agree with the portable kernels,
 * and a query (or a head) alone gets the bits it gets with others.
 */
static void
kv_kernels_give_the_portable_bits_whatever_their_company(void)
{
	enum { DIM = 64, G = 3, T = 15, HEADS = 14, NP = 70 };	/* more than a pass of queries and heads */
	int best = kernels_isa(), isa, q4, t, j, h, d;
	struct block_q8_0 g8[G][DIM];
	struct block_q4_1 g4[G][DIM];
	struct block_q8_0 r8[NP][DIM / 32 + 1];	/* rows with an extra block: d0 = 32 */
	struct block_q4_0 r4[NP][DIM / 32 + 1];
	uint16_t rh[NP][DIM + 32];
	float q[T][DIM], att[HEADS][NP], col[32], row[DIM + 32];
	float ref[T][G * 32], got[T][G * 32], one[G * 32];
	float vref[HEADS][DIM], vgot[HEADS][DIM], vone[DIM];

	for (int g = 0; g < G; g++)
		for (int c = 0; c < DIM; c++) {
			for (j = 0; j < 32; j++)
				col[j] = rnd() + (float)(c % 5) - 2;	/* a mean per channel */
			quant_quantize_q8_0(col, &g8[g][c], 1);
			quant_quantize_q4_1(col, &g4[g][c], 1);
		}
	for (t = 0; t < NP; t++) {
		for (d = 0; d < DIM + 32; d++)
			row[d] = rnd();
		quant_quantize_q8_0(row, r8[t], DIM / 32 + 1);
		quant_quantize_q4_0(row, r4[t], DIM / 32 + 1);
		for (d = 0; d < DIM + 32; d++)
			rh[t][d] = f32_to_f16(row[d]);
	}
	for (t = 0; t < T; t++)
		for (d = 0; d < DIM; d++)
			q[t][d] = rnd();
	for (h = 0; h < HEADS; h++)
		for (t = 0; t < NP; t++)
			att[h][t] = (rnd() + 1) / NP;
	for (q4 = 0; q4 < 2; q4++) {
		const void *grp = q4 ? (const void *)g4 : (const void *)g8;
		size_t gb = q4 ? sizeof g4[0] : sizeof g8[0];
		kernels_set_isa(KERNELS_SCALAR);
		kernels_group_scores(q4, grp, gb, G, DIM, &q[0][0], DIM, T, &ref[0][0], G * 32);
		for (isa = KERNELS_SCALAR; isa <= best; isa++) {
			double worst = 0, scale = 0;
			if (kernels_set_isa(isa) != 0)
				continue;
			kernels_group_scores(q4, grp, gb, G, DIM, &q[0][0], DIM, T, &got[0][0], G * 32);
			for (t = 0; t < T; t++) {
				kernels_group_scores(q4, grp, gb, G, DIM, q[t], DIM, 1, one, G * 32);
				CHECK(memcmp(one, got[t], sizeof one) == 0, "%s q%d: query %d alone differs",
				    kernels_isa_name(isa), q4 ? 4 : 8, t);
				for (j = 0; j < G * 32; j++)
					scale = worst_of(scale, fabs(ref[t][j]));
			}
			for (t = 0; t < T; t++)
				for (j = 0; j < G * 32; j++)
					worst = worst_of(worst, fabs(got[t][j] - ref[t][j]) / scale);
			CHECK(memcmp(got, ref, sizeof got) == 0, "%s group scores q%d: differ from the portable "
			    "kernel's (by %g of the largest)", kernels_isa_name(isa), q4 ? 4 : 8, worst);
		}
	}
	for (int ty = 0; ty < 3; ty++) {
		uint32_t type = ty == 0 ? GGML_F16 : ty == 1 ? GGML_Q8_0 : GGML_Q4_0;
		const void *rows = ty == 0 ? (const void *)rh : ty == 1 ? (const void *)r8 : (const void *)r4;
		size_t rb = ty == 0 ? sizeof rh[0] : ty == 1 ? sizeof r8[0] : sizeof r4[0];
		kernels_set_isa(KERNELS_SCALAR);
		kernels_row_values(type, NP, HEADS, &att[0][0], NP, rows, rb, 32, DIM, &vref[0][0], DIM, 0);
		for (isa = KERNELS_SCALAR; isa <= best; isa++) {
			double worst = 0, scale = 0;
			if (kernels_set_isa(isa) != 0)
				continue;
			kernels_row_values(type, NP, HEADS, &att[0][0], NP, rows, rb, 32, DIM, &vgot[0][0], DIM, 0);
			for (h = 0; h < HEADS; h++) {
				kernels_row_values(type, NP, 1, att[h], NP, rows, rb, 32, DIM, vone, DIM, 0);
				CHECK(memcmp(vone, vgot[h], sizeof vone) == 0, "%s %s: head %d alone differs",
				    kernels_isa_name(isa), gguf_type_name(type), h);
				/* two calls, the second accumulating, are one */
				kernels_row_values(type, 30, 1, att[h], NP, rows, rb, 32, DIM, vone, DIM, 0);
				kernels_row_values(type, NP - 30, 1, att[h] + 30, NP, (const char *)rows + 30 * rb,
				    rb, 32, DIM, vone, DIM, 1);
				CHECK(memcmp(vone, vgot[h], sizeof vone) == 0, "%s %s: head %d in two calls differs",
				    kernels_isa_name(isa), gguf_type_name(type), h);
				for (d = 0; d < DIM; d++)
					scale = worst_of(scale, fabs(vref[h][d]));
			}
			for (h = 0; h < HEADS; h++)
				for (d = 0; d < DIM; d++)
					worst = worst_of(worst, fabs(vgot[h][d] - vref[h][d]) / scale);
			CHECK(memcmp(vgot, vref, sizeof vgot) == 0, "%s values %s: differ from the portable "
			    "kernel's (by %g of the largest)", kernels_isa_name(isa), gguf_type_name(type), worst);
		}
	}
	kernels_set_isa(best);
}

/*
 * Attention's weighted sum of f32 values, on every instruction set and for
 * head sizes that are and are not whole passes: it agrees with the
 * portable kernel, and a head alone, or its positions in two calls, get
 * the bits it gets among others (the kernels take heads in passes).
 */
static void
f32_values_give_the_portable_bits_whatever_their_company(void)
{
	enum { NP = 50, MAXH = 13, MAXD = 136, LDV = MAXD + 5 };
	static const int dims[] = { 8, 24, 64, 72, 136 }, heads[] = { 1, 3, 7, 13 };
	static float v[NP][LDV], att[MAXH][NP], ref[MAXH][MAXD], got[MAXH][MAXD], one[MAXD];
	int best = kernels_isa(), isa, di, hi, h, d, t;

	for (t = 0; t < NP; t++)
		for (d = 0; d < LDV; d++)
			v[t][d] = rnd();
	for (h = 0; h < MAXH; h++)
		for (t = 0; t < NP; t++)
			att[h][t] = (rnd() + 1) / NP;
	for (di = 0; di < (int)(sizeof dims / sizeof *dims); di++)
		for (hi = 0; hi < (int)(sizeof heads / sizeof *heads); hi++) {
			int dim = dims[di], nh = heads[hi];
			kernels_set_isa(KERNELS_SCALAR);
			kernels_attn_values(NP, nh, &att[0][0], NP, &v[0][0], LDV, dim, &ref[0][0], MAXD, 0);
			for (isa = KERNELS_SCALAR; isa <= best; isa++) {
				double worst = 0, scale = 0;
				if (kernels_set_isa(isa) != 0)
					continue;
				kernels_attn_values(NP, nh, &att[0][0], NP, &v[0][0], LDV, dim, &got[0][0], MAXD, 0);
				for (h = 0; h < nh; h++) {
					kernels_attn_values(NP, 1, att[h], NP, &v[0][0], LDV, dim, one, MAXD, 0);
					CHECK(memcmp(one, got[h], dim * sizeof *one) == 0,
					    "%s dim %d heads %d: head %d alone differs", kernels_isa_name(isa), dim, nh, h);
					kernels_attn_values(17, 1, att[h], NP, &v[0][0], LDV, dim, one, MAXD, 0);
					kernels_attn_values(NP - 17, 1, att[h] + 17, NP, v[17], LDV, dim, one, MAXD, 1);
					CHECK(memcmp(one, got[h], dim * sizeof *one) == 0,
					    "%s dim %d heads %d: head %d in two calls differs", kernels_isa_name(isa), dim, nh, h);
					for (d = 0; d < dim; d++)
						scale = worst_of(scale, fabs(ref[h][d]));
				}
				for (h = 0; h < nh; h++)
					for (d = 0; d < dim; d++)
						worst = worst_of(worst, fabs(got[h][d] - ref[h][d]) / scale);
				for (h = 0; h < nh; h++)
					CHECK(memcmp(got[h], ref[h], dim * sizeof *one) == 0,
					    "%s dim %d heads %d: differs from the portable kernel (by %g of the largest)",
					    kernels_isa_name(isa), dim, nh, worst);
			}
		}
	kernels_set_isa(best);
}

/*
 * Softmax and SwiGLU's silu(g) * u give the portable kernel's bits on
 * every instruction set, for lengths that are and are not whole vectors
 * (with the tails the sum's zeros), scores far apart (exp's clamps) and
 * gates past -88 and +88.
 */
static void
softmax_and_silu_give_the_portable_bits(void)
{
	enum { N = 301 };
	static const int lens[] = { 1, 7, 15, 16, 17, 33, 100, 301 };
	float x[N], ref[N], got[N], u[N], gref[N], ggot[N];
	int best = kernels_isa(), isa, li, i, n;

	for (i = 0; i < N; i++) {
		x[i] = rnd() * (i % 11 == 0 ? 300 : 8);
		u[i] = rnd();
	}
	x[5] = 95, x[6] = -95;	/* past the clamps */
	/* no sink, a sink among the scores, a sink above them all (gpt-oss's attention sinks) */
	static const float sinks[] = { -INFINITY, 1.5f, 150.0f };
	for (li = 0; li < (int)(sizeof lens / sizeof *lens) * 3; li++) {
		float sink = sinks[li % 3];
		double max = sink, sum = 0, worst = 0;
		n = lens[li / 3];
		kernels_set_isa(KERNELS_SCALAR);
		memcpy(ref, x, sizeof x);
		kernels_softmax(ref, n, 0.37f, sink);
		/* against double: the sink joins the denominator and takes no output */
		for (i = 0; i < n; i++)
			max = fmax(max, (double)(0.37f * x[i]));
		for (i = 0; i < n; i++)
			sum += exp((double)(0.37f * x[i]) - max);
		sum += sink > -INFINITY ? exp(sink - max) : 0;
		for (i = 0; i < n; i++)
			worst = fmax(worst, fabs(ref[i] - exp((double)(0.37f * x[i]) - max) / sum));
		CHECK(worst < 1e-6, "softmax of %d with sink %g: off by %g from double", n, sink, worst);
		memcpy(gref, x, sizeof x);
		kernels_silu_mul(gref, u, (size_t)n);
		for (isa = KERNELS_SCALAR; isa <= best; isa++) {
			if (kernels_set_isa(isa) != 0)
				continue;
			memcpy(got, x, sizeof x);
			kernels_softmax(got, n, 0.37f, sink);
			CHECK(memcmp(got, ref, (size_t)n * sizeof *got) == 0,
			    "%s softmax of %d, sink %g, differs from the portable one", kernels_isa_name(isa), n, sink);
			memcpy(ggot, x, sizeof x);
			kernels_silu_mul(ggot, u, (size_t)n);
			CHECK(memcmp(ggot, gref, (size_t)n * sizeof *ggot) == 0, "%s silu of %d differs from the portable one",
			    kernels_isa_name(isa), n);
		}
	}
	for (i = 0, n = 0; i < N; i++)
		n += !(ref[i] == ref[i]) || !(gref[i] == gref[i]);
	CHECK(n == 0, "%d NaNs in softmax or silu", n);
	kernels_set_isa(best);
}

/*
 * Gemma's GELU is the tanh form: against it in double to float rounding
 * over [-6, 6], where the erf form differs by up to 2e-4 (and so fails).
 */
static void
gelu_is_the_tanh_form(void)
{
	enum { N = 1201 };
	float g[N], u[N];
	double worst = 0;
	int i;

	for (i = 0; i < N; i++) {
		g[i] = -6.0f + 12.0f * (float)i / (N - 1);
		u[i] = 1.0f + (float)(i % 3);
	}
	kernels_gelu_mul(g, u, N);
	for (i = 0; i < N; i++) {
		double x = -6.0 + 12.0 * (float)i / (N - 1);
		double want = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
		worst = worst_of(worst, fabs(g[i] - want) / (fabs(want) + 1));
	}
	CHECK(worst <= 1e-6, "GELU off the tanh form by %g", worst);
}

int
main(void)
{
	kernels_init();
	TEST(hand_computed_blocks_dequantize_as_the_spec_says);
	TEST(reference_quantizers_round_trip);
	TEST(simd_kernels_give_the_portable_bits);
	TEST(mxfp4_scales_at_their_ends_give_the_portable_bits);
	TEST(rounding_once_gives_the_same_bits);
	TEST(small_batches_give_each_token_its_bits);
	TEST(extreme_activations_stay_finite);
	TEST(kv_kernels_give_the_portable_bits_whatever_their_company);
	TEST(f32_values_give_the_portable_bits_whatever_their_company);
	TEST(softmax_and_silu_give_the_portable_bits);
	TEST(gelu_is_the_tanh_form);
	CHECK_EXIT();
}
