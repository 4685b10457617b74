/* report.c: what a run of llm-decode on one prompt says on stderr: a progress line, and its stats. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <unistd.h>

#include "../lib/kernels.h"
#include "decode.h"
#include "tool.h"

void
print_stats(const struct decode *d, const struct one *o)
{
	const struct kv *kv = &o->kv;
	const struct model_config *c = &d->s.m.c;
	int n_gen = (int)o->seq.gen.n;
	double prefill = o->t_prefill - o->t_start;
	double decode = o->t_end - o->t_first;
	double ttft = n_gen ? (o->t_first - o->t_start) * 1e3 : 0;
	double prefill_tps = prefill > 0 ? (o->n_prompt - o->reused) / prefill : 0;
	double decode_tps = n_gen > 1 && decode > 0 ? (n_gen - 1) / decode : 0;
	/* the global layers' window's evictions */
	int evicted = kv->seq_len ? kv_win_evicted(&kv->win[0], kv->seq_len - 1) : 0;
	struct json j;

	if (d->stats) {
		char rate[64] = "", seed[64] = "", prompt[96];
		/* a rate takes two tokens (the first ends the prefill); a greedy run has no seed */
		if (n_gen > 1)
			snprintf(rate, sizeof rate, " at %.1f tok/s", decode_tps);
		if (!d->greedy)
			snprintf(seed, sizeof seed, ", seed %llu", (unsigned long long)d->b.seed);
		/* the rate is that of the tokens computed: a resume's reused ones took no time */
		if (o->reused)
			snprintf(prompt, sizeof prompt, "%d prompt tokens (%d reused, %d computed at %.1f tok/s)",
			    o->n_prompt, o->reused, o->n_prompt - o->reused, prefill_tps);
		else
			snprintf(prompt, sizeof prompt, "%d prompt tokens at %.1f tok/s", o->n_prompt, prefill_tps);
		fprintf(stderr, "%s: %s, %d generated%s, "
		    "ttft %.1f ms, %d tokens reused from a snapshot\n%s: kv %zu bytes (%d of %d positions allocated, "
		    "%zu resident, %.1f ms growing), peak rss %zu bytes, %d threads%s\n",
		    argv0, prompt, n_gen, rate, ttft, o->reused,
		    argv0, kv_bytes(kv), kv->cap, kv->max_ctx, kv_resident_bytes(kv),
		    kv->grow_seconds * 1e3, peak_rss_bytes(), d->threads, seed);
		if (kv->win[0].window)
			fprintf(stderr, "%s: kv window: %d sinks and the newest %d positions in %d slots, "
			    "%d positions evicted\n", argv0, kv->win[0].sinks, kv->win[0].window,
			    kv->win[0].slots, evicted);
		if (kv->slides)
			fprintf(stderr, "%s: kv sliding layers: the newest %d positions in %d slots\n", argv0,
			    kv->win[1].window, kv->win[1].slots);
		if (c->n_expert) {
			fprintf(stderr, "%s: experts used of %d by layer:", argv0, c->n_expert);
			for (int l = 0; l < c->n_layers; l++)
				fprintf(stderr, " %d", model_run_experts_used(&d->s.run, l));
			fprintf(stderr, "; rss %zu bytes, the file %zu, a token reads %llu\n", rss_bytes(),
			    d->s.m.gguf.size, (unsigned long long)model_weight_bytes(&d->s.m));
		}
	}
	if (d->stats_json) {
		json_begin(&j, stderr);
		json_int(&j, "prompt_tokens", o->n_prompt);
		json_int(&j, "generated_tokens", n_gen);
		json_num(&j, "ttft_ms", ttft);
		json_num(&j, "prefill_tok_s", prefill_tps);
		json_num(&j, "decode_tok_s", decode_tps);
		json_int(&j, "kv_bytes", (long long)kv_bytes(kv));
		json_str(&j, "kv_type_k", kv_type_name(kv->k_type));
		json_str(&j, "kv_type_v", kv_type_name(kv->v_type));
		json_num(&j, "kv_bytes_per_pos", kv_bytes_per_pos(kv));
		json_int(&j, "kv_resident_bytes", (long long)kv_resident_bytes(kv));
		json_int(&j, "kv_shared_bytes", (long long)kv_shared_bytes(kv));
		json_int(&j, "rss_anon_bytes", (long long)rss_anon_bytes());
		json_num(&j, "kv_grow_ms", kv->grow_seconds * 1e3);
		json_int(&j, "kv_moved_bytes", (long long)kv->moved_bytes);
		json_num(&j, "grammar_ms", d->b.mask_seconds * 1e3);
		json_int(&j, "kv_capacity", kv->cap);
		json_int(&j, "max_ctx", kv->max_ctx);
		json_int(&j, "kv_window", kv->win[0].window);
		json_int(&j, "kv_sinks", kv->win[0].sinks);
		json_int(&j, "kv_evicted", evicted);
		json_int(&j, "kv_sliding_window", kv->slides ? kv->win[1].window : 0);
		json_int(&j, "reused_tokens", o->reused);
		json_int(&j, "computed_tokens", d->b.computed);
		json_int(&j, "peak_rss_bytes", (long long)peak_rss_bytes());
		json_int(&j, "rss_bytes", (long long)rss_bytes());
		if (c->n_expert) {
			int used[KV_MAX_LAYERS];
			for (int l = 0; l < c->n_layers; l++)
				used[l] = model_run_experts_used(&d->s.run, l);
			json_int(&j, "experts", c->n_expert);
			json_int(&j, "experts_per_token", c->n_expert_used);
			json_ints(&j, "experts_used", used, c->n_layers);
		}
		json_int(&j, "weight_bytes", (long long)model_weight_bytes(&d->s.m));
		json_int(&j, "threads", d->threads);
		json_str(&j, "isa", kernels_isa_name(kernels_isa()));
		json_str(&j, "compiler", llm_compiler());
		json_int(&j, "seed", (long long)d->b.seed);
		json_end(&j);
	}
}

/*
 * One line of progress on a terminal for a long prefill or scoring run:
 * drawn once the work has taken a second, redrawn at most ten times a
 * second, cleared at the end.  Nothing when stderr is not a terminal or
 * with -q.
 */
static struct {
	int on, drawn;
	double t0, last;
} progress_line;

void
progress_start(int quiet)
{
	progress_line.on = !quiet && isatty(STDERR_FILENO);
	progress_line.t0 = progress_line.last = now_seconds();
	progress_line.drawn = 0;
}

void
progress(int done, int total)
{
	double t = now_seconds(), rate;

	if (!progress_line.on || t - progress_line.t0 < 1 || t - progress_line.last < 0.1 || done <= 0 ||
	    done >= total)
		return;
	progress_line.last = t;
	rate = done / (t - progress_line.t0);
	fprintf(stderr, "\r%s: %d/%d tokens, %.0f tok/s, %.0f s left\033[K", argv0, done, total,
	    rate, (total - done) / rate);
	progress_line.drawn = 1;
}

void
progress_end(void)
{
	if (progress_line.drawn)
		fputs("\r\033[K", stderr);
	progress_line.drawn = 0;
}
