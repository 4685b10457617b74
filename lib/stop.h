/*
 * stop.h: stop strings.  The text of the tokens generated is followed as
 * they come; generation ends when it holds one of the strings (which may
 * begin or end inside a token's text), and neither the token in which it
 * begins nor any after it is emitted.  While the text's end could still
 * begin a stop string, the tokens that hold it wait.
 */
#ifndef LLM_STOP_H
#define LLM_STOP_H

#include <stddef.h>

#include "tok.h"
#include "util.h"

struct stop {
	char *const *s;		/* the stop strings, not empty */
	int n;
	struct tok_decoder dec;
	struct buf text;	/* the text generated so far */
	size_t *end;		/* where each token's text ends in it */
	int n_tok, cap;
	int safe;		/* the tokens whose text comes before any stop text */
};

/* Follow the generated tokens' text for the n strings s (kept, not copied). */
void stop_init(struct stop *st, const struct tok *t, char *const *s, int n);
void stop_free(struct stop *st);

/*
 * A generated token: 1 if the text now holds a stop string, else 0.
 * st->safe then counts the tokens, from the first pushed, whose text
 * lies wholly before any stop text that has come or may still come: all
 * of them may be emitted.  Once stopped, the others never are.
 */
int stop_push(struct stop *st, int id);

#endif
