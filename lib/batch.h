/*
 * batch.h: the generation loop, the one way tokens go through the model.
 * A batch decodes sequences together (continuous batching); one sequence
 * alone is a batch of one.  Each step is one pass over the weights for
 * every live sequence: the next token of those generating, and a piece
 * of the prompts of those not yet through theirs, MODEL_BATCH tokens at
 * most; each attends to its own cache.  A sequence's results are bitwise
 * those of running it alone (batch invariance), so which sequences share
 * a step never changes one's output.
 *
 * A sequence is a prompt, then either generation (sampled, ended by an
 * end token, n_predict, a stop string or its grammar) or scoring (each
 * token's log-probability given those before it, masked by a grammar if
 * there is one).  With n_predict 0 the prompt still runs: the cache it
 * fills is the product (a snapshot's making, a chat's closed turn).
 */
#ifndef LLM_BATCH_H
#define LLM_BATCH_H

#include "grammar.h"
#include "kv.h"
#include "model.h"
#include "sample.h"
#include "stop.h"
#include "tok.h"
#include "util.h"

enum { SEQ_PROMPT, SEQ_GEN, SEQ_DONE };

/* Why a sequence failed: the model's pass or the context (the model's file names it), or its grammar. */
enum { SEQ_OK, SEQ_FAIL_MODEL, SEQ_FAIL_GRAMMAR };

/* One sequence: a prompt, then generation or scoring. */
struct batch_seq {
	/* set by batch_start */
	const int *ids;		/* the prompt, the caller's until the sequence is done */
	int n_ids;
	struct kv *kv;		/* the caller's cache, holding positions [0, pos) */
	int pos;		/* the positions computed */
	int state;
	int n_predict;		/* generating: the most tokens it may take (0: the prompt alone) */
	/* generating */
	struct sampler smp;
	int next;		/* the token to run next */
	struct ids gen;		/* the tokens generated, a stop string's too (batch_seq_ready) */
	struct stop stop;	/* with stop strings: their matcher */
	int stopped;		/* a stop string ended it */
	struct gstate gs;	/* with a grammar: where the text is in it */
	/* scoring: the sum of each token's log-probability given those before */
	double nll;
	int scored;
	double *lp;		/* with the batch's each: every scored token's log-probability, in order */
	long left;		/* scoring under a grammar: the token it refused (the stream's index), or -1 */
	int failed;		/* SEQ_FAIL_MODEL or SEQ_FAIL_GRAMMAR: err says what is wrong */
	char err[256];
};

struct batch {
	struct model_run *run;
	int score;		/* score the prompts instead of generating */
	int each;		/* scoring: keep each token's log-probability (batch_seq's lp) */
	int ignore_eos;
	int end_id;		/* another token that ends a sequence (a chat's end of turn), or -1 */
	float temp, top_p, min_p, penalty;
	int top_k, last_n;	/* last_n: the repeat penalty's window */
	const struct tok *tok;	/* with stop strings: a line ends at one, which it does not keep */
	char *const *stops;
	int n_stops;
	const struct grammar *grammar;	/* generation kept to it, or scores masked by it (with gm, over tok's vocabulary) */
	struct gmask *gm;
	uint64_t seed;
	struct batch_seq **live;
	int n_live, max_live;
	float *out;		/* a pass's logits */
	int steps, computed;	/* passes, and tokens run through them */
	double mask_seconds;	/* time in the grammar: its masks, and its state on past each token */
};

/*
 * At most this many sequences at once (llm-decode -P): each keeps a row of
 * logits and a cache of its own.
 */
#define BATCH_LIVE_MAX 128

/*
 * A scoring pass keeps every token's logits, the vocabulary's floats each
 * (128 x 49152 floats are 25 MB): it takes at most this many tokens.
 */
#define BATCH_SCORE_MAX 128

/* A batch of at most max_live (1 to BATCH_LIVE_MAX) sequences at once. */
void batch_init(struct batch *b, struct model_run *run, int max_live);
void batch_free(struct batch *b);

/*
 * Start a sequence of the prompt ids[0..n) in a cache that holds the
 * positions [0, pos) of it (a resume), generating at most n_predict
 * tokens (unless the batch scores), with the batch's sampling, its
 * controls (the prompt's tokens accepted for the repeat penalty) and
 * seed.  The prompt must fit the cache (or it be windowed).  With
 * nothing left to run or to score, it is done at once.
 */
void batch_start(struct batch *b, struct batch_seq *q, const int *ids, int n, struct kv *kv,
    int pos, int n_predict);

/*
 * One pass of every live sequence; those that end (the end-of-sequence
 * token, n_predict tokens, the prompt scored, or a failure of their own)
 * leave the batch, done.  0, or -1 with llm_err() when the pass itself
 * failed (out of memory): then every live sequence is failed.
 */
int batch_step(struct batch *b);

/*
 * End a live sequence now, as it is: its tokens stay, and with run_last
 * the one it generated last is run into its cache first, so that the
 * cache holds every token it has (without, all but that one: a token the
 * caller could not pass on).  It leaves the batch, done.  0, or -1 when
 * that pass failed (q failed, err says why).
 */
int batch_end(struct batch *b, struct batch_seq *q, int run_last);

/* Free a done sequence's sampler and tokens. */
void batch_seq_free(struct batch_seq *q);

/*
 * The generated tokens a reader may have now: all of them but those
 * that may still begin a stop string, or that made one.
 */
size_t batch_seq_ready(const struct batch *b, const struct batch_seq *q);

/*
 * The token at position pos of the sequence's text (the prompt, then
 * the tokens generated): the cache's first seq_len positions hold them.
 */
int batch_seq_token(const struct batch_seq *q, int pos);

#endif
