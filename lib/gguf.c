/*
 * gguf.c: the GGUF reader.  The file is mmap'd read-only and never
 * copied: tensor data pointers point into the map, so weights stay in
 * their file type and only the pages a forward pass touches become
 * resident.  Every count, length and offset is checked against the
 * file size before it is used, so a corrupt file is an error, not a
 * crash.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "util.h"

static const struct gguf_type_info type_info[GGML_NTYPES] = {
	[GGML_F32]  = { "f32",  1,   4 },
	[GGML_F16]  = { "f16",  1,   2 },
	[GGML_Q4_0] = { "q4_0", 32,  18 },
	[GGML_Q4_1] = { "q4_1", 32,  20 },
	[GGML_Q5_0] = { "q5_0", 32,  22 },
	[GGML_Q5_1] = { "q5_1", 32,  24 },
	[GGML_Q8_0] = { "q8_0", 32,  34 },
	[GGML_Q8_1] = { "q8_1", 32,  36 },
	[GGML_Q2_K] = { "q2_K", 256, 84 },
	[GGML_Q3_K] = { "q3_K", 256, 110 },
	[GGML_Q4_K] = { "q4_K", 256, 144 },
	[GGML_Q5_K] = { "q5_K", 256, 176 },
	[GGML_Q6_K] = { "q6_K", 256, 210 },
	[GGML_Q8_K] = { "q8_K", 256, 292 },
	[GGML_IQ4_NL] = { "iq4_nl", 32, 18 },
	[GGML_IQ4_XS] = { "iq4_xs", 256, 136 },
	[GGML_BF16] = { "bf16", 1,   2 },
	[GGML_MXFP4] = { "mxfp4", 32, 17 },
};

const struct gguf_type_info *
gguf_type_info(uint32_t type)
{
	if (type >= GGML_NTYPES || !type_info[type].name)
		return NULL;
	return &type_info[type];
}

const char *
gguf_type_name(uint32_t type)
{
	static _Thread_local char buf[32];
	const struct gguf_type_info *ti = gguf_type_info(type);

	if (ti)
		return ti->name;
	snprintf(buf, sizeof buf, "type %u", type);
	return buf;
}

static const char *const value_type_name[GGUF_NVTYPES] = {
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64",
};

const char *
gguf_value_type_name(uint32_t type)
{
	return type < GGUF_NVTYPES ? value_type_name[type] : "unknown type";
}

static const uint32_t scalar_size[GGUF_NVTYPES] = {
	[GGUF_UINT8] = 1, [GGUF_INT8] = 1, [GGUF_UINT16] = 2, [GGUF_INT16] = 2,
	[GGUF_UINT32] = 4, [GGUF_INT32] = 4, [GGUF_FLOAT32] = 4, [GGUF_BOOL] = 1,
	[GGUF_UINT64] = 8, [GGUF_INT64] = 8, [GGUF_FLOAT64] = 8,
};

/* A read cursor over the map; every read checks the bound. */
struct cursor {
	const uint8_t *base;
	uint64_t pos, size;
};

static int
need(struct cursor *c, uint64_t n, const char *what)
{
	if (n > c->size - c->pos) {
		llm_seterr("truncated file: %s at offset %llu runs past end of file",
		    what, (unsigned long long)c->pos);
		return -1;
	}
	return 0;
}

static int
read_u32(struct cursor *c, uint32_t *v, const char *what)
{
	if (need(c, 4, what))
		return -1;
	memcpy(v, c->base + c->pos, 4);
	c->pos += 4;
	return 0;
}

static int
read_u64(struct cursor *c, uint64_t *v, const char *what)
{
	if (need(c, 8, what))
		return -1;
	memcpy(v, c->base + c->pos, 8);
	c->pos += 8;
	return 0;
}

static int
read_str(struct cursor *c, struct gguf_str *s, const char *what)
{
	uint64_t n;

	if (read_u64(c, &n, what) || need(c, n, what))
		return -1;
	s->s = (const char *)c->base + c->pos;
	s->n = n;
	c->pos += n;
	return 0;
}

static char *
strdup_n(struct gguf_str s)
{
	char *p = xmalloc(s.n + 1);

	memcpy(p, s.s, s.n);
	p[s.n] = '\0';
	return p;
}

/* Skip over one value of the given type, checking bounds. */
static int
skip_value(struct cursor *c, uint32_t type, const char *key, int depth)
{
	struct gguf_str s;
	uint32_t et;
	uint64_t n, i, bytes;

	if (type == GGUF_STRING)
		return read_str(c, &s, key);
	if (type == GGUF_ARRAY) {
		if (depth > 2) {
			llm_seterr("key %s: arrays nested too deeply", key);
			return -1;
		}
		if (read_u32(c, &et, key) || read_u64(c, &n, key))
			return -1;
		if (et >= GGUF_NVTYPES) {
			llm_seterr("key %s: bad array element type %u", key, et);
			return -1;
		}
		if (et != GGUF_STRING && et != GGUF_ARRAY) {
			if (!mul_ok(n, scalar_size[et], &bytes) || need(c, bytes, key))
				return -1;
			c->pos += bytes;
			return 0;
		}
		/* Each string or array takes at least 8 bytes: refuse absurd counts early. */
		if (n > (c->size - c->pos) / 8) {
			llm_seterr("key %s: array of %llu entries runs past end of file",
			    key, (unsigned long long)n);
			return -1;
		}
		for (i = 0; i < n; i++)
			if (skip_value(c, et, key, depth + 1))
				return -1;
		return 0;
	}
	if (type >= GGUF_NVTYPES) {
		llm_seterr("key %s: bad value type %u", key, type);
		return -1;
	}
	if (need(c, scalar_size[type], key))
		return -1;
	c->pos += scalar_size[type];
	return 0;
}

static int
parse_kv(struct gguf *g, struct cursor *c)
{
	struct gguf_str s;
	uint64_t i;

	/* A key/value pair takes at least 8 + 4 + 1 bytes. */
	if (g->n_kv > c->size / 13) {
		llm_seterr("absurd metadata count %llu for a %llu-byte file",
		    (unsigned long long)g->n_kv, (unsigned long long)c->size);
		return -1;
	}
	g->kv = xcalloc(g->n_kv, sizeof *g->kv);
	for (i = 0; i < g->n_kv; i++) {
		struct gguf_kv *kv = &g->kv[i];

		if (read_str(c, &s, "metadata key"))
			return -1;
		kv->key = strdup_n(s);
		if (read_u32(c, &kv->type, kv->key))
			return -1;
		kv->data = c->base + c->pos;
		if (kv->type == GGUF_ARRAY) {
			/* Peek at the element type and count for the getters. */
			if (need(c, 12, kv->key))
				return -1;
			memcpy(&kv->arr_type, kv->data, 4);
			memcpy(&kv->arr_n, kv->data + 4, 8);
		}
		if (skip_value(c, kv->type, kv->key, 0))
			return -1;
	}
	return 0;
}

static int
parse_tensors(struct gguf *g, struct cursor *c)
{
	struct gguf_str s;
	uint64_t i, nblocks;
	uint32_t nd;
	int d;

	/* A tensor info takes at least 8 + 4 + 8 + 4 + 8 bytes. */
	if (g->n_tensors > c->size / 32) {
		llm_seterr("absurd tensor count %llu for a %llu-byte file",
		    (unsigned long long)g->n_tensors, (unsigned long long)c->size);
		return -1;
	}
	g->tensors = xcalloc(g->n_tensors, sizeof *g->tensors);
	for (i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];
		const struct gguf_type_info *ti;

		if (read_str(c, &s, "tensor name"))
			return -1;
		t->name = strdup_n(s);
		if (read_u32(c, &nd, t->name))
			return -1;
		if (nd < 1 || nd > GGUF_MAX_DIMS) {
			llm_seterr("tensor %s: bad dimension count %u", t->name, nd);
			return -1;
		}
		t->n_dims = (int)nd;
		t->n_elements = 1;
		for (d = 0; d < GGUF_MAX_DIMS; d++)
			t->ne[d] = 1;
		for (d = 0; d < t->n_dims; d++) {
			if (read_u64(c, &t->ne[d], t->name))
				return -1;
			if (t->ne[d] == 0 || t->ne[d] > INT32_MAX ||
			    !mul_ok(t->n_elements, t->ne[d], &t->n_elements)) {
				llm_seterr("tensor %s: bad shape", t->name);
				return -1;
			}
		}
		if (read_u32(c, &t->type, t->name) || read_u64(c, &t->offset, t->name))
			return -1;
		if (!(ti = gguf_type_info(t->type))) {
			llm_seterr("tensor %s: unknown type %u", t->name, t->type);
			return -1;
		}
		if (t->ne[0] % ti->block) {
			llm_seterr("tensor %s: row length %llu is not a multiple of "
			    "the %s block size %u", t->name,
			    (unsigned long long)t->ne[0], ti->name, ti->block);
			return -1;
		}
		nblocks = t->n_elements / ti->block;
		if (!mul_ok(nblocks, ti->bytes, &t->nbytes)) {
			llm_seterr("tensor %s: bad shape", t->name);
			return -1;
		}
	}
	return 0;
}

/*
 * The alignment the kernels need for a type's data: f32 is read as
 * float, the others as uint16 (f16, bf16, and every block starts with
 * an f16 scale; block sizes are even).  The map starts on a page, so a
 * file offset with this alignment gives an aligned pointer.
 */
static uint64_t
element_alignment(uint32_t type)
{
	return type == GGML_F32 ? 4 : 2;
}

static int
bind_tensor_data(struct gguf *g)
{
	uint64_t i, end;

	for (i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];

		if (t->offset % g->alignment) {
			llm_seterr("tensor %s: offset %llu is not aligned to %u",
			    t->name, (unsigned long long)t->offset, g->alignment);
			return -1;
		}
		if (!add_ok(g->data_offset, t->offset, &end) ||
		    !add_ok(end, t->nbytes, &end) || end > g->size) {
			llm_seterr("tensor %s: data ends past end of file", t->name);
			return -1;
		}
		if ((g->data_offset + t->offset) % element_alignment(t->type)) {
			llm_seterr("tensor %s: data at file offset %llu is not aligned "
			    "to its %s elements", t->name,
			    (unsigned long long)(g->data_offset + t->offset),
			    gguf_type_name(t->type));
			return -1;
		}
		t->data = g->map + g->data_offset + t->offset;
	}
	return 0;
}

int
gguf_open(struct gguf *g, const char *path)
{
	struct cursor c;
	uint32_t align;
	int r;

	memset(g, 0, sizeof *g);
	g->path = path;
	if (!(g->map = map_file(path, &g->size, 0)))
		return -1;
	if (g->size < 24) {
		llm_seterr("truncated file: %zu bytes is too small for a GGUF header", g->size);
		unmap_file(g->map, g->size);
		g->map = NULL;
		return -1;
	}

	c.base = g->map;
	c.pos = 0;
	c.size = g->size;
	if (memcmp(g->map, GGUF_MAGIC, 4) != 0) {
		llm_seterr("bad magic: not a GGUF file");
		goto fail;
	}
	c.pos = 4;
	read_u32(&c, &g->version, "version");
	if (g->version != 2 && g->version != 3) {
		llm_seterr("unsupported GGUF version %u (this reader knows 2 and 3)",
		    g->version);
		goto fail;
	}
	if (read_u64(&c, &g->n_tensors, "tensor count") ||
	    read_u64(&c, &g->n_kv, "metadata count"))
		goto fail;
	if (parse_kv(g, &c) || parse_tensors(g, &c))
		goto fail;

	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	if ((r = gguf_get_u32(g, "general.alignment", &align)) < 0)
		goto fail;
	if (r == 1) {
		if (align == 0 || (align & (align - 1))) {
			llm_seterr("general.alignment %u is not a power of two", align);
			goto fail;
		}
		g->alignment = align;
	}
	g->data_offset = (c.pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors > 0 && g->data_offset > g->size) {
		llm_seterr("truncated file: no room for the tensor data");
		goto fail;
	}
	if (bind_tensor_data(g))
		goto fail;
	return 0;
fail:
	gguf_close(g);
	return -1;
}

void
gguf_close(struct gguf *g)
{
	uint64_t i;

	if (g->kv)
		for (i = 0; i < g->n_kv; i++)
			free(g->kv[i].key);
	if (g->tensors)
		for (i = 0; i < g->n_tensors; i++)
			free(g->tensors[i].name);
	free(g->kv);
	free(g->tensors);
	unmap_file(g->map, g->size);
	g->kv = NULL;
	g->tensors = NULL;
	g->map = NULL;
}

const struct gguf_kv *
gguf_find_kv(const struct gguf *g, const char *key)
{
	uint64_t i;

	for (i = 0; i < g->n_kv; i++)
		if (g->kv[i].key && strcmp(g->kv[i].key, key) == 0)
			return &g->kv[i];
	return NULL;
}

const struct gguf_tensor *
gguf_find_tensor(const struct gguf *g, const char *name)
{
	uint64_t i;

	for (i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].name && strcmp(g->tensors[i].name, name) == 0)
			return &g->tensors[i];
	return NULL;
}

/* Read any integer value as a signed 64-bit number, if it fits. */
static int
kv_integer(const struct gguf_kv *kv, int64_t *out)
{
	const uint8_t *p = kv->data;
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32;
		int32_t i32; uint64_t u64; int64_t i64; } v;

	memcpy(&v, p, kv->type < GGUF_NVTYPES ? scalar_size[kv->type] : 0);
	switch (kv->type) {
	case GGUF_UINT8:  *out = v.u8; return 0;
	case GGUF_INT8:   *out = v.i8; return 0;
	case GGUF_UINT16: *out = v.u16; return 0;
	case GGUF_INT16:  *out = v.i16; return 0;
	case GGUF_UINT32: *out = v.u32; return 0;
	case GGUF_INT32:  *out = v.i32; return 0;
	case GGUF_INT64:  *out = v.i64; return 0;
	case GGUF_UINT64:
		if (v.u64 > INT64_MAX)
			break;
		*out = (int64_t)v.u64;
		return 0;
	}
	return -1;
}

int
gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);
	int64_t v;

	if (!kv)
		return 0;
	if (kv_integer(kv, &v) < 0) {
		llm_seterr("key %s: expected an integer, found %s", key,
		    gguf_value_type_name(kv->type));
		return -1;
	}
	if (v < 0 || v > UINT32_MAX) {
		llm_seterr("key %s: value %lld out of range", key, (long long)v);
		return -1;
	}
	*out = (uint32_t)v;
	return 1;
}

int
gguf_get_f32(const struct gguf *g, const char *key, float *out)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);
	double d;
	float f;

	if (!kv)
		return 0;
	if (kv->type == GGUF_FLOAT32) {
		memcpy(&f, kv->data, 4);
		*out = f;
	} else if (kv->type == GGUF_FLOAT64) {
		memcpy(&d, kv->data, 8);
		*out = (float)d;
	} else {
		llm_seterr("key %s: expected a float, found %s", key,
		    gguf_value_type_name(kv->type));
		return -1;
	}
	return 1;
}

int
gguf_get_bool(const struct gguf *g, const char *key, int *out)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);

	if (!kv)
		return 0;
	if (kv->type != GGUF_BOOL) {
		llm_seterr("key %s: expected a bool, found %s", key,
		    gguf_value_type_name(kv->type));
		return -1;
	}
	*out = kv->data[0] != 0;
	return 1;
}

int
gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);

	if (!kv)
		return 0;
	if (kv->type != GGUF_STRING) {
		llm_seterr("key %s: expected a string, found %s", key,
		    gguf_value_type_name(kv->type));
		return -1;
	}
	memcpy(&out->n, kv->data, 8);
	out->s = (const char *)kv->data + 8;
	return 1;
}

int
gguf_check_arr(const struct gguf *g, const char *key, uint32_t elem_type)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);

	if (!kv)
		return 0;
	if (kv->type != GGUF_ARRAY) {
		llm_seterr("key %s: expected an array of %s, found %s", key,
		    gguf_value_type_name(elem_type), gguf_value_type_name(kv->type));
		return -1;
	}
	if (kv->arr_type != elem_type) {
		llm_seterr("key %s: expected an array of %s, found an array of %s", key,
		    gguf_value_type_name(elem_type), gguf_value_type_name(kv->arr_type));
		return -1;
	}
	return 1;
}

int
gguf_get_arr(const struct gguf *g, const char *key, uint32_t elem_type,
    const void **data, uint64_t *n)
{
	int r;

	if (elem_type == GGUF_STRING || elem_type == GGUF_ARRAY) {
		llm_seterr("key %s: gguf_get_arr reads scalar arrays only", key);
		return -1;
	}
	if ((r = gguf_check_arr(g, key, elem_type)) <= 0)
		return r;
	*data = gguf_find_kv(g, key)->data + 12;
	*n = gguf_find_kv(g, key)->arr_n;
	return 1;
}

int
gguf_get_str_arr(const struct gguf *g, const char *key,
    struct gguf_str **out, uint64_t *n)
{
	const struct gguf_kv *kv = gguf_find_kv(g, key);
	const uint8_t *p;
	uint64_t i;
	int r;

	if ((r = gguf_check_arr(g, key, GGUF_STRING)) <= 0)
		return r;
	/* Bounds were checked when the file was parsed. */
	*out = xcalloc(kv->arr_n, sizeof **out);
	p = kv->data + 12;
	for (i = 0; i < kv->arr_n; i++) {
		memcpy(&(*out)[i].n, p, 8);
		(*out)[i].s = (const char *)p + 8;
		p += 8 + (*out)[i].n;
	}
	*n = kv->arr_n;
	return 1;
}
