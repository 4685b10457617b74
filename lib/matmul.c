/*
 * matmul.c: the weight products of a forward pass, shared among the
 * threads.  The kernels (kernels.h) compute each output the same way
 * whoever computes it and whatever its company, so the schedule below
 * decides speed, never bits.
 *
 * Matrix products over one input batch X (T rows of ldx floats): each
 * weight matrix writes T output rows of ldo floats.  Threads split the
 * weight rows of all the matrices together.  One token's rows (and a
 * small batch's, up to SHARE_TOKENS) go a share a thread, each read
 * front to back as one stream, and a thread done
 * with its own takes halves of another's rest from the back: slices
 * claimed in turn broke the streams (decode 2-13% slower), and fixed
 * halves kept the calling thread waiting 7% of a decode.  A batch's go in
 * slices (multiples of 48 rows, about 8 a thread, or 2 for up to 64
 * tokens, down to 48 rows as the rows left run out) that the threads
 * claim in turn, so that a thread slowed by a neighbour does fewer of
 * them: with halves, a batch's two threads finished up to a quarter of
 * their time apart.
 *
 * A batch of GROUP_TOKENS tokens a thread or more is also split by
 * tokens, a group a thread, as the norms and the SwiGLU split it: a
 * thread claims the slices of its own group's rows first, then helps with
 * the others'.  So a thread mostly writes the outputs that its next norm
 * reads, and reads the inputs that its last norm wrote: with every thread
 * writing part of every token's outputs, the norms waited on the other
 * core's cache lines (6% of a 512-token f32 prompt on AVX2, now 0.7%).
 * The price is each weight read once a group instead of once: end to
 * end, avx512vnni f32 prompts of 512 tokens ran 6% faster, the others
 * within the noise.  Each output is computed the same way whoever
 * computes it.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "matmul.h"
#include "kernels.h"
#include "quant.h"
#include "util.h"

#define MAX_SHARES 64	/* threads that one token's shares or a batch's groups are for */
#define GROUP_TOKENS 32	/* a batch of this many a thread goes in a group of tokens a thread */
/*
 * Up to this many tokens are rounded on the calling thread: a hand-off
 * cost more than rounding 16 tokens (12% of a 16-sequence decode step's
 * products, then 4%).
 */
#define ROUND_INLINE 64
/*
 * Batches of up to this many tokens share their rows out as one token's
 * are: a routed expert's share of a prompt (Qwen3-30B-A3B's 128-token
 * prompt gives each of its 128 experts about 8), whose products wait on
 * memory where a claim's first rows come unfetched.
 */
#define SHARE_TOKENS 24

struct matmul_job {
	const struct matvec *mv;
	int n;
	const float *x;
	size_t ldx;
	const float *xr;	/* x rounded once, for the types that take it, or NULL */
	int sums;		/* whether xr needs the blocks' x sums (a type with a minimum) */
	size_t xr_group;	/* floats of xr a group's tokens take */
	int T;
	int groups;		/* a batch's groups of tokens: 1, or a thread's each */
	int total_rows;
	int slice;		/* rows a claim takes, for a batch */
	atomic_int next[MAX_SHARES];	/* each group's first row not yet claimed */
	_Atomic uint64_t share[MAX_SHARES];	/* one token: each thread's rows left, SHARE(lo, hi) */
};

#define SHARE(lo, hi) ((uint64_t)(uint32_t)(hi) << 32 | (uint32_t)(lo))

/* The first token of group g, and how many it has. */
static int
group_tokens(const struct matmul_job *job, int g, int *t0)
{
	*t0 = job->T * g / job->groups;
	return job->T * (g + 1) / job->groups - *t0;
}

/* Rows lo to hi of all the matrices together, for the tokens of group g. */
static void
matmul_rows(const struct matmul_job *job, int g, int lo, int hi)
{
	int i, t0, T = group_tokens(job, g, &t0), base = 0;

	for (i = 0; i < job->n && lo < hi; i++) {
		const struct weight *w = job->mv[i].w;
		float *out = job->mv[i].out + (size_t)t0 * job->mv[i].ldo;
		int r0 = lo > base ? lo - base : 0;
		int r1 = hi - base < w->rows ? hi - base : w->rows;

		if (r0 < r1 && job->xr && kernels_rounds_once(w->type))
			kernels_gemm_rounded(w->type, w->data, w->row_bytes, r0, r1, w->cols,
			    job->xr + job->xr_group * g, T, out, job->mv[i].ldo);
		else if (r0 < r1)
			kernels_gemm(w->type, w->data, w->row_bytes, r0, r1, w->cols,
			    job->x + (size_t)t0 * job->ldx, job->ldx, T, out, job->mv[i].ldo);
		base += w->rows;
	}
}

/*
 * One token, or a small batch: each thread takes its own share's rows
 * from the front, half of what is left at a time (at least 64 rows: a
 * part is a call, and 32 measured no better), in one stream (the tiles
 * prefetch into the next part), then halves of what others have left,
 * from the back.  Parts are multiples of 16 rows, whole decode tiles (8
 * rows, 16 for AVX-512's integer rule).
 */
static void
matvec_share(struct matmul_job *job, int ith, int nth)
{
	_Atomic uint64_t *share = &job->share[ith];
	uint64_t s = atomic_load_explicit(share, memory_order_relaxed);
	int lo, hi, size, mid, j;

	for (;;) {
		lo = (int)(uint32_t)s, hi = (int)(s >> 32);
		if (lo >= hi)
			break;
		size = (hi - lo) / 2 / 16 * 16;
		size = size < 64 ? 64 : size;
		size = size > hi - lo ? hi - lo : size;
		if (atomic_compare_exchange_weak_explicit(share, &s, SHARE(lo + size, hi),
		    memory_order_relaxed, memory_order_relaxed)) {
			matmul_rows(job, 0, lo, lo + size);
			s = atomic_load_explicit(share, memory_order_relaxed);
		}
	}
	for (j = 1; j < nth; j++) {
		share = &job->share[(ith + j) % nth];
		s = atomic_load_explicit(share, memory_order_relaxed);
		for (;;) {
			lo = (int)(uint32_t)s, hi = (int)(s >> 32);
			mid = lo + ((hi - lo) / 2 + 15) / 16 * 16;
			if (mid >= hi)
				break;
			if (atomic_compare_exchange_weak_explicit(share, &s, SHARE(lo, mid),
			    memory_order_relaxed, memory_order_relaxed)) {
				matmul_rows(job, 0, mid, hi);
				s = atomic_load_explicit(share, memory_order_relaxed);
			}
		}
	}
}

static void
matmul_worker(void *arg, int ith, int nth)
{
	struct matmul_job *job = arg;
	int lo, hi, j, g;

	if (job->T <= SHARE_TOKENS && nth == 1) {	/* run inline: the shares are set for the pool */
		matmul_rows(job, 0, 0, job->total_rows);
		return;
	}
	if (job->T <= SHARE_TOKENS && nth <= MAX_SHARES) {
		matvec_share(job, ith, nth);
		return;
	}
	for (j = 0; j < job->groups; j++) {	/* its own group first */
		g = (ith + j) % job->groups;
		lo = atomic_load_explicit(&job->next[g], memory_order_relaxed);
		while (lo < job->total_rows) {
			/* a share of what is left, smaller as it shrinks, so that the threads end together */
			int size = (job->total_rows - lo) / (2 * nth) / 48 * 48;

			size = size < 48 ? 48 : size > job->slice ? job->slice : size;
			hi = lo + size < job->total_rows ? lo + size : job->total_rows;
			if (atomic_compare_exchange_weak_explicit(&job->next[g], &lo, hi,
			    memory_order_relaxed, memory_order_relaxed)) {
				matmul_rows(job, g, lo, hi);
				lo = atomic_load_explicit(&job->next[g], memory_order_relaxed);
			}
		}
	}
}

/* The batch's tokens rounded into job->xr, a group's into its own part. */
static void
round_worker(void *arg, int ith, int nth)
{
	struct matmul_job *job = arg;
	int g, t0, T;

	if (job->groups == 1) {	/* the threads share the tokens out */
		kernels_round(job->x, job->ldx, job->T * ith / nth, job->T * (ith + 1) / nth, job->T,
		    job->mv[0].w->cols, (float *)job->xr, job->sums);
		return;
	}
	for (g = ith; g < job->groups; g += nth) {
		T = group_tokens(job, g, &t0);
		kernels_round(job->x + (size_t)t0 * job->ldx, job->ldx, 0, T, T, job->mv[0].w->cols,
		    (float *)job->xr + job->xr_group * g, job->sums);
	}
}

void
matmul(struct pool *pool, struct matmul_scratch *sc, const struct matvec *mv, int n,
    const float *x, size_t ldx, int T)
{
	struct matmul_job job = { .mv = mv, .n = n, .x = x, .ldx = ldx, .T = T, .groups = 1 };
	int i, cols = mv[0].w->cols, once = 0, nth = pool_threads(pool);

	if (nth > 1 && nth <= MAX_SHARES && T >= GROUP_TOKENS * nth)
		job.groups = nth;
	for (i = 0; i < job.groups; i++)
		atomic_init(&job.next[i], 0);
	for (i = 0; i < n; i++) {
		job.total_rows += mv[i].w->rows;
		once |= kernels_rounds_once(mv[i].w->type);
		job.sums |= quant_has_min(mv[i].w->type);
	}
	/*
	 * Products that round x take it rounded once, not once a claim:
	 * rounded in every claim, it took 13% of a q8_0 prompt, and one
	 * token's shares are claimed in parts.
	 */
	if (once) {
		size_t need;

		/* the groups' parts, each for the largest group */
		job.xr_group = kernels_rounded_floats((T + job.groups - 1) / job.groups, cols);
		need = job.xr_group * job.groups;
		if (need > sc->xr_floats) {
			free(sc->xr);
			sc->xr = xmalloc(need * sizeof *sc->xr);
			sc->xr_floats = need;
		}
		job.xr = sc->xr;
		pool_run_work(pool, round_worker, &job, T <= ROUND_INLINE ? 0 : (long long)T * cols * POOL_ROW_WORK);
	}
	for (i = 0; T <= SHARE_TOKENS && i < nth && nth <= MAX_SHARES; i++) {
		int lo = (int)((long long)job.total_rows * i / nth) / 16 * 16;
		int hi = i == nth - 1 ? job.total_rows : (int)((long long)job.total_rows * (i + 1) / nth) / 16 * 16;

		atomic_init(&job.share[i], SHARE(lo, hi));
	}
	/*
	 * About 8 claims a thread, in multiples of 48: whole tiles of 3, 4, 8
	 * or 48 rows.  Batches of up to 64 tokens (a decode step of many
	 * sequences) claim about 2: each claim's first rows come from memory
	 * unfetched, and a step's products are bound by reading the weights
	 * (decode steps of 16 sequences ran 3-7% faster).
	 */
	job.slice = job.total_rows / ((T <= 64 ? 2 : 8) * nth) / 48 * 48;
	if (job.slice < 48)
		job.slice = 48;
	pool_run_work(pool, matmul_worker, &job, (long long)job.total_rows * cols * T);
}

