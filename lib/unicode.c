/* unicode.c: UTF-8 coding and category lookup. */
#include "unicode.h"

int
unicode_category(uint32_t cp)
{
	int c = unicode_subcategory(cp);

	return c >= UC_Lu ? UC_L : c;
}

int
unicode_subcategory(uint32_t cp)
{
	int lo = 0, hi = unicode_nranges - 1, mid;

	if (cp < 0x80) {
		/* ASCII is the hot path: answer without a search. */
		if (cp < 0x20 || cp == 0x7f)
			return UC_C;
		if (cp == ' ')
			return UC_Z;
		if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
			return cp >= 'a' ? UC_Ll : UC_Lu;
		if (cp >= '0' && cp <= '9')
			return UC_N;
		if (cp == '$' || cp == '+' || cp == '<' || cp == '=' || cp == '>' ||
		    cp == '^' || cp == '`' || cp == '|' || cp == '~')
			return UC_S;
		return UC_P;
	}
	while (lo <= hi) {
		mid = (lo + hi) / 2;
		if (cp < unicode_ranges[mid].lo)
			hi = mid - 1;
		else if (cp > unicode_ranges[mid].hi)
			lo = mid + 1;
		else
			return unicode_ranges[mid].cat;
	}
	return UC_C;
}

int
unicode_is_space(uint32_t cp)
{
	switch (cp) {
	case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20:
	case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
	case 0x202f: case 0x205f: case 0x3000:
		return 1;
	}
	return cp >= 0x2000 && cp <= 0x200a;
}

int
utf8_lead_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

int
utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	int len = utf8_lead_len(s[0]), i;
	uint32_t c;

	if (len == 1) {
		*cp = s[0];
		return 1;
	}
	if (len == 0 || (size_t)len > n)
		goto raw;
	c = s[0] & (0x7f >> len);
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto raw;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* No overlong forms, surrogates or code points past U+10FFFF. */
	if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) ||
	    (c >= 0xd800 && c <= 0xdfff))
		goto raw;
	*cp = c;
	return len;
raw:
	*cp = UNICODE_RAW + s[0];
	return 1;
}

int
utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}
