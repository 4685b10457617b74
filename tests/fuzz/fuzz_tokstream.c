/*
 * fuzz_tokstream: the token-id stream every tool reads.  Whatever the
 * bytes, each id is read or refused with a message, never misread.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/tokstream.h"
#include "../../lib/util.h"
#include "fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tokstream ts;
	FILE *fp;
	int *ids, n, i;

	if (size == 0 || !(fp = fmemopen((void *)data, size, "rb")))
		return 0;
	/* The first byte picks the vocabulary size, the rest is the stream. */
	fgetc(fp);
	tokstream_init(&ts, fp, 1 + data[0] * 997);
	if (tokstream_read_all(&ts, &ids, &n) == 0)
		for (i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= 1 + data[0] * 997)
				abort();	/* an id out of range got through */
	free(ids);
	fclose(fp);
	return 0;
}
