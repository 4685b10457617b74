/*
 * replay.c: run a fuzz target once on each file named, or on each file
 * in each directory named.  make check runs the regression corpus this
 * way, so an input that once crashed a tool is tried on every build.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int n_inputs;

static void
replay_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	unsigned char *p = NULL;
	long n;

	if (!fp || fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 ||
	    !(p = malloc((size_t)n + 1)) || (rewind(fp), fread(p, 1, (size_t)n, fp)) != (size_t)n) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		exit(1);
	}
	fclose(fp);
	LLVMFuzzerTestOneInput(p, (size_t)n);
	free(p);
	n_inputs++;
}

int
main(int argc, char *argv[])
{
	struct stat st;
	struct dirent *e;
	char path[4096];
	DIR *d;
	int i;

	LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: no such file\n", argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			replay_file(argv[i]);
			continue;
		}
		if (!(d = opendir(argv[i])))
			return 1;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.') {
				snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
				replay_file(path);
			}
		closedir(d);
	}
	printf("replayed %d inputs\n", n_inputs);
	return 0;
}
