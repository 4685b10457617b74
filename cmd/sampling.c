/* sampling.c: the sampling options of llm-decode and llm-chat. */
#include <getopt.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sampling.h"
#include "tool.h"

void
sampling_defaults(struct sampling *s)
{
	memset(s, 0, sizeof *s);
	s->temp = 0.8f, s->top_k = 40, s->top_p = 0.95f;
	s->penalty = 1, s->last_n = 64;
}

int
sampling_option(struct sampling *s, int c, const char *arg)
{
	switch (c) {
	case O_GREEDY: s->greedy = 1; break;
	case O_TEMP:
		s->temp = (float)opt_real("--temp", arg, 0, 100);
		s->sampling = "--temp";
		break;
	case O_TOPK:
		s->top_k = (int)opt_int("--top-k", arg, 0, 1 << 30);
		s->sampling = "--top-k";
		break;
	case O_TOPP:
		s->top_p = (float)opt_real("--top-p", arg, 0, 1);
		s->sampling = "--top-p";
		break;
	case O_MINP:
		s->min_p = (float)opt_real("--min-p", arg, 0, 1);
		s->sampling = "--min-p";
		break;
	case O_PENALTY:
		s->penalty = (float)opt_real("--repeat-penalty", arg, 0.01, 100);
		s->controls = "--repeat-penalty";
		break;
	case O_LASTN:
		s->last_n = (int)opt_int("--repeat-last-n", arg, 0, 1 << 20);
		s->controls = "--repeat-last-n";
		break;
	case O_SEED:
		s->seed = (uint64_t)opt_int("--seed", arg, 0, INT64_MAX);
		s->seed_set = 1;
		break;
	default:
		return 0;
	}
	return 1;
}

void
sampling_check(struct sampling *s)
{
	/* Options that contradict each other are refused, never resolved by their order. */
	if (s->greedy && s->sampling)
		die(2, "--greedy and %s conflict: --greedy takes the most likely token", s->sampling);
	if (s->greedy)
		s->temp = 0;
	if (s->controls && strcmp(s->controls, "--repeat-last-n") == 0 && s->penalty == 1)
		die(2, "--repeat-last-n goes with --repeat-penalty: it sets the penalty's window");
	if (!s->seed_set)
		s->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

void
sampling_set(const struct sampling *s, struct batch *b)
{
	b->temp = s->temp, b->top_k = s->top_k, b->top_p = s->top_p;
	b->min_p = s->min_p, b->penalty = s->penalty, b->last_n = s->last_n;
	b->seed = s->seed;
}
