/* llm-decode: prompt token ids in, generated token ids out. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/kernels.h"
#include "../lib/schema.h"
#include "../lib/tokstream.h"
#include "decode.h"
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

/* The command line, as given. */
struct opts {
	const char *model, *kv_in, *kv_out;
	struct cache_opts co;
	struct sampling sa;
	int n_predict, n_set, threads, parallel, ignore_eos, warmup, quiet, stats, stats_json;
	int score, embed, pooling, normalize, lines, print_grammar;
	char *stops[MAX_STOPS];
	int n_stops;
	const char *grammar, *grammar_file, *schema;
};

/* The grammar's text: as given, read from a file, or made of a JSON schema; label names it in errors. */
struct gtext {
	const char *text;	/* NULL: no grammar */
	struct buf file;
	char *compiled;
	char label[300];
};

volatile sig_atomic_t stop_signal;

const char *const resume_hints[4] = { NULL, NULL, "resume with the same --kv-type, or recompute",
	"resume with the same --kv-window and --kv-sinks, or recompute" };

static void
on_signal(int sig)
{
	stop_signal = sig;
}

/*
 * SIGINT and SIGTERM finish the current step, then the run saves its
 * cache and exits.  SA_RESETHAND: a second signal kills at once (the
 * snapshot is written by rename, so an old one survives).  Installed
 * only once the input is read: until then nothing is lost by dying, and
 * a read blocked on a terminal must stay interruptible.  --lines reads
 * as it goes: without restart, a read blocked on a terminal returns at
 * the signal (EINTR).
 */
void
catch_signals(int restart)
{
	catch_signal(SIGINT, on_signal, SA_RESETHAND | (restart ? SA_RESTART : 0));
	catch_signal(SIGTERM, on_signal, SA_RESETHAND | (restart ? SA_RESTART : 0));
}

enum end
stdout_failed(struct decode *d)
{
	if (errno == EPIPE)
		return END_PIPE;
	snprintf(d->msg, sizeof d->msg, "stdout: %s", strerror(errno));
	return END_FAIL;
}

int
end_status(enum end end)
{
	return end == END_SIGNAL ? 128 + stop_signal : end == END_PIPE ? 128 + SIGPIPE :
	    end == END_FAIL ? 1 : 0;
}

/* Why the sequence failed, in msg: its grammar, or the model (the context full, out of memory). */
static enum end
seq_failed(struct decode *d, const struct batch_seq *q)
{
	if (q->failed == SEQ_FAIL_GRAMMAR)
		snprintf(d->msg, sizeof d->msg, "--grammar: %s", q->err);
	else if (q->gen.n)
		snprintf(d->msg, sizeof d->msg, "%s: %s (%zu tokens generated)", d->s.model_path,
		    q->err, q->gen.n);
	else
		snprintf(d->msg, sizeof d->msg, "%s: %s", d->s.model_path, q->err);
	return END_FAIL;
}

/* Resume: reuse the longest common prefix of the snapshot and the prompt. */
static void
resume(struct decode *d, struct one *o, const int *ids, int n_ids)
{
	const struct snapshot *snap = &d->s.snap;
	int lcp = 0;

	session_check(&d->s, &o->kv, resume_hints);
	if ((o->reused = snapshot_resume(snap, &o->kv, ids, n_ids)) < 0)
		die(1, "%s: %s", d->kv_in, llm_err());
	if (o->reused > 0 || d->quiet)
		return;
	/* a snapshot that gives nothing says why, not only in --stats */
	while (lcp < (int)snap->n_pos && lcp < n_ids && snapshot_token(snap, (uint32_t)lcp) ==
	    (uint32_t)ids[lcp])
		lcp++;
	if (lcp == 0)
		weprintf("%s: nothing reused: the input's first token is not the snapshot's", d->kv_in);
	else if (lcp == 1 && n_ids == 1)
		weprintf("%s: nothing reused: the input is one token, whose logits the snapshot does not "
		    "hold", d->kv_in);
	else
		weprintf("%s: nothing reused: the %d tokens it shares with the input cannot be loaded "
		    "into this cache (k %s v %s%s; see --kv-in in llm-decode(1))", d->kv_in, lcp,
		    kv_type_name(o->kv.k_type), kv_type_name(o->kv.v_type),
		    kv_windowed(&o->kv) ? ", windowed" : "");
}

/*
 * --warmup: the prompt's first batch through a scratch cache before the
 * clock starts, as llama-bench runs its prompt once first, so that paging
 * in the mapped weights and the first touch of the batch buffers are not
 * counted as prefill.  The real cache still grows as it fills.
 */
static void
warm_up(struct decode *d, const struct kv *like, const int *ids, int n)
{
	struct kv kv;
	struct batch b;
	struct batch_seq q;

	if (model_kv_init(&d->s.m, &kv, n < MODEL_BATCH ? n : MODEL_BATCH, 0, like->k_type,
	    like->v_type) < 0)
		die(1, "%s", llm_err());
	batch_init(&b, &d->s.run, 1);
	/* a token generated: the last one's logits, so the output matrix is paged in as well */
	batch_start(&b, &q, ids, kv.max_ctx, &kv, 0, 1);
	while (q.state != SEQ_DONE && batch_step(&b) == 0)
		;
	if (q.failed)
		die(1, "%s: warm-up: %s", d->s.model_path, q.err);
	batch_seq_free(&q);
	batch_free(&b);
	kv_free(&kv);
}

/* Write the generated tokens [*written, upto); 0, or -1 (errno) if stdout failed. */
static int
write_tokens(const struct batch_seq *q, size_t *written, size_t upto)
{
	for (; *written < upto; ++*written)
		if (tokstream_write(stdout, q->gen.v[*written]) < 0)
			return -1;
	return 0;
}

/* --score: a line for each token scored since the last call; a token the grammar refuses said on stderr. */
static int
write_scores(const struct batch_seq *q, int *shown)
{
	for (; *shown < q->scored; ++*shown) {
		double lp = q->lp[*shown];
		if (q->left == *shown + 1)
			weprintf("stdin: token %ld (id %d): the grammar does not allow it", q->left,
			    q->ids[q->left]);
		if ((isinf(lp) ? printf("-inf\n") : printf("%.6f\n", lp)) < 0)
			return -1;
	}
	return fflush(stdout) == EOF ? -1 : 0;
}

/* --score's last words: the grammar's verdict on stdout, the perplexity on stderr; the grammar's exit status. */
static int
score_verdict(struct decode *d, const struct batch_seq *q, enum end *end)
{
	int n = q->n_ids, status = 0;

	if (d->b.grammar) {
		if (q->left >= 0)
			printf("grammar: left at token %ld\n", q->left), status = 4;
		else if (gstate_complete(&q->gs))
			printf("grammar: whole\n");
		else
			printf("grammar: start\n"), status = 3;
		if (fflush(stdout) == EOF)
			*end = stdout_failed(d);
	}
	/* no token scored has no perplexity; a random model's can be vast: %g */
	if (*end == END_DONE && !d->quiet && n > 1)
		fprintf(stderr, "scored %d tokens, perplexity %.6g\n", n - 1, exp(q->nll / (n - 1)));
	else if (*end == END_DONE && !d->quiet)
		fprintf(stderr, "scored 0 tokens\n");
	return *end == END_DONE ? status : 0;
}

/*
 * One prompt through the loop, a batch of one: the prompt a batch at a
 * time, then the tokens generated written as they come (those that may
 * begin a stop string wait), or each token's score.  Between steps a
 * signal ends it.
 */
static enum end
run_one(struct decode *d, struct one *o, const int *ids, int n)
{
	struct batch_seq *q = &o->seq;
	size_t written = 0, had = 0;
	int shown = 0;
	enum end end = END_DONE;
	double t;

	progress_start(d->quiet);
	batch_start(&d->b, q, ids, n, &o->kv, o->reused, d->n_predict);
	while (q->state != SEQ_DONE) {
		if (stop_signal) {
			end = END_SIGNAL;
			break;
		}
		if (batch_step(&d->b) < 0 || q->failed) {
			if (d->b.score)	/* the tokens scored before it failed stay */
				(void)write_scores(q, &shown);
			end = seq_failed(d, q);
			break;
		}
		t = now_seconds();
		if (q->state == SEQ_PROMPT || (d->b.score && q->state == SEQ_DONE))
			progress(q->pos - o->reused, (d->b.score ? n - 1 : n) - o->reused);
		else if (!o->t_prefill) {
			progress_end();
			o->t_prefill = o->t_first = o->t_end = t;
		}
		if (d->b.score && write_scores(q, &shown) < 0) {
			end = stdout_failed(d);
			break;
		}
		if (q->gen.n > had)
			had = q->gen.n, o->t_end = t;
		if (write_tokens(q, &written, batch_seq_ready(&d->b, q)) < 0) {
			end = stdout_failed(d);
			break;
		}
	}
	progress_end();
	/*
	 * A signal: every token emitted goes into the cache for --kv-out (if
	 * it can); stdout gone: all but the one it did not take.
	 */
	if (q->state != SEQ_DONE)
		batch_end(&d->b, q, end == END_SIGNAL);
	if (!o->t_prefill)
		o->t_prefill = o->t_first = o->t_end = now_seconds();
	/* however it ended, what waited for a stop string that did not come is written */
	if (end != END_PIPE && write_tokens(q, &written, batch_seq_ready(&d->b, q)) < 0 &&
	    end == END_DONE)
		end = stdout_failed(d);
	return end;
}

/* The end of a run that computed something: stats, snapshot, status. */
static int
finish(struct decode *d, struct one *o, enum end end)
{
	int status = end_status(end);

	print_stats(d, o);
	if (end == END_FAIL)
		weprintf("%s", d->msg);
	if (d->kv_out) {
		/* the cache's positions hold the prompt and the tokens generated but the last */
		struct ids fed = { 0 };
		for (int p = 0; p < o->kv.seq_len; p++)
			ids_push(&fed, batch_seq_token(&o->seq, p));
		if (session_save(&d->s, d->kv_out, &o->kv, fed.v) < 0 && status == 0)
			status = 1;
		ids_free(&fed);
	}
	if (end == END_SIGNAL) {
		/* the prompt's positions the cache holds, those loaded from --kv-in aside */
		int held = o->kv.seq_len < o->n_prompt ? o->kv.seq_len : o->n_prompt;
		weprintf("stopped by %s after %d of %d prompt tokens computed%s and %zu generated%s",
		    strsignal(stop_signal), held - o->reused, o->n_prompt - o->reused,
		    o->reused ? " (the rest reused)" : "", o->seq.gen.n,
		    d->kv_out ? "; the cache was saved" : "");
	}
	return status;
}

/* The prompt: every token id of standard input; an empty one is BOS (unless scored). */
static int *
read_prompt(struct decode *d, int *n)
{
	const struct model_config *c = &d->s.m.c;
	struct tokstream ts;
	int *ids;

	tokstream_init(&ts, stdin, c->vocab_size);
	if (isatty(STDIN_FILENO) && !d->quiet)
		weprintf("reading token ids from the terminal, up to end of input (Ctrl-D); "
		    "llm-tokenize makes them from text");
	if (tokstream_read_all(&ts, &ids, n) < 0)
		die(1, "stdin: %s", llm_err());
	if (*n == 0 && !d->b.score) {
		/* An empty prompt starts from BOS, as a fresh text would. */
		if (c->bos_id < 0)
			die(1, "stdin: empty prompt, and the model has no BOS token");
		ids[(*n)++] = c->bos_id;
	}
	return ids;
}

/* One prompt: generated, or scored; the exit status. */
static int
decode_one(struct decode *d, int warmup)
{
	static struct one o;
	enum end end;
	int *ids, n, status, verdict = 0;

	session_cache(&d->s, &o.kv);
	ids = read_prompt(d, &n);
	if (n > o.kv.max_ctx && !o.kv.win[0].window)
		die(1, "stdin: %d prompt tokens do not fit max_ctx %d", n, o.kv.max_ctx);
	o.n_prompt = n;
	if (d->kv_in)
		resume(d, &o, ids, n);
	if (warmup)
		warm_up(d, &o.kv, ids, n);
	catch_signals(1);
	o.t_start = now_seconds();
	end = run_one(d, &o, ids, n);
	if (d->b.score && end == END_DONE)
		verdict = score_verdict(d, &o.seq, &end);
	status = finish(d, &o, end);
	batch_seq_free(&o.seq);
	kv_free(&o.kv);
	free(ids);
	/* --score --grammar: 3 for the start of a sentence only, 4 for a token refused */
	return status ? status : verdict;
}

static void
parse_args(int argc, char *argv[], struct opts *o)
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
	int c, kv_type = -1;

	memset(o, 0, sizeof *o);
	cache_opts_init(&o->co);
	sampling_defaults(&o->sa);
	o->n_predict = 128;
	o->pooling = -1;
	o->threads = pool_default_threads();
	while ((c = getopt_long(argc, argv, "m:n:t:P:qh", longopts, NULL)) != -1) {
		if (sampling_option(&o->sa, c, optarg))
			continue;
		switch (c) {
		case 'm': o->model = optarg; break;
		case 'n':
			o->n_predict = (int)opt_int("-n", optarg, 0, 1 << 30);
			o->n_set = 1;
			break;
		case 't': o->threads = (int)opt_int("-t", optarg, 1, 256); break;
		case 'P': o->parallel = (int)opt_int("-P", optarg, 1, BATCH_LIVE_MAX); break;
		case O_CTX: o->co.ctx = (int)opt_int("--ctx", optarg, 1, KV_MAX_CTX); break;
		case O_STOP:
			if (!*optarg)
				die(2, "--stop: an empty string would stop before the first token");
			if (o->n_stops == MAX_STOPS)
				die(2, "--stop: at most %d stop strings", MAX_STOPS);
			o->stops[o->n_stops++] = optarg;
			break;
		case O_IGNORE_EOS: o->ignore_eos = 1; break;
		case O_PREALLOC: o->co.prealloc = 1; break;
		case O_KV_IN: o->kv_in = optarg; break;
		case O_KV_OUT: o->kv_out = optarg; break;
		case O_KV_TYPE: kv_type = cache_type("--kv-type", optarg); break;
		case O_KV_TYPE_K: o->co.k_type = cache_type("--kv-type-k", optarg); break;
		case O_KV_TYPE_V: o->co.v_type = cache_type("--kv-type-v", optarg); break;
		case O_KV_WINDOW: o->co.window = (int)opt_int("--kv-window", optarg, 1, KV_MAX_CTX); break;
		case O_KV_SINKS: o->co.sinks = (int)opt_int("--kv-sinks", optarg, 0, KV_MAX_CTX); break;
		case O_WARMUP: o->warmup = 1; break;
		case O_EMBED: o->embed = 1; break;
		case O_POOLING:
			if (strcmp(optarg, "mean") == 0)
				o->pooling = MODEL_POOL_MEAN;
			else if (strcmp(optarg, "last") == 0)
				o->pooling = MODEL_POOL_LAST;
			else
				die(2, "--pooling: '%s': expected mean or last", optarg);
			break;
		case O_NORMALIZE: o->normalize = 1; break;
		case O_LINES: o->lines = 1; break;
		case O_GRAMMAR: o->grammar = optarg; break;
		case O_GRAMMAR_FILE: o->grammar_file = optarg; break;
		case O_JSON_SCHEMA: o->schema = optarg; break;
		case O_PRINT_GRAMMAR: o->print_grammar = 1; break;
		case O_SCORE: o->score = 1; break;
		case O_STATS: o->stats = 1; break;
		case O_STATS_JSON: o->stats_json = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc)
		die(2, "'%s': an argument where none goes: prompts come as token ids on standard "
		    "input (llm-tokenize -m MODEL 'TEXT' | llm-decode -m MODEL)", argv[optind]);
	if (kv_type >= 0 && (o->co.k_type >= 0 || o->co.v_type >= 0))
		die(2, "--kv-type and %s conflict: --kv-type sets both", o->co.k_type >= 0 ?
		    "--kv-type-k" : "--kv-type-v");
	if (kv_type >= 0)
		o->co.k_type = o->co.v_type = kv_type;
}

/* The grammar's text, as given, from a file, or made of a JSON schema (the schema's own errors name its place). */
static void
grammar_text(const struct opts *o, struct gtext *g)
{
	const char *file = o->grammar_file;

	if (!!o->grammar + !!o->grammar_file + !!o->schema > 1)
		die(2, "%s and %s conflict: one grammar", o->grammar ? "--grammar" : "--grammar-file",
		    o->schema ? "--json-schema" : "--grammar-file");
	g->text = o->grammar;
	if (o->schema && *o->schema == '@')
		file = o->schema + 1;
	if (file) {
		const char *opt = o->schema ? "--json-schema @" : "--grammar-file ";
		FILE *fp = strcmp(file, "-") == 0 ? NULL : fopen(file, "r");
		if (strcmp(file, "-") == 0)
			die(2, "%s-: standard input carries the token ids", opt);
		if (!fp || buf_read_all(&g->file, fp) < 0)
			die(2, "%s%s:", opt, file);
		fclose(fp);
		buf_add(&g->file, "", 1);
		g->file.n--;
		g->text = g->file.s;
	}
	if (o->schema)
		snprintf(g->label, sizeof g->label, "--json-schema%s%s", file ? " " : "", file ? file : "");
	else
		snprintf(g->label, sizeof g->label, "%s%s", file ? "--grammar-file " : "--grammar",
		    file ? file : "");
	if (o->schema) {
		const char *text = file ? g->file.s : o->schema;
		if (schema_to_gbnf(text, file ? g->file.n : strlen(text), &g->compiled) < 0)
			die(2, "%s: %s", g->label, llm_err());
		g->text = g->compiled;
	}
}

/* Options that contradict each other are refused, never resolved by their order (exit 2). */
static void
check_args(struct opts *o, const struct gtext *g)
{
	const struct sampling *sa = &o->sa;

	if (!o->model)
		usage(2);
	if (o->score && (o->n_set || sa->sampling || sa->greedy || sa->seed_set || o->ignore_eos ||
	    sa->controls || o->n_stops))
		die(2, "--score and %s conflict: --score generates nothing", o->n_set ? "-n" :
		    sa->sampling ? sa->sampling : sa->greedy ? "--greedy" : sa->seed_set ? "--seed" :
		    sa->controls ? sa->controls : o->n_stops ? "--stop" : "--ignore-eos");
	sampling_check(&o->sa);
	if (o->score && o->kv_in)
		die(2, "--score cannot resume from --kv-in: reused positions have no scores");
	if (g->text && o->embed)
		die(2, "%s and --embed conflict: an embedding generates nothing", g->label);
	/* stdin carries the token ids, stdout the tokens */
	if (strcmp(o->model, "-") == 0 || (o->kv_in && strcmp(o->kv_in, "-") == 0))
		die(2, "%s -: standard input carries the token ids", o->kv_in &&
		    strcmp(o->kv_in, "-") == 0 ? "--kv-in" : "-m");
	if (o->kv_out && strcmp(o->kv_out, "-") == 0)
		die(2, "--kv-out -: standard output carries the tokens");
	if (!o->embed && (o->pooling >= 0 || o->normalize))
		die(2, "%s goes with --embed", o->pooling >= 0 ? "--pooling" : "--normalize");
	if (o->parallel && (!o->lines || o->embed))
		die(2, "-P goes with --lines, and not with --embed");
	if (o->lines && !o->embed && (o->kv_out || o->warmup))
		die(2, "--lines and %s conflict: %s", o->kv_out ? "--kv-out" : "--warmup", o->kv_out ?
		    "there is one snapshot, and many lines" : "the lines are timed as they come");
	if (o->embed && (o->kv_in || o->kv_out || o->score))
		die(2, "--embed and %s conflict: an embedding reads and writes no snapshot and "
		    "scores nothing", o->kv_in ? "--kv-in" : o->kv_out ? "--kv-out" : "--score");
	cache_opts_check(&o->co);
}

/* --print-grammar: the grammar's text on stdout; the exit status. */
static int
print_grammar(const struct gtext *g)
{
	if (!g->text)
		die(2, "--print-grammar needs --grammar, --grammar-file or --json-schema");
	fputs(g->text, stdout);
	if (*g->text && g->text[strlen(g->text) - 1] != '\n')
		putchar('\n');
	if (fflush(stdout) == EOF || ferror(stdout)) {
		weprintf("stdout:");
		return 1;
	}
	return 0;
}

/* The session, and the loop set as the options say: its sampling, stop strings and grammar. */
static void
setup(struct decode *d, struct opts *o, const struct gtext *g)
{
	struct batch *b = &d->b;

	d->kv_in = o->kv_in, d->kv_out = o->kv_out, d->threads = o->threads;
	d->stats = o->stats, d->stats_json = o->stats_json, d->quiet = o->quiet;
	d->greedy = o->sa.greedy;
	/* a doomed snapshot is refused before any work, not after it */
	if (d->kv_out && snapshot_writable(d->kv_out) < 0)
		die(1, "%s: %s", d->kv_out, llm_err());
	session_open(&d->s, o->model, o->threads, &o->co, o->quiet);
	batch_init(b, &d->s.run, o->lines ? (o->parallel ? o->parallel : LINES_PARALLEL) : 1);
	/* the stop strings and the grammar are matched on text: the model's tokenizer makes it */
	if ((o->n_stops || g->text) && tok_load(&d->tok, &d->s.m.gguf) < 0)
		die(1, "%s: %s: %s", o->model, o->n_stops ? "--stop" : "--grammar", llm_err());
	if (g->text) {
		gmask_init(&d->gmask, &d->tok);
		b->grammar = &d->gram, b->gm = &d->gmask;
	}
	if (o->n_stops)
		b->tok = &d->tok, b->stops = o->stops, b->n_stops = o->n_stops;
	sampling_set(&o->sa, b);
	b->score = o->score, b->each = !o->lines;
	d->n_predict = o->n_predict, b->ignore_eos = o->ignore_eos;
	if (o->kv_in)
		session_snapshot(&d->s, o->kv_in);
}

int
main(int argc, char *argv[])
{
	static struct decode d;
	static struct opts o;
	struct gtext g = { 0 };
	int status;

	argv0 = "llm-decode";
	argv[0] = (char *)argv0;	/* getopt's own messages name the tool as ours do */
	parse_args(argc, argv, &o);
	grammar_text(&o, &g);
	if (g.text && grammar_parse(&d.gram, g.text, strlen(g.text)) < 0)
		die(2, "%s: %s%s", g.label, o.schema ? "the grammar made of it: " : "", llm_err());
	if (o.print_grammar) {
		status = print_grammar(&g);
		grammar_free(&d.gram);
		buf_free(&g.file);
		free(g.compiled);
		return status;
	}
	check_args(&o, &g);
	if (g.text) {
		/* a grammar no text can match is refused before any work (each sequence has its state) */
		struct gstate gs;
		if (gstate_init(&gs, &d.gram) < 0)
			die(2, "--grammar: %s", llm_err());
		gstate_free(&gs);
	}
	/* A write past a file size limit must fail with EFBIG, not kill us. */
	signal(SIGXFSZ, SIG_IGN);
	/* A reader that goes away is noticed as EPIPE: the cache can still be saved. */
	signal(SIGPIPE, SIG_IGN);

	setup(&d, &o, &g);
	if (o.embed)
		status = embed_inputs(&d, o.pooling < 0 ? MODEL_POOL_MEAN : o.pooling, o.normalize, o.lines);
	else if (o.lines)
		status = decode_lines(&d);
	else
		status = decode_one(&d, o.warmup);
	if (g.text) {
		gmask_free(&d.gmask);
		grammar_free(&d.gram);
	}
	if (o.n_stops || g.text)
		tok_free(&d.tok);
	buf_free(&g.file);
	free(g.compiled);
	batch_free(&d.b);
	session_close(&d.s);
	return status;
}
