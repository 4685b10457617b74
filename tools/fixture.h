/* fixture.h: deterministic random Llama models, written with ggufw. */
#ifndef LLM_FIXTURE_H
#define LLM_FIXTURE_H

#include <stdint.h>

struct fixture {
	int dim, n_layers, n_heads, n_kv_heads, ffn_dim, vocab, ctx;
	float rope_base;
	int tied;		/* no output.weight: tied to token_embd */
	int minimal_keys;	/* omit every optional key, to test the defaults */
	int q4k_mix;		/* types as a Q4_K_M file mixes them (1), or a Q2_K file (2); type ignored */
	uint32_t type;		/* type of the matrices; norms stay f32 */
	int eos_id;
	int vocab_as_ints;	/* hostile: tokenizer.ggml.tokens holds int32s */
	float std;		/* > 0: every matrix uniform with this standard deviation */
	const char *chat;	/* a chat template family: its markers and a template naming them */
	const char *arch;	/* NULL or "llama"; "qwen2": Q, K and V biases, keys under qwen2. */
	int rope_freqs;		/* a rope_freqs.weight of factors, as Llama 3.1/3.2 have */
	const char *extra;	/* hostile: one more tensor of this name, which no model uses */
	int eot_id, eom_id;	/* > 0: Llama 3's end-of-turn and end-of-message tokens */
	const char *vocab_from;	/* a GGUF whose tokenizer (and vocabulary size) the model takes */
	int head_dim;		/* > 0: heads of this size (attention.key_length) */
	int n_swa;		/* gemma3: the sliding window (0: every layer global) */
	int swa_pattern;	/* gemma3: > 0, written as sliding_window_pattern (else llama.cpp's 6) */
	float softcap;		/* gemma3: > 0, written as final_logit_softcapping */
	int n_expert, n_expert_used;	/* qwen3moe: experts, and those a token takes (0: 8 and 2) */
	int router_zero;	/* qwen3moe: a router of zeros, so that every expert ties */
	int expert_ffn;		/* qwen3moe: an expert's width (0: ffn_dim) */
	int expert_ffn_key;	/* qwen3moe, hostile: > 0, the expert width written, unlike the tensors' */
	float yarn_factor;	/* > 0: rope.scaling yarn with this factor (gpt-oss: 32) */
	const char *scaling;	/* and the rope.scaling.type written, if not "yarn" */
	const char *extra_key;	/* hostile: one more f32 key of this name (1.0) */
	int yarn_orig_ctx;	/* and its original_context_length */
	int no_sinks;		/* gpt-oss: sinks of -1000, where they take nothing from the softmax */
	uint64_t seed;
};

/* A tiny model for the unit tests: small, fast, and with every feature.
 * K types need rows of 256, so their tiny model is 256 wide. */
void fixture_tiny(struct fixture *f, uint32_t type);
/* SmolLM2-135M's exact shapes, for the benchmark. */
void fixture_smollm2_135m(struct fixture *f, uint32_t type);
/* The family checks' shape: dim 256, 3 layers, 8 heads, 2 KV heads. */
void fixture_small(struct fixture *f, uint32_t type);
/* Qwen2.5-0.5B's shapes (qwen2, tied), for the benchmark. */
void fixture_qwen25_05b(struct fixture *f, uint32_t type);
void fixture_llama32_1b(struct fixture *f, uint32_t type);
/* Qwen3-30B-A3B's shapes (qwen3moe: 128 experts of 768, 8 a token, 48 layers), for the benchmark with -L. */
void fixture_qwen3_30b_a3b(struct fixture *f, uint32_t type);
/* gpt-oss-20b's shapes (32 experts of 2880, 4 a token, 24 layers), for the benchmark with -L. */
void fixture_gpt_oss_20b(struct fixture *f, uint32_t type);
/* gemma-3-270m's and gemma-3-1b's shapes (gemma3, tied, a vocabulary of 262144), for the benchmark. */
void fixture_gemma3_270m(struct fixture *f, uint32_t type);
void fixture_gemma3_1b(struct fixture *f, uint32_t type);

/* Write the model; 0 or -1 (errno). */
int fixture_write(const struct fixture *f, const char *path);

/* Vocabulary-only files for the tokenizer tests; 0 or -1 (errno). */
int fixture_bpe_vocab(const char *path, const char *pre);
int fixture_spm_vocab(const char *path);

#endif
