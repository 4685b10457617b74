/* rope.c: rotary position embeddings. */
#include <math.h>
#include <stdlib.h>

#include "fmath.h"
#include "rope.h"
#include "util.h"

int
rope_init(struct rope *r, int dim, int head_dim, int neox, float base, const float *factors)
{
	r->dim = dim;
	r->head_dim = head_dim;
	r->neox = neox;
	r->inv_freq = xcalloc((size_t)dim / 2, sizeof *r->inv_freq);
	r->mscale = 1;
	for (int i = 0; i < dim / 2; i++)
		r->inv_freq[i] = fmath_pow((double)base, -2.0 * i / dim) /
		    (factors ? (double)factors[i] : 1.0);
	return 0;
}

void
rope_free(struct rope *r)
{
	free(r->inv_freq);
	r->inv_freq = NULL;
}

void
rope_linear(struct rope *r, double factor)
{
	for (int i = 0; i < r->dim / 2; i++)
		r->inv_freq[i] /= factor;
}

/* The dimension whose wavelength is ctx / beta: 2 pi base^(2 d / dim) = ctx / beta. */
static double
yarn_dim(int dim, int ctx, double beta, double base)
{
	return dim * fmath_log(ctx / (beta * 6.283185307179586)) / (2 * fmath_log(base));
}

void
rope_yarn(struct rope *r, double base, double factor, int orig_ctx, double beta_fast,
    double beta_slow)
{
	double lo = yarn_dim(r->dim, orig_ctx, beta_fast, base);
	double hi = yarn_dim(r->dim, orig_ctx, beta_slow, base);

	lo = lo > 0 ? lo : 0;
	hi = hi < r->dim - 1 ? hi : r->dim - 1;
	if (hi - lo < 0.001)	/* as both implementations keep the ramp finite */
		hi = lo + 0.001;
	for (int i = 0; i < r->dim / 2; i++) {
		double ramp = (i - lo) / (hi - lo);
		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		r->inv_freq[i] = r->inv_freq[i] / factor * ramp + r->inv_freq[i] * (1 - ramp);
	}
	r->mscale = factor > 1 ? 0.1 * fmath_log(factor) + 1 : 1;
}

void
rope_angles(const struct rope *r, int pos, float *cs)
{
	for (int i = 0; i < r->dim / 2; i++) {
		double s, c;
		fmath_sincos(pos * r->inv_freq[i], &s, &c);
		cs[2 * i] = (float)(c * r->mscale);
		cs[2 * i + 1] = (float)(s * r->mscale);
	}
}

void
rope_rotate(const struct rope *r, float *vec, int n_heads, const float *cs)
{
	int h, i, half = r->dim / 2;

	for (i = 0; i < half; i++) {
		float co = cs[2 * i], sn = cs[2 * i + 1];
		int a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;

		for (h = 0; h < n_heads; h++) {
			float *p = vec + h * r->head_dim;
			float x0 = p[a], x1 = p[b];

			p[a] = x0 * co - x1 * sn;
			p[b] = x0 * sn + x1 * co;
		}
	}
}
