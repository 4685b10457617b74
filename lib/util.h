/* util.h: errors, checked allocation, clocks, a tiny JSON writer. */
#ifndef LLM_UTIL_H
#define LLM_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * lib/ never prints.  A failing function records one line with
 * llm_seterr() and returns an error; the tool prints llm_err().
 */
void llm_seterr(const char *fmt, ...);
const char *llm_err(void);

/* Tool side: argv0 for messages, and sbase-style fatal errors. */
extern const char *argv0;
void warnx_(const char *fmt, ...);
_Noreturn void die(int status, const char *fmt, ...);

#ifndef LLM_VERSION
#define LLM_VERSION "unknown"	/* config.mk's VERSION, given by the Makefile */
#endif
/* --version: the tool's name and version on stdout, exit 0. */
static inline _Noreturn void
version(void)
{
	printf("%s %s\n", argv0, LLM_VERSION);
	exit(fflush(stdout) == 0 ? 0 : 1);
}

/*
 * Option arguments: a whole decimal integer or number in [min, max], or
 * exit 2 with "argv0: OPT: 'S': expected ...".
 */
long long opt_int(const char *opt, const char *s, long long min, long long max);
double opt_real(const char *opt, const char *s, double min, double max);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);

double now_seconds(void);
size_t peak_rss_bytes(void);
/*
 * The compiler that built the library, as "gcc 12.2.0" or "clang 14.0.6":
 * floating-point results are bitwise reproducible for one build, and
 * another compiler may contract multiply-adds differently.
 */
const char *llm_compiler(void);

/* Overflow-checked size arithmetic: returns 0 on overflow. */
int mul_ok(uint64_t a, uint64_t b, uint64_t *out);
int add_ok(uint64_t a, uint64_t b, uint64_t *out);

/*
 * Map a whole regular file read-only (populate: fault it all in now), or
 * with path "-" read standard input into anonymous memory, since a pipe
 * cannot be mapped.  NULL with llm_err() on failure.  Free with
 * unmap_file(p, *size).
 */
void *map_file(const char *path, size_t *size, int populate);
void unmap_file(const void *p, size_t size);

/* A growable byte buffer. */
struct buf {
	char *s;
	size_t n, cap;
};
void buf_add(struct buf *b, const void *p, size_t n);
void buf_free(struct buf *b);
/* Read a whole stream; 0 or -1 (errno). */
int buf_read_all(struct buf *b, FILE *fp);

/* A growable array of token ids. */
struct ids {
	int *v;
	size_t n, cap;
};
void ids_push(struct ids *a, int id);
void ids_free(struct ids *a);

/* A tiny JSON object writer: one flat object on one line. */
struct json {
	FILE *fp;
	int n;
};
void json_begin(struct json *j, FILE *fp);
void json_int(struct json *j, const char *key, long long v);
void json_num(struct json *j, const char *key, double v);
void json_str(struct json *j, const char *key, const char *v);
void json_end(struct json *j);
void json_write_string(FILE *fp, const char *s);

#endif
