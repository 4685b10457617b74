/*
 * pool.c: threads are created once and reused for every parallel
 * step.  A decode step dispatches a few hundred small jobs, so a
 * dispatch must cost well under a microsecond when the cores are free,
 * and must not collapse when they are not.
 *
 * A job is nth chunks, fn(arg, ith, nth) for each ith, and any thread
 * may run any chunk: each takes the next unclaimed one until none is
 * left.  The caller takes chunks too, so a worker that the scheduler has
 * not run yet (another process holds its core) costs nothing: its
 * chunks are done by whoever is running, and the caller waits only for
 * chunks already started.  A chunk does the same work whichever thread
 * runs it, so results never depend on the scheduling.
 *
 * The job's generation and its next chunk share one atomic word, so a
 * thread that wakes late can only claim a chunk of the job that is
 * current when it claims.  Workers spin briefly (about 50-100 us) for
 * the next job, then block on a condition variable; the caller only
 * takes the lock to wake them when one is asleep.  The caller waits for
 * started chunks by spinning briefly, then yielding its core.
 */
#if defined(__linux__)
#define _GNU_SOURCE	/* sched_getaffinity, CPU_COUNT: glibc and musl */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "util.h"

#define WORKER_SPIN (1 << 11)	/* pauses before a worker sleeps */
#define CALLER_SPIN (1 << 10)	/* pauses before the caller yields */

struct worker {
	struct pool *pool;
	pthread_t tid;
};

struct pool {
	int nth;
	struct worker *workers;
	_Atomic(pool_fn) fn;
	_Atomic(void *) arg;
	_Atomic uint64_t state;	/* generation << 32 | next chunk to claim */
	atomic_int finished;	/* chunks of the current job done */
	atomic_int sleepers;	/* workers blocked on cv */
	atomic_int quit;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile ("yield");
#endif
}

/*
 * Claim and run chunks of the job of generation gen while any are left;
 * how many were run.  A failed claim means the chunks are gone or a newer
 * job is current: either way this job needs nothing more from us.
 */
static int
run_chunks(struct pool *p, uint32_t gen)
{
	uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
	pool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
	void *arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
	int ran = 0;

	while ((uint32_t)(s >> 32) == gen && (int)(uint32_t)s < p->nth) {
		/* fn and arg are those of gen: a newer job is published only after this one ends */
		if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1,
		    memory_order_acq_rel, memory_order_acquire))
			continue;
		fn(arg, (int)(uint32_t)s, p->nth);
		atomic_fetch_add_explicit(&p->finished, 1, memory_order_release);
		ran++;
		s++;
	}
	return ran;
}

static void *
worker_main(void *v)
{
	struct worker *w = v;
	struct pool *p = w->pool;
	uint32_t seen = 0, g;
	int i;

	for (;;) {
		for (i = 0; i < WORKER_SPIN; i++) {
			g = (uint32_t)(atomic_load_explicit(&p->state, memory_order_acquire) >> 32);
			if (g != seen || atomic_load_explicit(&p->quit, memory_order_relaxed))
				break;
			cpu_relax();
		}
		if (i == WORKER_SPIN) {
			pthread_mutex_lock(&p->mu);
			atomic_fetch_add(&p->sleepers, 1);
			while ((g = (uint32_t)(atomic_load(&p->state) >> 32)) == seen &&
			    !atomic_load(&p->quit))
				pthread_cond_wait(&p->cv, &p->mu);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->quit))
			return NULL;
		seen = g;
		run_chunks(p, g);
	}
}

struct pool *
pool_create(int n_threads)
{
	struct pool *p;
	int i;

	if (n_threads < 1)
		n_threads = 1;
	p = xcalloc(1, sizeof *p);
	p->nth = n_threads;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->workers = xcalloc((size_t)n_threads, sizeof *p->workers);
	/* no job yet: generation 0 with its chunks all claimed */
	atomic_store(&p->state, (uint64_t)(uint32_t)n_threads);
	for (i = 1; i < n_threads; i++) {
		p->workers[i].pool = p;
		if (pthread_create(&p->workers[i].tid, NULL, worker_main, &p->workers[i])) {
			p->nth = i;	/* destroy joins only those started */
			pool_destroy(p);
			llm_seterr("cannot create thread %d", i);
			return NULL;
		}
	}
	return p;
}

void
pool_destroy(struct pool *p)
{
	int i;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->quit, 1);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (i = 1; i < p->nth; i++)
		pthread_join(p->workers[i].tid, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->workers);
	free(p);
}

int
pool_threads(const struct pool *p)
{
	return p ? p->nth : 1;
}

void
pool_run(struct pool *p, pool_fn fn, void *arg)
{
	uint32_t gen;
	int i;

	if (!p || p->nth == 1) {
		fn(arg, 0, 1);
		return;
	}
	/* The previous job has ended: every chunk claimed and finished. */
	atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
	atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
	atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
	gen = (uint32_t)(atomic_load_explicit(&p->state, memory_order_relaxed) >> 32) + 1;
	atomic_store(&p->state, (uint64_t)gen << 32);	/* seq_cst: ordered before the sleepers load */
	if (atomic_load(&p->sleepers) > 0) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	run_chunks(p, gen);
	/* Only chunks that others started are left to wait for. */
	for (i = 0; atomic_load_explicit(&p->finished, memory_order_acquire) < p->nth; i++) {
		if (i < CALLER_SPIN)
			cpu_relax();
		else
			sched_yield();
	}
}

void
pool_run_work(struct pool *p, pool_fn fn, void *arg, long long work)
{
	if (work < POOL_INLINE_WORK)
		fn(arg, 0, 1);
	else
		pool_run(p, fn, arg);
}

int
pool_default_threads(void)
{
	long n;

#if defined(__linux__)
	/* Linux: the CPUs this process may run on (taskset, cgroups' cpusets), not all online */
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
#endif
	/* elsewhere (macOS, the BSDs), POSIX's count of the processors online */
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : (int)n;
}
