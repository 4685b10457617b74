/* tokstream.c: the one parser for token-id streams, shared by every tool. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokstream.h"
#include "util.h"

void
tokstream_init(struct tokstream *ts, FILE *fp, int vocab)
{
	ts->fp = fp;
	ts->vocab = vocab;
	ts->pos = 0;
}

int
tokstream_next(struct tokstream *ts, int *id)
{
	char word[32];
	size_t len = 0;
	unsigned long long v = 0;
	int c, bad = 0, big = 0;

	while ((c = getc(ts->fp)) != EOF && isspace(c))
		;
	if (c == EOF) {
		if (ferror(ts->fp)) {
			llm_seterr("read error: %s", strerror(errno));
			return -1;
		}
		return 0;
	}
	for (; c != EOF && !isspace(c); c = getc(ts->fp)) {
		if (len < sizeof word - 4)
			word[len] = (char)c;
		else if (len == sizeof word - 4)
			memcpy(word + len, "...", 3);
		len++;
		if (!isdigit(c))
			bad = 1;
		else if (!big && (v = v * 10 + (unsigned)(c - '0')) > 0x7fffffff)
			big = 1;
	}
	word[len < sizeof word - 4 ? len : sizeof word - 1] = '\0';
	/* Control bytes would garble the one-line message. */
	for (char *p = word; *p; p++)
		if (!isprint((unsigned char)*p))
			*p = '?';
	if (bad) {
		llm_seterr("token %ld ('%s'): not a decimal token id", ts->pos, word);
		return -1;
	}
	if (big || v >= (unsigned long long)ts->vocab) {
		llm_seterr("token %ld ('%s'): id out of range (vocabulary has %d ids, 0-%d)",
		    ts->pos, word, ts->vocab, ts->vocab - 1);
		return -1;
	}
	*id = (int)v;
	ts->pos++;
	return 1;
}

int
tokstream_read_all(struct tokstream *ts, int **ids, int *n)
{
	int cap = 256, id, r;

	*n = 0;
	*ids = xmalloc((size_t)cap * sizeof **ids);
	while ((r = tokstream_next(ts, &id)) == 1) {
		if (*n == cap) {
			cap *= 2;
			*ids = xrealloc(*ids, (size_t)cap * sizeof **ids);
		}
		(*ids)[(*n)++] = id;
	}
	return r < 0 ? -1 : 0;
}

int
tokstream_write(FILE *fp, int id)
{
	if (fprintf(fp, "%d\n", id) < 0 || fflush(fp) == EOF)
		return -1;
	return 0;
}

int
tokstream_write_ids(FILE *fp, const int *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fprintf(fp, "%d\n", ids[i]) < 0)
			return -1;
	return fflush(fp) == EOF ? -1 : 0;
}
