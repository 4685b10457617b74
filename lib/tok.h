/*
 * tok.h: the GGUF tokenizers: SentencePiece BPE (tokenizer.ggml.model
 * "llama") and byte-level BPE ("gpt2"), with special tokens and a
 * streaming detokenizer.
 */
#ifndef LLM_TOK_H
#define LLM_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "util.h"

enum { TOK_SPM, TOK_BPE };

/* tokenizer.ggml.token_type values */
enum { TT_UNDEFINED, TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER_DEFINED,
	TT_UNUSED, TT_BYTE };

struct tok_map {		/* open addressing; slots hold ids, -1 empty */
	int32_t *slot;
	size_t mask;
};

struct tok_pairs {		/* BPE merges: (left id, right id) -> rank, merged id */
	uint64_t *key;
	int32_t *rank, *merged;
	size_t mask;
};

struct tok {
	int model;		/* TOK_SPM or TOK_BPE */
	int n_vocab;
	struct gguf_str *piece;	/* token texts, inside the map */
	int32_t *type;
	float *score;
	int bos, eos, unk;	/* -1 when absent */
	int add_bos, add_eos, add_space_prefix;
	int byte_id[256];	/* the token of each byte: <0xXX> or its byte-level char */
	uint32_t byte_char[256];/* byte-level BPE: the code point standing for each byte */
	struct tok_map vocab;
	struct tok_pairs merges;
	struct pretok *pre;
	int ignore_merges;
	int spm_words;		/* no token has U+2581 after another character */
	char pre_name[64];
	char warning[160];	/* a non-fatal problem, for the tool to print */
	int *special;		/* control, unknown and user-defined ids, longest first */
	int n_special;
	int has_user_defined;	/* user-defined tokens are matched even without --special */
};

/* From an open GGUF (a model or a vocabulary-only file); -1, llm_err(). */
int tok_load(struct tok *t, const struct gguf *g);
void tok_free(struct tok *t);

/* The id whose text is s[0..n), or -1. */
int tok_lookup(const struct tok *t, const char *s, size_t n);

/*
 * Append the ids of text[0..len) to out; BOS and EOS are the caller's.
 * With parse_special, control tokens written in the text become their
 * ids; user-defined tokens always do.  The tokenizer is only read, and
 * each call keeps its working state to itself, so threads may encode
 * with one tokenizer at once (tok_load and tok_free are not concurrent).
 */
void tok_encode(const struct tok *t, const char *text, size_t len, int parse_special,
    struct ids *out);

/* Append the bytes token id stands for; control tokens only with special. */
void tok_piece(const struct tok *t, int id, int special, struct buf *out);

/* The name of a token type, for --vocab. */
const char *tok_type_name(int type);

/*
 * Streaming detokenizer: bytes come out as soon as they form complete
 * UTF-8 characters; a character split across tokens waits.
 */
struct tok_decoder {
	const struct tok *t;
	int special;
	int started;		/* SentencePiece: the first space was handled */
	struct buf pending;
};

void tok_decoder_init(struct tok_decoder *d, const struct tok *t, int special);
/* Append to out what is ready after token id. */
void tok_decode(struct tok_decoder *d, int id, struct buf *out);
/* Append whatever is held back (end of stream). */
void tok_decode_finish(struct tok_decoder *d, struct buf *out);

#endif
