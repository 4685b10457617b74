/*
 * grammar.h: GBNF grammars (llama.cpp's notation) and the matcher that
 * constrains generation to them.
 *
 * A grammar is rules of alternatives of sequences; a sequence's elements
 * are characters (a literal's, a class's, any with '.') and references to
 * rules.  Groups and repetitions are lowered to rules of their own when
 * parsed, so the matcher knows only those two kinds.  The matcher is a
 * set of stacks of positions, as a pushdown automaton keeps them: each
 * stack's top is a character element the next code point may match, and
 * an empty stack means the text so far is a whole sentence.
 */
#ifndef LLM_GRAMMAR_H
#define LLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "tok.h"

/* An element of a rule's alternatives, all rules in one array. */
enum { G_END, G_ALT, G_RULE, G_CHAR, G_CHAR_NOT };

struct gelem {
	int type;
	int a, n;		/* G_RULE: the rule in a; G_CHAR*: ranges[a .. a + n) */
};

struct grammar {
	struct gelem *e;	/* every rule's elements: alternatives split by G_ALT, G_END last */
	int n_e, cap_e;
	uint32_t *ranges;	/* lo, hi pairs of code points, inclusive */
	int n_r, cap_r;
	int *start;		/* each rule's first element */
	int *chain;		/* a rule of X{m,n}'s optional tail, R ::= X R' | empty: how many X it
				 * can still take (its rules have ids one apart); -1: X{m,}'s
				 * R ::= X R | empty; 0: another rule */
	int *rule_of;		/* each element's rule */
	char **name;		/* each rule's name ("root", or made for a group: "x_1") */
	int n_rules, cap_rules;
	int root;
};

/*
 * Parse GBNF text; rule root is where it starts.  0, or -1 with llm_err()
 * saying "LINE:COL: what is wrong", or what is wrong with the whole: an
 * undefined rule (named, with where it is used), no root, left recursion
 * (which the matcher could never get past), a language with no sentence.
 */
int grammar_parse(struct grammar *g, const char *text, size_t n);
void grammar_free(struct grammar *g);

/* A matcher's state: the stacks, and a UTF-8 character begun in one token and ended in the next. */
struct gstack {
	int *v, n, cap;
};

struct gseen;

struct gstate {
	const struct grammar *g;
	struct gstack *s;
	int n, cap;
	uint32_t partial;	/* the bits of the character begun */
	int need;		/* its continuation bytes still to come; 0: none */
	int len;		/* its length in bytes */
	int spm;		/* SentencePiece text: U+2581 is a space */
	int strip;		/* and the first character, if a space, is not the text's */
	int peak;		/* the highest stack an expansion into this state met (the masks') */
	struct gseen *seen;	/* the stacks an expansion into this state met (its own scratch) */
};

/* The state before any text. 0, or -1 (llm_err) if the grammar is too deep. */
int gstate_init(struct gstate *st, const struct grammar *g);
/*
 * Match the text tokens' pieces make, as tok_decode turns them into text:
 * with SentencePiece, U+2581 is a space, and with its space prefix the
 * text's first space is dropped.  The pieces (tok_piece) go to
 * gstate_accept as they are, byte tokens too.
 */
void gstate_for(struct gstate *st, const struct tok *t);
void gstate_free(struct gstate *st);
void gstate_copy(struct gstate *dst, const struct gstate *src);

/*
 * Take the bytes s[0..n) (UTF-8; a character may stop at the end and go
 * on in the next call): 1 if the text so far is still the start of a
 * sentence, with st advanced; 0 if not, and st is then undefined; -1
 * (llm_err) if the grammar is too ambiguous to follow: a character whose
 * readings meet more stacks than the matcher keeps (16384), as
 * (a? b?){1000} does, where every count of the repetition can be where
 * the text is.  st is then undefined too.
 */
int gstate_accept(struct gstate *st, const char *s, size_t n);

/* Whether the text so far is a whole sentence. */
int gstate_complete(const struct gstate *st);
/* Whether it is, and no more text can follow (the generation is over). */
int gstate_finished(const struct gstate *st);

/*
 * The tokens that may come next, for a vocabulary: the pieces sorted once,
 * and the masks of the states met kept (up to GMASK_CACHE of them), so a
 * state met again costs a lookup.
 *
 * A state's mask is first that of its tops: the stacks less the frames
 * they all share below (the context: which property, which item, how
 * many came before).  Most tokens a top decides alone: those that stay
 * within it, or die there; they are walked once for every context the
 * top comes in.  Only the tokens that leave it (a string's closing quote,
 * and what follows) are walked again in each context.
 *
 * The tokens are in classes by length, each with masks of its own: a
 * token cannot tell apart the counts of a repetition X{m,n} past its
 * length, so the counts of [^"]{0,200} share a class's mask until the
 * bound is nearer than its tokens are long, and near it only the classes
 * of longer tokens are walked again.
 */
#define GMASK_CACHE 4096
#define GMASK_CLASSES 10

struct gmask_entry {
	uint64_t hash;
	int *key, n;
	unsigned char *mask;	/* a bit a token of the class, in its order */
	int *unsure, n_unsure;	/* a top's: the tokens that leave it (positions in order);
				 * -1: too many to be worth it, walk the whole state */
	int peak;		/* a top's: the highest stack its walk met */
	int over;		/* its walk met a step too ambiguous (gstate_accept's -1) */
};

/*
 * The walks' states, each kept once with the steps taken from it (a state
 * and a byte give the next state, or none): a lazily built automaton, so
 * a byte taken again from a state met before costs a lookup.  Emptied
 * when it would outgrow its bound, before a walk.
 */
struct gsteps {
	int *arena;		/* each state: its stacks' count, partial, need, len, spm << 1 | strip,
				 * then each stack: its height, its positions */
	size_t n_arena, cap_arena;
	size_t *at;		/* each state's place in the arena */
	uint64_t *hash;		/* each state's hash */
	char *left;		/* each state: 1 if it has an emptied stack, 3 if nothing else */
	int n, cap;
	int *index;		/* the states by hash; -1 free */
	size_t index_size;
	struct gstep {
		uint64_t from;	/* (state << 8 | byte) + 1; 0: a free slot */
		int to, peak;	/* the next state (-1: none), and the highest stack the step met */
	} *step;		/* the steps, by from's hash */
	size_t n_steps, steps_size;
	size_t bound;		/* the states and steps it keeps at most */
	struct gstate work;	/* a state being stepped, */
	int work_id;		/* which is this one (-1: none) */
	struct gstack key;
};

struct gmask {
	const struct tok *t;
	char **text;		/* each token's piece (tok_piece, in bytes below); NULL: none */
	size_t *len, max_len;
	int *order, *lcp, n;	/* the tokens with text by class, then in byte order; each's
				 * common prefix with the one before in its class */
	char *bytes;		/* their texts in that order, one after another, */
	size_t *at;		/* each one's place there */
	int from[GMASK_CLASSES + 1];	/* class c: order[from[c] .. from[c + 1]) */
	int *lv;		/* the states along the walk (in steps) */
	struct gstate tmp, top;	/* scratch, a state's tops */
	char *left;		/* along the walk: whether a state up to here left the top */
	struct gsteps steps;
	size_t most_bytes;	/* the most bytes a class's tokens have in all */
	struct gstack scratch, key, unsure;
	struct gmask_entry *cache;
	int n_cache;
	int over;		/* a mask in the last gmask_compute met a step too ambiguous */
	int walk_over;		/* the last walk met one */
	int *slot;		/* the cache's index by hash: 2 GMASK_CACHE slots, -1 free */
	unsigned char *bits;	/* a class's mask, made before it is kept */
	unsigned char *allowed;	/* the last mask, a byte a token */
};

void gmask_init(struct gmask *m, const struct tok *t);
void gmask_free(struct gmask *m);

/*
 * The mask of st: allowed[id] = 1 if token id's piece keeps the text the
 * start of a sentence; the n_end ids in end (end of sequence, of turn)
 * only when the text is a whole sentence; control and unknown tokens,
 * and tokens with no piece, never.  m's own, until the next call; m->over
 * set if a token's step was too ambiguous to follow (gmask_apply's -1).
 */
const unsigned char *gmask_compute(struct gmask *m, const struct gstate *st, const int *end,
    int n_end);
/*
 * The logits of the tokens st's mask refuses made -inf; how many it allows
 * (0: none can follow), or -1 (llm_err) if a token's step was too
 * ambiguous to follow (gstate_accept's -1): the mask cannot be trusted.
 */
int gmask_apply(struct gmask *m, const struct gstate *st, const int *end, int n_end, float *logits);
/* st on past token id's piece (the one m keeps): gstate_accept's answer (-1 with llm_err); 0 for a token with none. */
int gmask_take(struct gmask *m, struct gstate *st, int id);

#endif
