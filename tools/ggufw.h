/*
 * ggufw.h: the project's GGUF writer, for test fixtures, the demo and
 * the benchmark models.  It also holds the reference quantizers.
 */
#ifndef LLM_GGUFW_H
#define LLM_GGUFW_H

#include <stddef.h>
#include <stdint.h>

struct ggufw;

struct ggufw *ggufw_new(void);
void ggufw_free(struct ggufw *w);

void ggufw_u32(struct ggufw *w, const char *key, uint32_t v);
void ggufw_f32(struct ggufw *w, const char *key, float v);
void ggufw_bool(struct ggufw *w, const char *key, int v);
void ggufw_str(struct ggufw *w, const char *key, const char *v);
void ggufw_str_arr(struct ggufw *w, const char *key, const char *const *v, size_t n);
void ggufw_f32_arr(struct ggufw *w, const char *key, const float *v, size_t n);
void ggufw_i32_arr(struct ggufw *w, const char *key, const int32_t *v, size_t n);

/*
 * Add a tensor of shape ne[0..n_dims) (ne[0] contiguous), quantizing
 * the f32 data to type.  data NULL writes zero bytes (any type).
 */
void ggufw_tensor(struct ggufw *w, const char *name, uint32_t type,
    int n_dims, const uint64_t *ne, const float *data);

/* Write the file; 0 or -1 (errno). */
int ggufw_write(struct ggufw *w, const char *path, uint32_t version, uint32_t alignment);

/* Reference quantizers: n floats to the bytes of one row of the type. */
void quantize_row(uint32_t type, const float *x, void *out, size_t n);

#endif
