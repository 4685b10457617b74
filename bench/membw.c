/*
 * membw: measure memory read bandwidth with N threads, the bound a
 * decode step cannot beat (it reads every weight once per token).
 * Prints bytes per second on stdout.
 *
 * usage: membw [THREADS [BYTES]]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static size_t BYTES = (size_t)512 << 20;

struct job {
	const uint64_t *p;
	size_t n;
	uint64_t sum;
};

static void *
reader(void *v)
{
	struct job *j = v;
	uint64_t s[16] = { 0 };
	size_t i, k;

	/* Integer xors in 16 lanes: the compiler vectorizes this, so the loop
	 * is not the limit, the memory is. */
	for (i = 0; i + 16 <= j->n; i += 16)
		for (k = 0; k < 16; k++)
			s[k] ^= j->p[i + k];
	for (k = 1; k < 16; k++)
		s[0] ^= s[k];
	j->sum = s[0];
	return NULL;
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int
main(int argc, char *argv[])
{
	int nth = argc > 1 ? atoi(argv[1]) : 1, rep, i;
	size_t n;
	uint64_t *buf, sink = 0;
	double best = 0;
	pthread_t tid[64];
	struct job job[64];

	/* The size read: pass the model's weight bytes, so the cache levels match. */
	if (argc > 2)
		BYTES = (size_t)atoll(argv[2]) / 64 * 64;
	n = BYTES / sizeof(uint64_t);
	buf = malloc(BYTES);
	if (!buf || nth < 1 || nth > 64 || BYTES == 0)
		return 1;
	memset(buf, 1, BYTES);
	for (rep = 0; rep < 5; rep++) {
		double t0 = now(), dt;
		for (i = 0; i < nth; i++) {
			job[i].p = buf + n / nth * i;
			job[i].n = n / nth;
			pthread_create(&tid[i], NULL, reader, &job[i]);
		}
		for (i = 0; i < nth; i++) {
			pthread_join(tid[i], NULL);
			sink += job[i].sum;
		}
		dt = now() - t0;
		if (BYTES / dt > best)
			best = BYTES / dt;
	}
	printf("%.0f\n", best + (sink == 12345));
	return 0;
}
