/*
 * sample.c: choosing the next token.  The RNG is our own (splitmix64
 * seeding a xorshift64*), so a seed gives the same tokens on every
 * libc and machine.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmath.h"
#include "sample.h"
#include "util.h"

static uint64_t
splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t
rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* A uniform float in [0, 1) with 24 random bits. */
static float
rng_float(uint64_t *s)
{
	return (float)(rng_next(s) >> 40) / 16777216.0f;
}

void
sampler_init(struct sampler *s, int vocab, float temp, int top_k, float top_p, uint64_t seed)
{
	s->vocab = vocab;
	s->temp = temp;
	s->top_k = top_k < 0 || top_k > vocab ? 0 : top_k;
	s->top_p = top_p;
	s->rng = splitmix64(&seed);
	if (s->rng == 0)
		s->rng = 1;	/* xorshift must not start at zero */
	s->cand = xcalloc((size_t)vocab, sizeof *s->cand);
	s->min_p = 0;
	s->penalty = 1;
	s->last_n = 0;
	s->hist = NULL;
	s->seen = NULL;
	s->n_hist = 0;
}

void
sampler_controls(struct sampler *s, float min_p, float penalty, int last_n)
{
	s->min_p = min_p;
	s->penalty = penalty;
	s->last_n = penalty != 1 && last_n > 0 ? last_n : 0;
	free(s->hist);
	free(s->seen);
	s->hist = s->last_n ? xcalloc((size_t)s->last_n, sizeof *s->hist) : NULL;
	s->seen = s->last_n ? xcalloc((size_t)s->vocab, 1) : NULL;
	s->n_hist = 0;
}

void
sampler_accept(struct sampler *s, int id)
{
	if (s->last_n)
		s->hist[s->n_hist++ % s->last_n] = id;
}

void
sampler_free(struct sampler *s)
{
	free(s->cand);
	free(s->hist);
	free(s->seen);
	s->cand = NULL;
	s->hist = NULL;
	s->seen = NULL;
}

/* The repeat penalty, once for each token among the newest last_n, as llama.cpp applies it. */
static void
penalize(struct sampler *s, float *logits)
{
	long n = s->n_hist < s->last_n ? s->n_hist : s->last_n, i;

	for (i = 0; i < n; i++) {
		int id = s->hist[i];
		if (id < 0 || id >= s->vocab || s->seen[id])
			continue;	/* a token once, however often it came */
		s->seen[id] = 1;
		logits[id] = logits[id] <= 0 ? logits[id] * s->penalty : logits[id] / s->penalty;
	}
	for (i = 0; i < n; i++)
		if (s->hist[i] >= 0 && s->hist[i] < s->vocab)
			s->seen[s->hist[i]] = 0;
}

/*
 * The first index of the largest value (NaNs passed over, and 0 if x[0]
 * is one), in eight lanes side by side: one running best was a compare
 * and a dependent move a value, 6% of a decode step of 16 sequences.
 * Each lane starts at x[0] and keeps the first index of its largest, so
 * the lanes' best, ties to the lowest index, is the one a single pass
 * finds.  GCC and clang take the lanes as a vector (their extension).
 */
int
argmax(const float *x, int n)
{
	float m[8];
	int at[8], i = 0, j, best = 0;
#if defined(__GNUC__)
	typedef float f4 __attribute__((vector_size(16)));	/* SSE2's and NEON's width */
	typedef int i4 __attribute__((vector_size(16)));
	f4 m0, m1, v0, v1;
	i4 a0 = { 0 }, a1 = { 0 }, idx = { 0, 1, 2, 3 }, g0, g1;

	for (j = 0; j < 4; j++)
		m0[j] = m1[j] = x[0];
	for (; i + 8 <= n; i += 8, idx += 8) {
		memcpy(&v0, x + i, sizeof v0);
		memcpy(&v1, x + i + 4, sizeof v1);
		g0 = v0 > m0;
		g1 = v1 > m1;
		m0 = (f4)(((i4)v0 & g0) | ((i4)m0 & ~g0));
		m1 = (f4)(((i4)v1 & g1) | ((i4)m1 & ~g1));
		a0 = (idx & g0) | (a0 & ~g0);
		a1 = ((idx + 4) & g1) | (a1 & ~g1);
	}
	for (j = 0; j < 4; j++)
		m[j] = m0[j], at[j] = a0[j], m[4 + j] = m1[j], at[4 + j] = a1[j];
#else
	for (j = 0; j < 8; j++)
		m[j] = x[0], at[j] = 0;
	for (; i + 8 <= n; i += 8)
		for (j = 0; j < 8; j++)
			if (x[i + j] > m[j])
				m[j] = x[i + j], at[j] = i + j;
#endif
	for (; i < n; i++)
		if (x[i] > m[0])
			m[0] = x[i], at[0] = i;
	for (j = 0; j < 8; j++)
		if (m[j] > x[best] || (m[j] == x[best] && at[j] < best))
			best = at[j];
	return best;
}

double
log_prob(const float *logits, int n, int id)
{
	double max = logits[argmax(logits, n)], sum = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += fmath_exp((double)logits[i] - max);
	return (double)logits[id] - max - fmath_log(sum);
}

static int
by_prob_desc(const void *a, const void *b)
{
	const struct prob_id *x = a, *y = b;

	if (x->p != y->p)
		return x->p < y->p ? 1 : -1;
	return x->id - y->id;	/* a total order: results do not depend on qsort */
}

/* Keep the k most likely candidates at the front, in order (min-heap select). */
static int
select_top_k(struct prob_id *c, int n, int k)
{
	int i, j, child;
	struct prob_id t;

	/* c[0..k) is a min-heap by (p, -id); scan the rest. */
	for (i = k / 2 - 1; i >= 0; i--)
		for (j = i; (child = 2 * j + 1) < k; j = child) {
			if (child + 1 < k && by_prob_desc(&c[child + 1], &c[child]) > 0)
				child++;
			if (by_prob_desc(&c[child], &c[j]) <= 0)
				break;
			t = c[j], c[j] = c[child], c[child] = t;
		}
	for (i = k; i < n; i++) {
		if (by_prob_desc(&c[i], &c[0]) >= 0)
			continue;
		c[0] = c[i];
		for (j = 0; (child = 2 * j + 1) < k; j = child) {
			if (child + 1 < k && by_prob_desc(&c[child + 1], &c[child]) > 0)
				child++;
			if (by_prob_desc(&c[child], &c[j]) <= 0)
				break;
			t = c[j], c[j] = c[child], c[child] = t;
		}
	}
	qsort(c, (size_t)k, sizeof *c, by_prob_desc);
	return k;
}

int
sampler_sample(struct sampler *s, float *logits)
{
	struct prob_id *c = s->cand;
	float max, sum = 0, cum, r;
	int i, n = s->vocab;

	if (s->last_n)
		penalize(s, logits);
	if (s->temp <= 0)
		return argmax(logits, n);

	max = logits[argmax(logits, n)];
	/* min-p on the logits as they are (llama.cpp's: before the temperature) */
	float floor = s->min_p > 0 ? max + (float)fmath_log(s->min_p) : -INFINITY;
	for (i = 0; i < n; i++) {
		c[i].id = i;
		float z = (logits[i] - max) / s->temp;
		/* fmath_expf stops at e^-87.3; below it, 0 (e^-87.3 is 1e-38 of the largest) */
		c[i].p = z < -87.3f || logits[i] < floor ? 0.0f : fmath_expf(z);
		sum += c[i].p;
	}
	for (i = 0; i < n; i++)
		c[i].p /= sum;

	if (s->top_k > 0)
		n = select_top_k(c, n, s->top_k);
	else
		qsort(c, (size_t)n, sizeof *c, by_prob_desc);

	/* top-p: the smallest prefix whose mass reaches top_p (0: the first alone). */
	if (s->top_p < 1) {
		cum = 0;
		for (i = 0; i < n; i++) {
			cum += c[i].p;
			if (cum >= s->top_p) {
				n = i + 1;
				break;
			}
		}
	}
	sum = 0;
	for (i = 0; i < n; i++)
		sum += c[i].p;
	r = rng_float(&s->rng) * sum;
	cum = 0;
	for (i = 0; i < n; i++) {
		cum += c[i].p;
		if (r < cum)
			return c[i].id;
	}
	return c[n - 1].id;	/* rounding left r at the very top */
}
