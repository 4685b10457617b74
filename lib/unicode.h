/* unicode.h: UTF-8 and the Unicode general categories the pre-tokenizers need. */
#ifndef LLM_UNICODE_H
#define LLM_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Major general categories; C covers Cc, Cf, Cs, Co and unassigned.  The
 * table holds letters as their own categories, Lu to Lo, which
 * unicode_category answers as L and unicode_subcategory as they are.
 */
enum { UC_C, UC_L, UC_M, UC_N, UC_P, UC_S, UC_Z, UC_Lu, UC_Ll, UC_Lt, UC_Lm, UC_Lo };

struct unicode_range {
	uint32_t lo, hi;
	uint8_t cat;
};

/* The generated table (lib/unicode_table.c, from tools/gen-unicode.sh). */
extern const struct unicode_range unicode_ranges[];
extern const int unicode_nranges;

/*
 * A byte that is not part of valid UTF-8 decodes to UNICODE_RAW + byte,
 * outside the Unicode range, so tokenizers can still encode it as a byte.
 */
#define UNICODE_RAW 0x110000u

int unicode_category(uint32_t cp);
int unicode_subcategory(uint32_t cp);	/* a letter's Lu, Ll, Lt, Lm or Lo; else as unicode_category */
int unicode_is_space(uint32_t cp);	/* the White_Space property, as \s */

/* Decode one code point from s[0..n), n > 0; returns the bytes used (>= 1). */
int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);
/* Encode cp (not a raw byte); returns the length, 1-4. */
int utf8_encode(uint32_t cp, char *out);
/* The length a lead byte announces: 1-4, or 0 for a continuation or invalid byte. */
int utf8_lead_len(unsigned char c);

#endif
