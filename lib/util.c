/* util.c: errors, checked allocation, clocks, a tiny JSON writer. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__APPLE__)
#include <mach/mach.h>	/* task_info: macOS's count of the process's private memory */
#endif

#include "util.h"

/* MAP_ANON is the BSDs' and macOS's name; POSIX.1-2024 names both */
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif

static _Thread_local char errbuf[512];
const char *llm_progname = "llm";

void
llm_seterr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof errbuf, fmt, ap);
	va_end(ap);
}

const char *
llm_err(void)
{
	return errbuf[0] ? errbuf : "unknown error";
}

void
llm_out_of_memory(size_t n)
{
	fprintf(stderr, "%s: out of memory allocating %zu bytes\n", llm_progname, n);
	exit(1);
}

void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		llm_out_of_memory(n);
	return p;
}

void *
xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		llm_out_of_memory(size && n > SIZE_MAX / size ? SIZE_MAX : n * size);
	return p;
}

void *
xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		llm_out_of_memory(n);
	return q;
}

void *
xaligned(size_t align, size_t n)
{
	void *p;

	if (posix_memalign(&p, align, n ? n : 1) != 0)
		llm_out_of_memory(n);
	return p;
}

const char *
llm_compiler(void)
{
#define STR2(x) #x
#define STR(x) STR2(x)
#if defined(__clang__)
	return "clang " STR(__clang_major__) "." STR(__clang_minor__) "." STR(__clang_patchlevel__);
#elif defined(__GNUC__)
	return "gcc " __VERSION__;
#else
	return "unknown";
#endif
}

double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t
peak_rss_bytes(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
#if defined(__APPLE__)
	return (size_t)ru.ru_maxrss;	/* macOS reports bytes, as /usr/bin/time -l prints them */
#else
	return (size_t)ru.ru_maxrss * 1024;	/* Linux and the BSDs report KiB */
#endif
}

/*
 * Resident bytes: with anon, those that no file backs, else all of them.
 * macOS: the VM's "internal" pages, or resident_size; Linux: RssAnon or
 * VmRSS of /proc/self/status; 0 (unavailable) where there is neither.
 */
static size_t
resident(int anon)
{
#if defined(__APPLE__)
	task_vm_info_data_t info;
	mach_msg_type_number_t count = TASK_VM_INFO_COUNT;

	if (task_info(mach_task_self(), TASK_VM_INFO, (task_info_t)&info, &count) != KERN_SUCCESS)
		return 0;
	return (size_t)(anon ? info.internal : info.resident_size);
#else
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kib = 0;

	while (fp && fgets(line, sizeof line, fp))
		if (sscanf(line, anon ? "RssAnon: %llu kB" : "VmRSS: %llu kB", &kib) == 1)
			break;
	if (fp)
		fclose(fp);
	return (size_t)kib * 1024;
#endif
}

size_t
rss_anon_bytes(void)
{
	return resident(1);
}

size_t
rss_bytes(void)
{
	return resident(0);
}

const void *
mem_find(const void *hay, size_t n, const void *needle, size_t m)
{
	const char *h = hay, *end = h + n, *p;

	if (m == 0)
		return hay;
	for (p = h; m <= (size_t)(end - p) && (p = memchr(p, *(const char *)needle, (size_t)(end - p) - m + 1)); p++)
		if (memcmp(p, needle, m) == 0)
			return p;
	return NULL;
}

int
mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	if (a != 0 && b > UINT64_MAX / a)
		return 0;
	*out = a * b;
	return 1;
}

int
add_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	if (b > UINT64_MAX - a)
		return 0;
	*out = a + b;
	return 1;
}

void
json_write_string(FILE *fp, const char *s)
{
	fputc('"', fp);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(fp, "\\%c", c);
		else if (c < 0x20)
			fprintf(fp, "\\u%04x", c);
		else
			fputc(c, fp);
	}
	fputc('"', fp);
}

void
json_begin(struct json *j, FILE *fp)
{
	j->fp = fp;
	j->n = 0;
	fputc('{', fp);
}

static void
json_key(struct json *j, const char *key)
{
	if (j->n++)
		fputc(',', j->fp);
	json_write_string(j->fp, key);
	fputc(':', j->fp);
}

void
json_int(struct json *j, const char *key, long long v)
{
	json_key(j, key);
	fprintf(j->fp, "%lld", v);
}

void
json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_write_string(j->fp, v);
}

void
json_ints(struct json *j, const char *key, const int *v, int n)
{
	json_key(j, key);
	fputc('[', j->fp);
	for (int i = 0; i < n; i++)
		fprintf(j->fp, "%s%d", i ? "," : "", v[i]);
	fputc(']', j->fp);
}

void
json_num(struct json *j, const char *key, double v)
{
	json_key(j, key);
	if (isfinite(v))
		fprintf(j->fp, "%.6g", v);
	else
		fputs("null", j->fp);	/* JSON has no NaN or infinity */
}

void
json_end(struct json *j)
{
	fputs("}\n", j->fp);
	fflush(j->fp);
}

void
buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	if (n)	/* p may be NULL when n is 0 */
		memcpy(b->s + b->n, p, n);
	b->n += n;
	b->s[b->n] = '\0';	/* always a C string too */
}

void
buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap, again;
	int n;

	va_start(ap, fmt);
	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n > 0) {
		if (b->n + (size_t)n + 1 > b->cap) {
			b->cap = (b->n + (size_t)n + 1) * 2;
			b->s = xrealloc(b->s, b->cap);
		}
		vsnprintf(b->s + b->n, (size_t)n + 1, fmt, again);
		b->n += (size_t)n;
	}
	va_end(again);
}

void
buf_free(struct buf *b)
{
	free(b->s);
	b->s = NULL;
	b->n = b->cap = 0;
}

int
buf_read_all(struct buf *b, FILE *fp)
{
	char chunk[65536];
	size_t n;

	while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0)
		buf_add(b, chunk, n);
	buf_add(b, "", 0);
	return ferror(fp) ? -1 : 0;
}

void
ids_push(struct ids *a, int id)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->v = xrealloc(a->v, a->cap * sizeof *a->v);
	}
	a->v[a->n++] = id;
}

void
ids_free(struct ids *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

void *
map_file(const char *path, size_t *size, int populate)
{
	struct stat st;
	struct buf b = { 0 };
	void *p;
	int fd;

	*size = 0;
	if (strcmp(path, "-") == 0) {
		if (buf_read_all(&b, stdin) < 0) {
			llm_seterr("stdin: %s", strerror(errno));
			buf_free(&b);
			return NULL;
		}
		p = mmap(NULL, b.n ? b.n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			llm_seterr("%s", strerror(errno));
			buf_free(&b);
			return NULL;
		}
		memcpy(p, b.s, b.n);
		mprotect(p, b.n ? b.n : 1, PROT_READ);
		*size = b.n;
		buf_free(&b);
		return p;
	}
	if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &st) < 0) {
		llm_seterr("%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		llm_seterr("not a regular file");
		return NULL;
	}
#if defined(MAP_POPULATE)
	/* Linux: the pages faulted in by the mapping itself */
	int flags = MAP_PRIVATE | (populate ? MAP_POPULATE : 0);
#else
	int flags = MAP_PRIVATE;
#endif
	p = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, flags, fd, 0) :
	    mmap(NULL, 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	close(fd);
	if (p == MAP_FAILED) {
		llm_seterr("mmap: %s", strerror(errno));
		return NULL;
	}
#if !defined(MAP_POPULATE)
	/* elsewhere POSIX's advice: read the file ahead (the pages fault in as they are read) */
	if (populate && st.st_size)
		posix_madvise(p, (size_t)st.st_size, POSIX_MADV_WILLNEED);
#endif
	*size = (size_t)st.st_size;
	return p;
}

void
unmap_file(const void *p, size_t size)
{
	if (p)
		munmap((void *)p, size ? size : 1);
}
