/* tokstream.h: reading and writing streams of token ids. */
#ifndef LLM_TOKSTREAM_H
#define LLM_TOKSTREAM_H

#include <stddef.h>
#include <stdio.h>

struct tokstream {
	FILE *fp;
	int vocab;		/* ids must be below this */
	long pos;		/* index of the next id, from 0 */
};

void tokstream_init(struct tokstream *ts, FILE *fp, int vocab);

/*
 * Read the next whitespace-separated decimal id.  1 with *id set, 0 at
 * end of input, -1 on a bad token (llm_err() names it and its position).
 */
int tokstream_next(struct tokstream *ts, int *id);

/* Read every id; *ids is malloc'd. 0 or -1. */
int tokstream_read_all(struct tokstream *ts, int **ids, int *n);

/*
 * The one way ids are written: one per line, decimal.  tokstream_write
 * flushes at once so pipelines stream; tokstream_write_ids writes n and
 * flushes at the end.  0 or -1 (errno).
 */
int tokstream_write(FILE *fp, int id);
int tokstream_write_ids(FILE *fp, const int *ids, size_t n);

#endif
