/*
 * check.h: the unit-test harness.  Each test function is one claim;
 * TEST() runs it and prints "PASS: name" or "FAIL: name" for
 * tests/run.sh to count.
 */
#ifndef LLM_CHECK_H
#define LLM_CHECK_H

#include <stdio.h>

static int check_failed, check_total_failed;

#define CHECK(cond, ...) do { \
	if (!(cond)) { \
		fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		check_failed++; \
	} \
} while (0)

#define TEST(fn) do { \
	check_failed = 0; \
	fn(); \
	printf("%s: %s\n", check_failed ? "FAIL" : "PASS", #fn); \
	fflush(stdout); \
	check_total_failed += check_failed != 0; \
} while (0)

#define CHECK_EXIT() return check_total_failed ? 1 : 0

#endif
