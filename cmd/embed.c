/* embed.c: llm-decode --embed, an embedding a text (or a line). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tokstream.h"
#include "decode.h"
#include "tool.h"

/*
 * The embedding of the token ids in fp (where names it in errors) on a
 * line: dim floats, exact (%.9g), space-separated.
 */
static int
embed_one(struct decode *d, struct kv *kv, FILE *fp, const char *where, int pooling,
    int normalize, float *out)
{
	struct tokstream ts;
	int *ids, n, i, status = 0;

	tokstream_init(&ts, fp, d->s.m.c.vocab_size);
	if (tokstream_read_all(&ts, &ids, &n) < 0)
		die(1, "%s: %s", where, llm_err());
	if (n == 0)
		die(1, "%s: no tokens to embed", where);
	if (model_embed(&d->s.run, kv, ids, n, pooling, normalize, out) < 0)
		die(1, "%s: %s", where, llm_err());
	free(ids);
	for (i = 0; i < d->s.m.c.dim && status == 0; i++)
		if (printf(i ? " %.9g" : "%.9g", out[i]) < 0)
			status = -1;
	return status < 0 || putchar('\n') == EOF || fflush(stdout) == EOF ? -1 : 0;
}

/*
 * --embed: the whole input is one text, or with --lines each line is one
 * (an empty line is an error: it has no embedding).
 */
int
embed_inputs(struct decode *d, int pooling, int normalize, int lines)
{
	float *out = xmalloc((size_t)d->s.m.c.dim * sizeof *out);
	char *line = NULL, where[64];
	size_t cap = 0;
	long no = 0;
	int status = 0;
	struct kv kv;
	FILE *fp;

	session_cache(&d->s, &kv);
	if (!lines)
		status = embed_one(d, &kv, stdin, "stdin", pooling, normalize, out);
	while (lines && status == 0 && getline(&line, &cap, stdin) > 0) {
		no++;
		snprintf(where, sizeof where, "stdin: line %ld", no);
		if (!(fp = fmemopen(line, strlen(line), "r")))
			die(1, "%s:", where);
		status = embed_one(d, &kv, fp, where, pooling, normalize, out);
		fclose(fp);
	}
	if (ferror(stdin))
		die(1, "stdin:");
	free(line);
	free(out);
	kv_free(&kv);
	if (status < 0 && errno != EPIPE)
		weprintf("stdout: %s", strerror(errno));
	return status < 0 ? (errno == EPIPE ? 128 + SIGPIPE : 1) : 0;
}

