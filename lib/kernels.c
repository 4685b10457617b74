/*
 * kernels.c: the kernels in use.  At start, the best instruction set the
 * processor and this build have (or a lower one LLM_ISA names) gives its
 * table (simd/simd.h); the portable kernels below are the scalar set and
 * take the shapes a set leaves.  Every kernel computes each output with
 * the same operations whatever its company, so a batch and one token at
 * a time agree bit for bit within a set; sets differ from each other in
 * their reduction trees, and so in the last bits.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "gguf.h"
#include "kernels.h"
#include "quant.h"
#include "simd/simd.h"
#include "util.h"

#define f16_table quant_f16_table

/* ---- the portable set ---- */

/*
 * The portable products follow the rule of gemm.inc with eight lanes:
 * each output is eight running sums over k, then a fixed tree.
 */
static void
scalar_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	float *row = quant_scratch((size_t)cols);	/* freed when the thread ends */
	int r, t, k, j;

	for (r = r0; r < r1; r++) {
		quant_dequant_row(type, (const char *)w + (size_t)r * row_bytes, row, (size_t)cols);
		for (t = 0; t < T; t++) {
			const float *xt = x + (size_t)t * ldx;
			float a[8] = { 0 };

			for (k = 0; k + 8 <= cols; k += 8)
				for (j = 0; j < 8; j++)
					a[j] += row[k + j] * xt[k + j];
			for (j = 0; k + j < cols; j++)
				a[j] += row[k + j] * xt[k + j];
			out[(size_t)t * ldo + r] = ((a[0] + a[4]) + (a[2] + a[6])) +
			    ((a[1] + a[5]) + (a[3] + a[7]));
		}
	}
}

static void
scalar_attn_values(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate)
{
	int h, t, d;

	for (h = 0; h < heads; h++) {
		float *o = out + (size_t)h * ld_out;
		if (!accumulate)
			memset(o, 0, (size_t)dim * sizeof *o);
		for (t = 0; t < n_pos; t++)
			for (d = 0; d < dim; d++)
				o[d] += att[(size_t)h * ld_att + t] * v[(size_t)t * ld_v + d];
	}
}

static void
scalar_softmax(float *x, int n, float scale)
{
	float max, sum = 0;
	int i;

	for (i = 0; i < n; i++)
		x[i] *= scale;
	for (max = x[0], i = 1; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (i = 0; i < n; i++) {
		x[i] = expf(x[i] - max);
		sum += x[i];
	}
	for (i = 0; i < n; i++)
		x[i] /= sum;
}

static void
scalar_silu_mul(float *g, const float *u, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/*
 * The attention kernels of the quantized KV cache.  Every output is one
 * chain in a fixed order, so a query gets the same bits whatever other
 * queries run with it.
 */
static void
scalar_group_scores(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out)
{
	size_t bb = q4 ? sizeof(struct block_q4_1) : sizeof(struct block_q8_0);
	float acc[32], base, w;
	int t, g, c, j;

	for (t = 0; t < T; t++)
		for (g = 0; g < n_groups; g++) {
			const char *grp = (const char *)groups + (size_t)g * group_bytes;
			base = 0;
			for (j = 0; j < 32; j++)
				acc[j] = 0;
			for (c = 0; c < dim; c++) {
				float x = q[(size_t)t * ldq + c];
				if (q4) {
					const struct block_q4_1 *b = (const void *)(grp + (size_t)c * bb);
					w = f16_table[b->d];	/* d * quant is exact */
					base += x * f16_table[b->m];
					for (j = 0; j < 16; j++) {
						acc[j] += x * (w * (float)(b->qs[j] & 0xf));
						acc[j + 16] += x * (w * (float)(b->qs[j] >> 4));
					}
				} else {
					const struct block_q8_0 *b = (const void *)(grp + (size_t)c * bb);
					w = f16_table[b->d];
					for (j = 0; j < 32; j++)
						acc[j] += x * (w * (float)b->qs[j]);
				}
			}
			for (j = 0; j < 32; j++)
				out[(size_t)t * ld_out + (size_t)g * 32 + j] = acc[j] + base;
		}
}

/* Element e of a row of quantized values (q8_0 or q4_0 blocks, or f16), scaled by w. */
static int
scalar_row_values(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out,
    int accumulate)
{
	int h, t, i, e, j;

	for (h = 0; h < heads; h++) {
		float *o = out + (size_t)h * ld_out;
		if (!accumulate)
			memset(o, 0, (size_t)dim * sizeof *o);
		for (t = 0; t < n_pos; t++) {
			const char *row = (const char *)rows + (size_t)t * row_bytes;
			float a = att[(size_t)h * ld_att + t];
			for (i = 0; i < dim; i++) {
				e = d0 + i, j = e % 32;
				if (type == GGML_F16) {
					o[i] += a * f16_table[((const uint16_t *)row)[e]];
				} else if (type == GGML_Q8_0) {
					const struct block_q8_0 *b = (const struct block_q8_0 *)row + e / 32;
					o[i] += a * (f16_table[b->d] * (float)b->qs[j]);
				} else {
					const struct block_q4_0 *b = (const struct block_q4_0 *)row + e / 32;
					o[i] += a * (f16_table[b->d] *
					    (float)((j < 16 ? b->qs[j] & 0xf : b->qs[j - 16] >> 4) - 8));
				}
			}
		}
	}
	return 1;
}

static int
scalar_rounds_x(uint32_t type)
{
	(void)type;
	return 0;
}

static const struct kernels scalar = {
	.name = "scalar",
	.gemm = scalar_gemm,
	.rounds_x = scalar_rounds_x,
	.attn_values = scalar_attn_values,
	.softmax = scalar_softmax,
	.silu_mul = scalar_silu_mul,
	.group_scores = scalar_group_scores,
	.row_values = scalar_row_values,
};

/* ---- choosing a set ---- */

static const struct kernels *k = &scalar;
static int isa_in_use = KERNELS_SCALAR;

/* What the processor and the operating system support. */
static int
cpu_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, xcr0_lo, xcr0_hi;
	int avx, avx2, avx512, vnni, amx;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))	/* OSXSAVE */
		return KERNELS_SCALAR;
	__asm__ volatile ("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	avx = (c & (1u << 28)) && (c & (1u << 12)) && (c & (1u << 29)) &&	/* AVX, FMA, F16C */
	    (xcr0_lo & 6) == 6;						/* XMM and YMM state */
	if (!avx || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return KERNELS_SCALAR;
	avx2 = (b & (1u << 5)) != 0;
	avx512 = avx2 && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) &&	/* F, BW, VL */
	    (xcr0_lo & 0xe0) == 0xe0;					/* opmask and ZMM state */
	vnni = avx512 && (c & (1u << 11)) != 0;				/* AVX512_VNNI */
	amx = vnni && (d & (1u << 24)) && (d & (1u << 25)) &&		/* AMX-TILE, AMX-INT8 */
	    (xcr0_lo & 0x60000) == 0x60000;				/* tile config and data */
	if (amx && simd_amx())
		return KERNELS_AMX;
	if (vnni && simd_avx512vnni())
		return KERNELS_AVX512VNNI;
	if (avx512 && simd_avx512())
		return KERNELS_AVX512;
	if (avx2 && simd_avx2())
		return KERNELS_AVX2;
#endif
	return KERNELS_SCALAR;
}

/* The table of a set; NULL if this build has none. */
static const struct kernels *
table(int isa)
{
	switch (isa) {
	case KERNELS_AVX2: return simd_avx2();
	case KERNELS_AVX512: return simd_avx512();
	case KERNELS_AVX512VNNI: return simd_avx512vnni();
	case KERNELS_AMX: return simd_amx();
	}
	return &scalar;
}

int
kernels_set_isa(int isa)
{
	if (isa < KERNELS_SCALAR || isa > cpu_isa() || !table(isa))
		return -1;
	isa_in_use = isa;
	k = table(isa);
	return 0;
}

void
kernels_init(void)
{
	const char *env;
	int isa;

	kernels_set_isa(cpu_isa());
	if ((env = getenv("LLM_ISA")) != NULL)
		for (isa = KERNELS_SCALAR; isa <= KERNELS_AMX; isa++)
			if (strcmp(env, kernels_isa_name(isa)) == 0)
				kernels_set_isa(isa);	/* ignored if the processor lacks it */
}

int
kernels_isa(void)
{
	return isa_in_use;
}

const char *
kernels_isa_name(int isa)
{
	return isa == KERNELS_AMX ? "amx" : isa == KERNELS_AVX512VNNI ? "avx512vnni" :
	    isa == KERNELS_AVX512 ? "avx512" : isa == KERNELS_AVX2 ? "avx2" : "scalar";
}

/* ---- the calls, through the set in use ---- */

void
quant_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	k->gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
}

int
quant_rounds_x(uint32_t type)
{
	return k->rounds_x(type);
}

int
quant_rounds_once(uint32_t type)
{
	return quant_rounds_x(type);
}

size_t
quant_rounded_floats(int T, int cols)
{
	size_t lanes = ((size_t)T + 15) / 16 * 16;

	/* quant_rounded_parts' parts, quant_rounded_lanes', and 16 floats to align them */
	return QUANT_LINES((size_t)T * cols / 2) + 2 * QUANT_LINES((size_t)T * (cols / 32)) +
	    lanes * (size_t)(cols / 2) + lanes * (size_t)(cols / 32) + 16;
}

void
quant_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr)
{
	if (k->round)
		k->round(x, ldx, t0, t1, T, cols, xr);
}

void
quant_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	if (k->gemm_rounded)
		k->gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
}

void
kernels_attn_values(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate)
{
	k->attn_values(n_pos, heads, att, ld_att, v, ld_v, dim, out, ld_out, accumulate);
}

void
kernels_softmax(float *x, int n, float scale)
{
	k->softmax(x, n, scale);
}

void
kernels_silu_mul(float *g, const float *u, size_t n)
{
	k->silu_mul(g, u, n);
}

void
kernels_gelu_mul(float *g, const float *u, size_t n)
{
	const float c = 0.7978845608028654f;	/* sqrt(2 / pi) */

	for (size_t i = 0; i < n; i++) {
		float x = g[i];
		g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
	}
}

void
kernels_group_scores(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out)
{
	k->group_scores(q4, groups, group_bytes, n_groups, dim, q, ldq, T, out, ld_out);
}

void
kernels_row_values(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out, int accumulate)
{
	/* the SIMD kernels take whole blocks; other shapes (heads of 8, say) go portable */
	if (!k->row_values(type, n_pos, heads, att, ld_att, rows, row_bytes, d0, dim, out, ld_out,
	    accumulate))
		scalar_row_values(type, n_pos, heads, att, ld_att, rows, row_bytes, d0, dim, out,
		    ld_out, accumulate);
}
