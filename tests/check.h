/*
 * check.h: the unit-test harness.  Each test function is one claim;
 * TEST() runs it and prints "PASS: name" or "FAIL: name" for
 * tests/run.sh to count.
 */
#ifndef LLM_CHECK_H
#define LLM_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failed, check_total_failed;
static char check_skip[1024];

/* Skip the current test, saying why (for example, ../shared is absent). */
#define SKIP(...) do { snprintf(check_skip, sizeof check_skip, __VA_ARGS__); return; } while (0)

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		check_failed++; \
	} \
} while (0)

/*
 * 1 if the list (names separated by spaces or commas) names the test: a
 * name that ends in '*' names every test it begins.
 */
static inline int
check_named(const char *list, const char *name)
{
	const char *p = list;
	size_t n;

	while (p && *p) {
		p += strspn(p, " ,");
		n = strcspn(p, " ,");
		if (n && (p[n - 1] == '*' ? strncmp(p, name, n - 1) == 0 :
		    strncmp(p, name, n) == 0 && name[n] == '\0'))
			return 1;
		p += n;
	}
	return 0;
}

/*
 * Whether the test is left out: 1 if $LLM_TEST_SKIP names it (it says
 * SKIP: tests/cross.sh skips so what emulation makes minutes long), 2 if
 * $LLM_TEST_ONLY is set and does not name it (it says nothing: a few
 * tests run alone, as when one is timed or debugged), else 0.
 */
static inline int
check_skipped(const char *name)
{
	const char *only = getenv("LLM_TEST_ONLY");

	if (only && *only && !check_named(only, name))
		return 2;
	return check_named(getenv("LLM_TEST_SKIP"), name);
}

#define TEST(fn) do { \
	check_failed = 0; \
	check_skip[0] = '\0'; \
	if (check_skipped(#fn)) { \
		if (check_skipped(#fn) == 1) \
			printf("SKIP: %s: LLM_TEST_SKIP names it\n", #fn); \
		break; \
	} \
	fn(); \
	if (check_skip[0] && !check_failed) \
		printf("SKIP: %s: %s\n", #fn, check_skip); \
	else \
		printf("%s: %s\n", check_failed ? "FAIL" : "PASS", #fn); \
	fflush(stdout); \
	check_total_failed += check_failed != 0; \
} while (0)

#define CHECK_EXIT() return check_total_failed ? 1 : 0

/*
 * The larger of two errors, and NaN if either is NaN.  fmax and "e >
 * worst" both drop a NaN, so a kernel that returns NaN would pass; with
 * this, a NaN or infinite error fails any CHECK(worst <= limit).
 */
static inline double
worst_of(double a, double b)
{
	if (isnan(a) || isnan(b))
		return NAN;
	return a > b ? a : b;
}

/* A whole file into a malloc'd buffer; NULL if it cannot be read. */
static inline unsigned char *
read_whole(const char *path, size_t *n)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *p = NULL;
	long size;

	if (!fp)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (size = ftell(fp)) >= 0 &&
	    (p = malloc((size_t)size + 1)) != NULL) {
		rewind(fp);
		if (fread(p, 1, (size_t)size, fp) != (size_t)size) {
			free(p);
			p = NULL;
		}
		*n = (size_t)size;
	}
	fclose(fp);
	return p;
}

/* Write n bytes as the whole of path, or exit. */
static inline void
write_whole(const char *path, const void *p, size_t n)
{
	FILE *fp = fopen(path, "wb");

	if (!fp || fwrite(p, 1, n, fp) != n || fclose(fp)) {
		fprintf(stderr, "%s: cannot write\n", path);
		exit(1);
	}
}

#endif
