/*
 * fmath.h: the elementary functions whose bits are the same on every
 * machine, with every compiler.  A C library's expf, tanhf, powf, logf,
 * sinf and cosf (and their double forms) differ between libraries and
 * machines in their last bits, so no result of the library depends on
 * them: everything below is IEEE additions, multiplications, divisions
 * and explicit fused multiply-adds, each rounded as the standard says,
 * in an order written here once.
 *
 * fmath_expf is the exp of the kernels (softmax, SiLU, GELU, the
 * sampler): every kernel set computes it with these very operations
 * (EXP in each of lib/simd/'s files), lane by lane.  The double functions are for
 * tables and reports (RoPE's angles, log-probabilities), computed by one
 * thread in portable C.
 */
#ifndef LLM_FMATH_H
#define LLM_FMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/*
 * exp(x) as in Cephes: x clamped to [-87.3, 88] (a NaN becomes -87.3, as
 * the vector max and min instructions give), n = x log2(e) rounded to
 * the nearest integer, ties to even; r = x - n ln 2 in two steps (ln 2
 * as 0.693359375, exact in 9 bits, so n times it is exact, less
 * 2.12194440e-4); a degree-6 polynomial for e^r by Horner's rule; times
 * 2^n, made from its exponent bits.  Plain multiplications and additions,
 * no fused ones: portable C without an FMA instruction would call the C
 * library's fmaf for each (the sampler takes an exp a vocabulary entry).
 * Relative error about 2e-7.
 */
static inline float
fmath_expf(float x)
{
	float n, r, p, two_n;
	uint32_t bits;

	x = x > -87.3f ? x : -87.3f;
	x = x < 88.0f ? x : 88.0f;
	/* |x log2 e| < 2^22: adding and taking away 1.5 * 2^23 rounds it to an integer, ties to even */
	n = (x * 1.44269504089f + 12582912.0f) - 12582912.0f;
	r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + (r + 1.0f);
	bits = (uint32_t)((int32_t)n + 127) << 23;	/* -126 <= n <= 127 */
	memcpy(&two_n, &bits, sizeof two_n);
	return p * two_n;
}

/*
 * tanh(y): below |y| = 0.5 its Taylor series to y^15 (the next term is
 * under 1e-8 of it), by Horner's rule in y^2; above, 1 - 2 / (e^(2|y|) +
 * 1) with fmath_expf (no cancellation to speak of there); its sign y's.
 * Relative error about 2e-7.
 */
static inline float
fmath_tanhf(float y)
{
	float a = fabsf(y), a2, p, t;

	if (a < 0.5f) {
		a2 = a * a;
		p = -1.4558343871e-3f;
		p = p * a2 + 3.5921280366e-3f;
		p = p * a2 + -8.8632355299e-3f;
		p = p * a2 + 2.1869488536e-2f;
		p = p * a2 + -5.3968253968e-2f;
		p = p * a2 + 1.3333333333e-1f;
		p = p * a2 + -3.3333333333e-1f;
		t = a * a2 * p + a;
	} else {
		t = 1.0f - 2.0f / (fmath_expf(2.0f * a) + 1.0f);
	}
	return y < 0 ? -t : t;
}

/* e^x, log x (x > 0), b^e (b > 0) and sin and cos, in double, about 1e-15 relative. */
double fmath_exp(double x);
double fmath_log(double x);
double fmath_pow(double b, double e);
void fmath_sincos(double x, double *s, double *c);

#endif
