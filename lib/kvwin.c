/*
 * kvwin.c: window geometry, the one place it is written: which slot of
 * a layer's store holds a position, which positions a window keeps, and
 * how many slots it takes.  The cache (kv.c), snapshots (snapshot.c) and
 * llm-kvstat read their rows by it.
 */
#include <stdio.h>

#include "kvpriv.h"
#include "util.h"

/* A window's slots: each part rounded up to whole groups of g. */
void
kv_win_shape(struct kv_win *w, int g, int sinks, int window, int ring)
{
	w->sinks = sinks;
	w->window = window;
	w->sink_slots = (sinks + g - 1) / g * g;
	w->ring_slots = (ring + g - 1) / g * g;
	w->slots = w->sink_slots + w->ring_slots;
}

int
kv_window_shape(struct kv *kv, int g, int max_ctx, int sinks, int window)
{
	if (sinks < 0 || window < 1 || window > max_ctx - sinks) {
		llm_seterr("%d sinks and a window of %d do not fit max_ctx %d", sinks, window,
		    max_ctx);
		return -1;
	}
	/* a group never wraps in the ring, and the sinks' groups are complete before the first eviction */
	if (window < g) {
		llm_seterr("a window of %d is less than the %d positions of a group", window, g);
		return -1;
	}
	kv_win_shape(&kv->win[0], g, sinks, window, window);
	return 0;
}

int
kv_slide_shape(struct kv_win *w, int g, int window)
{
	if (window < 1 || window > KV_MAX_CTX) {
		llm_seterr("a sliding window of %d positions", window);
		return -1;
	}
	if (window < g) {
		llm_seterr("a sliding window of %d positions is less than the %d of a group", window, g);
		return -1;
	}
	kv_win_shape(w, g, 0, window, g == 1 ? window + KV_SLIDE - 1 : window);
	return 0;
}

int
kv_win_slot_pos(const struct kv_win *w, int pos, int s)
{
	int top;

	if (s < w->sink_slots || !w->window || pos < w->slots)
		return s;
	/* the ring holds the ring_slots newest positions; pos is at kv_slot(pos) */
	top = kv_win_slot(w, pos);
	return pos - (top - s + w->ring_slots) % w->ring_slots;
}

int
kv_slot_pos(const struct kv *kv, int layer, int pos, int s)
{
	return kv_win_slot_pos(kv_win(kv, layer), pos, s);
}

