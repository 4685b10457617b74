/*
 * kernels.c: the kernels in use, and the rules they follow.  At start,
 * the best instruction set the processor and this build have (or another
 * it has that LLM_ISA names) gives its table (simd/simd.h); the portable
 * kernels below are the scalar set, take the shapes a set leaves, and
 * are the specification: every set gives exactly their bits, for every
 * weight type, cache type, batch size and thread count, so a result is
 * the same on every machine.  Nothing here depends on how a compiler
 * contracts a * b + c (the build says -ffp-contract=off, and every fused
 * multiply-add is written as one) or on a C library's elementary
 * functions (fmath.h).
 *
 * THE RULES, one an operation (PERFORMANCE.md repeats them):
 *
 * Products of float weights (f32, f16, bf16; kernels_gemm).  Output (r, t)
 * is a chain over k of 16 lanes: lane j of chunk c is fma(w[16c + j],
 * x[16c + j], acc[j]), acc[j] from +0, the last chunk's missing elements
 * zeros in both w and x; then the fixed tree sum16: lanes i and i + h
 * added for h = 8, 4, 2, 1.  f16 and bf16 widen to f32 exactly.  AVX-512
 * holds the 16 lanes in a vector, AVX2 in two (lanes 0-7 and 8-15).
 *
 * Products of block weights (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K to q6_K,
 * iq4_nl, iq4_xs, mxfp4): the integer rule.  x is rounded per block of 32 to int16
 * (round_x: amax = max |x|, taken as 0 below 1e-30; q = x * (32767 /
 * amax) rounded to nearest, ties to even, saturated; scale dx = amax /
 * 32767).  A weight block gives 32 int16 weights, a scale d and a
 * minimum m (iblock); its 32 products with x's integers are summed
 * exactly as an int32 s (modulo 2^32: no real block reaches it); the
 * output is the chain over blocks in order of o = fma((float)s, d * dx,
 * o) from +0.  Types with a minimum (q4_1, q5_1, q4_K, q5_K) add, after
 * it, a second chain over blocks of p = fma(m, xsum, p) from +0, xsum =
 * dx * (float)(the sum of x's integers): out = o + p; q2_K, a minimum a
 * half block, the chain over half blocks, xsum the sum of the half's
 * integers times dx.  The order in which a kernel adds integers is
 * free: integers add exactly.
 *
 * Softmax: x *= scale; max (with a sink's logit, if one); x =
 * fmath_expf(x - max); the sum by the float rule's 16 lanes and tree
 * (plain additions, zeros past the end), then a sink's fmath_expf(sink -
 * max) added; x / sum.  SiLU: x / (1 + fmath_expf(0 - max(x, -88))) * u.
 * GELU (tanh form): x / (1 + fmath_expf(-2 z)) * u, z = c (x + 0.044715
 * (x x) x), the identity 0.5 (1 + tanh z) = 1 / (1 + e^(-2z)).  gpt-oss's
 * clamped SwiGLU: x / (1 + fmath_expf(-(1.702 x))) * (y + 1), x =
 * min(g, 7), y = u clamped to [-7, 7].  Attention's value
 * sums: per output one chain of fma(att, v, o) over positions in order;
 * scores against quantized key groups: per position one chain over
 * channels of fma(q, d * quant, o), plus (q4_1) the chain of fma(q, m,
 * base), out = o + base.
 *
 * The rest of a pass (RMSNorm, RoPE, the value rotation, the sampler,
 * pooling) is plain C that every machine runs alike: a fixed order of
 * IEEE operations, RoPE's angles from fmath's sin and cos.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>		/* getauxval */
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>		/* sysctlbyname */
#endif

#include "fmath.h"
#include "gguf.h"
#include "kernels.h"
#include "quant.h"
#include "simd/simd.h"
#include "util.h"

#define f16_table quant_f16_table

/*
 * The kernels' scratch hangs off a pthread key, whose destructor frees it
 * when a thread exits: a pool's threads come and go with the pool, and a
 * _Thread_local pointer would leak its buffer each time.
 */
struct scratch {
	size_t cap;
	float pad[14];	/* buf starts a cache line in: a vector load never straddles two */
	float buf[];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

/* A key takes memory too: failing to make one is running out of it (util.h's policy). */
static void
scratch_make_key(void)
{
	if (pthread_key_create(&scratch_key, free) != 0)
		llm_out_of_memory(sizeof scratch_key);
}

float *
kernels_scratch(size_t n)
{
	struct scratch *s;

	pthread_once(&scratch_once, scratch_make_key);
	s = pthread_getspecific(scratch_key);
	if (!s || s->cap < n) {
		free(s);
		s = xaligned(64, sizeof *s + n * sizeof(float));
		if (pthread_setspecific(scratch_key, s) != 0)
			llm_out_of_memory(sizeof *s + n * sizeof(float));
		s->cap = n;
	}
	return s->buf;
}

/* ---- the portable set: the specification ---- */

/* The float rule's tree: 16 lanes halved four times (a is overwritten). */
static float
sum16(float *a)
{
	int h, i;

	for (h = 8; h >= 1; h /= 2)
		for (i = 0; i < h; i++)
			a[i] = a[i] + a[i + h];
	return a[0];
}

/* One output of the float rule: w and x of n elements. */
static float
dot_f32(const float *w, const float *x, int n)
{
	float acc[16] = { 0 };
	int k, j;

	for (k = 0; k < n; k += 16)
		for (j = 0; j < 16; j++)
			acc[j] = k + j < n ? fmaf(w[k + j], x[k + j], acc[j]) : fmaf(0.0f, 0.0f, acc[j]);
	return sum16(acc);
}

static int
is_float_type(uint32_t type)
{
	return type == GGML_F32 || type == GGML_F16 || type == GGML_BF16;
}

/* Tokens [t0, t1) of x rounded into xr's parts (kernels_rounded_parts), with the x sums that sums asks for. */
static void
scalar_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	float *dx, *xsum;
	int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	float *xsum16 = (float *)kernels_rounded_sums(xsum, T, cols, 2);
	int t, b, i, h, sum, nb = cols / 32;

	for (t = t0; t < t1; t++)
		for (b = 0; b < nb; b++) {
			int16_t *q = xq + (size_t)t * cols + 32 * b;
			float d = quant_round_block(x + (size_t)t * ldx + 32 * b, q);
			dx[(size_t)t * nb + b] = d;
			for (sum = 0, i = 0; sums && i < 32; i++)
				sum += q[i];
			if (sums & 1)
				xsum[(size_t)b * T + t] = d * (float)sum;
			for (h = 0; sums & 2 && h < 2; h++) {
				for (sum = 0, i = 16 * h; i < 16 * h + 16; i++)
					sum += q[i];
				xsum16[(size_t)(2 * b + h) * T + t] = d * (float)sum;
			}
		}
}

/* The exact integer sum of 32 products, modulo 2^32 as the vector lanes wrap. */
static int32_t
isum32(const int16_t *w, const int16_t *x)
{
	uint32_t s = 0;
	int i;

	for (i = 0; i < 32; i++)
		s += (uint32_t)((int32_t)w[i] * x[i]);
	return (int32_t)s;
}

/* The floats of scratch that a row's blocks take as quant_iblock gives them. */
static size_t
scalar_row_floats(int cols)
{
	return (size_t)cols / 2 + 3 * (size_t)(cols / 32);
}

/* scratch: scalar_row_floats(cols), where each row's blocks are read once for all T tokens. */
static void
scalar_gemm_rows(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo, float *scratch)
{
	int nb = cols / 32, r, t, b, h, nm = quant_has_min(type);
	float *dx, *xsum, o, p;
	const int16_t *xq = kernels_rounded_parts(xr, T, cols, &dx, &xsum);
	const float *xs = kernels_rounded_sums(xsum, T, cols, nm);
	float *d = scratch, *m = d + nb;
	int16_t *wq = (int16_t *)(m + 2 * nb);

	for (r = r0; r < r1; r++) {
		const char *row = (const char *)w + (size_t)r * row_bytes;
		for (b = 0; b < nb; b++)
			d[b] = quant_iblock(type, row, b, wq + 32 * b, m + 2 * b);
		for (t = 0; t < T; t++) {
			for (o = 0, p = 0, b = 0; b < nb; b++) {
				o = fmaf((float)isum32(wq + 32 * b, xq + (size_t)t * cols + 32 * b),
				    d[b] * dx[(size_t)t * nb + b], o);
				for (h = 0; h < nm; h++)
					p = fmaf(m[2 * b + h], xs[(size_t)(b * nm + h) * T + t], p);
			}
			out[(size_t)t * ldo + r] = nm ? o + p : o;
		}
	}
}

static void
scalar_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	scalar_gemm_rows(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo,
	    kernels_scratch(scalar_row_floats(cols)));
}

static void
scalar_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	int r, t;

	if (!is_float_type(type)) {
		size_t n = kernels_rounded_floats(T, cols);
		float *xr = kernels_scratch(n + scalar_row_floats(cols));
		scalar_round(x, ldx, 0, T, T, cols, xr, quant_has_min(type));
		scalar_gemm_rows(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo, xr + n);
		return;
	}
	float *row = kernels_scratch((size_t)cols);	/* freed when the thread ends */
	for (r = r0; r < r1; r++) {
		quant_dequant_row(type, (const char *)w + (size_t)r * row_bytes, row, (size_t)cols);
		for (t = 0; t < T; t++)
			out[(size_t)t * ldo + r] = dot_f32(row, x + (size_t)t * ldx, cols);
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
				o[d] = fmaf(att[(size_t)h * ld_att + t], v[(size_t)t * ld_v + d], o[d]);
	}
}

static void
scalar_softmax(float *x, int n, float scale, float sink)
{
	float max = -INFINITY, acc[16] = { 0 }, sum;
	int i;

	for (i = 0; i < n; i++) {
		x[i] *= scale;
		max = x[i] > max ? x[i] : max;
	}
	max = sink > max ? sink : max;
	for (i = 0; i < n; i++)
		x[i] = fmath_expf(x[i] - max);
	for (i = 0; i < (n + 15) / 16 * 16; i++)
		acc[i % 16] = acc[i % 16] + (i < n ? x[i] : 0.0f);
	sum = sum16(acc);
	if (sink > -INFINITY)	/* the sink's term, last */
		sum += fmath_expf(sink - max);
	for (i = 0; i < n; i++)
		x[i] /= sum;
}

static void
scalar_silu_mul(float *g, const float *u, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float x = g[i];
		g[i] = x / (1.0f + fmath_expf(0.0f - (x > -88.0f ? x : -88.0f))) * u[i];
	}
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
					base = fmaf(x, f16_table[b->m], base);
					for (j = 0; j < 16; j++) {
						acc[j] = fmaf(x, w * (float)(b->qs[j] & 0xf), acc[j]);
						acc[j + 16] = fmaf(x, w * (float)(b->qs[j] >> 4), acc[j + 16]);
					}
				} else {
					const struct block_q8_0 *b = (const void *)(grp + (size_t)c * bb);
					w = f16_table[b->d];
					for (j = 0; j < 32; j++)
						acc[j] = fmaf(x, w * (float)b->qs[j], acc[j]);
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
	float v;

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
					v = f16_table[((const uint16_t *)row)[e]];
				} else if (type == GGML_Q8_0) {
					const struct block_q8_0 *b = (const struct block_q8_0 *)row + e / 32;
					v = f16_table[b->d] * (float)b->qs[j];
				} else {
					const struct block_q4_0 *b = (const struct block_q4_0 *)row + e / 32;
					v = f16_table[b->d] *
					    (float)((j < 16 ? b->qs[j] & 0xf : b->qs[j - 16] >> 4) - 8);
				}
				o[i] = fmaf(a, v, o[i]);
			}
		}
	}
	return 1;
}

static int
scalar_rounds_x(uint32_t type)
{
	return !is_float_type(type);
}

static const struct kernels scalar = {
	.name = "scalar",
	.gemm = scalar_gemm,
	.rounds_x = scalar_rounds_x,
	.round = scalar_round,
	.gemm_rounded = scalar_gemm_rounded,
	.attn_values = scalar_attn_values,
	.softmax = scalar_softmax,
	.silu_mul = scalar_silu_mul,
	.group_scores = scalar_group_scores,
	.row_values = scalar_row_values,
};

/* ---- choosing a set ---- */

static const struct kernels *k = &scalar;
static int isa_in_use = KERNELS_SCALAR;

#if defined(__x86_64__) || defined(__i386__)
/* x86: what cpuid says the processor and the operating system support */
static int
cpu_has(int isa)
{
	unsigned a, b, c, d, xcr0_lo, xcr0_hi;
	int avx, avx2, avx512, vnni, amx;

	if (isa == KERNELS_SCALAR)
		return 1;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))	/* OSXSAVE */
		return 0;
	__asm__ volatile ("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	avx = (c & (1u << 28)) && (c & (1u << 12)) && (c & (1u << 29)) &&	/* AVX, FMA, F16C */
	    (xcr0_lo & 6) == 6;						/* XMM and YMM state */
	if (!avx || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	avx2 = (b & (1u << 5)) != 0;
	avx512 = avx2 && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) &&	/* F, BW, VL */
	    (xcr0_lo & 0xe0) == 0xe0;					/* opmask and ZMM state */
	vnni = avx512 && (c & (1u << 11)) != 0;				/* AVX512_VNNI */
	amx = vnni && (d & (1u << 24)) && (d & (1u << 25)) &&		/* AMX-TILE, AMX-INT8 */
	    (xcr0_lo & 0x60000) == 0x60000;				/* tile config and data */
	switch (isa) {
	case KERNELS_AVX2: return avx2;
	case KERNELS_AVX512: return avx512;
	case KERNELS_AVX512VNNI: return vnni;
	case KERNELS_AMX: return amx;
	}
	return 0;
}
#elif defined(__aarch64__)
/*
 * AArch64: NEON always; dotprod and i8mm as the operating system reports
 * them: Linux's auxiliary vector (HWCAP_ASIMDDP, HWCAP2_I8MM), macOS's
 * sysctl (hw.optional.arm.FEAT_DotProd, FEAT_I8MM).  Elsewhere (the
 * BSDs) NEON alone.
 */
static int
cpu_has(int isa)
{
	int dotprod = 0, i8mm = 0;

#if defined(__linux__)
	dotprod = (getauxval(AT_HWCAP) & (1ul << 20)) != 0;	/* HWCAP_ASIMDDP */
	i8mm = (getauxval(AT_HWCAP2) & (1ul << 13)) != 0;	/* HWCAP2_I8MM */
#elif defined(__APPLE__)
	int v;
	size_t n = sizeof v;
	dotprod = sysctlbyname("hw.optional.arm.FEAT_DotProd", &v, &n, NULL, 0) == 0 && v;
	n = sizeof v;
	i8mm = sysctlbyname("hw.optional.arm.FEAT_I8MM", &v, &n, NULL, 0) == 0 && v;
#endif
	switch (isa) {
	case KERNELS_SCALAR: case KERNELS_NEON: return 1;
	case KERNELS_DOTPROD: return dotprod;
	case KERNELS_I8MM: return dotprod && i8mm;
	}
	return 0;
}
#else
static int
cpu_has(int isa)
{
	return isa == KERNELS_SCALAR;
}
#endif

/* The table of a set; NULL if this build has none. */
static const struct kernels *
table(int isa)
{
	switch (isa) {
	case KERNELS_AVX2: return simd_avx2();
	case KERNELS_AVX512: return simd_avx512();
	case KERNELS_AVX512VNNI: return simd_avx512vnni();
	case KERNELS_AMX: return simd_amx();
	case KERNELS_NEON: return simd_neon();
	case KERNELS_DOTPROD: return simd_dotprod();
	case KERNELS_I8MM: return simd_i8mm();
	}
	return &scalar;
}

int
kernels_set_isa(int isa)
{
	if (isa < KERNELS_SCALAR || isa >= KERNELS_SETS || !cpu_has(isa) || !table(isa))
		return -1;
	isa_in_use = isa;
	k = table(isa);
	return 0;
}

void
kernels_init(void)
{
	static int done;
	const char *env;
	int isa;

	if (done)	/* once: a test's kernels_set_isa outlives the models it loads */
		return;
	done = 1;
	quant_init();
	/* the best this processor and build have: each architecture's sets come best last */
	for (isa = KERNELS_SETS - 1; isa > KERNELS_SCALAR && kernels_set_isa(isa) != 0; isa--)
		;
	if ((env = getenv("LLM_ISA")) != NULL)
		for (isa = KERNELS_SCALAR; isa < KERNELS_SETS; isa++)
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
	static const char *const names[KERNELS_SETS] = { "scalar", "avx2", "avx512", "avx512vnni", "amx",
		"neon", "dotprod", "i8mm" };

	return isa > KERNELS_SCALAR && isa < KERNELS_SETS ? names[isa] : names[0];
}

/* ---- the calls, through the set in use ---- */

void
kernels_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	k->gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
}

int
kernels_rounds_x(uint32_t type)
{
	return k->rounds_x(type);
}

int
kernels_rounds_once(uint32_t type)
{
	return kernels_rounds_x(type);
}

size_t
kernels_rounded_floats(int T, int cols)
{
	return simd_rounded_floats(T, cols);
}

void
kernels_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr, int sums)
{
	if (k->round)
		k->round(x, ldx, t0, t1, T, cols, xr, sums);
}

void
kernels_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
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
kernels_softmax(float *x, int n, float scale, float sink)
{
	k->softmax(x, n, scale, sink);
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
		float x = g[i], z = c * (x + 0.044715f * (x * x * x));
		g[i] = x / (1.0f + fmath_expf(-2.0f * z)) * u[i];
	}
}

void
kernels_swiglu_oai_mul(float *g, const float *u, size_t n)
{
	const float alpha = 1.702f, limit = 7.0f;

	for (size_t i = 0; i < n; i++) {
		/* std::min and std::clamp's forms: a NaN goes through */
		float x = limit < g[i] ? limit : g[i];
		float y = u[i] < -limit ? -limit : limit < u[i] ? limit : u[i];
		g[i] = x / (1.0f + fmath_expf(-(alpha * x))) * (y + 1.0f);
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
