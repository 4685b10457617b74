/* pool.h: the persistent thread pool. */
#ifndef LLM_POOL_H
#define LLM_POOL_H

struct pool;

/* Work item: called once per thread, ith in [0, nth). */
typedef void (*pool_fn)(void *arg, int ith, int nth);

/* n_threads includes the caller; NULL on failure (llm_err()). */
struct pool *pool_create(int n_threads);
void pool_destroy(struct pool *p);
int pool_threads(const struct pool *p);

/* Run fn on every thread and wait for all; the caller is thread 0. */
void pool_run(struct pool *p, pool_fn fn, void *arg);

/*
 * Below this much work (multiply-adds, or their worth) a step runs on the
 * calling thread: a hand-off costs microseconds, more than the work
 * (stories260K's matrices, a decode step's norms), and far more when
 * another process holds a core.
 */
#define POOL_INLINE_WORK (1 << 16)
#define POOL_ROW_WORK 8		/* multiply-adds an element of a norm, a silu or a rounding is worth */

/* pool_run, or fn(arg, 0, 1) on the calling thread if work is below POOL_INLINE_WORK. */
void pool_run_work(struct pool *p, pool_fn fn, void *arg, long long work);

/* The online CPU count, at least 1. */
int pool_default_threads(void);

#endif
