/*
 * decode.h: what llm-decode's modes share: the session, the generation
 * loop set from the options, the signals and how a run ends.  One prompt
 * (llm-decode.c) is a batch of one; --lines (lines.c) a batch of many.
 */
#ifndef LLM_DECODE_H
#define LLM_DECODE_H

#include <signal.h>
#include <stdint.h>

#include "../lib/batch.h"
#include "../lib/grammar.h"
#include "../lib/tok.h"
#include "session.h"

/*
 * How a run ends.  Whatever the reason, once anything was computed the
 * cache is saved (with --kv-out) before the exit: no work is lost.
 */
enum end {
	END_DONE,	/* exit 0 */
	END_SIGNAL,	/* SIGINT or SIGTERM: exit 128 + the signal */
	END_PIPE,	/* stdout's reader went away: exit 141, quietly */
	END_FAIL,	/* an error, already described in msg: exit 1 */
};

struct decode {
	struct session s;
	struct batch b;		/* the loop, with the sampling, stop strings and grammar of the options */
	struct tok tok;		/* the model's tokenizer, with stop strings or a grammar (their text) */
	struct grammar gram;	/* with a grammar: it, and its masks over tok's vocabulary */
	struct gmask gmask;
	const char *kv_in, *kv_out;
	int n_predict;		/* -n: each sequence's */
	int threads, stats, stats_json, quiet, greedy;
	char msg[600];		/* why the run failed (END_FAIL) */
};

/* One prompt's run: a batch of one, and what its stats report. */
struct one {
	struct kv kv;
	struct batch_seq seq;
	int n_prompt, reused;
	double t_start, t_prefill, t_first, t_end;
};

/* One prompt's stats on stderr, as --stats and --stats-json ask (report.c). */
void print_stats(const struct decode *d, const struct one *o);
/*
 * A line of progress on a terminal for a long prefill or scoring run:
 * drawn once the work has taken a second, redrawn at most ten times a
 * second, cleared at the end; nothing when stderr is not a terminal or
 * with quiet (report.c).
 */
void progress_start(int quiet);
void progress(int done, int total);
void progress_end(void);

/* --embed: each text's (or with lines each line's) embedding on a line of stdout; the exit status (embed.c). */
int embed_inputs(struct decode *d, int pooling, int normalize, int lines);

/* Set by SIGINT and SIGTERM; the loops look at it between steps. */
extern volatile sig_atomic_t stop_signal;
void catch_signals(int restart);

/* A write to stdout failed: its reader is gone (END_PIPE), or it is an error (END_FAIL, msg set). */
enum end stdout_failed(struct decode *d);
/* The exit status of a run that ended so (its message said). */
int end_status(enum end end);

/* What a tool says after a snapshot that does not fit its cache (session_check), by the reason. */
extern const char *const resume_hints[4];

/* --lines: a prompt (or a stream to score) per line of standard input; the exit status. */
int decode_lines(struct decode *d);

/* The sequences --lines decodes at once unless -P says (lines.c). */
#define LINES_PARALLEL 16

#endif
