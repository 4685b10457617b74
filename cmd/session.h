/*
 * session.h: what llm-decode and llm-chat share around the generation
 * loop (lib/batch.h): the model, its pool and run buffers, the cache
 * options and the caches made of them, a snapshot to resume from, saving
 * one, and the teardown.  Its failures are the tools' own messages and
 * exit statuses (tool.h's die): 2 for options, 1 for the rest.
 */
#ifndef LLM_SESSION_H
#define LLM_SESSION_H

#include "../lib/kv.h"
#include "../lib/model.h"
#include "../lib/pool.h"
#include "../lib/snapshot.h"

/* The cache options, as given; session_settle and a snapshot fill in the rest. */
struct cache_opts {
	int ctx;		/* max_ctx; 0: the model's context_length */
	int prealloc;		/* --kv-prealloc */
	int k_type, v_type;	/* -1: the snapshot's, or f32 */
	int window, sinks;	/* --kv-window, 0 for none; --kv-sinks, -1 for the default */
};

struct session {
	const char *model_path;
	struct model m;
	struct pool *pool;
	struct model_run run;
	struct cache_opts co;
	const char *snap_path;	/* a snapshot's path while it is open (session_snapshot), or NULL */
	struct snapshot snap;
};

/* The options' defaults: nothing given. */
void cache_opts_init(struct cache_opts *o);
/*
 * A --kv-type, --kv-type-k or --kv-type-v argument (opt names it), or
 * exit 2 naming the types.
 */
int cache_type(const char *opt, const char *arg);
/*
 * The options' own rules, after getopt (exit 2): --kv-sinks needs
 * --kv-window, which takes 4 sinks unless told (StreamingLLM's choice).
 */
void cache_opts_check(struct cache_opts *o);

/*
 * Load the model, make a pool of threads and the run buffers; warn
 * (unless quiet) of a --ctx beyond the model's context.  Exit 1 if one fails.
 */
void session_open(struct session *s, const char *model_path, int threads,
    const struct cache_opts *o, int quiet);
/*
 * Open a snapshot to resume from, mapped while caches read its rows in
 * place: a cache type or window not given takes the snapshot's.  Exit 1
 * if it cannot be read.
 */
void session_snapshot(struct session *s, const char *path);
/*
 * Whether the open snapshot fits kv, or exit 1 saying why and what to do:
 * hint[SNAP_MODEL], hint[SNAP_TYPES] and hint[SNAP_WINDOW] follow the
 * reason (NULL: none).
 */
void session_check(struct session *s, const struct kv *kv, const char *const hint[4]);
/* A cache as the options say, its window set; exit 1 (2 for a window that cannot be) on failure. */
void session_cache(struct session *s, struct kv *kv);
/*
 * Save kv, whose positions hold ids[0..seq_len), to path (by rename: an
 * old snapshot survives a failure); 0, or -1 said on stderr.
 */
int session_save(const struct session *s, const char *path, const struct kv *kv, const int *ids);
/* Everything open, in the reverse order. */
void session_close(struct session *s);

#endif
