/* session.c: the model, the caches and the snapshots of a tool's run (session.h). */
#include <stdio.h>
#include <string.h>

#include "session.h"
#include "tool.h"

void
cache_opts_init(struct cache_opts *o)
{
	*o = (struct cache_opts){ .k_type = -1, .v_type = -1, .sinks = -1 };
}

int
cache_type(const char *opt, const char *arg)
{
	int t = kv_type_parse(arg);

	if (t < 0)
		die(2, "%s: '%s': expected %s", opt, arg, kv_type_names());
	return t;
}

void
cache_opts_check(struct cache_opts *o)
{
	if (o->sinks >= 0 && !o->window)
		die(2, "--kv-sinks needs --kv-window: without a window nothing is evicted");
	if (o->window && o->sinks < 0)
		o->sinks = 4;	/* StreamingLLM's choice */
}

void
session_open(struct session *s, const char *model_path, int threads, const struct cache_opts *o,
    int quiet)
{
	s->model_path = model_path;
	s->co = *o;
	if (model_load(&s->m, model_path) < 0)
		die(1, "%s: %s", model_path, llm_err());
	if (!(s->pool = pool_create(threads)))
		die(1, "%s", llm_err());
	model_run_init(&s->run, &s->m, s->pool);
	if (o->ctx > s->m.c.context_length && !quiet)
		weprintf("warning: --ctx %d is beyond the model's context_length %d", o->ctx,
		    s->m.c.context_length);
}

void
session_snapshot(struct session *s, const char *path)
{
	struct cache_opts *o = &s->co;

	if (snapshot_open(&s->snap, path) < 0)
		die(1, "%s: %s", path, llm_err());
	s->snap_path = path;
	if (o->k_type < 0)
		o->k_type = s->snap.meta.k_type;
	if (o->v_type < 0)
		o->v_type = s->snap.meta.v_type;
	if (!o->window && s->snap.meta.window) {
		o->window = (int)s->snap.meta.window;
		o->sinks = (int)s->snap.meta.sinks;
	}
}

void
session_check(struct session *s, const struct kv *kv, const char *const hint[4])
{
	int what = 0;

	if (snapshot_check(&s->snap, &s->m, kv, &what) < 0)
		die(1, "%s: %s%s%s", s->snap_path, llm_err(), hint[what] ? ": " : "",
		    hint[what] ? hint[what] : "");
}

void
session_cache(struct session *s, struct kv *kv)
{
	const struct cache_opts *o = &s->co;

	if (model_kv_init(&s->m, kv, o->ctx ? o->ctx : s->m.c.context_length, o->prealloc,
	    o->k_type < 0 ? KV_F32 : o->k_type, o->v_type < 0 ? KV_F32 : o->v_type) < 0)
		die(1, "%s", llm_err());
	if (o->window && kv_set_window(kv, o->sinks, o->window) < 0)
		die(2, "--kv-window %d --kv-sinks %d: %s", o->window, o->sinks, llm_err());
}

int
session_save(const struct session *s, const char *path, const struct kv *kv, const int *ids)
{
	struct snap_meta meta;

	snapshot_meta_of(&meta, &s->m, kv);
	if (snapshot_write(path, &meta, kv, ids, kv->seq_len) < 0) {
		weprintf("%s: %s", path, llm_err());
		return -1;
	}
	return 0;
}

void
session_close(struct session *s)
{
	if (s->snap_path)
		snapshot_close(&s->snap);
	model_run_free(&s->run);
	model_free(&s->m);
	pool_destroy(s->pool);
	memset(s, 0, sizeof *s);
}
