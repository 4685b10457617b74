/*
 * membw: measure memory read bandwidth with N threads, the bound a
 * decode step cannot beat (it reads every weight once per token).
 * Prints bytes per second on stdout.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES ((size_t)512 << 20)

struct job {
	const double *p;
	size_t n;
	double sum;
};

static void *
reader(void *v)
{
	struct job *j = v;
	double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	size_t i;

	for (i = 0; i + 4 <= j->n; i += 4) {
		s0 += j->p[i];
		s1 += j->p[i + 1];
		s2 += j->p[i + 2];
		s3 += j->p[i + 3];
	}
	j->sum = s0 + s1 + s2 + s3;
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
	size_t n = BYTES / sizeof(double);
	double *buf = malloc(BYTES), best = 0, sink = 0;
	pthread_t tid[64];
	struct job job[64];

	if (!buf || nth < 1 || nth > 64)
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
	printf("%.0f\n", best + (sink == 12345 ? 1 : 0));
	return 0;
}
