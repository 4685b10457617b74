/*
 * pretok.h: the pre-tokenizers of byte-level BPE vocabularies.  Each is
 * the list of regexes of its upstream tokenizer.json, run by a small
 * backtracking matcher over code points.
 */
#ifndef LLM_PRETOK_H
#define LLM_PRETOK_H

#include <stddef.h>
#include <stdint.h>

struct pretok;

/* A piece of the input: code points [start, end). */
struct span {
	size_t start, end;
};

/*
 * The pre-tokenizer that tokenizer.ggml.pre names; NULL with llm_err()
 * set for an unknown name.  *ignore_merges is set for the families whose
 * BPE takes a whole word that is a token as it is (llama3).
 */
struct pretok *pretok_new(const char *name, int *ignore_merges);
void pretok_free(struct pretok *p);
/* 1 if the name is one this build knows. */
int pretok_known(const char *name);

/*
 * Split cps[0..n) into pieces, in time linear in n.  A pre-tokenizer is
 * read-only once made, so threads may share it.  *spans is a growable array (malloc'd,
 * *cap entries); returns the number of pieces.
 */
size_t pretok_split(const struct pretok *p, const uint32_t *cps, size_t n,
    struct span **spans, size_t *cap);

/* The regex matcher, exposed for tests. */
struct regex;
struct regex *regex_compile(const char *pattern);	/* NULL, llm_err() */
void regex_free(struct regex *re);
/* The end of the match starting at i, within [0, n), or -1. */
long regex_match_at(const struct regex *re, const uint32_t *cps, size_t n, size_t i);

#endif
