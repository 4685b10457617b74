/* stop.c: stop strings, matched on the text of the tokens generated. */
#include <string.h>

#include "stop.h"

void
stop_init(struct stop *st, const struct tok *t, char *const *s, int n)
{
	memset(st, 0, sizeof *st);
	st->s = s;
	st->n = n;
	tok_decoder_init(&st->dec, t, 0);
	st->dec.started = 1;	/* the text goes on from the prompt: a first space is kept */
}

void
stop_free(struct stop *st)
{
	buf_free(&st->text);
	buf_free(&st->dec.pending);
	free(st->end);
	memset(st, 0, sizeof *st);
}

/* Whether the text's last n bytes are the first n of s. */
static int
ends_with_start(const struct buf *b, const char *s, size_t n)
{
	return n <= b->n && memcmp(b->s + b->n - n, s, n) == 0;
}

/* The first place at or after from where s (len bytes) lies in the text, or -1. */
static long
find(const struct buf *b, size_t from, const char *s, size_t len)
{
	for (size_t p = from; p + len <= b->n; p++)
		if (memcmp(b->s + p, s, len) == 0)
			return (long)p;
	return -1;
}

int
stop_push(struct stop *st, int id)
{
	size_t limit, len, k, before = st->text.n;
	long p;
	int i, stopped = 0;

	tok_decode(&st->dec, id, &st->text);
	if (st->n_tok == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 64;
		st->end = xrealloc(st->end, (size_t)st->cap * sizeof *st->end);
	}
	st->end[st->n_tok++] = st->text.n;
	/*
	 * The text before limit is safe: before the first stop string the
	 * new text completes (it may lie inside a token's text), or before
	 * the longest end of the text that begins one.
	 */
	limit = st->text.n;
	for (i = 0; i < st->n; i++) {
		len = strlen(st->s[i]);
		p = find(&st->text, before >= len - 1 ? before - (len - 1) : 0, st->s[i], len);
		if (p >= 0 && (size_t)p < limit) {
			limit = (size_t)p;
			stopped = 1;
		}
	}
	for (i = 0; i < st->n && !stopped; i++)
		for (k = strlen(st->s[i]) - 1; k > 0; k--)
			if (st->text.n - k < limit && ends_with_start(&st->text, st->s[i], k)) {
				limit = st->text.n - k;
				break;
			}
	/* a token whose text reaches past the limit waits, or is dropped */
	for (st->safe = 0; st->safe < st->n_tok && st->end[st->safe] <= limit; st->safe++)
		;
	return stopped;
}
