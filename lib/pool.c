/*
 * pool.c: threads are created once and reused for every parallel
 * step.  A decode step dispatches a few hundred small matmuls, so a
 * dispatch must cost well under a microsecond: workers spin on a
 * generation counter for a while before they fall back to sleeping
 * on a condition variable.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "util.h"

#define SPIN_ITERATIONS (1 << 17)

struct worker {
	struct pool *pool;
	int ith;
	pthread_t tid;
};

struct pool {
	int nth;
	struct worker *workers;
	pool_fn fn;
	void *arg;
	atomic_uint gen;	/* bumped once per pool_run */
	atomic_int done;	/* workers finished with this gen */
	atomic_int quit;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void *
worker_main(void *v)
{
	struct worker *w = v;
	struct pool *p = w->pool;
	unsigned seen = 0, g;
	int i;

	for (;;) {
		for (i = 0; i < SPIN_ITERATIONS; i++) {
			if ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) != seen ||
			    atomic_load(&p->quit))
				break;
			cpu_relax();
		}
		if (i == SPIN_ITERATIONS) {
			pthread_mutex_lock(&p->mu);
			while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->quit))
				pthread_cond_wait(&p->cv, &p->mu);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->quit))
			return NULL;
		seen = g;
		p->fn(p->arg, w->ith, p->nth);
		atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
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
	for (i = 1; i < n_threads; i++) {
		p->workers[i].pool = p;
		p->workers[i].ith = i;
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
	if (!p || p->nth == 1) {
		fn(arg, 0, 1);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	fn(arg, 0, p->nth);
	while (atomic_load_explicit(&p->done, memory_order_acquire) < p->nth - 1)
		cpu_relax();
}

int
pool_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (int)n;
}
