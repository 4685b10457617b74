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
#include "../lib/tok.h"
#include "../lib/util.h"
#include "sampling.h"
#include "session.h"
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
	struct session s;	/* the model, and --kv's snapshot while the cache reads its rows in place */
	struct tok tok;
	struct kv kv;
	struct batch b;
	int family;		/* CHAT_NONE: no template, each line continues the text */
	int close_len;		/* the tokens chat_close appends */
	/* the messages so far: their roles set how the next turn renders */
	struct chat_msg *msgs;
	size_t n_msgs, rendered;	/* the first rendered are in conv */
	/* the conversation's ids; between turns the cache holds them all */
	struct ids conv;
	const char *kv_path;
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

/*
 * Run the conversation's ids the cache does not hold yet through it (a
 * closed turn), by the loop with nothing to generate; 0, or -1 said on
 * stderr.
 */
static int
catch_up(struct chat *c)
{
	struct batch_seq q;

	batch_start(&c->b, &q, c->conv.v, (int)c->conv.n, &c->kv, c->kv.seq_len, 0);
	while (q.state != SEQ_DONE && batch_step(&c->b) == 0)
		;
	if (q.failed)
		weprintf("%s: %s", c->s.model_path, q.err);
	batch_seq_free(&q);
	return q.failed ? -1 : 0;
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
	weprintf("turn %d: %s; the conversation is as it was", c->turn + 1, msg);
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
	struct chat_view view;
	struct buf reply = { 0 }, piece = { 0 };
	size_t shown = 0;
	long computed = c->b.computed;

	push_msg(c, CHAT_USER, text);
	if (c->family == CHAT_NONE)
		tok_encode(&c->tok, text, strlen(text), 0, &c->conv);
	else if (chat_render_from(&c->tok, c->family, c->msgs, c->n_msgs, c->rendered, &c->conv) < 0) {
		weprintf("%s: %s", c->s.model_path, llm_err());
		return -1;
	}
	n_prompt = (int)c->conv.n;
	/* a reply must fit, and its close after it */
	room = c->kv.win[0].window ? INT_MAX : c->kv.max_ctx - (int)c->conv.n - c->close_len;
	if (room < 1)
		return refuse(c, n_conv, "%d tokens with this message do not fit the context of %d "
		    "(a larger --ctx, or --kv-window)", (int)c->conv.n + c->close_len + 1, c->kv.max_ctx);
	/* each turn its own draws, by where it starts: the same in a conversation resumed */
	c->b.seed = c->seed + (uint64_t)n_conv;
	batch_start(&c->b, &q, c->conv.v, (int)c->conv.n, &c->kv, c->kv.seq_len,
	    c->n_predict < room ? c->n_predict : room);
	tok_decoder_init(&dec, &c->tok, 0);
	chat_view_init(&view, &c->tok, c->family);
	end = END_TURN;
	while (q.state != SEQ_DONE) {
		/* the prompt goes through whatever comes: the cache keeps whole turns */
		if (got_signal && q.state == SEQ_GEN) {
			batch_end(&c->b, &q, 1);
			end = END_INTERRUPT;
			break;
		}
		if (batch_step(&c->b) < 0 || q.failed) {
			weprintf("%s: %s", c->s.model_path, q.err);
			status = -1;
			break;
		}
		for (; shown < q.gen.n; shown++) {
			if (shown == 0)
				t_first = now_seconds();
			if (!chat_shown(&view, q.gen.v[shown]))	/* harmony's analysis */
				continue;
			piece.n = 0;
			tok_decode(&dec, q.gen.v[shown], &piece);
			buf_add(&reply, piece.s, piece.n);
			if (out(piece.s, piece.n) < 0)
				lost = 1;
		}
		t_last = now_seconds();
		if (lost) {
			batch_end(&c->b, &q, 1);
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
		weprintf("stdout: %s", strerror(out_err));
	if (end == END_TURN && (int)q.gen.n == q.n_predict)
		end = q.n_predict < c->n_predict ? END_CONTEXT : END_LIMIT;
	/* the reply joins the conversation, however it ended, and its turn is closed */
	for (size_t i = 0; i < q.gen.n; i++)
		ids_push(&c->conv, q.gen.v[i]);
	buf_add(&reply, "", 1);
	push_msg(c, CHAT_ASSISTANT, reply.s);
	c->rendered = c->n_msgs;
	if (c->family != CHAT_NONE && chat_close(&c->tok, c->family, &c->conv) < 0)
		weprintf("%s: %s", c->s.model_path, llm_err()), status = -1;
	if (status == 0 && catch_up(c) < 0)
		status = -1;
	if (status == 0 && c->kv_path && session_save(&c->s, c->kv_path, &c->kv, c->conv.v) < 0)
		status = -1;
	if (end == END_CONTEXT)
		weprintf("turn %d: the reply was cut where the context of %d ends; the conversation can "
		    "go no further (a larger --ctx, or --kv-window)", c->turn + 1, c->kv.max_ctx);
	if (c->stats_json) {
		struct json j;
		double decode = t_last - t_first;
		json_begin(&j, stderr);
		json_int(&j, "turn", c->turn + 1);
		json_int(&j, "prompt_tokens", n_prompt);
		json_int(&j, "reused_tokens", reused);
		json_int(&j, "computed_tokens", c->b.computed - computed);
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
resume(struct chat *c, int type, const char *system)
{
	const char *path = c->kv_path;
	const struct snapshot *snap = &c->s.snap;

	session_snapshot(&c->s, path);
	if (type < 0 && snap->meta.k_type != snap->meta.v_type)
		die(1, "%s: its keys are %s and its values %s; llm-chat keeps one type", path,
		    kv_type_name(snap->meta.k_type), kv_type_name(snap->meta.v_type));
	if (!c->s.co.ctx)
		c->s.co.ctx = (int)snap->meta.max_ctx;
	session_cache(&c->s, &c->kv);
	session_check(&c->s, &c->kv, (const char *const[]){ NULL, "another model's conversation",
	    "resume with its --kv-type, or start another",
	    "resume with its --kv-window and --kv-sinks, or start another" });
	for (uint32_t p = 0; p < snap->n_pos; p++)
		ids_push(&c->conv, (int)snapshot_token(snap, p));
	if (c->conv.n == 0)
		die(1, "%s: holds no conversation", path);
	if (snapshot_resume(snap, &c->kv, c->conv.v, (int)c->conv.n) < 0)
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

/* The command line, as given. */
struct opts {
	const char *model, *system;
	struct cache_opts co;
	struct sampling sa;
	int threads, family;
};

static void
parse_args(int argc, char *argv[], struct chat *c, struct opts *o)
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
	int ch;

	sampling_defaults(&o->sa);
	cache_opts_init(&o->co);
	o->threads = pool_default_threads();
	o->family = CHAT_NONE;
	c->n_predict = INT_MAX;
	while ((ch = getopt_long(argc, argv, "m:n:t:qh", longopts, NULL)) != -1) {
		if (sampling_option(&o->sa, ch, optarg))
			continue;
		switch (ch) {
		case 'm': o->model = optarg; break;
		case 'n': c->n_predict = (int)opt_int("-n", optarg, 1, INT_MAX); break;
		case 't': o->threads = (int)opt_int("-t", optarg, 1, 256); break;
		case O_CTX: o->co.ctx = (int)opt_int("--ctx", optarg, 1, KV_MAX_CTX); break;
		case O_SYSTEM: o->system = optarg; break;
		case O_TEMPLATE:
			if ((o->family = chat_parse(optarg)) == CHAT_NONE)
				die(2, "--template: '%s': expected one of %s", optarg, chat_names());
			break;
		case O_KV: c->kv_path = optarg; break;
		case O_KV_TYPE: o->co.k_type = o->co.v_type = cache_type("--kv-type", optarg); break;
		case O_KV_WINDOW: o->co.window = (int)opt_int("--kv-window", optarg, 1, KV_MAX_CTX); break;
		case O_KV_SINKS: o->co.sinks = (int)opt_int("--kv-sinks", optarg, 0, KV_MAX_CTX); break;
		case O_STATS_JSON: c->stats_json = 1; break;
		case 'q': c->quiet = 1; break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc)
		die(2, "'%s': an argument where none goes: the user's turns come on standard input, "
		    "a line each", argv[optind]);
	if (!o->model)
		usage(2);
	if (strcmp(o->model, "-") == 0 || (c->kv_path && strcmp(c->kv_path, "-") == 0))
		die(2, "%s -: standard input carries the user's turns", c->kv_path &&
		    strcmp(c->kv_path, "-") == 0 ? "--kv" : "-m");
	cache_opts_check(&o->co);
	sampling_check(&o->sa);
	c->seed = o->sa.seed;
}

/* The chat template: given, or the model's; one whose control tokens the vocabulary lacks is refused now. */
static void
template(struct chat *c, const struct opts *o)
{
	const char *model = c->s.model_path;

	c->family = o->family != CHAT_NONE ? o->family : chat_detect(&c->s.m.gguf);
	if (c->family == CHAT_NONE && o->system)
		die(1, "%s: --system: the model has no chat template to put it in (give --template "
		    "with one of %s)", model, chat_names());
	if (c->family != CHAT_NONE) {
		struct chat_msg probe = { CHAT_USER, (char *)"" };
		struct ids ids = { 0 };
		if (chat_render(&c->tok, c->family, &probe, 1, &ids) < 0 ||
		    chat_close(&c->tok, c->family, &ids) < 0)
			die(1, "%s: %s", model, llm_err());
		ids.n = 0;
		chat_close(&c->tok, c->family, &ids);
		c->close_len = (int)ids.n;
		ids_free(&ids);
		if (c->family == CHAT_HARMONY && chat_end_id(&c->tok, c->family) < 0)
			die(1, "%s: the harmony template needs the control token <|return|>, which the "
			    "vocabulary lacks", model);
		if (c->family == CHAT_HARMONY && !c->quiet)
			weprintf("%s: harmony: a reply shows its final channel; its analysis goes to the "
			    "cache, not the screen", model);
	} else if (!c->quiet)
		weprintf("%s: no chat template: each line continues the text", model);
}

/* The user's turns, a line each, until the input ends or a signal or an error ends the session; the exit status. */
static int
converse(struct chat *c)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int tty = isatty(STDIN_FILENO) && !c->quiet, failed = 0, status = 0, interrupted = 0, o;

	for (;;) {
		arm_signals();
		if (tty)
			fputs("> ", stderr);
		errno = 0;
		if ((len = getline(&line, &cap, stdin)) < 0) {
			if (got_signal)
				status = 128 + got_signal;
			else if (ferror(stdin)) {
				weprintf("stdin:");
				status = 1;
			}
			if (tty && status != 1)
				fputc('\n', stderr);
			break;
		}
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || strspn(line, " \t") == (size_t)len)
			continue;	/* no turn */
		if (strlen(line) != (size_t)len) {
			weprintf("stdin: turn %d: a NUL byte in the line; the conversation is as it was",
			    c->turn + 1);
			failed = 1;
			continue;
		}
		o = turn(c, line, &interrupted);
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
	return status ? status : failed;
}

int
main(int argc, char *argv[])
{
	static struct chat c;
	static struct opts o;
	struct stat st;
	char *def = NULL;
	int status;

	argv0 = "llm-chat";
	argv[0] = (char *)argv0;
	parse_args(argc, argv, &c, &o);
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);

	if (c.kv_path && stat(c.kv_path, &st) < 0 && errno == ENOENT && snapshot_writable(c.kv_path) < 0)
		die(1, "%s: %s", c.kv_path, llm_err());
	session_open(&c.s, o.model, o.threads, &o.co, c.quiet);
	if (tok_load(&c.tok, &c.s.m.gguf) < 0)
		die(1, "%s: %s", o.model, llm_err());
	template(&c, &o);
	if (c.kv_path && stat(c.kv_path, &st) == 0)
		resume(&c, o.co.k_type, o.system);
	else {
		session_cache(&c.s, &c.kv);
		if (c.tok.add_bos && c.tok.bos >= 0)
			ids_push(&c.conv, c.tok.bos);
		/* the system message as the template renders it: its own where none is given */
		if (c.family != CHAT_NONE && (def = chat_system(&c.s.m.gguf, c.family, o.system)) != NULL)
			push_msg(&c, CHAT_SYSTEM, def);
	}
	batch_init(&c.b, &c.s.run, 1);
	sampling_set(&o.sa, &c.b);
	if (c.family != CHAT_NONE)
		c.b.end_id = chat_end_id(&c.tok, c.family);

	status = converse(&c);
	free(def);
	batch_free(&c.b);
	chat_free(c.msgs, c.n_msgs);
	ids_free(&c.conv);
	kv_free(&c.kv);
	tok_free(&c.tok);
	session_close(&c.s);
	return status;
}
