/* matmul.h: products of weight matrices with a batch, on the thread pool. */
#ifndef LLM_MATMUL_H
#define LLM_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

/* A weight matrix as it lies in the map: rows of cols, in its file type. */
struct weight {
	const void *data;
	uint32_t type;
	int rows, cols;
	size_t row_bytes;
};

/* One product of a batch: out[t * ldo + r] = w[r] . x[t]. */
struct matvec {
	float *out;
	size_t ldo;
	const struct weight *w;
};

/* A run's scratch for the products: x rounded once (kernels_round), grown when first needed. */
struct matmul_scratch {
	float *xr;
	size_t xr_floats;
};

/*
 * The n products mv[i] of the same input batch x (T rows of ldx floats,
 * each as wide as the matrices' cols), the threads sharing the rows of
 * all the matrices together.  Bitwise the same whatever the threads and T.
 */
void matmul(struct pool *pool, struct matmul_scratch *s, const struct matvec *mv, int n,
    const float *x, size_t ldx, int T);

#endif
