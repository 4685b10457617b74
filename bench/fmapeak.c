/*
 * fmapeak: the machine's f32 multiply-add peak with N threads, the bound
 * a prefill cannot beat (it is matrix products).  Twelve independent
 * chains of fused multiply-adds per thread, on the widest vectors the
 * processor has (or those LLM_ISA names: avx2, avx512; NEON's 4 lanes on
 * AArch64; with 4 pipes, as Apple's cores have, 12 chains of 4-cycle
 * latency keep them busy).  Prints FLOP per
 * second on stdout, counting a multiply-add as two; 0 where there are no
 * FMA instructions.
 *
 * usage: fmapeak [THREADS]
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHAINS 12
#define STEPS 40000000L

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static double
run512(void)
{
	__m512 a[CHAINS], b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
	float s = 0;
	long k;
	int i;

	for (i = 0; i < CHAINS; i++)
		a[i] = _mm512_set1_ps((float)i);
	for (k = 0; k < STEPS; k++)
#pragma GCC unroll 12
		for (i = 0; i < CHAINS; i++)
			a[i] = _mm512_fmadd_ps(a[i], b, c);
	for (i = 0; i < CHAINS; i++)
		s += _mm512_reduce_add_ps(a[i]);
	return s;
}

__attribute__((target("avx2,fma"))) static double
run256(void)
{
	__m256 a[CHAINS], b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
	float s = 0, t[8];
	long k;
	int i;

	for (i = 0; i < CHAINS; i++)
		a[i] = _mm256_set1_ps((float)i);
	for (k = 0; k < STEPS; k++)
#pragma GCC unroll 12
		for (i = 0; i < CHAINS; i++)
			a[i] = _mm256_fmadd_ps(a[i], b, c);
	for (i = 0; i < CHAINS; i++) {
		_mm256_storeu_ps(t, a[i]);
		s += t[0];
	}
	return s;
}
#elif defined(__aarch64__)
#include <arm_neon.h>

static double
run128(void)
{
	float32x4_t a[CHAINS], b = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-6f);
	float s = 0;
	long k;
	int i;

	for (i = 0; i < CHAINS; i++)
		a[i] = vdupq_n_f32((float)i);
	for (k = 0; k < STEPS; k++)
#pragma GCC unroll 12
		for (i = 0; i < CHAINS; i++)
			a[i] = vfmaq_f32(c, a[i], b);
	for (i = 0; i < CHAINS; i++)
		s += vaddvq_f32(a[i]);
	return s;
}
#endif

static int lanes;
static volatile double sink;

static void *
worker(void *arg)
{
	(void)arg;
#if defined(__x86_64__) || defined(__i386__)
	sink += lanes == 16 ? run512() : run256();
#elif defined(__aarch64__)
	sink += run128();
#endif
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
	int nth = argc > 1 ? atoi(argv[1]) : 1, i;
	const char *isa = getenv("LLM_ISA");
	pthread_t tid[64];
	double t0, dt;

	if (nth < 1 || nth > 64)
		return 1;
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && !(isa && strcmp(isa, "avx2") == 0))
		lanes = 16;
	else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		lanes = 8;
#elif defined(__aarch64__)
	lanes = 4;
#endif
	if (!lanes || (isa && strcmp(isa, "scalar") == 0)) {
		puts("0");
		return 0;
	}
	t0 = now();
	for (i = 0; i < nth; i++)
		pthread_create(&tid[i], NULL, worker, NULL);
	for (i = 0; i < nth; i++)
		pthread_join(tid[i], NULL);
	dt = now() - t0;
	printf("%.0f\n", 2.0 * lanes * CHAINS * STEPS * nth / dt);
	return 0;
}
