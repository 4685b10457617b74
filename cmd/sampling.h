/*
 * sampling.h: the sampling options llm-decode and llm-chat share, as
 * getopt_long entries, their parsing and their checks.
 */
#ifndef LLM_SAMPLING_H
#define LLM_SAMPLING_H

#include <stdint.h>

#include "../lib/batch.h"

/* Option codes, above any other long option's. */
enum { O_GREEDY = 512, O_TEMP, O_TOPK, O_TOPP, O_MINP, O_PENALTY, O_LASTN, O_SEED };

#define SAMPLING_LONGOPTS \
	{ "greedy", no_argument, NULL, O_GREEDY }, \
	{ "temp", required_argument, NULL, O_TEMP }, \
	{ "top-k", required_argument, NULL, O_TOPK }, \
	{ "top-p", required_argument, NULL, O_TOPP }, \
	{ "min-p", required_argument, NULL, O_MINP }, \
	{ "repeat-penalty", required_argument, NULL, O_PENALTY }, \
	{ "repeat-last-n", required_argument, NULL, O_LASTN }, \
	{ "seed", required_argument, NULL, O_SEED }

struct sampling {
	float temp, top_p, min_p, penalty;
	int top_k, last_n;
	int greedy, seed_set;
	uint64_t seed;
	const char *sampling;	/* the last of --temp, --top-k, --top-p, --min-p given */
	const char *controls;	/* the last of --repeat-penalty, --repeat-last-n given */
};

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, the rest off. */
void sampling_defaults(struct sampling *s);
/* Take option c with its argument: 1, or 0 if c is not one of them; a bad argument exits 2. */
int sampling_option(struct sampling *s, int c, const char *arg);
/*
 * After the options: conflicts exit 2 (--greedy with a sampling option,
 * --repeat-last-n without --repeat-penalty); --greedy sets the
 * temperature to 0; a seed not given is drawn from the time and pid.
 */
void sampling_check(struct sampling *s);

/* The generation loop's sampling as the options say (and its seed). */
void sampling_set(const struct sampling *s, struct batch *b);

#endif
