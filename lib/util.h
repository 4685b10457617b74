/* util.h: errors, checked allocation, clocks, a tiny JSON writer. */
#ifndef LLM_UTIL_H
#define LLM_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * lib/ never prints and never exits, with one exception.  A failing
 * function records one line with llm_seterr() and returns an error; the
 * tool prints llm_err() and decides the exit status.
 *
 * The exception is running out of memory, as in git and sbase: xmalloc,
 * xcalloc, xrealloc and xaligned print "PROGNAME: out of memory
 * allocating N bytes" on stderr and end the process with status 1, in
 * one place (llm_out_of_memory).  Allocations a caller can size from a
 * file or an option (a cache's reservation, a whole input) are checked
 * first and fail with an error instead.
 */
void llm_seterr(const char *fmt, ...);
const char *llm_err(void);

/* The name that message carries: the tools set it to their own (cmd/tool.h's argv0). */
extern const char *llm_progname;
_Noreturn void llm_out_of_memory(size_t n);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* n bytes aligned to align (a power of two, a multiple of sizeof(void *)); free() frees it. */
void *xaligned(size_t align, size_t n);

double now_seconds(void);
/* The peak resident set in bytes (getrusage's ru_maxrss, in the units of each system). */
size_t peak_rss_bytes(void);
/*
 * The process's private memory now: Linux's RssAnon (/proc/self/status),
 * macOS's resident internal pages (task_info); 0 where neither is there.
 */
size_t rss_anon_bytes(void);
/* The resident bytes now, mapped files' pages included (Linux VmRSS; macOS resident_size); 0 if unknown */
size_t rss_bytes(void);
/*
 * The compiler that built the library, as "gcc 12.2.0" or "clang 14.0.6",
 * for the run's report: the results are the same whichever it is
 * (kernels.c's rules, and config.mk's -ffp-contract=off).
 */
const char *llm_compiler(void);

/* Overflow-checked size arithmetic: returns 0 on overflow. */
int mul_ok(uint64_t a, uint64_t b, uint64_t *out);
/* The first n bytes at hay that begin with the m at needle, or NULL (memmem, which POSIX.1-2008 lacks). */
const void *mem_find(const void *hay, size_t n, const void *needle, size_t m);
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
/* Append printf's text of fmt (all of it). */
void buf_printf(struct buf *b, const char *fmt, ...);
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
/* An array of n integers */
void json_ints(struct json *j, const char *key, const int *v, int n);
void json_end(struct json *j);
void json_write_string(FILE *fp, const char *s);

#endif
