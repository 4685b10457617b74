/* batch.c: continuous batching of many sequences over one model. */
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "batch.h"
#include "pool.h"

void
batch_init(struct batch *b, struct model_run *run, int max_live)
{
	memset(b, 0, sizeof *b);
	b->run = run;
	b->end_id = -1;
	b->max_live = max_live < 1 ? 1 : max_live > BATCH_LIVE_MAX ? BATCH_LIVE_MAX : max_live;
	b->live = xcalloc((size_t)b->max_live, sizeof *b->live);
}

void
batch_free(struct batch *b)
{
	free(b->live);
	free(b->out);
	memset(b, 0, sizeof *b);
}

void
batch_seq_free(struct batch_seq *q)
{
	sampler_free(&q->smp);
	ids_free(&q->gen);
	stop_free(&q->stop);
	gstate_free(&q->gs);
	free(q->lp);
}

size_t
batch_seq_ready(const struct batch *b, const struct batch_seq *q)
{
	if (!b->n_stops || (q->state == SEQ_DONE && !q->stopped))
		return q->gen.n;
	return (size_t)q->stop.safe;
}

int
batch_seq_token(const struct batch_seq *q, int pos)
{
	return pos < q->n_ids ? q->ids[pos] : q->gen.v[pos - q->n_ids];
}

static void
fail(struct batch_seq *q, int why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(q->err, sizeof q->err, fmt, ap);
	va_end(ap);
	q->failed = why;
	q->state = SEQ_DONE;
}

/* The positions a sequence runs before it generates or is scored: a scored prompt's last token is never run. */
static int
prompt_end(const struct batch *b, const struct batch_seq *q)
{
	return b->score ? q->n_ids - 1 : q->n_ids;
}

void
batch_start(struct batch *b, struct batch_seq *q, const int *ids, int n, struct kv *kv, int pos,
    int n_predict)
{
	memset(q, 0, sizeof *q);
	q->ids = ids;
	q->n_ids = n;
	q->kv = kv;
	q->pos = pos;
	q->state = SEQ_PROMPT;
	q->left = -1;
	q->n_predict = n_predict;
	sampler_init(&q->smp, b->run->m->c.vocab_size, b->temp, b->top_k, b->top_p, b->seed);
	sampler_controls(&q->smp, b->min_p, b->penalty, b->last_n);
	for (int i = 0; i < n; i++)
		sampler_accept(&q->smp, ids[i]);
	if (b->n_stops)
		stop_init(&q->stop, b->tok, b->stops, b->n_stops);
	if (b->grammar) {
		if (gstate_init(&q->gs, b->grammar) < 0) {
			fail(q, SEQ_FAIL_GRAMMAR, "%s", llm_err());
			return;
		}
		gstate_for(&q->gs, b->gm->t);
	}
	if (b->score && b->each && n > 1)
		q->lp = xmalloc((size_t)(n - 1) * sizeof *q->lp);
	/*
	 * A run whose end is known and fits (the prompt and n_predict, not
	 * llm-chat's unbounded turns) grows its cache once now, empty or as
	 * resumed, not at the doublings as it goes: each moved the rows
	 * (16 lines of 128 with 64 generated ran 1.13x without, a Zen 5).
	 * Ended early, it holds the capacity kv_bytes says, and the pages
	 * it wrote.
	 */
	if (n_predict > 0 && n_predict <= kv->max_ctx - n && kv_reserve(kv, n + n_predict) < 0) {
		fail(q, SEQ_FAIL_MODEL, "%s", llm_err());
		return;
	}
	/* nothing to score, or (generating none) nothing of the prompt left to fill the cache with */
	if ((b->score && n < 2) || (!b->score && q->n_predict == 0 && pos >= n)) {
		q->state = SEQ_DONE;
		return;
	}
	b->live[b->n_live++] = q;
}

/* Whether id ends a sequence: end of text, of turn (Llama 3's <|eot_id|>) or of message. */
static int
is_end(const struct model_config *c, int id)
{
	return id == c->eos_id || id == c->eot_id || id == c->eom_id;
}

/* Take the token sampled from logits: it ends the sequence, or is run next. */
static void
take(struct batch *b, struct batch_seq *q, float *logits)
{
	int next = sampler_sample(&q->smp, logits);

	if (!b->ignore_eos && (is_end(&b->run->m->c, next) || next == b->end_id)) {
		q->state = SEQ_DONE;
		return;
	}
	ids_push(&q->gen, next);
	if (b->grammar) {	/* the mask allowed it: the state takes its piece, and may be at an end */
		double t0 = now_seconds();
		int alive = gmask_take(b->gm, &q->gs, next);
		b->mask_seconds += now_seconds() - t0;
		if (alive < 0) {	/* (a step too ambiguous: the token stays emitted) */
			fail(q, SEQ_FAIL_GRAMMAR, "%s", llm_err());
			return;
		}
	}
	if (b->n_stops && stop_push(&q->stop, next)) {
		q->stopped = 1;	/* the stop text's tokens are never ready (batch_seq_ready) */
		q->state = SEQ_DONE;
		return;
	}
	sampler_accept(&q->smp, next);
	if ((int)q->gen.n == q->n_predict || (b->grammar && gstate_finished(&q->gs))) {
		q->state = SEQ_DONE;
		return;
	}
	q->next = next;
	q->state = SEQ_GEN;
}

/*
 * A pass's sequences' rows of logits, by sequence in turn: each scored
 * in order, or its token sampled; a sequence's are always one thread's.
 */
struct take_job {
	struct batch *b;
	const struct model_seq *seqs;
	struct batch_seq **who;
	int ns;
	atomic_int next;
	int row[MODEL_BATCH];	/* each sequence's first row of logits */
};

#define TAKE_WORK 16	/* multiply-adds a logit's softmax and sort is worth */

static void
take_rows(void *arg, int ith, int nth)
{
	struct take_job *job = arg;
	struct batch *b = job->b;
	size_t V = (size_t)b->run->m->c.vocab_size;
	int k, j;

	(void)ith, (void)nth;
	while ((k = atomic_fetch_add_explicit(&job->next, 1, memory_order_relaxed)) < job->ns) {
		struct batch_seq *q = job->who[k];
		float *row = b->out + (size_t)job->row[k] * V;
		if (b->score) {
			for (j = 0; j < job->seqs[k].n && !b->grammar; j++) {	/* a grammar's: scored before */
				double lp = log_prob(row + (size_t)j * V, (int)V, q->ids[q->pos + j + 1]);
				q->nll -= lp;
				if (q->lp)
					q->lp[q->scored] = lp;
				q->scored++;
			}
			q->pos += job->seqs[k].n;
			if (q->pos == prompt_end(b, q))
				q->state = SEQ_DONE;
			continue;
		}
		q->pos += job->seqs[k].n;
		if (job->seqs[k].what == MODEL_OUT_LAST)
			take(b, q, row);
		else if (q->pos == q->n_ids && q->n_predict == 0)
			q->state = SEQ_DONE;	/* the prompt is in the cache: all it asked */
	}
}

int
batch_end(struct batch *b, struct batch_seq *q, int run_last)
{
	int i, j, err = 0;

	if (q->state == SEQ_GEN && run_last) {
		struct model_seq s = { q->kv, &q->next, 1, q->pos, MODEL_OUT_NONE };
		if ((err = model_forward_seqs(b->run, &s, 1, NULL)) < 0)
			fail(q, SEQ_FAIL_MODEL, "%s", llm_err());
		else
			q->pos++, b->computed++;
	}
	q->state = SEQ_DONE;
	for (i = j = 0; i < b->n_live; i++)
		if (b->live[i] != q)
			b->live[j++] = b->live[i];
	b->n_live = j;
	return err;
}

/* The tokens the sequence's grammar refuses made -inf in its row; -1 (the sequence failed) if it allows none. */
static int
mask_row(struct batch *b, struct batch_seq *q, float *row)
{
	const struct model_config *c = &b->run->m->c;
	int end[4] = { c->eos_id, c->eot_id, c->eom_id, b->end_id };
	double t0 = now_seconds();
	int any = gmask_apply(b->gm, &q->gs, end, 4, row);

	b->mask_seconds += now_seconds() - t0;

	if (any < 0)
		fail(q, SEQ_FAIL_GRAMMAR, "%s", llm_err());
	else if (!any)
		fail(q, SEQ_FAIL_GRAMMAR, "no token of the vocabulary can go on from the text "
		    "generated (%d tokens)", (int)q->gen.n);
	return any > 0 ? 0 : -1;
}

/*
 * Scoring under a grammar: the token at index at of the stream, id, its
 * row masked first and the state on past it; -inf once the grammar refuses
 * one, and for every token after it.
 */
static void
score_masked(struct batch *b, struct batch_seq *q, float *row, int id, long at)
{
	const struct model_config *c = &b->run->m->c;
	int end[4] = { c->eos_id, c->eot_id, c->eom_id, b->end_id };
	double lp = -INFINITY, t0 = now_seconds();
	int over = 0;

	if (q->failed)
		return;
	if (q->left < 0) {
		over = gmask_apply(b->gm, &q->gs, end, 4, row) < 0;
		if (!over && !b->gm->allowed[id])
			q->left = at;
	}
	if (q->left < 0 && !over)
		over = gmask_take(b->gm, &q->gs, id) < 0;
	b->mask_seconds += now_seconds() - t0;
	if (over) {	/* a step too ambiguous: the tokens scored so far stay */
		fail(q, SEQ_FAIL_GRAMMAR, "%s", llm_err());
		return;
	}
	if (q->left < 0)
		lp = log_prob(row, c->vocab_size, id);
	q->nll -= lp;
	if (q->lp)
		q->lp[q->scored] = lp;
	q->scored++;
}

int
batch_step(struct batch *b)
{
	struct model_seq seqs[MODEL_BATCH];
	struct batch_seq *who[MODEL_BATCH];
	size_t V = (size_t)b->run->m->c.vocab_size;
	int ns = 0, budget = b->score ? BATCH_SCORE_MAX : MODEL_BATCH, rows = 0, i, j, k;

	if (!b->out)
		b->out = xmalloc((b->score ? BATCH_SCORE_MAX : (size_t)b->max_live) * V * sizeof *b->out);
	/* the generating ones a token each, then pieces of prompts as far as the batch goes */
	for (k = 0; k < 2; k++)
		for (i = 0; i < b->n_live && budget > 0; i++) {
			struct batch_seq *q = b->live[i];
			int n, what;
			if (q->state != (k ? SEQ_PROMPT : SEQ_GEN))
				continue;
			n = k ? prompt_end(b, q) - q->pos : 1;
			n = n < budget ? n : budget;
			if (!q->kv->win[0].window && q->pos + n > q->kv->max_ctx) {
				fail(q, SEQ_FAIL_MODEL, "context full: position %d is past max_ctx %d",
				    q->pos + n - 1, q->kv->max_ctx);
				continue;
			}
			what = b->score ? MODEL_OUT_ALL : q->n_predict > 0 && (!k ||
			    q->pos + n == prompt_end(b, q)) ? MODEL_OUT_LAST : MODEL_OUT_NONE;
			seqs[ns] = (struct model_seq){ q->kv, k ? q->ids + q->pos : &q->next, n, q->pos, what };
			who[ns++] = q;
			budget -= n;
		}
	if (ns > 0 && model_forward_seqs(b->run, seqs, ns, b->out) < 0) {
		for (i = 0; i < b->n_live; i++)
			if (b->live[i]->state != SEQ_DONE)
				fail(b->live[i], SEQ_FAIL_MODEL, "%s", llm_err());
		b->n_live = 0;
		return -1;
	}
	if (ns > 0)
		b->steps++;
	/* each sequence's rows: sampled or scored, the sequences side by side on the pool */
	struct take_job job = { .b = b, .seqs = seqs, .who = who, .ns = ns };
	for (k = 0; k < ns; k++) {
		job.row[k] = rows;
		rows += b->score ? seqs[k].n : seqs[k].what == MODEL_OUT_LAST;
		b->computed += seqs[k].n;
	}
	/* the grammar's masks first, one sequence after another (the mask cache is shared) */
	for (k = 0; b->grammar && !b->score && k < ns; k++)
		if (seqs[k].what == MODEL_OUT_LAST && mask_row(b, who[k], b->out + (size_t)job.row[k] * V) < 0)
			seqs[k].what = MODEL_OUT_NONE;	/* failed: nothing to take */
	for (k = 0; b->grammar && b->score && k < ns; k++)
		for (j = 0; j < seqs[k].n; j++)
			score_masked(b, who[k], b->out + (size_t)(job.row[k] + j) * V,
			    who[k]->ids[who[k]->pos + j + 1], who[k]->pos + j + 1);
	atomic_init(&job.next, 0);
	/* one sequence's rows are one thread's anyway: no hand-off for them */
	pool_run_work(b->run->pool, take_rows, &job, ns > 1 ? (long long)rows * (long long)V * TAKE_WORK : 0);
	/* the done leave, the others keep their order */
	for (i = j = 0; i < b->n_live; i++)
		if (b->live[i]->state != SEQ_DONE)
			b->live[j++] = b->live[i];
	b->n_live = j;
	return 0;
}
