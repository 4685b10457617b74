/*
 * lines.c: llm-decode --lines.  A prompt (or with --score a stream to
 * score) per input line, read as it is needed, at most -P of them in
 * flight, decoded together by the one loop (lib/batch.h); each line's
 * output is written on its own line, in input order, as soon as it and
 * all before it are done.  A bad line is named on stderr and gets an
 * empty output line; the others go on, and the exit status is 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/kernels.h"
#include "../lib/tokstream.h"
#include "decode.h"
#include "tool.h"

struct line {
	long no;
	int *ids, n;
	int slot;		/* its cache, while in flight; -1 */
	int bad;		/* refused before it ran (said on stderr) */
	struct batch_seq seq;
};

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

struct lines {
	struct decode *d;
	struct input in;
	struct kv *kvs;		/* a cache per slot, made when first needed, cleared for the next line */
	struct line **slot;	/* the line in each slot, or NULL */
	struct line **queue;	/* lines read but not yet written, in order: a ring */
	size_t head, queued, cap;
	long read, written;
	int failed;		/* a line failed */
	int verdict;		/* --score under a grammar: 3 if a line is a start only, 4 if one left it */
	long prompt, reused, generated;
};

static void
queue_push(struct lines *L, struct line *ln)
{
	if (L->queued == L->cap) {
		size_t cap = L->cap ? 2 * L->cap : 64;
		struct line **ring = xmalloc(cap * sizeof *ring);
		for (size_t i = 0; i < L->queued; i++)
			ring[i] = L->queue[(L->head + i) % L->cap];
		free(L->queue);
		L->queue = ring, L->cap = cap, L->head = 0;
	}
	L->queue[(L->head + L->queued++) % L->cap] = ln;
}

/* The line at the head of the queue leaves it, freed. */
static void
queue_pop(struct lines *L)
{
	struct line *ln = L->queue[L->head];

	batch_seq_free(&ln->seq);
	free(ln->ids);
	free(ln);
	L->head = (L->head + 1) % L->cap;
	L->queued--;
}

static void
line_bad(struct lines *L, struct line *ln, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	weprintf("stdin: line %ld: %s", ln->no, msg);
	ln->bad = 1;
	ln->seq.state = SEQ_DONE;
	L->failed = 1;
}

/* A free slot's cache, cleared; made on first use. */
static struct kv *
slot_cache(struct lines *L, int i)
{
	struct kv *kv = &L->kvs[i];

	if (!kv->k)
		session_cache(&L->d->s, kv);
	kv_clear(kv);
	return kv;
}

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

/* A line's token ids, an empty prompt made BOS; 0, or -1 (said) for a bad line. */
static int
line_ids(struct lines *L, struct line *ln, char *text, size_t len)
{
	const struct model_config *c = &L->d->s.m.c;
	const struct kv *kv = &L->kvs[0];
	struct tokstream ts;
	FILE *fp;
	int err = 0;

	if (len == 0)	/* fmemopen takes no empty buffer */
		ln->ids = xmalloc(sizeof *ln->ids);
	else {
		if (!(fp = fmemopen(text, len, "r")))
			die(1, "stdin: line %ld:", ln->no);
		tokstream_init(&ts, fp, c->vocab_size);
		err = tokstream_read_all(&ts, &ln->ids, &ln->n);
		fclose(fp);
	}
	if (err < 0)
		return line_bad(L, ln, "%s", llm_err()), -1;
	if (ln->n == 0 && !L->d->b.score) {
		/* an empty prompt starts from BOS, as a fresh text would (and as alone) */
		if (c->bos_id < 0)
			return line_bad(L, ln, "empty prompt, and the model has no BOS token"), -1;
		ln->ids[ln->n++] = c->bos_id;
	}
	if (ln->n > kv->max_ctx && !kv->win[0].window)
		return line_bad(L, ln, "%d prompt tokens do not fit max_ctx %d", ln->n, kv->max_ctx), -1;
	return 0;
}

/*
 * Read one line, if one is there (or wait for one), into a new line of
 * the queue, and start it in a free slot: 1, or 0 if none was read.
 */
static int
read_line(struct lines *L, int wait)
{
	struct decode *d = L->d;
	struct line *ln;
	char *text;
	size_t len;
	int i, pos = 0;

	if (!input_line(&L->in, wait, &text, &len))
		return 0;
	ln = xcalloc(1, sizeof *ln);
	ln->no = ++L->read;
	ln->slot = -1;
	queue_push(L, ln);
	if (line_ids(L, ln, text, len) < 0)
		return 1;
	for (i = 0; L->slot[i]; i++)
		;
	struct kv *kv = slot_cache(L, i);
	if (d->kv_in && (pos = snapshot_resume(&d->s.snap, kv, ln->ids, ln->n)) < 0)
		return line_bad(L, ln, "%s", llm_err()), 1;
	L->prompt += ln->n;
	L->reused += pos;
	if (!d->b.score && d->n_predict == 0)
		ln->seq.state = SEQ_DONE;	/* -n 0: an empty line; no cache outlives the line to fill */
	else
		batch_start(&d->b, &ln->seq, ln->ids, ln->n, kv, pos, d->n_predict);
	if (ln->seq.state != SEQ_DONE) {
		ln->slot = i;
		L->slot[i] = ln;
	} else
		kv_clear(kv);	/* lets the snapshot go */
	return 1;
}

/* A scored line's output: sum, count, perplexity, and under a grammar how it stands with it. */
static int
write_score(struct lines *L, const struct batch_seq *q)
{
	double ppl = q->scored ? exp(q->nll / q->scored) : NAN;

	if (printf("%.6f %d %.6g", q->scored ? -q->nll : 0.0, q->scored, ppl) < 0)
		return -1;
	/* the exit status is the worst line's */
	if (L->d->b.grammar && q->left >= 0) {
		L->verdict = 4;
		return printf(" left:%ld", q->left) < 0 ? -1 : 0;
	}
	if (L->d->b.grammar && !q->failed) {
		int whole = gstate_complete(&q->gs);
		if (!whole && L->verdict < 3)
			L->verdict = 3;
		return printf(" %s", whole ? "whole" : "start") < 0 ? -1 : 0;
	}
	return 0;
}

/* Write the done lines at the head of the queue; 0, or -1 (errno) if stdout failed. */
static int
write_ready(struct lines *L)
{
	struct line *ln;
	int wrote = 0;

	while (L->queued > 0 && (ln = L->queue[L->head])->seq.state == SEQ_DONE) {
		size_t n = batch_seq_ready(&L->d->b, &ln->seq);
		if (L->d->b.score && !ln->bad && write_score(L, &ln->seq) < 0)
			return -1;
		for (size_t i = 0; !L->d->b.score && i < n; i++)
			if (printf(i ? " %d" : "%d", ln->seq.gen.v[i]) < 0)
				return -1;
		if (putchar('\n') == EOF)
			return -1;
		L->generated += (long)ln->seq.gen.n;
		queue_pop(L);
		L->written++;
		wrote = 1;
	}
	return wrote && fflush(stdout) == EOF ? -1 : 0;
}

static void
lines_stats(const struct lines *L, double seconds)
{
	const struct decode *d = L->d;
	long computed = L->prompt - L->reused;
	double total = seconds > 0 ? (computed + L->generated) / seconds : 0;
	double gen = seconds > 0 ? L->generated / seconds : 0;
	struct json j;

	if (d->stats)
		fprintf(stderr, "%s: %ld lines, %ld prompt tokens (%ld reused), %ld generated in %.3f s: "
		    "%.1f tok/s in all, %.1f generated; %d passes, -P %d, %d threads, peak rss %zu bytes, "
		    "%zu private\n", argv0, L->written, L->prompt, L->reused, L->generated, seconds,
		    total, gen, d->b.steps, d->b.max_live, d->threads, peak_rss_bytes(), rss_anon_bytes());
	if (d->stats_json) {
		json_begin(&j, stderr);
		json_int(&j, "lines", L->written);
		json_int(&j, "prompt_tokens", L->prompt);
		json_int(&j, "reused_tokens", L->reused);
		json_int(&j, "generated_tokens", L->generated);
		json_int(&j, "computed_tokens", d->b.computed);
		json_num(&j, "seconds", seconds);
		json_num(&j, "total_tok_s", total);
		json_num(&j, "generated_tok_s", gen);
		json_int(&j, "passes", d->b.steps);
		json_int(&j, "parallel", d->b.max_live);
		json_int(&j, "threads", d->threads);
		json_int(&j, "peak_rss_bytes", (long long)peak_rss_bytes());
		json_int(&j, "rss_anon_bytes", (long long)rss_anon_bytes());
		json_str(&j, "isa", kernels_isa_name(kernels_isa()));
		json_str(&j, "compiler", llm_compiler());
		json_end(&j);
	}
}

/* After a step: the lines done leave their slots, and those that failed say why. */
static void
free_slots(struct lines *L)
{
	for (int i = 0; i < L->d->b.max_live; i++) {
		struct line *ln = L->slot[i];
		if (!ln || ln->seq.state != SEQ_DONE)
			continue;
		if (ln->seq.failed) {
			weprintf("stdin: line %ld: %s%s (%zu tokens %s)", ln->no,
			    ln->seq.failed == SEQ_FAIL_GRAMMAR ? "--grammar: " : "", ln->seq.err,
			    L->d->b.score ? (size_t)ln->seq.scored : ln->seq.gen.n,
			    L->d->b.score ? "scored" : "generated");
			L->failed = 1;
		}
		kv_clear(&L->kvs[i]);
		L->slot[i] = NULL;
	}
}

/* Read, step and write until the input ends, or a signal, stdout or the model ends the run. */
static enum end
run(struct lines *L)
{
	struct decode *d = L->d;
	struct batch *b = &d->b;

	for (;;) {
		/* lines done are written before any wait for input */
		if (write_ready(L) < 0)
			return stdout_failed(d);
		/* new lines fill the free slots; with none live, wait for one */
		while (!L->in.eof && !stop_signal && b->n_live < b->max_live && read_line(L, b->n_live == 0))
			if (b->n_live == 0 && write_ready(L) < 0)
				break;
		if (stop_signal)
			return END_SIGNAL;
		if (ferror(stdout) || write_ready(L) < 0)
			return stdout_failed(d);
		if (L->in.eof && b->n_live == 0)
			return END_DONE;
		if (b->n_live == 0)
			continue;
		if (batch_step(b) < 0) {
			snprintf(d->msg, sizeof d->msg, "%s: %s", d->s.model_path, llm_err());
			free_slots(L);
			return END_FAIL;
		}
		free_slots(L);
	}
}

int
decode_lines(struct decode *d)
{
	static struct lines L;
	enum end end;
	int status, i;
	double t0 = now_seconds();

	L.d = d;
	L.kvs = xcalloc((size_t)d->b.max_live, sizeof *L.kvs);
	L.slot = xcalloc((size_t)d->b.max_live, sizeof *L.slot);
	slot_cache(&L, 0);	/* the limits every line is checked against */
	if (d->kv_in) {
		/* checked once here, for every line that reads it, with the cache made as theirs */
		session_check(&d->s, &L.kvs[0], resume_hints);
		if (snapshot_verify(&d->s.snap) < 0)
			die(1, "%s: %s", d->kv_in, llm_err());
	}
	catch_signals(0);
	end = run(&L);
	if ((end == END_SIGNAL || end == END_FAIL) && write_ready(&L) < 0)
		end = stdout_failed(d);
	lines_stats(&L, now_seconds() - t0);
	status = end_status(end);
	if (end == END_DONE)
		status = L.failed ? 1 : L.verdict;
	if (end == END_FAIL && d->msg[0])
		weprintf("%s", d->msg);
	if (end == END_SIGNAL)
		weprintf("stopped by %s after %ld lines", strsignal(stop_signal), L.written);
	while (L.queued > 0)
		queue_pop(&L);
	for (i = 0; i < d->b.max_live; i++)
		kv_free(&L.kvs[i]);
	free(L.kvs), free(L.slot), free(L.queue), free(L.in.buf);
	return status;
}
