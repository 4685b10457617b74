/* sample.h: greedy, temperature, top-k, top-p, with a seeded RNG. */
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
	uint64_t rng;
	struct prob_id *cand;
};

void sampler_init(struct sampler *s, int vocab, float temp, int top_k,
    float top_p, uint64_t seed);
void sampler_free(struct sampler *s);

/* Pick the next token; logits is clobbered. */
int sampler_sample(struct sampler *s, float *logits);

/* The index of the largest logit; ties go to the lowest id. */
int argmax(const float *x, int n);

/* log(softmax(logits)[id]), computed stably. */
double log_prob(const float *logits, int n, int id);

#endif
