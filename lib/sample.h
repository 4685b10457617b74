/*
 * sample.h: the next token from a row of logits: greedy (temperature 0),
 * or drawn from a seeded RNG after temperature, top-k, top-p and min-p,
 * with a repeat penalty over the last tokens; and a token's log-probability.
 */
#ifndef LLM_SAMPLE_H
#define LLM_SAMPLE_H

#include <stdint.h>

struct prob_id {
	float p;
	int id;
};

struct sampler {
	int vocab;
	float temp;		/* 0: greedy */
	int top_k;		/* 0: off */
	float top_p;		/* 1: off; 0: only the most likely token */
	float min_p;		/* 0: off */
	float penalty;		/* the repeat penalty; 1: off */
	int last_n;		/* the tokens it looks back over */
	int *hist;		/* the newest last_n tokens, a ring */
	unsigned char *seen;	/* by token: penalized in this step (all 0 between steps) */
	long n_hist;		/* tokens accepted */
	uint64_t rng;
	struct prob_id *cand;
};

void sampler_init(struct sampler *s, int vocab, float temp, int top_k,
    float top_p, uint64_t seed);
void sampler_free(struct sampler *s);

/*
 * The controls llama.cpp has, off until set: min_p keeps the tokens whose
 * probability is at least min_p times the most likely one's; a repeat
 * penalty divides a positive logit of a token among the last_n tokens
 * accepted (sampler_accept) by penalty, and multiplies a negative one.
 */
void sampler_controls(struct sampler *s, float min_p, float penalty, int last_n);
/* A token of the sequence (the prompt's, or one generated), for the repeat penalty. */
void sampler_accept(struct sampler *s, int id);

/*
 * Pick the next token: the repeat penalty, then greedy's argmax, or
 * min-p (on the penalized logits), the temperature's softmax, top-k,
 * top-p and a draw.  logits is clobbered.
 */
int sampler_sample(struct sampler *s, float *logits);

/* The index of the largest logit; ties go to the lowest id. */
int argmax(const float *x, int n);

/* log(softmax(logits)[id]), computed stably. */
double log_prob(const float *logits, int n, int id);

#endif
