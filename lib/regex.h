/*
 * regex.h: a JSON Schema "pattern" (an ECMA-262 regular expression, the
 * subset schemas use) as a GBNF expression, for the strings it matches.
 *
 * The pattern is read as ECMA-262 reads it with the u flag (code points,
 * \u{...}), and as its Annex B reads a { that begins no count and a lone
 * } or ]: as the character.  Taken: characters and escapes (\t \n \v \f
 * \r \0 \cX \xHH \uHHHH \u{H...}, an escaped punctuation character);
 * classes with ranges and negation; \d \w \s \D \W \S, in classes too;
 * "."; groups ((...), (?:...), (?<name>...)) and alternation; * + ?
 * {m} {m,} {m,n}, lazy or not (the same strings match); ^ and $ at the
 * start and end of the pattern's alternatives.  Refused, by name:
 * backreferences, lookahead and lookbehind, \b and \B, \p{...}, anchors
 * elsewhere, counts above 1000.
 *
 * A pattern matches a string that contains a match (JSON Schema's rule):
 * where an alternative has no ^ any characters may come before it, and
 * where it has no $ any after.
 */
#ifndef LLM_REGEX_H
#define LLM_REGEX_H

#include <stddef.h>

#include "util.h"

/*
 * Append to out the GBNF expression of the texts JSON writes between a
 * string's quotes for the strings the pattern re[0..n) matches: each
 * character the pattern matches written as itself, except those JSON
 * must escape (" \ and U+0000 to U+001F), written as \" \\ \b \f \n \r
 * \t or else \u00XX; the characters an unanchored end allows are any, as
 * the rule named any (one JSON string character, escapes and all)
 * matches them.  0, or -1 with llm_err() saying "at N: what is wrong"
 * (N counting the pattern's bytes from 0).
 */
int regex_gbnf(const char *re, size_t n, const char *any, struct buf *out);

#endif
