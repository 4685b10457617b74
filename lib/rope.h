/* rope.h: rotary position embeddings, as the model and the cache's attention use them. */
#ifndef LLM_ROPE_H
#define LLM_ROPE_H

/*
 * RoPE rotates pairs of each head's first dim dimensions by pos times
 * their frequency: adjacent pairs (x[2i], x[2i+1]) in llama's "normal"
 * style, (x[i], x[i + dim/2]) in the NEOX style of qwen2.
 */
struct rope {
	int dim;		/* leading dimensions of each head that rotate, even */
	int head_dim;
	int neox;
	double *inv_freq;	/* dim / 2 frequencies, divided by the file's factors if any */
	double mscale;		/* cos and sin times it: 1, or YaRN's attention factor */
};

/* base^(-2i/dim) / factors[i] (factors may be NULL); -1 with llm_err() if out of memory. */
int rope_init(struct rope *r, int dim, int head_dim, int neox, float base, const float *factors);
void rope_free(struct rope *r);

/* Linear scaling (rope.scaling.type linear): every frequency divided by factor. */
void rope_linear(struct rope *r, double factor);

/*
 * YaRN (Peng et al., 2023), as gpt-oss was trained and its Hugging Face
 * config states it ("truncate": false): frequency i is the mix
 * f_i / factor * ramp + f_i * (1 - ramp), ramp = clamp((i - lo) /
 * (hi - lo), 0, 1), where lo and hi are the dimensions whose wavelength
 * is orig_ctx / beta_fast and orig_ctx / beta_slow, clamped to [0,
 * dim - 1] and not rounded (llama.cpp rounds them to whole dimensions:
 * floor and ceil); cos and sin are scaled by 0.1 ln(factor) + 1.
 */
void rope_yarn(struct rope *r, double base, double factor, int orig_ctx, double beta_fast,
    double beta_slow);

/*
 * The angles' cos and sin at pos, into cs[2i] and cs[2i + 1] (dim
 * floats): computed once a pass, not per layer, in double by fmath's
 * sin and cos (the same bits on every machine), then rounded to float.
 */
void rope_angles(const struct rope *r, int pos, float *cs);

/* Rotate n_heads heads of vec (head_dim apart) by the angles of rope_angles(). */
void rope_rotate(const struct rope *r, float *vec, int n_heads, const float *cs);

#endif
