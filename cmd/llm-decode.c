/* llm-decode: prompt token ids in, generated token ids out. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <poll.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/batch.h"
#include "../lib/grammar.h"
#include "../lib/kv.h"
#include "../lib/model.h"
#include "../lib/pool.h"
#include "../lib/kernels.h"
#include "../lib/quant.h"
#include "../lib/sample.h"
#include "../lib/schema.h"
#include "../lib/snapshot.h"
#include "../lib/stop.h"
#include "../lib/tok.h"
#include "../lib/tokstream.h"
#include "../lib/util.h"
#include "sampling.h"
#include "tool.h"

static void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s -m MODEL [-n N] [-t THREADS] [--ctx N] "
	    "[--greedy | --temp T --top-k K --top-p P --min-p P] [--seed S]\n"
	    "       [--repeat-penalty R [--repeat-last-n N]] [--stop TEXT ...]\n"
	    "       [--grammar TEXT | --grammar-file FILE | --json-schema SCHEMA|@FILE] [--print-grammar]\n"
	    "       [--ignore-eos] [--kv-type T] [--kv-type-k T] [--kv-type-v T] [--kv-prealloc]\n"
	    "       [--kv-window W [--kv-sinks S]] [--warmup] [-q]\n"
	    "       [--kv-in FILE] [--kv-out FILE] [--score] [--stats] [--stats-json]\n"
	    "       %s -m MODEL --lines [-P N] [options above but --kv-out, --warmup]\n"
	    "       %s -m MODEL --embed [--pooling mean|last] [--normalize] [--lines] [-t THREADS]\n",
	    argv0, argv0, argv0);
	if (status == 0)
		printf("every option and what it does: man llm-decode, or man -l man/llm-decode.1\n");
	exit(status);
}

#define MAX_STOPS 16	/* --stop strings */

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

/* A --kv-type argument, or exit 2 naming the types. */
static int
cache_type(const char *opt, const char *arg)
{
	int t = kv_type_parse(arg);

	if (t < 0)
		die(2, "%s: '%s': expected f32, f16, q8_0 or q4_0", opt, arg);
	return t;
}

struct run {
	struct model m;
	struct model_run run;	/* the sequence's buffers */
	struct kv kv;
	struct snapshot snap;	/* --kv-in's, mapped while the cache reads its rows in place */
	int have_snap;
	struct pool *pool;
	const char *model_path, *kv_out;
	struct ids fed;		/* the token at each position of the cache */
	int n_prompt, n_gen, reused, computed;
	double t_start, t_prefill, t_first, t_end;
	uint64_t seed;
	int threads, stats, stats_json, quiet, greedy;
	char msg[600];		/* why the run failed (END_FAIL) */
};

/* Set by the handler of SIGINT and SIGTERM; the loops look at it between steps. */
static volatile sig_atomic_t stop_signal;

static void
on_signal(int sig)
{
	stop_signal = sig;
}

/*
 * SIGINT and SIGTERM finish the current batch or token, then the run
 * saves its cache and exits.  SA_RESETHAND: a second signal kills at
 * once (the snapshot is written by rename, so an old one survives).
 * Installed only once the input is read: until then nothing is lost by
 * dying, and a read blocked on a terminal must stay interruptible.
 * --lines reads as it goes: without restart, a read blocked on a
 * terminal returns at the signal (EINTR).
 */
static void
catch_signals(int restart)
{
	catch_signal(SIGINT, on_signal, SA_RESETHAND | (restart ? SA_RESTART : 0));
	catch_signal(SIGTERM, on_signal, SA_RESETHAND | (restart ? SA_RESTART : 0));
}

static void
print_stats(const struct run *r)
{
	double prefill = r->t_prefill - r->t_start;
	double decode = r->t_end - r->t_first;
	double ttft = r->n_gen ? (r->t_first - r->t_start) * 1e3 : 0;
	double prefill_tps = prefill > 0 ? (r->n_prompt - r->reused) / prefill : 0;
	double decode_tps = r->n_gen > 1 && decode > 0 ? (r->n_gen - 1) / decode : 0;
	/* the global layers' window's evictions */
	int evicted = r->kv.seq_len ? kv_win_evicted(&r->kv.win[0], r->kv.seq_len - 1) : 0;
	struct json j;

	if (r->stats) {
		char rate[64] = "", seed[64] = "";
		/* a rate takes two tokens (the first ends the prefill); a greedy run has no seed */
		if (r->n_gen > 1)
			snprintf(rate, sizeof rate, " at %.1f tok/s", decode_tps);
		if (!r->greedy)
			snprintf(seed, sizeof seed, ", seed %llu", (unsigned long long)r->seed);
		char prompt[96];
		/* the rate is that of the tokens computed: a resume's reused ones took no time */
		if (r->reused)
			snprintf(prompt, sizeof prompt, "%d prompt tokens (%d reused, %d computed at %.1f tok/s)",
			    r->n_prompt, r->reused, r->n_prompt - r->reused, prefill_tps);
		else
			snprintf(prompt, sizeof prompt, "%d prompt tokens at %.1f tok/s", r->n_prompt, prefill_tps);
		fprintf(stderr, "%s: %s, %d generated%s, "
		    "ttft %.1f ms, %d tokens reused from a snapshot\n%s: kv %zu bytes (%d of %d positions allocated, "
		    "%zu resident, %.1f ms growing), peak rss %zu bytes, %d threads%s\n",
		    argv0, prompt, r->n_gen, rate, ttft, r->reused,
		    argv0, kv_bytes(&r->kv), r->kv.cap, r->kv.max_ctx, kv_resident_bytes(&r->kv),
		    r->kv.grow_seconds * 1e3, peak_rss_bytes(), r->threads, seed);
	}
	if (r->stats && r->kv.win[0].window)
		fprintf(stderr, "%s: kv window: %d sinks and the newest %d positions in %d slots, "
		    "%d positions evicted\n", argv0, r->kv.win[0].sinks, r->kv.win[0].window,
		    r->kv.win[0].slots, evicted);
	if (r->stats && r->kv.slides)
		fprintf(stderr, "%s: kv sliding layers: the newest %d positions in %d slots\n", argv0,
		    r->kv.win[1].window, r->kv.win[1].slots);
	if (r->stats_json) {
		json_begin(&j, stderr);
		json_int(&j, "prompt_tokens", r->n_prompt);
		json_int(&j, "generated_tokens", r->n_gen);
		json_num(&j, "ttft_ms", ttft);
		json_num(&j, "prefill_tok_s", prefill_tps);
		json_num(&j, "decode_tok_s", decode_tps);
		json_int(&j, "kv_bytes", (long long)kv_bytes(&r->kv));
		json_str(&j, "kv_type_k", kv_type_name(r->kv.k_type));
		json_str(&j, "kv_type_v", kv_type_name(r->kv.v_type));
		json_num(&j, "kv_bytes_per_pos", kv_bytes_per_pos(&r->kv));
		json_int(&j, "kv_resident_bytes", (long long)kv_resident_bytes(&r->kv));
		json_int(&j, "kv_shared_bytes", (long long)kv_shared_bytes(&r->kv));
		json_int(&j, "rss_anon_bytes", (long long)rss_anon_bytes());
		json_num(&j, "kv_grow_ms", r->kv.grow_seconds * 1e3);
		json_int(&j, "kv_capacity", r->kv.cap);
		json_int(&j, "max_ctx", r->kv.max_ctx);
		json_int(&j, "kv_window", r->kv.win[0].window);
		json_int(&j, "kv_sinks", r->kv.win[0].sinks);
		json_int(&j, "kv_evicted", evicted);
		json_int(&j, "kv_sliding_window", r->kv.slides ? r->kv.win[1].window : 0);
		json_int(&j, "reused_tokens", r->reused);
		json_int(&j, "computed_tokens", r->computed);
		json_int(&j, "peak_rss_bytes", (long long)peak_rss_bytes());
		json_int(&j, "weight_bytes", (long long)model_weight_bytes(&r->m));
		json_int(&j, "threads", r->threads);
		json_str(&j, "isa", kernels_isa_name(kernels_isa()));
		json_str(&j, "compiler", llm_compiler());
		json_int(&j, "seed", (long long)r->seed);
		json_end(&j);
	}
}

/*
 * One line of progress on a terminal for a long prefill or scoring run:
 * drawn once the work has taken a second, redrawn at most ten times a
 * second, cleared at the end.  Nothing when stderr is not a terminal or
 * with -q.
 */
static int progress_on;
static double progress_t0, progress_last;
static int progress_drawn;

static void
progress_start(int quiet)
{
	progress_on = !quiet && isatty(STDERR_FILENO);
	progress_t0 = progress_last = now_seconds();
	progress_drawn = 0;
}

static void
progress(int done, int total)
{
	double t = now_seconds(), rate;

	if (!progress_on || t - progress_t0 < 1 || t - progress_last < 0.1 || done <= 0)
		return;
	progress_last = t;
	rate = done / (t - progress_t0);
	fprintf(stderr, "\r%s: %d/%d tokens, %.0f tok/s, %.0f s left\033[K", argv0, done, total,
	    rate, (total - done) / rate);
	progress_drawn = 1;
}

static void
progress_end(void)
{
	if (progress_drawn)
		fputs("\r\033[K", stderr);
	progress_drawn = 0;
}

/* Record a failure of the model (context full, out of memory) for finish(). */
static enum end
model_failed(struct run *r)
{
	if (r->n_gen)
		snprintf(r->msg, sizeof r->msg, "%s: %s (%d tokens generated)",
		    r->model_path, llm_err(), r->n_gen);
	else
		snprintf(r->msg, sizeof r->msg, "%s: %s", r->model_path, llm_err());
	return END_FAIL;
}

/* A write to stdout failed: its reader is gone (EPIPE), or it is an error. */
static enum end
stdout_failed(struct run *r)
{
	if (errno == EPIPE)
		return END_PIPE;
	snprintf(r->msg, sizeof r->msg, "stdout: %s", strerror(errno));
	return END_FAIL;
}

/*
 * Run ids[from..to) through the model a batch at a time; between batches
 * a signal stops it.  *logits gets the last token's logits.
 */
static enum end
run_prompt(struct run *r, const int *ids, int from, int to, float **logits)
{
	int i, b;

	progress_start(r->quiet);
	for (i = from; i < to; i += b) {
		if (stop_signal) {
			progress_end();
			return END_SIGNAL;
		}
		b = to - i < MODEL_BATCH ? to - i : MODEL_BATCH;
		if (model_forward(&r->run, &r->kv, ids + i, b, i,
		    i + b == to ? MODEL_OUT_LAST : MODEL_OUT_NONE, NULL) < 0) {
			progress_end();
			return model_failed(r);
		}
		*logits = r->run.logits;
		r->computed += b;
		progress(i + b - from, to - from);
	}
	progress_end();
	return END_DONE;
}

/* --score --grammar: how the stream stands with the grammar, for the last line and the exit status. */
struct scoring {
	struct gstate *gs;	/* NULL: no grammar */
	struct gmask *gm;
	long left_at;		/* the token the grammar refused, or -1 */
};

/*
 * Token id's log-probability from its logits row, under the grammar if
 * there is one: the row masked first, the state on past the token; a
 * token it refuses is -inf, and so is every one after it.
 */
static double
score_token(struct run *r, struct scoring *sc, float *row, int id, long at)
{
	const struct model_config *c = &r->m.c;
	int end[3] = { c->eos_id, c->eot_id, c->eom_id };

	if (!sc->gs)
		return log_prob(row, c->vocab_size, id);
	if (sc->left_at >= 0)
		return -INFINITY;
	gmask_apply(sc->gm, sc->gs, end, 3, row);
	if (!sc->gm->allowed[id]) {
		sc->left_at = at;
		warnx_("stdin: token %ld (id %d): the grammar does not allow it", at, id);
		return -INFINITY;
	}
	gmask_take(sc->gm, sc->gs, id);
	return log_prob(row, c->vocab_size, id);
}

/* Each token's log-probability given those before it, a batch at a time. */
static enum end
score(struct run *r, const int *ids, int n, struct scoring *sc)
{
	size_t V = (size_t)r->m.c.vocab_size;
	float *logits = xmalloc(MODEL_BATCH * V * sizeof *logits);
	double nll = 0, lp;
	enum end end = END_DONE;
	int i, b, k;

	progress_start(r->quiet);
	for (i = 0; i + 1 < n && end == END_DONE; i += b) {
		progress(i, n - 1);
		if (stop_signal) {
			end = END_SIGNAL;
			break;
		}
		/* the last token is only scored, never run */
		b = n - 1 - i < MODEL_BATCH ? n - 1 - i : MODEL_BATCH;
		if (model_forward(&r->run, &r->kv, ids + i, b, i, MODEL_OUT_ALL, logits) < 0) {
			end = model_failed(r);
			break;
		}
		r->computed += b;
		for (k = 0; k < b; k++) {
			lp = score_token(r, sc, logits + k * V, ids[i + k + 1], i + k + 1);
			nll -= lp;
			if ((isinf(lp) ? printf("-inf\n") : printf("%.6f\n", lp)) < 0) {
				end = stdout_failed(r);
				break;
			}
		}
		if (end == END_DONE && fflush(stdout) == EOF)
			end = stdout_failed(r);
	}
	free(logits);
	progress_end();
	/* the stream and the grammar, the last line */
	if (end == END_DONE && sc->gs) {
		if (sc->left_at >= 0)
			printf("grammar: left at token %ld\n", sc->left_at);
		else
			printf("grammar: %s\n", gstate_complete(sc->gs) ? "whole" : "start");
		if (fflush(stdout) == EOF)
			end = stdout_failed(r);
	}
	/* no token scored has no perplexity; a random model's can be vast: %g */
	if (end == END_DONE && !r->quiet && n > 1)
		fprintf(stderr, "scored %d tokens, perplexity %.6g\n", n - 1, exp(nll / (n - 1)));
	else if (end == END_DONE && !r->quiet)
		fprintf(stderr, "scored 0 tokens\n");
	return end;
}

/* Whether --kv-in's snapshot fits the model and the cache made for the run, or exit 1 saying what to do. */
static void
check_snapshot(struct run *r, const char *path)
{
	int what;

	if (snapshot_check(&r->snap, &r->m, &r->kv, &what) < 0)
		die(1, "%s: %s%s", path, llm_err(), what == SNAP_TYPES ?
		    ": resume with the same --kv-type, or recompute" : what == SNAP_WINDOW ?
		    ": resume with the same --kv-window and --kv-sinks, or recompute" : "");
}

/* Resume: reuse the longest common prefix of the snapshot and the prompt. */
static void
resume(struct run *r, const char *path, const int *ids, int n_ids)
{
	int lcp = 0;

	check_snapshot(r, path);
	if ((r->reused = snapshot_resume(&r->snap, &r->kv, ids, n_ids)) < 0)
		die(1, "%s: %s", path, llm_err());
	if (r->reused > 0 || r->quiet)
		return;
	/* a snapshot that gives nothing says why, not only in --stats */
	while (lcp < (int)r->snap.n_pos && lcp < n_ids && snapshot_token(&r->snap, (uint32_t)lcp) ==
	    (uint32_t)ids[lcp])
		lcp++;
	if (lcp == 0)
		warnx_("%s: nothing reused: the input's first token is not the snapshot's", path);
	else if (lcp == 1 && n_ids == 1)
		warnx_("%s: nothing reused: the input is one token, whose logits the snapshot does not "
		    "hold", path);
	else
		warnx_("%s: nothing reused: the %d tokens it shares with the input cannot be loaded "
		    "into this cache (k %s v %s%s; see --kv-in in llm-decode(1))", path, lcp,
		    kv_type_name(r->kv.k_type), kv_type_name(r->kv.v_type),
		    kv_windowed(&r->kv) ? ", windowed" : "");
}

/*
 * --kv-in's snapshot, opened before the cache is made: a cache type or
 * window not given takes the snapshot's, so a resume need not repeat
 * them (one given and different is refused by resume()).
 */
static void
open_snapshot(struct run *r, const char *path, int *k_type, int *v_type, int *window, int *sinks)
{
	if (snapshot_open(&r->snap, path) < 0)
		die(1, "%s: %s", path, llm_err());
	r->have_snap = 1;
	if (*k_type < 0)
		*k_type = r->snap.meta.k_type;
	if (*v_type < 0)
		*v_type = r->snap.meta.v_type;
	if (!*window && r->snap.meta.window) {
		*window = (int)r->snap.meta.window;
		*sinks = (int)r->snap.meta.sinks;
	}
}

/*
 * --warmup: the prompt's first batch through a scratch cache before the
 * clock starts, as llama-bench runs its prompt once first, so that paging
 * in the mapped weights and the first touch of the batch buffers are not
 * counted as prefill.  The real cache still grows as it fills.
 */
static void
warm_up(struct run *r, const int *ids, int n)
{
	struct kv kv;

	if (n > MODEL_BATCH)
		n = MODEL_BATCH;
	if (model_kv_init(&r->m, &kv, n, 0,
	    r->kv.k_type, r->kv.v_type) < 0)
		die(1, "%s", llm_err());
	if (model_forward(&r->run, &kv, ids, n, 0, MODEL_OUT_LAST, NULL) < 0)
		die(1, "%s: warm-up: %s", r->model_path, llm_err());
	kv_free(&kv);
}

static int
save(struct run *r)
{
	struct snap_meta meta;

	snapshot_meta_of(&meta, &r->m, &r->kv);
	if (snapshot_write(r->kv_out, &meta, &r->kv, r->fed.v, r->kv.seq_len) < 0) {
		warnx_("%s: %s", r->kv_out, llm_err());
		return -1;
	}
	return 0;
}

/* The end of every run that computed something: stats, snapshot, status. */
static int
finish(struct run *r, enum end end)
{
	int status;

	print_stats(r);
	status = end == END_SIGNAL ? 128 + stop_signal : end == END_PIPE ? 128 + SIGPIPE :
	    end == END_FAIL ? 1 : 0;
	if (end == END_FAIL)
		warnx_("%s", r->msg);
	if (r->kv_out && save(r) < 0 && status == 0)
		status = 1;
	if (end == END_SIGNAL) {
		/* the prompt's positions the cache holds, those loaded from --kv-in aside */
		int held = r->kv.seq_len < r->n_prompt ? r->kv.seq_len : r->n_prompt;
		warnx_("stopped by %s after %d of %d prompt tokens computed%s and %d generated%s",
		    strsignal(stop_signal), held - r->reused, r->n_prompt - r->reused,
		    r->reused ? " (the rest reused)" : "", r->n_gen,
		    r->kv_out ? "; the cache was saved" : "");
	}
	ids_free(&r->fed);
	kv_free(&r->kv);
	if (r->have_snap)
		snapshot_close(&r->snap);
	model_run_free(&r->run);
	model_free(&r->m);
	pool_destroy(r->pool);
	return status;
}

/*
 * The generated tokens not yet written, with --stop: those that may
 * still turn out to be part of a stop string wait in gen until the
 * stop matcher says they are safe (or the run ends another way).
 */
struct held {
	struct ids gen;		/* every token generated */
	size_t written;
};

/* Write the generated tokens up to upto; 0, or -1 (errno) if stdout failed. */
static int
write_held(struct held *h, size_t upto)
{
	for (; h->written < upto; h->written++)
		if (tokstream_write(stdout, h->gen.v[h->written]) < 0)
			return -1;
	return 0;
}

/*
 * --grammar: the tokens the grammar allows next, the others' logits made
 * -inf; 0, or -1 (the run's msg set) when it allows none.
 */
static int
constrain(struct run *r, struct gstate *gs, struct gmask *gm, float *logits)
{
	const struct model_config *c = &r->m.c;
	int end[3] = { c->eos_id, c->eot_id, c->eom_id }, any;

	any = gmask_apply(gm, gs, end, 3, logits);
	if (!any)
		snprintf(r->msg, sizeof r->msg, "--grammar: no token of the vocabulary can go on "
		    "from the text generated (%d tokens)", r->n_gen);
	return any ? 0 : -1;
}

static enum end
generate(struct run *r, struct sampler *smp, float *logits, int n_predict, int ignore_eos,
    struct stop *st, struct gstate *gs, struct gmask *gm)
{
	struct held h = { { 0 }, 0 };
	enum end end = END_DONE;
	int next, stopped;

	while (r->n_gen < n_predict) {
		if (stop_signal) {
			end = END_SIGNAL;
			break;
		}
		if (gs && constrain(r, gs, gm, logits) < 0) {
			end = END_FAIL;
			break;
		}
		next = sampler_sample(smp, logits);
		/* end of text, of turn (Llama 3's <|eot_id|>) or of message (<|eom_id|>) */
		if (!ignore_eos && (next == r->m.c.eos_id || next == r->m.c.eot_id ||
		    next == r->m.c.eom_id))
			break;
		ids_push(&h.gen, next);
		if (gs)	/* the mask allowed it: the state takes its text */
			gmask_take(gm, gs, next);
		/* a stop string's tokens are never written; those that may begin one wait */
		stopped = st && stop_push(st, next);
		if (write_held(&h, st ? (size_t)st->safe : h.gen.n) < 0) {
			end = stdout_failed(r);
			break;
		}
		if (r->n_gen++ == 0)
			r->t_first = now_seconds();
		r->t_end = now_seconds();
		if (stopped) {
			h.written = h.gen.n;	/* the rest is the stop text */
			break;
		}
		/* a sentence that nothing can follow: the grammar ends the generation */
		if (gs && gstate_finished(gs))
			break;
		sampler_accept(smp, next);
		if (r->n_gen == n_predict)
			break;
		if (model_forward(&r->run, &r->kv, &next, 1, r->kv.seq_len, MODEL_OUT_LAST, NULL) < 0) {
			end = model_failed(r);
			break;
		}
		logits = r->run.logits;
		ids_push(&r->fed, next);
		r->computed++;
	}
	/* however it ended, what waited for a stop string that did not come is written */
	if (end != END_PIPE && write_held(&h, h.gen.n) < 0 && end == END_DONE)
		end = stdout_failed(r);
	ids_free(&h.gen);
	return end;
}

/*
 * The embedding of the token ids in fp (where names it in errors) on a
 * line: dim floats, exact (%.9g), space-separated.
 */
static int
embed_one(struct run *r, FILE *fp, const char *where, int pooling, int normalize, float *out)
{
	struct tokstream ts;
	int *ids, n, d, status = 0;

	tokstream_init(&ts, fp, r->m.c.vocab_size);
	if (tokstream_read_all(&ts, &ids, &n) < 0)
		die(1, "%s: %s", where, llm_err());
	if (n == 0)
		die(1, "%s: no tokens to embed", where);
	if (model_embed(&r->run, &r->kv, ids, n, pooling, normalize, out) < 0)
		die(1, "%s: %s", where, llm_err());
	free(ids);
	for (d = 0; d < r->m.c.dim && status == 0; d++)
		if (printf(d ? " %.9g" : "%.9g", out[d]) < 0)
			status = -1;
	return status < 0 || putchar('\n') == EOF || fflush(stdout) == EOF ? -1 : 0;
}

/*
 * --embed: the whole input is one text, or with --lines each line is one
 * (an empty line is an error: it has no embedding).
 */
static int
embed_inputs(struct run *r, int pooling, int normalize, int lines)
{
	float *out = xmalloc((size_t)r->m.c.dim * sizeof *out);
	char *line = NULL, where[64];
	size_t cap = 0;
	long no = 0;
	int status = 0;
	FILE *fp;

	if (!lines)
		status = embed_one(r, stdin, "stdin", pooling, normalize, out);
	while (lines && status == 0 && getline(&line, &cap, stdin) > 0) {
		no++;
		snprintf(where, sizeof where, "stdin: line %ld", no);
		if (!(fp = fmemopen(line, strlen(line), "r")))
			die(1, "%s:", where);
		status = embed_one(r, fp, where, pooling, normalize, out);
		fclose(fp);
	}
	if (ferror(stdin))
		die(1, "stdin:");
	free(line);
	free(out);
	if (status < 0 && errno != EPIPE)
		warnx_("stdout: %s", strerror(errno));
	kv_free(&r->kv);
	model_run_free(&r->run);
	model_free(&r->m);
	pool_destroy(r->pool);
	return status < 0 ? (errno == EPIPE ? 128 + SIGPIPE : 1) : 0;
}

/*
 * The sequences --lines decodes at once unless -P says: a decode step of
 * 16 is a 16-token product, which reads each weight once for 16 tokens
 * (close to the machine's compute bound on a few cores, bench/HISTORY.md);
 * more gains little and holds more caches.
 */
#define LINES_PARALLEL 16

/*
 * --lines: a prompt (or with --score a stream to score) per input line,
 * read as it is needed, at most parallel of them in flight, decoded
 * together (lib/batch.h); each line's output is written on its own line,
 * in input order, as soon as it and all before it are done.  A bad line
 * is named on stderr and gets an empty output line; the others go on,
 * and the exit status is 1.
 */
struct line {
	long no;
	int *ids, n;
	int slot;		/* its cache, while in flight; -1 */
	int bad;		/* refused before it ran (said on stderr) */
	struct batch_seq q;
};

struct lines {
	struct run *r;
	struct batch b;
	struct kv *kvs;		/* a cache per slot, made when first needed, cleared for the next line */
	struct line **slot;	/* the line in each slot, or NULL */
	int parallel, k_type, v_type, max_ctx, prealloc, window, sinks;
	struct line **q;	/* lines read but not yet written, in order: a ring */
	size_t q_head, q_n, q_cap;
	long read, written;
	int failed;		/* a line failed */
	int verdict;		/* --score under a grammar: 3 if a line is a start only, 4 if one left it */
	long prompt, reused, generated;
};

static void
queue_push(struct lines *L, struct line *ln)
{
	if (L->q_n == L->q_cap) {
		size_t cap = L->q_cap ? 2 * L->q_cap : 64;
		struct line **q = xmalloc(cap * sizeof *q);
		for (size_t i = 0; i < L->q_n; i++)
			q[i] = L->q[(L->q_head + i) % L->q_cap];
		free(L->q);
		L->q = q, L->q_cap = cap, L->q_head = 0;
	}
	L->q[(L->q_head + L->q_n++) % L->q_cap] = ln;
}

static void
line_bad(struct lines *L, struct line *ln, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	warnx_("stdin: line %ld: %s", ln->no, msg);
	ln->bad = 1;
	ln->q.state = SEQ_DONE;
	L->failed = 1;
}

/* A free slot's cache, cleared; made on first use. */
static struct kv *
slot_cache(struct lines *L, int i)
{
	struct kv *kv = &L->kvs[i];
	struct run *r = L->r;

	if (!kv->k) {
		if (model_kv_init(&r->m, kv, L->max_ctx,
		    L->prealloc, L->k_type, L->v_type) < 0 ||
		    (L->window && kv_set_window(kv, L->sinks, L->window) < 0))
			die(1, "%s", llm_err());
	}
	kv_clear(kv);
	return kv;
}

/*
 * The input, read as it comes: whole lines cut from what read(2) gave,
 * so that what is waiting is known (stdio's buffer cannot be asked), and
 * a step never waits for a line that has not come.
 */
struct input {
	char *buf;
	size_t start, len, cap;
	int eof;
};

/*
 * The next whole line (its newline replaced by a NUL; the last may lack
 * one) in *line, *n: 1.  0 when none is buffered and wait is 0, at the
 * end of the input (eof set), or at a signal.  A read error exits.
 */
static int
input_line(struct input *in, int wait, char **line, size_t *n)
{
	struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
	char *nl;
	ssize_t got;

	for (;;) {
		nl = in->start < in->len ? memchr(in->buf + in->start, '\n', in->len - in->start) : NULL;
		if (nl || (in->eof && in->start < in->len)) {
			*line = in->buf + in->start;
			*n = nl ? (size_t)(nl - *line) : in->len - in->start;
			(*line)[*n] = '\0';
			in->start += *n + (nl != NULL);
			return 1;
		}
		if (in->eof || (!wait && poll(&p, 1, 0) <= 0))
			return 0;
		if (in->start > 0)
			memmove(in->buf, in->buf + in->start, in->len - in->start);
		in->len -= in->start;
		in->start = 0;
		if (in->len + 4096 > in->cap) {
			in->cap = 2 * in->cap + 8192;
			in->buf = xrealloc(in->buf, in->cap);
		}
		/* one byte left for the NUL of a last line without a newline */
		if ((got = read(STDIN_FILENO, in->buf + in->len, in->cap - in->len - 1)) < 0) {
			if (errno == EINTR && stop_signal)
				return 0;
			if (errno != EINTR)
				die(1, "stdin:");
		} else if (got == 0)
			in->eof = 1;
		else
			in->len += (size_t)got;
	}
}

/*
 * Read one line, if one is there (or wait for one), into a new line of
 * the queue, and start it in a free slot: 1, or 0 if none was read.
 */
static int
read_line(struct lines *L, struct input *in, int wait)
{
	struct run *r = L->r;
	struct line *ln;
	struct tokstream ts;
	char *text;
	size_t len;
	FILE *fp;
	int i, pos = 0;

	if (!input_line(in, wait, &text, &len))
		return 0;
	ln = xcalloc(1, sizeof *ln);
	ln->no = ++L->read;
	ln->slot = -1;
	queue_push(L, ln);
	i = 0;
	if (len == 0)	/* fmemopen takes no empty buffer */
		ln->ids = xmalloc(sizeof *ln->ids);
	else {
		if (!(fp = fmemopen(text, len, "r")))
			die(1, "stdin: line %ld:", ln->no);
		tokstream_init(&ts, fp, r->m.c.vocab_size);
		i = tokstream_read_all(&ts, &ln->ids, &ln->n);
		fclose(fp);
	}
	if (i < 0)
		return line_bad(L, ln, "%s", llm_err()), 1;
	if (ln->n == 0 && !L->b.score) {
		/* an empty prompt starts from BOS, as a fresh text would (and as alone) */
		if (r->m.c.bos_id < 0)
			return line_bad(L, ln, "empty prompt, and the model has no BOS token"), 1;
		ln->ids[ln->n++] = r->m.c.bos_id;
	}
	if (ln->n > L->max_ctx && !L->window)
		return line_bad(L, ln, "%d prompt tokens do not fit max_ctx %d", ln->n, L->max_ctx), 1;
	for (i = 0; L->slot[i]; i++)
		;
	struct kv *kv = slot_cache(L, i);
	if (r->have_snap && (pos = snapshot_resume(&r->snap, kv, ln->ids, ln->n)) < 0)
		return line_bad(L, ln, "%s", llm_err()), 1;
	L->prompt += ln->n;
	L->reused += pos;
	batch_start(&L->b, &ln->q, ln->ids, ln->n, kv, pos);
	if (ln->q.state != SEQ_DONE) {
		ln->slot = i;
		L->slot[i] = ln;
	} else
		kv_clear(kv);	/* lets the snapshot go */
	return 1;
}

/* Write the done lines at the head of the queue; 0, or -1 (errno) if stdout failed. */
static int
write_ready(struct lines *L)
{
	struct line *ln;
	int wrote = 0;

	while (L->q_n > 0 && (ln = L->q[L->q_head])->q.state == SEQ_DONE) {
		if (L->b.score && !ln->bad) {
			double ppl = ln->q.scored ? exp(ln->q.nll / ln->q.scored) : NAN;
			if (printf("%.6f %d %.6g", ln->q.scored ? -ln->q.nll : 0.0, ln->q.scored, ppl) < 0)
				return -1;
			/* under a grammar, how the line stands with it; the exit status is the worst */
			if (L->b.grammar && ln->q.left >= 0) {
				if (printf(" left:%ld", ln->q.left) < 0)
					return -1;
				L->verdict = 4;
			} else if (L->b.grammar && !ln->q.failed) {
				int whole = gstate_complete(&ln->q.gs);
				if (printf(" %s", whole ? "whole" : "start") < 0)
					return -1;
				if (!whole && L->verdict < 3)
					L->verdict = 3;
			}
			if (putchar('\n') == EOF)
				return -1;
		} else {
			for (size_t i = 0; i < ln->q.gen.n; i++)
				if (printf(i ? " %d" : "%d", ln->q.gen.v[i]) < 0)
					return -1;
			if (putchar('\n') == EOF)
				return -1;
		}
		L->generated += (long)ln->q.gen.n;
		batch_seq_free(&ln->q);
		free(ln->ids);
		free(ln);
		L->q_head = (L->q_head + 1) % L->q_cap;
		L->q_n--;
		L->written++;
		wrote = 1;
	}
	return wrote && fflush(stdout) == EOF ? -1 : 0;
}

static void
lines_stats(const struct lines *L, double seconds)
{
	const struct run *r = L->r;
	long computed = L->prompt - L->reused;
	double total = seconds > 0 ? (computed + L->generated) / seconds : 0;
	double gen = seconds > 0 ? L->generated / seconds : 0;
	struct json j;

	if (r->stats)
		fprintf(stderr, "%s: %ld lines, %ld prompt tokens (%ld reused), %ld generated in %.3f s: "
		    "%.1f tok/s in all, %.1f generated; %d passes, -P %d, %d threads, peak rss %zu bytes, "
		    "%zu private\n", argv0, L->written, L->prompt, L->reused, L->generated, seconds,
		    total, gen, L->b.steps, L->parallel, r->threads, peak_rss_bytes(), rss_anon_bytes());
	if (r->stats_json) {
		json_begin(&j, stderr);
		json_int(&j, "lines", L->written);
		json_int(&j, "prompt_tokens", L->prompt);
		json_int(&j, "reused_tokens", L->reused);
		json_int(&j, "generated_tokens", L->generated);
		json_int(&j, "computed_tokens", L->b.computed);
		json_num(&j, "seconds", seconds);
		json_num(&j, "total_tok_s", total);
		json_num(&j, "generated_tok_s", gen);
		json_int(&j, "passes", L->b.steps);
		json_int(&j, "parallel", L->parallel);
		json_int(&j, "threads", r->threads);
		json_int(&j, "peak_rss_bytes", (long long)peak_rss_bytes());
		json_int(&j, "rss_anon_bytes", (long long)rss_anon_bytes());
		json_str(&j, "isa", kernels_isa_name(kernels_isa()));
		json_str(&j, "compiler", llm_compiler());
		json_end(&j);
	}
}

static int
decode_lines(struct lines *L)
{
	struct run *r = L->r;
	struct input in = { 0 };
	int i, status;
	enum end end = END_DONE;
	double t0 = now_seconds();

	L->kvs = xcalloc((size_t)L->parallel, sizeof *L->kvs);
	L->slot = xcalloc((size_t)L->parallel, sizeof *L->slot);
	catch_signals(0);
	for (;;) {
		/* lines done are written before any wait for input */
		if (write_ready(L) < 0) {
			end = stdout_failed(r);
			break;
		}
		/* new lines fill the free slots; with none live, wait for one */
		while (!in.eof && !stop_signal && L->b.n_live < L->parallel &&
		    read_line(L, &in, L->b.n_live == 0))
			if (L->b.n_live == 0 && write_ready(L) < 0)
				break;
		if (stop_signal) {
			end = END_SIGNAL;
			break;
		}
		if (ferror(stdout) || write_ready(L) < 0) {
			end = stdout_failed(r);
			break;
		}
		if (in.eof && L->b.n_live == 0)
			break;
		if (L->b.n_live == 0)
			continue;
		if (batch_step(&L->b) < 0) {
			snprintf(r->msg, sizeof r->msg, "%s: %s", r->model_path, llm_err());
			end = END_FAIL;
		}
		/* the lines done leave their slots; those that failed say why */
		for (i = 0; i < L->parallel; i++) {
			struct line *ln = L->slot[i];
			if (!ln || ln->q.state != SEQ_DONE)
				continue;
			if (ln->q.failed) {
				warnx_("stdin: line %ld: %s (%zu tokens generated)", ln->no, ln->q.err,
				    ln->q.gen.n);
				L->failed = 1;
			}
			kv_clear(&L->kvs[i]);
			L->slot[i] = NULL;
		}
		if (end == END_FAIL)
			break;
	}
	if ((end == END_SIGNAL || end == END_FAIL) && write_ready(L) < 0)
		end = stdout_failed(r);
	lines_stats(L, now_seconds() - t0);
	status = end == END_SIGNAL ? 128 + stop_signal : end == END_PIPE ? 128 + SIGPIPE :
	    end == END_FAIL || L->failed ? 1 : L->verdict;
	if (end == END_FAIL && r->msg[0])
		warnx_("%s", r->msg);
	if (end == END_SIGNAL)
		warnx_("stopped by %s after %ld lines", strsignal(stop_signal), L->written);
	while (L->q_n > 0) {
		struct line *ln = L->q[L->q_head];
		batch_seq_free(&ln->q);
		free(ln->ids);
		free(ln);
		L->q_head = (L->q_head + 1) % L->q_cap;
		L->q_n--;
	}
	for (i = 0; i < L->parallel; i++)
		kv_free(&L->kvs[i]);
	free(L->kvs), free(L->slot), free(L->q), free(in.buf);
	if (L->b.gm) {
		struct tok *t = (struct tok *)L->b.gm->t;
		gmask_free(L->b.gm);
		grammar_free((struct grammar *)L->b.grammar);
		if (!L->b.tok)
			tok_free(t);
	}
	if (L->b.tok)
		tok_free((struct tok *)L->b.tok);
	batch_free(&L->b);
	if (r->have_snap)
		snapshot_close(&r->snap);
	model_run_free(&r->run);
	model_free(&r->m);
	pool_destroy(r->pool);
	return status;
}

int
main(int argc, char *argv[])
{
	enum { O_CTX = 256, O_IGNORE_EOS, O_PREALLOC, O_SCORE, O_STATS, O_STATS_JSON, O_KV_IN,
		O_KV_OUT, O_KV_TYPE, O_KV_TYPE_K, O_KV_TYPE_V, O_KV_WINDOW, O_KV_SINKS, O_WARMUP,
		O_EMBED, O_POOLING, O_NORMALIZE, O_LINES, O_STOP, O_GRAMMAR, O_GRAMMAR_FILE, O_JSON_SCHEMA,
		O_PRINT_GRAMMAR };
	static const struct option longopts[] = {
		{ "ctx", required_argument, NULL, O_CTX },
		SAMPLING_LONGOPTS,
		{ "stop", required_argument, NULL, O_STOP },
		{ "grammar", required_argument, NULL, O_GRAMMAR },
		{ "grammar-file", required_argument, NULL, O_GRAMMAR_FILE },
		{ "json-schema", required_argument, NULL, O_JSON_SCHEMA },
		{ "print-grammar", no_argument, NULL, O_PRINT_GRAMMAR },
		{ "ignore-eos", no_argument, NULL, O_IGNORE_EOS },
		{ "kv-prealloc", no_argument, NULL, O_PREALLOC },
		{ "kv-in", required_argument, NULL, O_KV_IN },
		{ "kv-out", required_argument, NULL, O_KV_OUT },
		{ "kv-type", required_argument, NULL, O_KV_TYPE },
		{ "kv-type-k", required_argument, NULL, O_KV_TYPE_K },
		{ "kv-type-v", required_argument, NULL, O_KV_TYPE_V },
		{ "kv-window", required_argument, NULL, O_KV_WINDOW },
		{ "kv-sinks", required_argument, NULL, O_KV_SINKS },
		{ "warmup", no_argument, NULL, O_WARMUP },
		{ "embed", no_argument, NULL, O_EMBED },
		{ "pooling", required_argument, NULL, O_POOLING },
		{ "normalize", no_argument, NULL, O_NORMALIZE },
		{ "lines", no_argument, NULL, O_LINES },
		{ "parallel", required_argument, NULL, 'P' },
		{ "score", no_argument, NULL, O_SCORE },
		{ "stats", no_argument, NULL, O_STATS },
		{ "stats-json", no_argument, NULL, O_STATS_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static struct run r;
	struct tokstream ts;
	struct sampler smp;
	const char *kv_in = NULL;
	struct sampling sa;
	float *logits = NULL;
	int n_stops = 0;
	char *stops[MAX_STOPS];
	struct tok tok;
	struct stop stop;
	struct grammar gram;
	struct gstate gstate;
	struct gmask gmask;
	const char *grammar = NULL, *grammar_file = NULL, *schema = NULL;
	char *compiled = NULL, glabel[300];
	struct buf gtext = { 0 };
	int n_predict = 128, ctx = 0, ignore_eos = 0, prealloc = 0;
	int do_score = 0, warmup = 0, n_set = 0, status, grammar_status = 0;
	int embed = 0, pooling = -1, normalize = 0, lines = 0, parallel = 0, print_grammar = 0;
	int kv_type = -1, k_type = -1, v_type = -1, window = 0, sinks = -1;
	int *ids, n_ids, c;
	enum end end;

	argv0 = "llm-decode";
	argv[0] = (char *)argv0;	/* getopt's own messages name the tool as ours do */
	r.threads = pool_default_threads();
	sampling_defaults(&sa);
	while ((c = getopt_long(argc, argv, "m:n:t:P:qh", longopts, NULL)) != -1) {
		if (sampling_option(&sa, c, optarg))
			continue;
		switch (c) {
		case 'm': r.model_path = optarg; break;
		case 'n':
			n_predict = (int)opt_int("-n", optarg, 0, 1 << 30);
			n_set = 1;
			break;
		case 't': r.threads = (int)opt_int("-t", optarg, 1, 256); break;
		case 'P': parallel = (int)opt_int("-P", optarg, 1, MODEL_BATCH); break;
		case O_CTX: ctx = (int)opt_int("--ctx", optarg, 1, KV_MAX_CTX); break;
		case O_STOP:
			if (!*optarg)
				die(2, "--stop: an empty string would stop before the first token");
			if (n_stops == MAX_STOPS)
				die(2, "--stop: at most %d stop strings", MAX_STOPS);
			stops[n_stops++] = optarg;
			break;
		case O_IGNORE_EOS: ignore_eos = 1; break;
		case O_PREALLOC: prealloc = 1; break;
		case O_KV_IN: kv_in = optarg; break;
		case O_KV_OUT: r.kv_out = optarg; break;
		case O_KV_TYPE: kv_type = cache_type("--kv-type", optarg); break;
		case O_KV_TYPE_K: k_type = cache_type("--kv-type-k", optarg); break;
		case O_KV_TYPE_V: v_type = cache_type("--kv-type-v", optarg); break;
		case O_KV_WINDOW: window = (int)opt_int("--kv-window", optarg, 1, KV_MAX_CTX); break;
		case O_KV_SINKS: sinks = (int)opt_int("--kv-sinks", optarg, 0, KV_MAX_CTX); break;
		case O_WARMUP: warmup = 1; break;
		case O_EMBED: embed = 1; break;
		case O_POOLING:
			if (strcmp(optarg, "mean") == 0)
				pooling = MODEL_POOL_MEAN;
			else if (strcmp(optarg, "last") == 0)
				pooling = MODEL_POOL_LAST;
			else
				die(2, "--pooling: '%s': expected mean or last", optarg);
			break;
		case O_NORMALIZE: normalize = 1; break;
		case O_LINES: lines = 1; break;
		case O_GRAMMAR: grammar = optarg; break;
		case O_GRAMMAR_FILE: grammar_file = optarg; break;
		case O_JSON_SCHEMA: schema = optarg; break;
		case O_PRINT_GRAMMAR: print_grammar = 1; break;
		case O_SCORE: do_score = 1; break;
		case O_STATS: r.stats = 1; break;
		case O_STATS_JSON: r.stats_json = 1; break;
		case 'q': r.quiet = 1; break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc)
		die(2, "'%s': an argument where none goes: prompts come as token ids on standard "
		    "input (llm-tokenize -m MODEL 'TEXT' | llm-decode -m MODEL)", argv[optind]);
	/* the grammar: as given, from a file, or made of a JSON schema (the schema's own errors name its place) */
	if (!!grammar + !!grammar_file + !!schema > 1)
		die(2, "%s and %s conflict: one grammar", grammar ? "--grammar" : "--grammar-file",
		    schema ? "--json-schema" : "--grammar-file");
	if (schema && *schema == '@')
		grammar_file = schema + 1;
	if (grammar_file) {
		const char *opt = schema ? "--json-schema @" : "--grammar-file ";
		FILE *fp = strcmp(grammar_file, "-") == 0 ? NULL : fopen(grammar_file, "r");
		if (strcmp(grammar_file, "-") == 0)
			die(2, "%s-: standard input carries the token ids", opt);
		if (!fp || buf_read_all(&gtext, fp) < 0)
			die(2, "%s%s:", opt, grammar_file);
		fclose(fp);
		buf_add(&gtext, "", 1);
		gtext.n--;
		grammar = gtext.s;
	}
	if (schema)
		snprintf(glabel, sizeof glabel, "--json-schema%s%s", grammar_file ? " " : "",
		    grammar_file ? grammar_file : "");
	else
		snprintf(glabel, sizeof glabel, "%s%s", grammar_file ? "--grammar-file " : "--grammar",
		    grammar_file ? grammar_file : "");
	if (schema) {
		const char *text = grammar_file ? gtext.s : schema;
		if (schema_to_gbnf(text, grammar_file ? gtext.n : strlen(text), &compiled) < 0)
			die(2, "%s: %s", glabel, llm_err());
		grammar = compiled;
	}
	if (grammar && grammar_parse(&gram, grammar, strlen(grammar)) < 0)
		die(2, "%s: %s%s", glabel, schema ? "the grammar made of it: " : "", llm_err());
	if (print_grammar) {
		if (!grammar)
			die(2, "--print-grammar needs --grammar, --grammar-file or --json-schema");
		fputs(grammar, stdout);
		if (*grammar && grammar[strlen(grammar) - 1] != '\n')
			putchar('\n');
		if (fflush(stdout) == EOF || ferror(stdout))
			die(1, "stdout:");
		grammar_free(&gram);
		buf_free(&gtext);
		free(compiled);
		return 0;
	}
	if (!r.model_path)
		usage(2);
	/* Options that contradict each other are refused, never resolved by their order. */
	if (do_score && (n_set || sa.sampling || sa.greedy || sa.seed_set || ignore_eos ||
	    sa.controls || n_stops))
		die(2, "--score and %s conflict: --score generates nothing", n_set ? "-n" :
		    sa.sampling ? sa.sampling : sa.greedy ? "--greedy" : sa.seed_set ? "--seed" :
		    sa.controls ? sa.controls : n_stops ? "--stop" : "--ignore-eos");
	sampling_check(&sa);
	r.greedy = sa.greedy;
	r.seed = sa.seed;
	if (do_score && kv_in)
		die(2, "--score cannot resume from --kv-in: reused positions have no scores");
	if (grammar && embed)
		die(2, "%s and --embed conflict: an embedding generates nothing", glabel);
	if (kv_type >= 0 && (k_type >= 0 || v_type >= 0))
		die(2, "--kv-type and %s conflict: --kv-type sets both", k_type >= 0 ? "--kv-type-k" :
		    "--kv-type-v");
	if (kv_type >= 0)
		k_type = v_type = kv_type;
	/* stdin carries the token ids, stdout the tokens */
	if (strcmp(r.model_path, "-") == 0 || (kv_in && strcmp(kv_in, "-") == 0))
		die(2, "%s -: standard input carries the token ids", kv_in && strcmp(kv_in, "-") == 0 ?
		    "--kv-in" : "-m");
	if (r.kv_out && strcmp(r.kv_out, "-") == 0)
		die(2, "--kv-out -: standard output carries the tokens");
	if (!embed && (pooling >= 0 || normalize))
		die(2, "%s goes with --embed", pooling >= 0 ? "--pooling" : "--normalize");
	if (parallel && (!lines || embed))
		die(2, "-P goes with --lines, and not with --embed");
	if (lines && !embed && (r.kv_out || warmup))
		die(2, "--lines and %s conflict: %s", r.kv_out ? "--kv-out" : "--warmup", r.kv_out ?
		    "there is one snapshot, and many lines" : "the lines are timed as they come");
	if (embed && (kv_in || r.kv_out || do_score))
		die(2, "--embed and %s conflict: an embedding reads and writes no snapshot and "
		    "scores nothing", kv_in ? "--kv-in" : r.kv_out ? "--kv-out" : "--score");
	if (sinks >= 0 && !window)
		die(2, "--kv-sinks needs --kv-window: without a window nothing is evicted");
	if (window && sinks < 0)
		sinks = 4;	/* StreamingLLM's choice */
	/* A write past a file size limit must fail with EFBIG, not kill us. */
	signal(SIGXFSZ, SIG_IGN);
	/* A reader that goes away is noticed as EPIPE: the cache can still be saved. */
	signal(SIGPIPE, SIG_IGN);

	/* a doomed snapshot is refused before any work, not after it */
	if (r.kv_out && snapshot_writable(r.kv_out) < 0)
		die(1, "%s: %s", r.kv_out, llm_err());
	if (model_load(&r.m, r.model_path) < 0)
		die(1, "%s: %s", r.model_path, llm_err());
	/* the stop strings and the grammar are matched on text: the model's tokenizer makes it */
	if ((n_stops || grammar) && tok_load(&tok, &r.m.gguf) < 0)
		die(1, "%s: %s: %s", r.model_path, n_stops ? "--stop" : "--grammar", llm_err());
	if (grammar && gstate_init(&gstate, &gram) < 0)
		die(2, "--grammar: %s", llm_err());
	if (grammar) {
		gstate_for(&gstate, &tok);
		gmask_init(&gmask, &tok);
	}
	if (!(r.pool = pool_create(r.threads)))
		die(1, "%s", llm_err());
	model_run_init(&r.run, &r.m, r.pool);
	if (ctx > r.m.c.context_length && !r.quiet)
		warnx_("warning: --ctx %d is beyond the model's context_length %d", ctx,
		    r.m.c.context_length);
	if (kv_in)
		open_snapshot(&r, kv_in, &k_type, &v_type, &window, &sinks);
	if (model_kv_init(&r.m, &r.kv,
	    ctx ? ctx : r.m.c.context_length, prealloc, k_type < 0 ? KV_F32 : k_type,
	    v_type < 0 ? KV_F32 : v_type) < 0)
		die(1, "%s", llm_err());
	if (window && kv_set_window(&r.kv, sinks, window) < 0)
		die(2, "--kv-window %d --kv-sinks %d: %s", window, sinks, llm_err());

	if (embed)
		return embed_inputs(&r, pooling < 0 ? MODEL_POOL_MEAN : pooling, normalize, lines);
	if (lines) {
		static struct lines L;
		L.r = &r;
		L.parallel = parallel ? parallel : LINES_PARALLEL;
		L.k_type = r.kv.k_type, L.v_type = r.kv.v_type, L.max_ctx = r.kv.max_ctx;
		L.prealloc = prealloc, L.window = window, L.sinks = sinks;
		if (kv_in) {
			/* checked once here, for every line that reads it, with the cache made as theirs */
			check_snapshot(&r, kv_in);
			if (snapshot_verify(&r.snap) < 0)
				die(1, "%s: %s", kv_in, llm_err());
		}
		kv_free(&r.kv);
		batch_init(&L.b, &r.run, L.parallel);
		L.b.score = do_score, L.b.n_predict = n_predict, L.b.ignore_eos = ignore_eos;
		L.b.temp = sa.temp, L.b.top_k = sa.top_k, L.b.top_p = sa.top_p, L.b.seed = r.seed;
		L.b.min_p = sa.min_p, L.b.penalty = sa.penalty, L.b.last_n = sa.last_n;
		L.b.tok = n_stops ? &tok : NULL, L.b.stops = stops, L.b.n_stops = n_stops;
		if (grammar) {
			gstate_free(&gstate);	/* each line has its own */
			L.b.grammar = &gram, L.b.gm = &gmask;
		}
		buf_free(&gtext);	/* the grammar is parsed: its text is not needed */
		free(compiled);
		return decode_lines(&L);
	}
	tokstream_init(&ts, stdin, r.m.c.vocab_size);
	if (isatty(STDIN_FILENO) && !r.quiet)
		warnx_("reading token ids from the terminal, up to end of input (Ctrl-D); "
		    "llm-tokenize makes them from text");
	if (tokstream_read_all(&ts, &ids, &n_ids) < 0)
		die(1, "stdin: %s", llm_err());
	if (n_ids == 0 && !do_score) {
		/* An empty prompt starts from BOS, as a fresh text would. */
		if (r.m.c.bos_id < 0)
			die(1, "stdin: empty prompt, and the model has no BOS token");
		ids[n_ids++] = r.m.c.bos_id;
	}
	if (n_ids > r.kv.max_ctx && !r.kv.win[0].window)
		die(1, "stdin: %d prompt tokens do not fit max_ctx %d", n_ids, r.kv.max_ctx);
	r.n_prompt = n_ids;
	for (c = 0; c < n_ids; c++)
		ids_push(&r.fed, ids[c]);
	if (kv_in)
		resume(&r, kv_in, ids, n_ids);

	if (warmup)
		warm_up(&r, ids, n_ids);
	catch_signals(1);
	r.t_start = now_seconds();
	if (do_score) {
		struct scoring sc = { grammar ? &gstate : NULL, &gmask, -1 };
		end = score(&r, ids, n_ids, &sc);
		if (end == END_DONE && grammar && sc.left_at >= 0)
			grammar_status = 4;
		else if (end == END_DONE && grammar && !gstate_complete(&gstate))
			grammar_status = 3;
		r.t_prefill = r.t_first = r.t_end = now_seconds();
	} else {
		/* The prompt goes through in batches: each weight is read once per batch. */
		end = run_prompt(&r, ids, r.reused, n_ids, &logits);
		r.t_prefill = r.t_first = r.t_end = now_seconds();
		if (end == END_DONE) {
			sampler_init(&smp, r.m.c.vocab_size, sa.temp, sa.top_k, sa.top_p, r.seed);
			sampler_controls(&smp, sa.min_p, sa.penalty, sa.last_n);
			for (c = 0; c < n_ids; c++)
				sampler_accept(&smp, ids[c]);
			if (n_stops)
				stop_init(&stop, &tok, stops, n_stops);
			end = generate(&r, &smp, logits, n_predict, ignore_eos, n_stops ? &stop : NULL,
			    grammar ? &gstate : NULL, &gmask);
			sampler_free(&smp);
			if (n_stops)
				stop_free(&stop);
		}
	}
	if (grammar) {
		gmask_free(&gmask);
		gstate_free(&gstate);
		grammar_free(&gram);
	}
	if (n_stops || grammar)
		tok_free(&tok);
	buf_free(&gtext);
	free(compiled);
	/* Only the positions the cache holds are saved: fed may run one past them. */
	r.fed.n = (size_t)r.kv.seq_len;
	status = finish(&r, end);
	free(ids);
	/* --score --grammar: 3 for the start of a sentence only, 4 for a token refused */
	return status ? status : grammar_status;
}
