/* gguf.h: a bounds-checked, mmap'd GGUF (v2, v3) reader. */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include <stddef.h>
#include <stdint.h>

/* Metadata value types, from the GGUF specification. */
enum {
	GGUF_UINT8, GGUF_INT8, GGUF_UINT16, GGUF_INT16, GGUF_UINT32,
	GGUF_INT32, GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY,
	GGUF_UINT64, GGUF_INT64, GGUF_FLOAT64, GGUF_NVTYPES
};

/* Tensor element types (ggml_type).  The numbers are the file's. */
enum {
	GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3,
	GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8, GGML_Q8_1 = 9,
	GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13,
	GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_IQ4_NL = 20, GGML_IQ4_XS = 23,
	GGML_BF16 = 30, GGML_MXFP4 = 39, GGML_NTYPES = 40
};

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

struct gguf_type_info {
	const char *name;
	uint32_t block;		/* elements per block */
	uint32_t bytes;		/* bytes per block */
};

/* Strings in GGUF are length-prefixed, not NUL-terminated. */
struct gguf_str {
	const char *s;
	uint64_t n;
};

struct gguf_kv {
	char *key;
	uint32_t type;
	const uint8_t *data;	/* the value, inside the map */
	uint32_t arr_type;	/* for GGUF_ARRAY */
	uint64_t arr_n;
};

struct gguf_tensor {
	char *name;
	uint32_t type;
	int n_dims;
	uint64_t ne[GGUF_MAX_DIMS];	/* ne[0] is the contiguous row length */
	uint64_t n_elements;
	uint64_t nbytes;
	uint64_t offset;	/* from the start of the data section */
	const void *data;
};

struct gguf {
	const char *path;
	uint8_t *map;
	size_t size;
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	uint64_t n_kv, n_tensors;
	struct gguf_kv *kv;
	struct gguf_tensor *tensors;
};

const struct gguf_type_info *gguf_type_info(uint32_t type);
/* "q8_0", or "type 99" for a tensor type this reader does not know. */
const char *gguf_type_name(uint32_t type);
/* "uint32", "string", ...: the name of a metadata value type. */
const char *gguf_value_type_name(uint32_t type);

/* 0 on success; -1 with llm_err() set to a one-line reason. */
int gguf_open(struct gguf *g, const char *path);
void gguf_close(struct gguf *g);

const struct gguf_kv *gguf_find_kv(const struct gguf *g, const char *key);
const struct gguf_tensor *gguf_find_tensor(const struct gguf *g, const char *name);

/*
 * Typed getters: 1 if found and converted, 0 if absent (*out untouched),
 * -1 if present with an unusable type or value (llm_err() set).
 */
int gguf_get_u32(const struct gguf *g, const char *key, uint32_t *out);
int gguf_get_f32(const struct gguf *g, const char *key, float *out);
int gguf_get_bool(const struct gguf *g, const char *key, int *out);
int gguf_get_str(const struct gguf *g, const char *key, struct gguf_str *out);
/* 1 if key is an array of elem_type, 0 if absent, -1 (naming both types) if not. */
int gguf_check_arr(const struct gguf *g, const char *key, uint32_t elem_type);
/* An array of the given scalar element type; *n is its length. */
int gguf_get_arr(const struct gguf *g, const char *key, uint32_t elem_type,
    const void **data, uint64_t *n);
/* A string array, unpacked into a malloc'd vector the caller frees. */
int gguf_get_str_arr(const struct gguf *g, const char *key,
    struct gguf_str **out, uint64_t *n);

#endif
