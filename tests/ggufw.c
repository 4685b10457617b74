/* ggufw.c: the GGUF writer and the reference quantizers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/gguf.h"
#include "../lib/quant.h"
#include "../lib/util.h"
#include "ggufw.h"

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

struct wtensor {
	char *name;
	uint32_t type;
	int n_dims;
	uint64_t ne[4];
	uint8_t *data;
	size_t nbytes;
};

struct ggufw {
	struct wbuf kv;
	uint64_t n_kv;
	struct wtensor *t;
	size_t n_t;
};

static void
put(struct wbuf *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 256;
		if (!(b->p = realloc(b->p, b->cap)))
			die(1, "out of memory");
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void put_u32(struct wbuf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(struct wbuf *b, uint64_t v) { put(b, &v, 8); }

static void
put_str(struct wbuf *b, const char *s)
{
	put_u64(b, strlen(s));
	put(b, s, strlen(s));
}

static void
key(struct ggufw *w, const char *k, uint32_t type)
{
	put_str(&w->kv, k);
	put_u32(&w->kv, type);
	w->n_kv++;
}

struct ggufw *
ggufw_new(void)
{
	quant_init();
	return xcalloc(1, sizeof(struct ggufw));
}

void
ggufw_free(struct ggufw *w)
{
	size_t i;

	for (i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->t);
	free(w->kv.p);
	free(w);
}

void ggufw_u32(struct ggufw *w, const char *k, uint32_t v) { key(w, k, GGUF_UINT32); put_u32(&w->kv, v); }
void ggufw_f32(struct ggufw *w, const char *k, float v) { key(w, k, GGUF_FLOAT32); put(&w->kv, &v, 4); }
void ggufw_str(struct ggufw *w, const char *k, const char *v) { key(w, k, GGUF_STRING); put_str(&w->kv, v); }

void
ggufw_bool(struct ggufw *w, const char *k, int v)
{
	uint8_t b = v != 0;

	key(w, k, GGUF_BOOL);
	put(&w->kv, &b, 1);
}

void
ggufw_str_arr(struct ggufw *w, const char *k, const char *const *v, size_t n)
{
	size_t i;

	key(w, k, GGUF_ARRAY);
	put_u32(&w->kv, GGUF_STRING);
	put_u64(&w->kv, n);
	for (i = 0; i < n; i++)
		put_str(&w->kv, v[i]);
}

void
ggufw_f32_arr(struct ggufw *w, const char *k, const float *v, size_t n)
{
	key(w, k, GGUF_ARRAY);
	put_u32(&w->kv, GGUF_FLOAT32);
	put_u64(&w->kv, n);
	put(&w->kv, v, n * 4);
}

void
ggufw_i32_arr(struct ggufw *w, const char *k, const int32_t *v, size_t n)
{
	key(w, k, GGUF_ARRAY);
	put_u32(&w->kv, GGUF_INT32);
	put_u64(&w->kv, n);
	put(&w->kv, v, n * 4);
}

void
quantize_row(uint32_t type, const float *x, void *out, size_t n)
{
	uint16_t *h = out;
	struct block_q8_0 *b = out;
	size_t i, j;

	switch (type) {
	case GGML_F32:
		memcpy(out, x, n * 4);
		break;
	case GGML_F16:
		for (i = 0; i < n; i++)
			h[i] = f32_to_f16(x[i]);
		break;
	case GGML_BF16:
		for (i = 0; i < n; i++)
			h[i] = f32_to_bf16(x[i]);
		break;
	case GGML_Q8_0:
		/* d = max|x| / 127, q = round(x / d): llama.cpp's reference rule. */
		for (i = 0; i < n / QK8_0; i++) {
			const float *xb = x + i * QK8_0;
			float amax = 0, d, id;

			for (j = 0; j < QK8_0; j++)
				if (fabsf(xb[j]) > amax)
					amax = fabsf(xb[j]);
			d = amax / 127;
			id = d ? 1 / d : 0;
			b[i].d = f32_to_f16(d);
			for (j = 0; j < QK8_0; j++)
				b[i].qs[j] = (int8_t)roundf(xb[j] * id);
		}
		break;
	default:
		die(1, "quantize_row: no quantizer for %s", gguf_type_name(type));
	}
}

void
ggufw_tensor(struct ggufw *w, const char *name, uint32_t type, int n_dims,
    const uint64_t *ne, const float *data)
{
	const struct gguf_type_info *ti = gguf_type_info(type);
	struct wtensor *t;
	uint64_t rows = 1;
	int d;

	if (!(w->t = realloc(w->t, (w->n_t + 1) * sizeof *w->t)))
		die(1, "out of memory");
	t = &w->t[w->n_t++];
	memset(t, 0, sizeof *t);
	t->name = strdup(name);
	t->type = type;
	t->n_dims = n_dims;
	for (d = 0; d < n_dims; d++) {
		t->ne[d] = ne[d];
		if (d > 0)
			rows *= ne[d];
	}
	t->nbytes = rows * (ne[0] / ti->block) * ti->bytes;
	t->data = xcalloc(1, t->nbytes);
	if (data)
		for (uint64_t r = 0; r < rows; r++)
			quantize_row(type, data + r * ne[0],
			    t->data + r * (t->nbytes / rows), ne[0]);
}

int
ggufw_write(struct ggufw *w, const char *path, uint32_t version, uint32_t alignment)
{
	struct wbuf h = { 0 };
	static const uint8_t zeros[4096];
	uint64_t off = 0, pad;
	size_t i;
	FILE *fp;
	int d, ok;

	put(&h, GGUF_MAGIC, 4);
	put_u32(&h, version);
	put_u64(&h, w->n_t);
	put_u64(&h, w->n_kv);
	put(&h, w->kv.p, w->kv.n);
	for (i = 0; i < w->n_t; i++) {
		put_str(&h, w->t[i].name);
		put_u32(&h, (uint32_t)w->t[i].n_dims);
		for (d = 0; d < w->t[i].n_dims; d++)
			put_u64(&h, w->t[i].ne[d]);
		put_u32(&h, w->t[i].type);
		put_u64(&h, off);
		off += (w->t[i].nbytes + alignment - 1) / alignment * alignment;
	}
	pad = (alignment - h.n % alignment) % alignment;
	put(&h, zeros, pad);
	if (!(fp = fopen(path, "wb"))) {
		free(h.p);
		return -1;
	}
	ok = fwrite(h.p, 1, h.n, fp) == h.n;
	for (i = 0; ok && i < w->n_t; i++) {
		pad = (alignment - w->t[i].nbytes % alignment) % alignment;
		ok = fwrite(w->t[i].data, 1, w->t[i].nbytes, fp) == w->t[i].nbytes &&
		    fwrite(zeros, 1, pad, fp) == pad;
	}
	free(h.p);
	if (fclose(fp) != 0)
		ok = 0;
	return ok ? 0 : -1;
}
