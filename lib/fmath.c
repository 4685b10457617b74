/*
 * fmath.c: exp, log, pow, sin and cos in double, from additions,
 * multiplications and divisions alone (fmath.h says why).  Each reduces
 * its argument exactly, or nearly (sin and cos), to a small interval and
 * sums a Taylor series there by Horner's rule, with more terms than
 * double precision needs: simple to check, and fast enough for tables
 * made once and for a log-probability a token.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fmath.h"

/* ln 2 in two parts: the first with 32 bits, so n * LN2_HI is exact for |n| < 2^21 */
static const double LN2_HI = 6.93147180369123816490e-01;
static const double LN2_LO = 1.90821492927058770002e-10;

/* 2^k for -1022 <= k <= 1023, from its exponent bits */
static double
two_to(int k)
{
	uint64_t bits = (uint64_t)(k + 1023) << 52;
	double d;

	memcpy(&d, &bits, sizeof d);
	return d;
}

double
fmath_exp(double x)
{
	double n, r, p;
	int i;

	if (x != x)
		return x;
	if (x > 709.0)
		return HUGE_VAL;
	if (x < -708.0)
		return 0.0;
	/* x = n ln 2 + r, |r| <= ln 2 / 2; |n| < 2^11, so the rounding by 1.5 * 2^52 is exact */
	n = (x * 1.44269504088896338700 + 6755399441055744.0) - 6755399441055744.0;
	r = (x - n * LN2_HI) - n * LN2_LO;
	/* e^r = sum of r^i / i! to i = 16: the remainder is below 1e-19 */
	p = 1.0;
	for (i = 16; i >= 1; i--)
		p = 1.0 + p * r / i;
	return p * two_to((int)n);
}

double
fmath_log(double x)
{
	double m, s, s2, p;
	int k, i;

	if (x != x || x < 0)
		return NAN;
	if (x == 0)
		return -HUGE_VAL;
	if (x > DBL_MAX)
		return x;
	/* x = m 2^k with m in [sqrt(1/2), sqrt(2)): frexp is exact */
	m = frexp(x, &k);
	if (m < 0.70710678118654752440) {
		m *= 2;
		k--;
	}
	/* log m = 2 atanh s, s = (m - 1) / (m + 1), |s| < 0.172: the odd series to s^41 */
	s = (m - 1) / (m + 1);
	s2 = s * s;
	p = 0;
	for (i = 41; i >= 3; i -= 2)
		p = (p + 1.0 / i) * s2;
	p = 2 * s + 2 * s * p;
	return k * LN2_HI + (p + k * LN2_LO);
}

double
fmath_pow(double b, double e)
{
	return fmath_exp(e * fmath_log(b));
}

/*
 * pi / 2 in two parts, the first with its last 22 bits zero, so k * PIO2_HI
 * is exact for |k| < 2^22 (angles below about 6e6: RoPE's are positions
 * times frequencies of at most 1).  The two together are pi / 2 within
 * about 1e-27 relative, far below a float's precision.
 */
static const double PIO2_HI = 1.57079632673412561417e+00;
static const double PIO2_LO = 6.07710050650619224932e-11;

void
fmath_sincos(double x, double *s, double *c)
{
	double k, r, r2, ps, pc, t;
	int i, q;

	if (x != x || x > 1e15 || x < -1e15) {
		*s = *c = NAN;
		return;
	}
	k = (x * 0.63661977236758134308 + 6755399441055744.0) - 6755399441055744.0;
	r = (x - k * PIO2_HI) - k * PIO2_LO;	/* |r| <= pi / 4, nearly */
	r2 = r * r;
	/* sin r = r - r^3/3! + ... to r^25, cos r = 1 - r^2/2! + ... to r^26 */
	ps = 1.0, pc = 1.0;
	for (i = 25; i >= 3; i -= 2)
		ps = 1.0 - ps * r2 / (i * (i - 1));
	for (i = 26; i >= 2; i -= 2)
		pc = 1.0 - pc * r2 / (i * (i - 1));
	ps *= r;
	q = (int)fmod(k, 4.0);
	q = q < 0 ? q + 4 : q;
	switch (q) {
	case 0: *s = ps, *c = pc; break;
	case 1: *s = pc, *c = -ps; break;
	case 2: *s = -ps, *c = -pc; break;
	default: t = ps, *s = -pc, *c = t; break;
	}
}
