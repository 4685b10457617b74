/* tool.c: the programs' shared helpers (tool.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static void
vwarn(const char *fmt, va_list ap)
{
	size_t n = strlen(fmt);

	fprintf(stderr, "%s: ", argv0);
	vfprintf(stderr, fmt, ap);
	/* sbase convention: a trailing colon appends strerror(errno). */
	if (n > 0 && fmt[n - 1] == ':')
		fprintf(stderr, " %s", strerror(errno));
	fputc('\n', stderr);
}

void
weprintf(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
}

void
die(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vwarn(fmt, ap);
	va_end(ap);
	exit(status);
}

long long
opt_int(const char *opt, const char *s, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die(2, "%s: '%s': expected an integer from %lld to %lld", opt, s, min, max);
	return v;
}

double
opt_real(const char *opt, const char *s, double min, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= min && v <= max))
		die(2, "%s: '%s': expected a number from %g to %g", opt, s, min, max);
	return v;
}

static int
parse_whole(const char *s, const char *end, long *v)
{
	long x = 0;

	if (s == end)
		return -1;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || x > (INT32_MAX - (*s - '0')) / 10)
			return -1;
		x = x * 10 + (*s - '0');
	}
	*v = x;
	return 0;
}

int
opt_range(const char *s, long *a, long *b)
{
	const char *dash = strchr(s, '-'), *end = s + strlen(s);

	if (parse_whole(s, dash ? dash : end, a) < 0 ||
	    (dash && (parse_whole(dash + 1, end, b) < 0 || *b < *a))) {
		llm_seterr("'%.40s': expected a position A or a range A-B, "
		    "whole numbers with A <= B", s);
		return -1;
	}
	if (!dash)
		*b = *a;
	return 0;
}

#ifndef LLM_VERSION
#define LLM_VERSION "unknown"	/* config.mk's VERSION, given by the Makefile */
#endif

void
version(void)
{
	printf("%s %s\n", argv0, LLM_VERSION);
	exit(fflush(stdout) == 0 ? 0 : 1);
}

void
catch_signal(int sig, void (*handler)(int), int flags)
{
	struct sigaction sa, old;

	/* A signal ignored at start stays ignored (a script's background job). */
	if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
		return;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}
