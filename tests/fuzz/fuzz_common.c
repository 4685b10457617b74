/* fuzz_common.c: the input as a named file, and a scratch directory. */
#if defined(__linux__)
#define _GNU_SOURCE	/* memfd_create: Linux's file in memory */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

const char *
fuzz_file(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;

	if (fd < 0) {
#if defined(__linux__)
		if ((fd = memfd_create("llm-fuzz", 0)) < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
#else
		/* elsewhere a file in the scratch directory, written over for each input */
		snprintf(path, sizeof path, "%s/input", fuzz_dir());
		if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0) {
			perror(path);
			abort();
		}
#endif
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
