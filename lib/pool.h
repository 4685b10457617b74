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

/* The online CPU count, at least 1. */
int pool_default_threads(void);

#endif
