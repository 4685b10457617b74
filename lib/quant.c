/*
 * quant.c: the weight types the forward pass reads directly from the
 * map.  Weights are never converted at load time; each kernel expands
 * a block as it multiplies, so the f32 copy never exists.
 */
#include <math.h>
#include <string.h>

#include "gguf.h"
#include "quant.h"

static float f16_table[1 << 16];

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

void
quant_init(void)
{
	static int done;
	uint32_t i;

	if (done)
		return;
	for (i = 0; i < (1u << 16); i++)
		f16_table[i] = f16_to_f32((uint16_t)i);
	done = 1;
}

int
quant_supported(uint32_t type)
{
	switch (type) {
	case GGML_F32: case GGML_F16: case GGML_BF16: case GGML_Q8_0:
		return 1;
	}
	return 0;
}

const char *
quant_supported_list(void)
{
	return "f32, f16, bf16, q8_0";
}

size_t
quant_row_bytes(uint32_t type, size_t n)
{
	const struct gguf_type_info *ti = gguf_type_info(type);

	return n / ti->block * ti->bytes;
}

void
quant_dequant_row(uint32_t type, const void *row, float *out, size_t n)
{
	const struct block_q8_0 *b;
	const uint16_t *h;
	size_t i, j;
	float d;

	switch (type) {
	case GGML_F32:
		memcpy(out, row, n * sizeof *out);
		break;
	case GGML_F16:
		h = row;
		for (i = 0; i < n; i++)
			out[i] = f16_table[h[i]];
		break;
	case GGML_BF16:
		h = row;
		for (i = 0; i < n; i++)
			out[i] = bf16_to_f32(h[i]);
		break;
	case GGML_Q8_0:
		b = row;
		for (i = 0; i < n / QK8_0; i++) {
			d = f16_table[b[i].d];
			for (j = 0; j < QK8_0; j++)
				out[i * QK8_0 + j] = d * b[i].qs[j];
		}
		break;
	}
}

/*
 * The kernels keep eight partial sums so the compiler can keep them
 * in vector lanes; the summation order is fixed, so results do not
 * depend on threads or on how the cache grew.
 */
static float
dot_f32(const float *w, const float *x, size_t n)
{
	float s[8] = { 0 };
	size_t i, j;

	for (i = 0; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			s[j] += w[i + j] * x[i + j];
	for (; i < n; i++)
		s[0] += w[i] * x[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float
dot_f16(const uint16_t *w, const float *x, size_t n)
{
	float s[8] = { 0 };
	size_t i, j;

	for (i = 0; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			s[j] += f16_table[w[i + j]] * x[i + j];
	for (; i < n; i++)
		s[0] += f16_table[w[i]] * x[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float
dot_bf16(const uint16_t *w, const float *x, size_t n)
{
	float s[8] = { 0 };
	size_t i, j;

	for (i = 0; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			s[j] += bf16_to_f32(w[i + j]) * x[i + j];
	for (; i < n; i++)
		s[0] += bf16_to_f32(w[i]) * x[i];
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static float
dot_q8_0(const struct block_q8_0 *b, const float *x, size_t n)
{
	float sum = 0;
	size_t i, j;

	for (i = 0; i < n / QK8_0; i++, x += QK8_0) {
		float s[8] = { 0 };

		for (j = 0; j < QK8_0; j += 8) {
			s[0] += b[i].qs[j + 0] * x[j + 0];
			s[1] += b[i].qs[j + 1] * x[j + 1];
			s[2] += b[i].qs[j + 2] * x[j + 2];
			s[3] += b[i].qs[j + 3] * x[j + 3];
			s[4] += b[i].qs[j + 4] * x[j + 4];
			s[5] += b[i].qs[j + 5] * x[j + 5];
			s[6] += b[i].qs[j + 6] * x[j + 6];
			s[7] += b[i].qs[j + 7] * x[j + 7];
		}
		sum += f16_table[b[i].d] *
		    (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
	}
	return sum;
}

float
quant_dot_row(uint32_t type, const void *row, const float *x, size_t n)
{
	switch (type) {
	case GGML_F32:  return dot_f32(row, x, n);
	case GGML_F16:  return dot_f16(row, x, n);
	case GGML_BF16: return dot_bf16(row, x, n);
	case GGML_Q8_0: return dot_q8_0(row, x, n);
	}
	return NAN;
}
