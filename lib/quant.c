/*
 * quant.c: the weight types the forward pass reads directly from the
 * map.  Weights are never converted at load time; each kernel expands
 * a block as it multiplies, so the f32 copy never exists.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "gguf.h"
#include "quant.h"
#include "util.h"

/* f16 to f32 for every bit pattern; the SIMD kernels share it. */
float quant_f16_table[1 << 16];
#define f16_table quant_f16_table
/* A byte as a signed int, in float: the kernels' scales without an int-to-float conversion each. */
float quant_i8_table[256];

typedef void gemm_fn(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo);
gemm_fn quant_avx2_gemm, quant_avx512_gemm;
void quant_vnni_gemm_q8_0(const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo);
typedef void round_fn(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr);
round_fn quant_avx2_round, quant_vnni_round;
typedef void gemm_rounded_fn(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo);
gemm_rounded_fn quant_avx2_gemm_rounded, quant_vnni_gemm_rounded;
int quant_avx2_rounds_x(uint32_t type), quant_avx512_rounds_x(uint32_t type);
typedef void values_fn(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate);
values_fn quant_avx2_attn_values, quant_avx512_attn_values;
typedef void group_scores_fn(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out);
typedef int row_values_fn(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out, int accumulate);
group_scores_fn quant_avx2_group_scores, quant_avx512_group_scores;
row_values_fn quant_avx2_row_values, quant_avx512_row_values;
static group_scores_fn scalar_group_scores;
static group_scores_fn *group_scores_impl = scalar_group_scores;
static row_values_fn *row_values_impl;
static values_fn scalar_attn_values;
static values_fn *values_impl = scalar_attn_values;
typedef void silu_fn(float *g, const float *u, size_t n);
silu_fn quant_avx2_silu_mul, quant_avx512_silu_mul;
static silu_fn scalar_silu_mul;
static silu_fn *silu_impl = scalar_silu_mul;
typedef void softmax_fn(float *x, int n, float scale);
softmax_fn quant_avx2_softmax, quant_avx512_softmax;
static softmax_fn scalar_softmax;
static softmax_fn *softmax_impl = scalar_softmax;
extern int quant_avx2_built, quant_avx512_built, quant_vnni_built;
static gemm_fn scalar_gemm;
static gemm_fn *gemm_impl = scalar_gemm;
static int cpu_isa(void);
static int isa_in_use = QUANT_SCALAR;

float
f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t man = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13);	/* inf, NaN */
	} else if (exp == 0) {
		/* zero or subnormal: man * 2^-24 */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	} else {
		bits = sign | ((exp + 112) << 23) | (man << 13);
	}
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
f32_to_f16(float f)
{
	uint32_t x, sign, man;
	int32_t exp;
	uint16_t h;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000;
	exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff)		/* inf, NaN */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		/* subnormal in f16, round to nearest even */
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t half = 1u << (shift - 1);
		uint32_t rest = man & ((1u << shift) - 1);
		h = (uint16_t)(man >> shift);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	h = (uint16_t)(sign | ((uint32_t)exp << 10) | (man >> 13));
	/* round to nearest even; a carry into the exponent is correct */
	if ((man & 0x1fff) > 0x1000 || ((man & 0x1fff) == 0x1000 && (h & 1)))
		h++;
	return h;
}

float
bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

uint16_t
f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7fffffff) > 0x7f800000)	/* keep NaN a NaN */
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);	/* round to nearest even */
	return (uint16_t)(x >> 16);
}

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
quant_scratch(size_t n)
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

/*
 * The quantizers of the cache types, ggml's reference rules: q8_0 takes
 * d = max|x| / 127 and q = round(x / d); q4_0 takes d = m / -8, m the
 * value of largest magnitude, and q = x / d + 8 rounded, within 0..15.
 */
void
quant_quantize_q8_0(const float *x, struct block_q8_0 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * QK8_0;
		float amax = 0, d, id;

		for (j = 0; j < QK8_0; j++)
			if (fabsf(xb[j]) > amax)
				amax = fabsf(xb[j]);
		d = amax / 127;
		id = d ? 1 / d : 0;
		out[i].d = f32_to_f16(d);
		for (j = 0; j < QK8_0; j++)
			out[i].qs[j] = (int8_t)roundf(xb[j] * id);
	}
}

void
quant_quantize_q4_0(const float *x, struct block_q4_0 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * QK4_0;
		float m = 0, d, id;
		int q[QK4_0];

		for (j = 0; j < QK4_0; j++)
			if (fabsf(xb[j]) > fabsf(m))
				m = xb[j];
		d = m / -8;
		id = d ? 1 / d : 0;
		for (j = 0; j < QK4_0; j++) {
			int v = (int)(xb[j] * id + 8.5f);
			q[j] = v < 0 ? 0 : v > 15 ? 15 : v;
		}
		out[i].d = f32_to_f16(d);
		for (j = 0; j < QK4_0 / 2; j++)
			out[i].qs[j] = (uint8_t)(q[j] | q[j + QK4_0 / 2] << 4);
	}
}

void
quant_quantize_q4_1(const float *x, struct block_q4_1 *out, size_t nblocks)
{
	size_t i, j;

	for (i = 0; i < nblocks; i++) {
		const float *xb = x + i * 32;
		float lo = xb[0], hi = xb[0], d, id, m;
		int q[32];

		for (j = 1; j < 32; j++) {
			lo = xb[j] < lo ? xb[j] : lo;
			hi = xb[j] > hi ? xb[j] : hi;
		}
		/* the stored (f16) minimum and scale, so the rounding sees what dequantizing will */
		out[i].m = f32_to_f16(lo);
		m = f16_to_f32(out[i].m);
		d = (hi - m) / 15;
		out[i].d = f32_to_f16(d);
		d = f16_to_f32(out[i].d);
		id = d ? 1 / d : 0;
		for (j = 0; j < 32; j++) {
			int v = (int)((xb[j] - m) * id + 0.5f);
			q[j] = v < 0 ? 0 : v > 15 ? 15 : v;
		}
		for (j = 0; j < 16; j++)
			out[i].qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
	}
}

/*
 * The attention kernels of the quantized KV cache.  Portable versions;
 * each instruction set has its own (quant_simd.h), each exact within
 * itself.  Every output is one chain in a fixed order, so a query gets
 * the same bits whatever other queries run with it.
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
static void
scalar_row_values(int type, int n_pos, int heads, const float *att, size_t ld_att,
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
}

void
quant_group_scores(int q4, const void *groups, size_t group_bytes, int n_groups, int dim,
    const float *q, size_t ldq, int T, float *out, size_t ld_out)
{
	group_scores_impl(q4, groups, group_bytes, n_groups, dim, q, ldq, T, out, ld_out);
}

void
quant_row_values(uint32_t type, int n_pos, int heads, const float *att, size_t ld_att,
    const void *rows, size_t row_bytes, int d0, int dim, float *out, size_t ld_out, int accumulate)
{
	/* the SIMD kernels take whole blocks; other shapes (heads of 8, say) go portable */
	if (!row_values_impl || !row_values_impl(type, n_pos, heads, att, ld_att, rows, row_bytes,
	    d0, dim, out, ld_out, accumulate))
		scalar_row_values((int)type, n_pos, heads, att, ld_att, rows, row_bytes, d0, dim, out,
		    ld_out, accumulate);
}

void
quant_hadamard(float *x, size_t n, int r)
{
	float scale = 1 / sqrtf((float)r);
	size_t b;
	int h, i, j;

	for (b = 0; b + (size_t)r <= n; b += (size_t)r) {
		float *y = x + b;
		/* the fast Walsh-Hadamard butterflies, then the 1/sqrt(r) that makes it orthonormal */
		for (h = 1; h < r; h *= 2)
			for (i = 0; i < r; i += 2 * h)
				for (j = i; j < i + h; j++) {
					float a = y[j], c = y[j + h];
					y[j] = a + c;
					y[j + h] = a - c;
				}
		for (i = 0; i < r; i++)
			y[i] *= scale;
	}
}

void
quant_init(void)
{
	static int done;
	const char *env;
	uint32_t i;
	int isa;

	if (done)
		return;
	for (i = 0; i < (1u << 16); i++)
		f16_table[i] = f16_to_f32((uint16_t)i);
	for (i = 0; i < 256; i++)
		quant_i8_table[i] = (float)(int8_t)i;
	quant_set_isa(cpu_isa());
	if ((env = getenv("LLM_ISA")) != NULL)
		for (isa = QUANT_SCALAR; isa <= QUANT_AVX512VNNI; isa++)
			if (strcmp(env, quant_isa_name(isa)) == 0)
				quant_set_isa(isa);	/* ignored if the processor lacks it */
	done = 1;
}

int
quant_supported(uint32_t type)
{
	switch (type) {
	case GGML_F32: case GGML_F16: case GGML_BF16: case GGML_Q8_0:
	case GGML_Q4_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1:
	case GGML_Q4_K: case GGML_Q5_K: case GGML_Q6_K:
		return 1;
	}
	return 0;
}

const char *
quant_supported_list(void)
{
	return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K";
}

size_t
quant_row_bytes(uint32_t type, size_t n)
{
	const struct gguf_type_info *ti = gguf_type_info(type);

	return n / ti->block * ti->bytes;
}

/*
 * Each type's weights, exactly as ggml's dequantizers compute them:
 * products and sums in f32, left to right, each rounded.
 */
void
quant_dequant_chunk(uint32_t type, const void *row, int k, int n, float *out)
{
	const uint16_t *h = row;
	int i, j, off, sc, mn, g, l, shift;
	float d, m;

	switch (type) {
	case GGML_F32:
		memcpy(out, (const float *)row + k, (size_t)n * sizeof *out);
		return;
	case GGML_F16:
		for (i = 0; i < n; i++)
			out[i] = f16_table[h[k + i]];
		return;
	case GGML_BF16:
		for (i = 0; i < n; i++)
			out[i] = bf16_to_f32(h[k + i]);
		return;
	case GGML_Q8_0: {
		const struct block_q8_0 *b = (const struct block_q8_0 *)row + k / QK8_0;
		d = f16_table[b->d];
		for (i = 0, off = k % QK8_0; i < n; i++)
			out[i] = d * (float)b->qs[off + i];
		return;
	}
	case GGML_Q4_0: case GGML_Q4_1: {
		const struct block_q4_0 *b0 = (const struct block_q4_0 *)row + k / 32;
		const struct block_q4_1 *b1 = (const struct block_q4_1 *)row + k / 32;
		const uint8_t *qs = type == GGML_Q4_0 ? b0->qs : b1->qs;
		off = k % 32;
		for (i = 0; i < n; i++) {
			j = off + i;
			int q = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
			if (type == GGML_Q4_0)
				out[i] = f16_table[b0->d] * (float)(q - 8);
			else
				out[i] = f16_table[b1->d] * (float)q + f16_table[b1->m];
		}
		return;
	}
	case GGML_Q5_0: case GGML_Q5_1: {
		const struct block_q5_0 *b0 = (const struct block_q5_0 *)row + k / 32;
		const struct block_q5_1 *b1 = (const struct block_q5_1 *)row + k / 32;
		const uint8_t *qs = type == GGML_Q5_0 ? b0->qs : b1->qs;
		uint32_t qh;
		memcpy(&qh, type == GGML_Q5_0 ? b0->qh : b1->qh, 4);
		off = k % 32;
		for (i = 0; i < n; i++) {
			j = off + i;
			int q = (j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4) | (int)((qh >> j) & 1) << 4;
			if (type == GGML_Q5_0)
				out[i] = f16_table[b0->d] * (float)(q - 16);
			else
				out[i] = f16_table[b1->d] * (float)q + f16_table[b1->m];
		}
		return;
	}
	case GGML_Q4_K: case GGML_Q5_K: {
		const struct block_q4_K *b4 = (const struct block_q4_K *)row + k / QK_K;
		const struct block_q5_K *b5 = (const struct block_q5_K *)row + k / QK_K;
		const uint8_t *scales = type == GGML_Q4_K ? b4->scales : b5->scales;
		const uint8_t *qs = type == GGML_Q4_K ? b4->qs : b5->qs;
		uint16_t dd = type == GGML_Q4_K ? b4->d : b5->d, dm = type == GGML_Q4_K ? b4->dmin : b5->dmin;
		off = k % QK_K;
		j = off / 32;			/* sub-block */
		g = j / 2;			/* 64-weight group: its 32 bytes of qs */
		shift = (j % 2) * 4;		/* low nibbles first, then high */
		quant_k4_scale_min(j, scales, &sc, &mn);
		d = f16_table[dd] * (float)sc;
		m = f16_table[dm] * (float)mn;
		for (i = 0; i < n; i++) {
			l = off % 32 + i;
			int q = (qs[32 * g + l] >> shift) & 0xf;
			if (type == GGML_Q5_K)
				q |= ((b5->qh[l] >> j) & 1) << 4;
			out[i] = d * (float)q - m;
		}
		return;
	}
	case GGML_Q6_K: {
		const struct block_q6_K *b = (const struct block_q6_K *)row + k / QK_K;
		off = k % QK_K;
		int half = off / 128, quarter = off % 128 / 32;	/* which 32 of the half */
		const uint8_t *ql = b->ql + 64 * half + (quarter & 1) * 32;
		const uint8_t *qh = b->qh + 32 * half;
		d = f16_table[b->d] * (float)b->scales[off / 16];
		for (i = 0; i < n; i++) {
			l = off % 32 + i;
			int lo = quarter < 2 ? ql[l] & 0xf : ql[l] >> 4;
			int hi = (qh[l] >> (2 * quarter)) & 3;
			out[i] = d * (float)((lo | hi << 4) - 32);
		}
		return;
	}
	}
}

void
quant_dequant_row(uint32_t type, const void *row, float *out, size_t n)
{
	size_t k;

	if (type == GGML_F32) {
		memcpy(out, row, n * sizeof *out);
		return;
	}
	for (k = 0; k + 16 <= n; k += 16)
		quant_dequant_chunk(type, row, (int)k, 16, out + k);
	if (k < n)
		quant_dequant_chunk(type, row, (int)k, (int)(n - k), out + k);
}

/*
 * The portable kernel follows the rule of quant_simd.h with eight lanes:
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

void
quant_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	gemm_impl(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
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

void
quant_silu_mul(float *g, const float *u, size_t n)
{
	silu_impl(g, u, n);
}

void
quant_softmax(float *x, int n, float scale)
{
	softmax_impl(x, n, scale);
}

void
quant_attn_values(int n_pos, int heads, const float *att, size_t ld_att,
    const float *v, size_t ld_v, int dim, float *out, size_t ld_out, int accumulate)
{
	values_impl(n_pos, heads, att, ld_att, v, ld_v, dim, out, ld_out, accumulate);
}

/* avx512vnni: avx512's kernels, but q8_0 products by the block-sum rule */
static void
vnni_gemm(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *x, size_t ldx, int T, float *out, size_t ldo)
{
	if (type == GGML_Q8_0)
		quant_vnni_gemm_q8_0(w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
	else
		quant_avx512_gemm(type, w, row_bytes, r0, r1, cols, x, ldx, T, out, ldo);
}

/* What the processor and the operating system support. */
static int
cpu_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d, xcr0_lo, xcr0_hi;
	int avx, avx2, avx512, vnni;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))	/* OSXSAVE */
		return QUANT_SCALAR;
	__asm__ volatile ("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	avx = (c & (1u << 28)) && (c & (1u << 12)) && (c & (1u << 29)) &&	/* AVX, FMA, F16C */
	    (xcr0_lo & 6) == 6;						/* XMM and YMM state */
	if (!avx || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return QUANT_SCALAR;
	avx2 = (b & (1u << 5)) != 0;
	avx512 = avx2 && (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31)) &&	/* F, BW, VL */
	    (xcr0_lo & 0xe0) == 0xe0;					/* opmask and ZMM state */
	vnni = avx512 && (c & (1u << 11)) != 0;				/* AVX512_VNNI */
	if (vnni && quant_avx512_built && quant_vnni_built)
		return QUANT_AVX512VNNI;
	if (avx512 && quant_avx512_built)
		return QUANT_AVX512;
	if (avx2 && quant_avx2_built)
		return QUANT_AVX2;
#endif
	return QUANT_SCALAR;
}

int
quant_set_isa(int isa)
{
	if (isa < QUANT_SCALAR || isa > cpu_isa())
		return -1;
	isa_in_use = isa;
	gemm_impl = isa == QUANT_AVX512VNNI ? vnni_gemm : isa == QUANT_AVX512 ? quant_avx512_gemm :
	    isa == QUANT_AVX2 ? quant_avx2_gemm : scalar_gemm;
	values_impl = isa >= QUANT_AVX512 ? quant_avx512_attn_values :
	    isa == QUANT_AVX2 ? quant_avx2_attn_values : scalar_attn_values;
	silu_impl = isa >= QUANT_AVX512 ? quant_avx512_silu_mul :
	    isa == QUANT_AVX2 ? quant_avx2_silu_mul : scalar_silu_mul;
	softmax_impl = isa >= QUANT_AVX512 ? quant_avx512_softmax :
	    isa == QUANT_AVX2 ? quant_avx2_softmax : scalar_softmax;
	group_scores_impl = isa >= QUANT_AVX512 ? quant_avx512_group_scores :
	    isa == QUANT_AVX2 ? quant_avx2_group_scores : scalar_group_scores;
	row_values_impl = isa >= QUANT_AVX512 ? quant_avx512_row_values :
	    isa == QUANT_AVX2 ? quant_avx2_row_values : NULL;
	return 0;
}

int
quant_rounds_x(uint32_t type)
{
	if (isa_in_use == QUANT_AVX512VNNI && type == GGML_Q8_0)
		return 1;
	return isa_in_use >= QUANT_AVX512 ? quant_avx512_rounds_x(type) :
	    isa_in_use == QUANT_AVX2 ? quant_avx2_rounds_x(type) : 0;
}

int
quant_rounds_once(uint32_t type)
{
	return quant_rounds_x(type);
}

size_t
quant_rounded_floats(int T, int cols)
{
	/* quant_rounded_parts' parts, and 16 floats to align them */
	return QUANT_LINES((size_t)T * cols / 2) + 2 * QUANT_LINES((size_t)T * (cols / 32)) + 16;
}

void
quant_round(const float *x, size_t ldx, int t0, int t1, int T, int cols, float *xr)
{
	if (isa_in_use == QUANT_AVX512VNNI)
		quant_vnni_round(x, ldx, t0, t1, T, cols, xr);
	else if (isa_in_use == QUANT_AVX2)
		quant_avx2_round(x, ldx, t0, t1, T, cols, xr);
}

void
quant_gemm_rounded(uint32_t type, const void *w, size_t row_bytes, int r0, int r1, int cols,
    const float *xr, int T, float *out, size_t ldo)
{
	if (isa_in_use == QUANT_AVX512VNNI)	/* q8_0, the one type it rounds */
		quant_vnni_gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
	else if (isa_in_use == QUANT_AVX2)
		quant_avx2_gemm_rounded(type, w, row_bytes, r0, r1, cols, xr, T, out, ldo);
}

int
quant_isa(void)
{
	return isa_in_use;
}

const char *
quant_isa_name(int isa)
{
	return isa == QUANT_AVX512VNNI ? "avx512vnni" : isa == QUANT_AVX512 ? "avx512" :
	    isa == QUANT_AVX2 ? "avx2" : "scalar";
}
