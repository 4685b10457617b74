/*
 * batch.h: many sequences decoded together (continuous batching).  Each
 * step is one pass over the weights for every live sequence: the next
 * token of those generating, and a piece of the prompts of those not yet
 * through theirs, MODEL_BATCH tokens at most; each attends to its own
 * cache.  A sequence's results are bitwise those of running it alone with
 * model_forward (batch invariance), so which sequences share a step never
 * changes one's output.
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

/* One sequence: a prompt, then generation or scoring. */
struct batch_seq {
	/* set by batch_start */
	const int *ids;		/* the prompt, the caller's until the sequence is done */
	int n_ids;
	struct kv *kv;		/* the caller's cache, holding positions [0, pos) */
	int pos;		/* the positions computed */
	int state;
	/* generating */
	struct sampler smp;
	int next;		/* the token to run next */
	struct ids gen;		/* the tokens generated */
	struct stop stop;	/* with stop strings: their matcher */
	struct gstate gs;	/* with a grammar: where the text is in it */
	/* scoring: the sum of each token's log-probability given those before */
	double nll;
	int scored;
	long left;		/* scoring under a grammar: the token it refused (the stream's index), or -1 */
	int failed;		/* the pass or the context refused it: err says why */
	char err[256];
};

struct batch {
	struct model_run *run;
	int score;		/* score the prompts instead of generating */
	int n_predict, ignore_eos;
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
};

/* A batch of at most max_live (1 to MODEL_BATCH) sequences at once. */
void batch_init(struct batch *b, struct model_run *run, int max_live);
void batch_free(struct batch *b);

/*
 * Start a sequence of the prompt ids[0..n) in a cache that holds the
 * positions [0, pos) of it (a resume), with the batch's sampling, its
 * controls (the prompt's tokens accepted for the repeat penalty) and seed.  The prompt must fit the cache (or it be windowed).  With n_predict
 * 0 or nothing to score, it is done at once.
 */
void batch_start(struct batch *b, struct batch_seq *q, const int *ids, int n, struct kv *kv,
    int pos);

/*
 * One pass of every live sequence; those that end (the end-of-sequence
 * token, n_predict tokens, the prompt scored, or a failure of their own)
 * leave the batch, done.  0, or -1 with llm_err() when the pass itself
 * failed (out of memory): then every live sequence is failed.
 */
int batch_step(struct batch *b);

/* End a live sequence now, as it is: its tokens stay; it leaves the batch, done. */
void batch_end(struct batch *b, struct batch_seq *q);

/* Free a done sequence's sampler and tokens. */
void batch_seq_free(struct batch_seq *q);

#endif
