/* llm-chat: a conversation with a model, a user's turn a line of input. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/batch.h"
#include "../lib/chat.h"
#include "../lib/kernels.h"
#include "../lib/kv.h"
#include "../lib/model.h"
#include "../lib/pool.h"
#include "../lib/snapshot.h"
#include "../lib/tok.h"
#include "../lib/util.h"
#include "sampling.h"
#include "tool.h"

static void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s -m MODEL [--system TEXT] [--template NAME] "
	    "[--kv FILE] [-n N] [-t THREADS] [--ctx N]\n"
	    "       [--greedy | --temp T --top-k K --top-p P --min-p P] [--seed S]\n"
	    "       [--repeat-penalty R [--repeat-last-n N]] [--kv-type T]\n"
	    "       [--kv-window W [--kv-sinks S]] [--stats-json] [-q]\n", argv0);
	if (status == 0)
		printf("every option and what it does: man llm-chat, or man -l man/llm-chat.1\n");
	exit(status);
}

/* How a reply ended, for --stats-json. */
static const char *const ends[] = { "end", "limit", "context", "interrupt" };
enum { END_TURN, END_LIMIT, END_CONTEXT, END_INTERRUPT };

struct chat {
	struct model m;
	struct model_run run;
	struct pool *pool;
	struct tok tok;
	struct kv kv;
	struct snapshot snap;	/* --kv's, mapped while the cache reads its rows in place */
	int have_snap;
	struct batch b;
	int family;		/* CHAT_NONE: no template, each line continues the text */
	int close_len;		/* the tokens chat_close appends */
	/* the messages so far: their roles set how the next turn renders */
	struct chat_msg *msgs;
	size_t n_msgs, rendered;	/* the first rendered are in conv */
	/* the conversation's ids; between turns the cache holds them all */
	struct ids conv;
	const char *model_path, *kv_path;
	int n_predict, turn, stats_json, quiet;
	uint64_t seed;
};

/* Set by SIGINT and SIGTERM: SIGINT ends the reply, SIGTERM the session too. */
static volatile sig_atomic_t got_signal;

static void
on_signal(int sig)
{
	got_signal = sig;
}

/*
 * Armed again before each read and each turn: without SA_RESTART, so a
 * read blocked on a terminal returns at Ctrl-C; SA_RESETHAND, so a
 * second signal within a turn kills at once (a snapshot is written by
 * rename: the last turn's survives).
 */
static void
arm_signals(void)
{
	got_signal = 0;
	catch_signal(SIGINT, on_signal, SA_RESETHAND);
	catch_signal(SIGTERM, on_signal, SA_RESETHAND);
}

static void
push_msg(struct chat *c, int role, const char *text)
{
	c->msgs = xrealloc(c->msgs, (c->n_msgs + 1) * sizeof *c->msgs);
	c->msgs[c->n_msgs].role = role;
	c->msgs[c->n_msgs].text = memcpy(xmalloc(strlen(text) + 1), text, strlen(text) + 1);
	c->n_msgs++;
}

/* Run the conversation's ids the cache does not hold yet through it, a batch at a time; their count, or -1. */
static int
catch_up(struct chat *c)
{
	int pos, n, done = 0;

	for (pos = c->kv.seq_len; pos < (int)c->conv.n; pos += n) {
		n = (int)c->conv.n - pos < MODEL_BATCH ? (int)c->conv.n - pos : MODEL_BATCH;
		if (model_forward(&c->run, &c->kv, c->conv.v + pos, n, pos, MODEL_OUT_NONE, NULL) < 0)
			return -1;
		done += n;
	}
	return done;
}

static int
save(struct chat *c)
{
	struct snap_meta meta;

	snapshot_meta_of(&meta, &c->m, &c->kv);
	if (snapshot_write(c->kv_path, &meta, &c->kv, c->conv.v, c->kv.seq_len) < 0) {
		warnx_("%s: %s", c->kv_path, llm_err());
		return -1;
	}
	return 0;
}

/* The errno of stdout's first failure; after one, nothing more is written. */
static int out_err;

/* Write s to stdout now; -1 if it fails, or failed before. */
static int
out(const char *s, size_t n)
{
	if (out_err)
		return -1;
	if ((n && fwrite(s, 1, n, stdout) != n) || fflush(stdout) == EOF) {
		out_err = errno ? errno : EIO;
		return -1;
	}
	return 0;
}

/*
 * A turn that cannot be taken: said on stderr, its reply an empty line
 * (the replies stay a line a turn for a script), the conversation as it
 * was.  1, or -2 if stdout's reader went away.
 */
static int
refuse(struct chat *c, size_t n_conv, const char *fmt, int a, int b)
{
	char msg[256];

	snprintf(msg, sizeof msg, fmt, a, b);
	warnx_("turn %d: %s; the conversation is as it was", c->turn + 1, msg);
	c->conv.n = n_conv;
	free(c->msgs[--c->n_msgs].text);
	c->turn++;
	return out("\n", 1) < 0 ? (out_err == EPIPE ? -2 : -1) : 1;
}

/*
 * One turn: the user's text rendered and run, the reply generated and
 * written as text, then the turn closed and run too, so that the cache
 * holds the whole conversation, and with --kv saved.  0; 1 if the turn
 * was refused (the session goes on); -1 if the session must end on an
 * error said on stderr; -2 if stdout's reader went away (the turn is
 * still closed and saved: what the model said stays said).
 */
static int
turn(struct chat *c, const char *text, int *interrupted)
{
	size_t n_conv = c->conv.n;
	int reused = c->kv.seq_len, n_prompt, room, end, status = 0, lost = 0;
	double t0 = now_seconds(), t_first = 0, t_last = 0;
	struct batch_seq q;
	struct tok_decoder dec;
	struct buf reply = { 0 }, piece = { 0 };
	size_t shown = 0;
	long computed = c->b.computed, closed = 0;

	push_msg(c, CHAT_USER, text);
	if (c->family == CHAT_NONE)
		tok_encode(&c->tok, text, strlen(text), 0, &c->conv);
	else if (chat_render_from(&c->tok, c->family, c->msgs, c->n_msgs, c->rendered, &c->conv) < 0) {
		warnx_("%s: %s", c->model_path, llm_err());
		return -1;
	}
	n_prompt = (int)c->conv.n;
	/* a reply must fit, and its close after it */
	room = c->kv.win[0].window ? INT_MAX : c->kv.max_ctx - (int)c->conv.n - c->close_len;
	if (room < 1)
		return refuse(c, n_conv, "%d tokens with this message do not fit the context of %d "
		    "(a larger --ctx, or --kv-window)", (int)c->conv.n + c->close_len + 1, c->kv.max_ctx);
	c->b.n_predict = c->n_predict < room ? c->n_predict : room;
	/* each turn its own draws, by where it starts: the same in a conversation resumed */
	c->b.seed = c->seed + (uint64_t)n_conv;
	batch_start(&c->b, &q, c->conv.v, (int)c->conv.n, &c->kv, c->kv.seq_len);
	tok_decoder_init(&dec, &c->tok, 0);
	end = END_TURN;
	while (q.state != SEQ_DONE) {
		/* the prompt goes through whatever comes: the cache keeps whole turns */
		if (got_signal && q.state == SEQ_GEN) {
			batch_end(&c->b, &q);
			end = END_INTERRUPT;
			break;
		}
		if (batch_step(&c->b) < 0 || q.failed) {
			warnx_("%s: %s", c->model_path, q.failed ? q.err : llm_err());
			status = -1;
			break;
		}
		for (; shown < q.gen.n; shown++) {
			if (shown == 0)
				t_first = now_seconds();
			piece.n = 0;
			tok_decode(&dec, q.gen.v[shown], &piece);
			buf_add(&reply, piece.s, piece.n);
			if (out(piece.s, piece.n) < 0)
				lost = 1;
		}
		t_last = now_seconds();
		if (lost) {
			batch_end(&c->b, &q);
			break;
		}
	}
	piece.n = 0;
	tok_decode_finish(&dec, &piece);
	buf_add(&reply, piece.s, piece.n);
	/* a newline ends the reply, unless it ends with one (as llm-tokenize -d ends a text) */
	if (out(piece.s, piece.n) < 0 || ((reply.n == 0 || reply.s[reply.n - 1] != '\n') &&
	    out("\n", 1) < 0))
		lost = 1;
	if (lost && out_err != EPIPE)
		warnx_("stdout: %s", strerror(out_err));
	if (end == END_TURN && (int)q.gen.n == c->b.n_predict)
		end = c->b.n_predict < c->n_predict ? END_CONTEXT : END_LIMIT;
	/* the reply joins the conversation, however it ended, and its turn is closed */
	for (size_t i = 0; i < q.gen.n; i++)
		ids_push(&c->conv, q.gen.v[i]);
	buf_add(&reply, "", 1);
	push_msg(c, CHAT_ASSISTANT, reply.s);
	c->rendered = c->n_msgs;
	if (c->family != CHAT_NONE && chat_close(&c->tok, c->family, &c->conv) < 0)
		warnx_("%s: %s", c->model_path, llm_err()), status = -1;
	if (status == 0 && (closed = catch_up(c)) < 0) {
		warnx_("%s: %s", c->model_path, llm_err());
		status = -1;
	}
	if (status == 0 && c->kv_path && save(c) < 0)
		status = -1;
	if (end == END_CONTEXT)
		warnx_("turn %d: the reply was cut where the context of %d ends; the conversation can "
		    "go no further (a larger --ctx, or --kv-window)", c->turn + 1, c->kv.max_ctx);
	if (c->stats_json) {
		struct json j;
		double decode = t_last - t_first;
		json_begin(&j, stderr);
		json_int(&j, "turn", c->turn + 1);
		json_int(&j, "prompt_tokens", n_prompt);
		json_int(&j, "reused_tokens", reused);
		json_int(&j, "computed_tokens", c->b.computed - computed + (closed > 0 ? closed : 0));
		json_int(&j, "generated_tokens", (long long)q.gen.n);
		json_str(&j, "end", ends[end]);
		json_num(&j, "ttft_ms", q.gen.n ? (t_first - t0) * 1e3 : 0);
		json_num(&j, "decode_tok_s", q.gen.n > 1 && decode > 0 ? (q.gen.n - 1) / decode : 0);
		json_int(&j, "conversation_tokens", (long long)c->conv.n);
		json_int(&j, "kv_bytes", (long long)kv_bytes(&c->kv));
		json_int(&j, "kv_shared_bytes", (long long)kv_shared_bytes(&c->kv));
		json_int(&j, "seed", (long long)c->b.seed);
		json_end(&j);
	}
	*interrupted = end == END_INTERRUPT;
	batch_seq_free(&q);
	buf_free(&reply);
	buf_free(&piece);
	c->turn++;
	return status < 0 ? status : lost ? (out_err == EPIPE ? -2 : -1) : 0;
}

/* A --kv-type argument, or exit 2 naming the types. */
static int
cache_type(const char *arg)
{
	int t = kv_type_parse(arg);

	if (t < 0)
		die(2, "--kv-type: '%s': expected f32, f16, q8_0 or q4_0", arg);
	return t;
}

/* The text of ids[0..n), NUL-terminated. */
static void
decode(const struct tok *t, const int *ids, size_t n, struct buf *out)
{
	struct tok_decoder d;

	tok_decoder_init(&d, t, 0);
	for (size_t i = 0; i < n; i++)
		tok_decode(&d, ids[i], out);
	tok_decode_finish(&d, out);
	buf_add(out, "", 1);
}

/*
 * --kv FILE that exists: the conversation it holds, its cache types and
 * window unless given (and then they must agree), read in place.
 */
static void
resume(struct chat *c, int *type, int *window, int *sinks, int ctx, const char *system)
{
	const char *path = c->kv_path;
	int what;

	if (snapshot_open(&c->snap, path) < 0)
		die(1, "%s: %s", path, llm_err());
	c->have_snap = 1;
	if (*type < 0 && c->snap.meta.k_type != c->snap.meta.v_type)
		die(1, "%s: its keys are %s and its values %s; llm-chat keeps one type", path,
		    kv_type_name(c->snap.meta.k_type), kv_type_name(c->snap.meta.v_type));
	if (*type < 0)
		*type = c->snap.meta.k_type;
	if (!*window && c->snap.meta.window)
		*window = (int)c->snap.meta.window, *sinks = (int)c->snap.meta.sinks;
	if (model_kv_init(&c->m, &c->kv,
	    ctx ? ctx : (int)c->snap.meta.max_ctx, 0, *type, *type) < 0)
		die(1, "%s", llm_err());
	if (*window && kv_set_window(&c->kv, *sinks, *window) < 0)
		die(2, "--kv-window %d --kv-sinks %d: %s", *window, *sinks, llm_err());
	if (snapshot_check(&c->snap, &c->m, &c->kv, &what) < 0)
		die(1, "%s: %s%s", path, llm_err(), what == SNAP_MODEL ? ": another model's "
		    "conversation" : what == SNAP_TYPES ? ": resume with its --kv-type, or start "
		    "another" : ": resume with its --kv-window and --kv-sinks, or start another");
	for (uint32_t p = 0; p < c->snap.n_pos; p++)
		ids_push(&c->conv, (int)snapshot_token(&c->snap, p));
	if (c->conv.n == 0)
		die(1, "%s: holds no conversation", path);
	if (snapshot_resume(&c->snap, &c->kv, c->conv.v, (int)c->conv.n) < 0)
		die(1, "%s: %s", path, llm_err());
	/* the same --system again is its own; another cannot be put before what was said */
	if (system) {
		/* as text, the way the vocabulary spells it (a character it lacks is lost alike) */
		struct ids sys = { 0 };
		struct buf text = { 0 }, want = { 0 };
		tok_encode(&c->tok, system, strlen(system), 0, &sys);
		decode(&c->tok, sys.v, sys.n, &want);
		decode(&c->tok, c->conv.v, c->conv.n < sys.n + 4096 ? c->conv.n : sys.n + 4096, &text);
		if (!strstr(text.s, want.s))
			die(1, "%s: the conversation began with another system message, which --system "
			    "cannot change", path);
		buf_free(&text), buf_free(&want), ids_free(&sys);
	}
	/* what was said: a user's turn and a reply, as far as rendering goes */
	push_msg(c, CHAT_USER, "");
	push_msg(c, CHAT_ASSISTANT, "");
	c->rendered = c->n_msgs;
}

int
main(int argc, char *argv[])
{
	enum { O_CTX = 256, O_SYSTEM, O_TEMPLATE, O_KV, O_KV_TYPE, O_KV_WINDOW, O_KV_SINKS,
		O_STATS_JSON };
	static const struct option longopts[] = {
		{ "system", required_argument, NULL, O_SYSTEM },
		{ "template", required_argument, NULL, O_TEMPLATE },
		{ "kv", required_argument, NULL, O_KV },
		{ "ctx", required_argument, NULL, O_CTX },
		SAMPLING_LONGOPTS,
		{ "kv-type", required_argument, NULL, O_KV_TYPE },
		{ "kv-window", required_argument, NULL, O_KV_WINDOW },
		{ "kv-sinks", required_argument, NULL, O_KV_SINKS },
		{ "stats-json", no_argument, NULL, O_STATS_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	static struct chat c;
	struct sampling sa;
	struct stat st;
	const char *system = NULL;
	char *line = NULL, *def = NULL;
	size_t cap = 0;
	ssize_t len;
	int threads = pool_default_threads(), ctx = 0, type = -1, window = 0, sinks = -1;
	int family = CHAT_NONE, tty, failed = 0, status = 0, interrupted = 0, o;

	argv0 = "llm-chat";
	argv[0] = (char *)argv0;
	sampling_defaults(&sa);
	c.n_predict = INT_MAX;
	while ((o = getopt_long(argc, argv, "m:n:t:qh", longopts, NULL)) != -1) {
		if (sampling_option(&sa, o, optarg))
			continue;
		switch (o) {
		case 'm': c.model_path = optarg; break;
		case 'n': c.n_predict = (int)opt_int("-n", optarg, 1, INT_MAX); break;
		case 't': threads = (int)opt_int("-t", optarg, 1, 256); break;
		case O_CTX: ctx = (int)opt_int("--ctx", optarg, 1, KV_MAX_CTX); break;
		case O_SYSTEM: system = optarg; break;
		case O_TEMPLATE:
			if ((family = chat_parse(optarg)) == CHAT_NONE)
				die(2, "--template: '%s': expected one of %s", optarg, chat_names());
			break;
		case O_KV: c.kv_path = optarg; break;
		case O_KV_TYPE: type = cache_type(optarg); break;
		case O_KV_WINDOW: window = (int)opt_int("--kv-window", optarg, 1, KV_MAX_CTX); break;
		case O_KV_SINKS: sinks = (int)opt_int("--kv-sinks", optarg, 0, KV_MAX_CTX); break;
		case O_STATS_JSON: c.stats_json = 1; break;
		case 'q': c.quiet = 1; break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc)
		die(2, "'%s': an argument where none goes: the user's turns come on standard input, "
		    "a line each", argv[optind]);
	if (!c.model_path)
		usage(2);
	if (strcmp(c.model_path, "-") == 0 || (c.kv_path && strcmp(c.kv_path, "-") == 0))
		die(2, "%s -: standard input carries the user's turns", c.kv_path &&
		    strcmp(c.kv_path, "-") == 0 ? "--kv" : "-m");
	if (sinks >= 0 && !window)
		die(2, "--kv-sinks needs --kv-window: without a window nothing is evicted");
	if (window && sinks < 0)
		sinks = 4;
	sampling_check(&sa);
	c.seed = sa.seed;
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	if (c.kv_path && stat(c.kv_path, &st) < 0 && errno == ENOENT && snapshot_writable(c.kv_path) < 0)
		die(1, "%s: %s", c.kv_path, llm_err());
	if (model_load(&c.m, c.model_path) < 0)
		die(1, "%s: %s", c.model_path, llm_err());
	if (tok_load(&c.tok, &c.m.gguf) < 0)
		die(1, "%s: %s", c.model_path, llm_err());
	if (family == CHAT_NONE)
		family = chat_detect(&c.m.gguf);
	c.family = family;
	if (family == CHAT_NONE && system)
		die(1, "%s: --system: the model has no chat template to put it in (give --template "
		    "with one of %s)", c.model_path, chat_names());
	if (family != CHAT_NONE) {
		/* a template whose control tokens the vocabulary lacks is refused now */
		struct chat_msg probe = { CHAT_USER, (char *)"" };
		struct ids ids = { 0 };
		if (chat_render(&c.tok, family, &probe, 1, &ids) < 0 || chat_close(&c.tok, family, &ids) < 0)
			die(1, "%s: %s", c.model_path, llm_err());
		ids.n = 0;
		chat_close(&c.tok, family, &ids);
		c.close_len = (int)ids.n;
		ids_free(&ids);
	} else if (!c.quiet)
		warnx_("%s: no chat template: each line continues the text", c.model_path);
	if (!(c.pool = pool_create(threads)))
		die(1, "%s", llm_err());
	model_run_init(&c.run, &c.m, c.pool);
	if (ctx > c.m.c.context_length && !c.quiet)
		warnx_("warning: --ctx %d is beyond the model's context_length %d", ctx,
		    c.m.c.context_length);

	if (c.kv_path && stat(c.kv_path, &st) == 0) {
		resume(&c, &type, &window, &sinks, ctx, system);
	} else {
		if (model_kv_init(&c.m, &c.kv,
		    ctx ? ctx : c.m.c.context_length, 0, type < 0 ? KV_F32 : type,
		    type < 0 ? KV_F32 : type) < 0)
			die(1, "%s", llm_err());
		if (window && kv_set_window(&c.kv, sinks, window) < 0)
			die(2, "--kv-window %d --kv-sinks %d: %s", window, sinks, llm_err());
		if (c.tok.add_bos && c.tok.bos >= 0)
			ids_push(&c.conv, c.tok.bos);
		/* the system message as the template renders it: its own where none is given */
		if (family != CHAT_NONE && (def = chat_system(&c.m.gguf, family, system)) != NULL)
			push_msg(&c, CHAT_SYSTEM, def);
	}
	batch_init(&c.b, &c.run, 1);
	c.b.temp = sa.temp, c.b.top_k = sa.top_k, c.b.top_p = sa.top_p;
	c.b.min_p = sa.min_p, c.b.penalty = sa.penalty, c.b.last_n = sa.last_n;
	if (family != CHAT_NONE)
		c.b.end_id = chat_end_id(&c.tok, family);

	tty = isatty(STDIN_FILENO) && !c.quiet;
	for (;;) {
		arm_signals();
		if (tty)
			fputs("> ", stderr);
		errno = 0;
		if ((len = getline(&line, &cap, stdin)) < 0) {
			if (got_signal) {
				status = 128 + got_signal;
				if (tty)
					fputc('\n', stderr);
			} else if (ferror(stdin)) {
				warnx_("stdin:");
				status = 1;
			} else if (tty)
				fputc('\n', stderr);
			break;
		}
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || strspn(line, " \t") == (size_t)len)
			continue;	/* no turn */
		if (strlen(line) != (size_t)len) {
			warnx_("stdin: turn %d: a NUL byte in the line; the conversation is as it was",
			    c.turn + 1);
			failed = 1;
			continue;
		}
		o = turn(&c, line, &interrupted);
		if (o < 0) {
			status = o == -2 ? 128 + SIGPIPE : 1;
			break;
		}
		failed |= o;
		if (got_signal == SIGTERM) {
			status = 128 + SIGTERM;
			break;
		}
		if (interrupted && tty)
			fputs("(stopped)\n", stderr);
	}
	free(line);
	free(def);
	batch_free(&c.b);
	chat_free(c.msgs, c.n_msgs);
	ids_free(&c.conv);
	kv_free(&c.kv);
	if (c.have_snap)
		snapshot_close(&c.snap);
	tok_free(&c.tok);
	model_run_free(&c.run);
	model_free(&c.m);
	pool_destroy(c.pool);
	return status ? status : failed;
}
