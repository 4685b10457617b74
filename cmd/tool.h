/*
 * tool.h: what the programs share and the library does not have: the
 * program's name in messages, sbase-style fatal errors, option
 * arguments, --version.  Linked by cmd/, tools/ and tests/, never by lib/.
 */
#ifndef LLM_TOOL_H
#define LLM_TOOL_H

#include "../lib/util.h"

/*
 * The program's name, for messages: the library's llm_progname, so that
 * the one message lib/ prints (out of memory) names the tool too.
 */
#define argv0 llm_progname

/*
 * "argv0: message" on stderr, and for die() exit with status.  As sbase's
 * weprintf and eprintf: a format ending in ':' appends ' ' and
 * strerror(errno); any other is printed as it is (BSD's warn and warnx
 * in one).
 */
void weprintf(const char *fmt, ...);
_Noreturn void die(int status, const char *fmt, ...);

/*
 * Option arguments: a whole decimal integer or number in [min, max], or
 * exit 2 with "argv0: OPT: 'S': expected ...".
 */
long long opt_int(const char *opt, const char *s, long long min, long long max);
double opt_real(const char *opt, const char *s, double min, double max);

/* "A" or "A-B", whole numbers with 0 <= A <= B < 2^31; -1 with llm_err() if not. */
int opt_range(const char *s, long *a, long *b);

/*
 * Catch sig with handler and sigaction's flags (SA_RESETHAND,
 * SA_RESTART), unless it is ignored: a script's background job keeps
 * ignoring SIGINT.
 */
void catch_signal(int sig, void (*handler)(int), int flags);

/* --version: the tool's name and version on stdout, exit 0. */
_Noreturn void version(void);

#endif
