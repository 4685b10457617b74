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
rope_angles(const struct rope *r, int pos, float *cs)
{
	for (int i = 0; i < r->dim / 2; i++) {
		double s, c;
		fmath_sincos(pos * r->inv_freq[i], &s, &c);
		cs[2 * i] = (float)c;
		cs[2 * i + 1] = (float)s;
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
