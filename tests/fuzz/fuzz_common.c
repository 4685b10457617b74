/* fuzz_common.c: the input as a named file, and a scratch directory. */
#define _GNU_SOURCE	/* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

const char *
fuzz_file(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;

	if (fd < 0) {
		if ((fd = memfd_create("llm-fuzz", 0)) < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
		perror("fuzz_file");
		abort();
	}
	return path;
}

const char *
fuzz_dir(void)
{
	static char dir[64];

	if (!dir[0]) {
		snprintf(dir, sizeof dir, "/tmp/llm-fuzz-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			abort();
		}
	}
	return dir;
}
