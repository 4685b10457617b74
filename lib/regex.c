/*
 * regex.c: a JSON Schema pattern as GBNF (regex.h).  A recursive descent
 * over the pattern writes the expression as it reads: a group as a
 * group, a count as a count, and every character, class or escape as
 * the set of code points it matches, written as JSON writes them inside
 * a string.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regex.h"
#include "unicode.h"
#include "util.h"

#define MAX_COUNT 1000		/* as schema.c's, and grammar.c's bound on a repetition */
#define MAX_NEST 100		/* groups within groups */
#define MAX_CP 0x10ffff

/* A set of code points as ranges, sorted and apart once tidied. */
struct cset {
	uint32_t (*r)[2];
	int n, cap;
};

static void
cs_add(struct cset *s, uint32_t lo, uint32_t hi)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->r = xrealloc(s->r, (size_t)s->cap * sizeof *s->r);
	}
	s->r[s->n][0] = lo, s->r[s->n][1] = hi;
	s->n++;
}

static int
range_cmp(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void
cs_tidy(struct cset *s)
{
	int k = 0;

	if (s->n > 1)
		qsort(s->r, (size_t)s->n, sizeof *s->r, range_cmp);
	for (int i = 0; i < s->n; i++)
		if (k && s->r[i][0] <= s->r[k - 1][1] + 1) {
			if (s->r[i][1] > s->r[k - 1][1])
				s->r[k - 1][1] = s->r[i][1];
		} else
			s->r[k][0] = s->r[i][0], s->r[k++][1] = s->r[i][1];
	s->n = k;
}

/* The code points s lacks. */
static void
cs_invert(struct cset *s)
{
	struct cset t = { 0 };
	uint32_t next = 0;

	cs_tidy(s);
	for (int i = 0; i < s->n; i++) {
		if (s->r[i][0] > next)
			cs_add(&t, next, s->r[i][0] - 1);
		next = s->r[i][1] + 1;
	}
	if (next <= MAX_CP)
		cs_add(&t, next, MAX_CP);
	free(s->r);
	*s = t;
}

/* \d \w \s (and, upper case, what they lack) added to s: 1, or 0 if c is none of them. */
static int
class_escape(int c, struct cset *s)
{
	static const uint32_t digit[][2] = { { '0', '9' } };
	static const uint32_t word[][2] = { { '0', '9' }, { 'A', 'Z' }, { '_', '_' }, { 'a', 'z' } };
	/* ECMA-262's WhiteSpace and LineTerminator */
	static const uint32_t space[][2] = { { 0x09, 0x0d }, { 0x20, 0x20 }, { 0xa0, 0xa0 },
		{ 0x1680, 0x1680 }, { 0x2000, 0x200a }, { 0x2028, 0x2029 }, { 0x202f, 0x202f },
		{ 0x205f, 0x205f }, { 0x3000, 0x3000 }, { 0xfeff, 0xfeff } };
	const uint32_t (*r)[2];
	int n;
	struct cset t = { 0 };

	switch (c | 0x20) {
	case 'd': r = digit, n = 1; break;
	case 'w': r = word, n = 4; break;
	case 's': r = space, n = 10; break;
	default: return 0;
	}
	for (int i = 0; i < n; i++)
		cs_add(&t, r[i][0], r[i][1]);
	if (c >= 'A' && c <= 'Z')
		cs_invert(&t);
	for (int i = 0; i < t.n; i++)
		cs_add(s, t.r[i][0], t.r[i][1]);
	free(t.r);
	return 1;
}

struct rx {
	const char *s, *p, *end;
	const char *any;	/* the rule of one JSON string character */
	int nest;
};

static int
rx_fail(struct rx *x, const char *at, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	llm_seterr("at %d: %s", (int)(at - x->s), msg);
	return -1;
}


/* A code point inside a GBNF class. */
static void
class_char(struct buf *b, uint32_t c)
{
	if (c == '\\' || c == ']' || c == '[' || c == '-' || c == '^')
		buf_printf(b, "\\%c", (int)c);
	else if (c > 0x20 && c < 0x7f)
		buf_printf(b, "%c", (int)c);
	else if (c < 0x80)
		buf_printf(b, "\\x%02X", (unsigned)c);
	else if (c < 0x10000)
		buf_printf(b, "\\u%04X", (unsigned)c);
	else
		buf_printf(b, "\\U%08X", (unsigned)c);
}

/* A hexadecimal digit in either case, for the low four bits in bits (a bit a value). */
static void
hex_class(struct buf *b, unsigned bits)
{
	buf_printf(b, "[");
	for (int d = 0; d < 16; d++)
		if (bits >> d & 1)
			buf_printf(b, d < 10 ? "%c" : "%c%c", d < 10 ? '0' + d : 'a' + d - 10, 'A' + d - 10);
	buf_printf(b, "]");
}

/*
 * The set's characters as JSON writes them in a string, one GBNF element:
 * a class of the plain ones, and the escapes of " \ and the controls.
 * -1 if the set has no character a string can hold.
 */
static int
emit_set(struct rx *x, const char *at, struct cset *s, struct buf *out)
{
	static const char shorts[] = { 'b', 8, 'f', 12, 'n', 10, 'r', 13, 't', 9 };
	struct buf plain = { 0 }, alt = { 0 };
	unsigned ctl[2] = { 0, 0 };	/* the controls without a short escape, by high hex digit */
	int n = 0, quote = 0, backslash = 0;
	char sh[6];
	int nsh = 0;

	cs_tidy(s);
	for (int i = 0; i < s->n; i++) {
		uint32_t lo = s->r[i][0], hi = s->r[i][1];
		for (uint32_t c = lo; c <= hi && c < 0x20; c++) {
			int k;
			for (k = 0; k < 10 && (uint32_t)shorts[k + 1] != c; k += 2)
				;
			if (k < 10)
				sh[nsh++] = shorts[k];
			else
				ctl[c >> 4] |= 1u << (c & 15);
		}
		quote |= lo <= '"' && '"' <= hi;
		backslash |= lo <= '\\' && '\\' <= hi;
		/* the plain ones: less the controls, ", \ and the surrogates */
		uint32_t cut[][2] = { { 0, 0x1f }, { '"', '"' }, { '\\', '\\' }, { 0xd800, 0xdfff } };
		for (int k = 0; k < 4 && lo <= hi; k++) {
			if (hi < cut[k][0] || lo > cut[k][1])
				continue;
			if (lo < cut[k][0]) {
				class_char(&plain, lo);
				if (cut[k][0] - 1 > lo) {
					buf_printf(&plain, "-");
					class_char(&plain, cut[k][0] - 1);
				}
			}
			lo = cut[k][1] + 1;
			if (cut[k][1] >= hi)
				lo = hi + 1;
		}
		if (lo <= hi) {
			class_char(&plain, lo);
			if (hi > lo) {
				buf_printf(&plain, "-");
				class_char(&plain, hi);
			}
		}
	}
	if (s->n == 1 && s->r[0][0] == s->r[0][1] && plain.n) {	/* one plain character: a literal */
		uint32_t c = s->r[0][0];
		char u[4];
		buf_printf(&alt, "\"");
		buf_add(&alt, u, (size_t)utf8_encode(c, u));
		buf_printf(&alt, "\"");
		n++;
	} else if (plain.n) {
		buf_printf(&alt, "[");
		buf_add(&alt, plain.s, plain.n);
		buf_printf(&alt, "]");
		n++;
	}
	if (quote)
		buf_printf(&alt, "%s\"\\\\\\\"\"", n++ ? " | " : "");
	if (backslash)
		buf_printf(&alt, "%s\"\\\\\\\\\"", n++ ? " | " : "");
	if (nsh) {
		buf_printf(&alt, "%s\"\\\\\" [", n++ ? " | " : "");
		buf_add(&alt, sh, (size_t)nsh);
		buf_printf(&alt, "]");
	}
	if (ctl[0] | ctl[1]) {
		buf_printf(&alt, "%s\"\\\\u00\" ", n++ ? " | " : "");
		if (ctl[0] && ctl[1])
			buf_printf(&alt, "( ");
		for (int h = 0; h < 2; h++)
			if (ctl[h]) {
				buf_printf(&alt, "%s\"%d\" ", h && ctl[0] ? " | " : "", h);
				hex_class(&alt, ctl[h]);
			}
		if (ctl[0] && ctl[1])
			buf_printf(&alt, " )");
	}
	buf_free(&plain);
	if (n == 0) {
		buf_free(&alt);
		return rx_fail(x, at, "it matches no character a string can hold");
	}
	/* one class or literal as it is; else a group (an escape is two elements) */
	int group = n > 1 || nsh || ctl[0] || ctl[1];
	if (group)
		buf_printf(out, "( ");
	buf_add(out, alt.s, alt.n);
	if (group)
		buf_printf(out, " )");
	buf_free(&alt);
	return 0;
}

static int
hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
}

/* k hexadecimal digits at p (k < 0: one or more, up to a '}'): the value, or -1. */
static long
hex_digits(struct rx *x, int k)
{
	long v = 0;
	int i, h;

	for (i = 0; k < 0 ? x->p < x->end && *x->p != '}' : i < k; i++, x->p++) {
		if (x->p >= x->end || (h = hex(*x->p)) < 0 || v > MAX_CP)
			return -1;
		v = v * 16 + h;
	}
	return i == 0 || v > MAX_CP ? -1 : v;
}

static int plain_char(struct rx *x, uint32_t *cp);

/*
 * A character escape, x->p past the backslash: the code point into *cp.
 * In a class \b is a backspace and \- a hyphen.
 */
static int
char_escape(struct rx *x, int in_class, uint32_t *cp)
{
	const char *at = x->p - 1;
	int c = (unsigned char)*x->p++;
	long v;

	switch (c) {
	case 't': *cp = '\t'; return 0;
	case 'n': *cp = '\n'; return 0;
	case 'v': *cp = 0x0b; return 0;
	case 'f': *cp = 0x0c; return 0;
	case 'r': *cp = '\r'; return 0;
	case '0':
		if (x->p < x->end && *x->p >= '0' && *x->p <= '9')
			return rx_fail(x, at, "\\0 followed by a digit (an octal escape): not supported");
		*cp = 0;
		return 0;
	case 'c':
		if (x->p >= x->end || !((*x->p | 0x20) >= 'a' && (*x->p | 0x20) <= 'z'))
			return rx_fail(x, at, "\\c must be followed by a letter");
		*cp = (uint32_t)(*x->p++ % 32);
		return 0;
	case 'x':
		if ((v = hex_digits(x, 2)) < 0)
			return rx_fail(x, at, "\\x must be followed by 2 hexadecimal digits");
		*cp = (uint32_t)v;
		return 0;
	case 'u':
		if (x->p < x->end && *x->p == '{') {
			x->p++;
			if ((v = hex_digits(x, -1)) < 0 || x->p >= x->end || *x->p != '}')
				return rx_fail(x, at, "\\u{...} must hold a code point in hexadecimal");
			x->p++;
		} else if ((v = hex_digits(x, 4)) < 0)
			return rx_fail(x, at, "\\u must be followed by 4 hexadecimal digits or {...}");
		/* a surrogate pair written as two escapes is one code point */
		if (v >= 0xd800 && v < 0xdc00 && x->end - x->p >= 6 && x->p[0] == '\\' && x->p[1] == 'u') {
			const char *back = x->p;
			long lo;
			x->p += 2;
			if ((lo = hex_digits(x, 4)) >= 0xdc00 && lo < 0xe000)
				v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
			else
				x->p = back;
		}
		*cp = (uint32_t)v;
		return 0;
	case 'b':
		if (in_class) {
			*cp = 8;
			return 0;
		}
		return rx_fail(x, at, "\\b (a word boundary): not supported");
	case 'B':
		return rx_fail(x, at, "\\B (not a word boundary): not supported");
	case 'k':
		return rx_fail(x, at, "\\k (a backreference): not supported");
	case 'p': case 'P':
		return rx_fail(x, at, "\\%c (Unicode properties): not supported", c);
	}
	if (c >= '1' && c <= '9')
		return rx_fail(x, at, "\\%c (a backreference): not supported", c);
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
		return rx_fail(x, at, "\\%c: not an escape ECMA-262 knows", c);
	if (c < 0x80) {
		*cp = (uint32_t)c;
		return 0;
	}
	/* a non-ASCII character, escaped for nothing: itself */
	x->p--;
	return plain_char(x, cp);
}

/* One character of the pattern as it is (UTF-8). */
static int
plain_char(struct rx *x, uint32_t *cp)
{
	int len = utf8_decode((const unsigned char *)x->p, (size_t)(x->end - x->p), cp);

	if (*cp > MAX_CP)
		return rx_fail(x, x->p, "not UTF-8");
	x->p += len;
	return 0;
}

/* A character in a class: as it is, or escaped. */
static int
class_char_at(struct rx *x, uint32_t *cp)
{
	if (*x->p != '\\')
		return plain_char(x, cp);
	if (++x->p >= x->end)
		return rx_fail(x, x->p - 1, "a \\ at the end");
	return char_escape(x, 1, cp);
}

/* A class, x->p past its '[': its set into s. */
static int
bracket(struct rx *x, struct cset *s)
{
	const char *at = x->p - 1;
	int negate = 0;

	if (x->p < x->end && *x->p == '^')
		negate = 1, x->p++;
	for (;;) {
		uint32_t lo, hi;
		const char *item = x->p;
		if (x->p >= x->end)
			return rx_fail(x, at, "a class with no ]");
		if (*x->p == ']') {
			x->p++;
			break;
		}
		if (*x->p == '\\' && x->p + 1 < x->end && class_escape((unsigned char)x->p[1], s)) {
			x->p += 2;
			if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']')
				return rx_fail(x, item, "a range from a class escape");
			continue;
		}
		if (class_char_at(x, &lo) < 0)
			return -1;
		hi = lo;
		if (x->p + 1 < x->end && *x->p == '-' && x->p[1] != ']') {
			const char *to = ++x->p;
			if (*x->p == '\\' && x->p + 1 < x->end && x->p[1] && strchr("dDwWsS", x->p[1]))
				return rx_fail(x, to, "a range to a class escape");
			if (class_char_at(x, &hi) < 0)
				return -1;
			if (hi < lo)
				return rx_fail(x, item, "a range out of order");
		}
		cs_add(s, lo, hi);
	}
	if (negate)
		cs_invert(s);
	return 0;
}

/* A count {m}, {m,}, {m,n} at p: where it ends, with *min, *max (-1: none); NULL if none begins there (Annex B: a '{') */
static const char *
braces(const char *p, const char *end, int *min, int *max)
{
	long m = 0, n = -1;

	if (++p >= end || *p < '0' || *p > '9')
		return NULL;
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		m = m > MAX_COUNT ? m : m * 10 + (*p - '0');
	if (p < end && *p == ',') {
		p++;
		if (p < end && *p >= '0' && *p <= '9')
			for (n = 0; p < end && *p >= '0' && *p <= '9'; p++)
				n = n > MAX_COUNT ? n : n * 10 + (*p - '0');
	} else
		n = m;
	if (p >= end || *p != '}')
		return NULL;
	*min = (int)m, *max = (int)n;
	return p + 1;
}

/* A quantifier at x->p: 1 with its counts, 0 if none, -1. */
static int
quantifier(struct rx *x, int *min, int *max)
{
	const char *at = x->p, *end;

	if (x->p >= x->end)
		return 0;
	switch (*x->p) {
	case '*': *min = 0, *max = -1, x->p++; break;
	case '+': *min = 1, *max = -1, x->p++; break;
	case '?': *min = 0, *max = 1, x->p++; break;
	case '{':
		if (!(end = braces(x->p, x->end, min, max)))
			return 0;
		x->p = end;
		if (*min > MAX_COUNT || *max > MAX_COUNT)
			return rx_fail(x, at, "a count above %d: not supported", MAX_COUNT);
		if (*max >= 0 && *min > *max)
			return rx_fail(x, at, "a count's numbers out of order");
		break;
	default:
		return 0;
	}
	if (x->p < x->end && *x->p == '?')	/* lazy: the same strings */
		x->p++;
	return 1;
}

static int alternatives(struct rx *x, int top, struct buf *out);

/* One atom at x->p, as one GBNF element. */
static int
atom(struct rx *x, struct buf *out)
{
	const char *at = x->p;
	struct cset s = { 0 };
	uint32_t c;
	int rc, a, b;

	switch (*x->p) {
	case '(':
		if (++x->nest > MAX_NEST)
			return rx_fail(x, at, "groups nested deeper than %d", MAX_NEST);
		x->p++;
		if (x->p < x->end && *x->p == '?') {
			const char *q = x->p + 1;
			if (q < x->end && *q == ':')
				x->p += 2;
			else if (q < x->end && (*q == '=' || *q == '!'))
				return rx_fail(x, at, "(?%c (a lookahead): not supported", *q);
			else if (x->end - q >= 2 && *q == '<' && (q[1] == '=' || q[1] == '!'))
				return rx_fail(x, at, "(?<%c (a lookbehind): not supported", q[1]);
			else if (q < x->end && *q == '<') {	/* a named group: a group */
				const char *e = memchr(q, '>', (size_t)(x->end - q));
				if (!e || e == q + 1)
					return rx_fail(x, at, "a group's name with no >");
				x->p = e + 1;
			} else
				return rx_fail(x, at, "(? must begin (?: (?<name> (?= (?! (?<= or (?<!");
		}
		buf_printf(out, "( ");
		if (alternatives(x, 0, out) < 0)
			return -1;
		if (x->p >= x->end || *x->p != ')')
			return rx_fail(x, at, "a group with no )");
		x->p++;
		x->nest--;
		buf_printf(out, " )");
		return 0;
	case '[':
		x->p++;
		rc = bracket(x, &s);
		break;
	case '.':	/* anything but a line terminator */
		x->p++;
		cs_add(&s, '\n', '\n'), cs_add(&s, '\r', '\r'), cs_add(&s, 0x2028, 0x2029);
		cs_invert(&s);
		rc = 0;
		break;
	case '\\':
		if (++x->p >= x->end)
			return rx_fail(x, at, "a \\ at the end");
		if (class_escape((unsigned char)*x->p, &s)) {
			x->p++;
			rc = 0;
			break;
		}
		if ((rc = char_escape(x, 0, &c)) == 0)
			cs_add(&s, c, c);
		break;
	case '*': case '+': case '?':
		return rx_fail(x, at, "%c with nothing to repeat", *x->p);
	default:	/* a '{' that begins no count is one (Annex B) */
		if (*x->p == '{' && braces(x->p, x->end, &a, &b))
			return rx_fail(x, at, "a count with nothing to repeat");
		if ((rc = plain_char(x, &c)) == 0)
			cs_add(&s, c, c);
	}
	if (rc == 0)
		rc = emit_set(x, at, &s, out);
	free(s.r);
	return rc;
}

/*
 * A sequence of atoms, each with its count, up to a '|', a ')' or the
 * end.  top: an alternative of the whole pattern, which may begin with ^
 * and end with $; without them any characters come before or after.
 */
static int
sequence(struct rx *x, int top, struct buf *out)
{
	int from = 0, to = 0, n = 0, min, max, q;
	struct buf seq = { 0 };

	if (top && x->p < x->end && *x->p == '^')
		from = 1, x->p++;
	while (x->p < x->end && *x->p != '|' && *x->p != ')') {
		const char *at = x->p;
		struct buf a = { 0 };
		if (*x->p == '$' && top && (x->p + 1 == x->end || x->p[1] == '|')) {
			x->p++, to = 1;
			break;
		}
		if (*x->p == '^' || *x->p == '$') {
			buf_free(&seq);
			return rx_fail(x, at, "%c inside the pattern: not supported (only at the start or end "
			    "of an alternative of the whole pattern)", *x->p);
		}
		if (atom(x, &a) < 0 || (q = quantifier(x, &min, &max)) < 0) {
			buf_free(&a), buf_free(&seq);
			return -1;
		}
		if (q && x->p < x->end && (*x->p == '*' || *x->p == '+' || *x->p == '?' ||
		    (*x->p == '{' && braces(x->p, x->end, &min, &max)))) {
			buf_free(&a), buf_free(&seq);
			return rx_fail(x, x->p, "%c with nothing to repeat", *x->p);
		}
		if (q && max == 0)
			;	/* {0}: nothing */
		else {
			buf_printf(&seq, n++ ? " " : "");
			buf_add(&seq, a.s, a.n);
			if (!q || (min == 1 && max == 1))
				;
			else if (max < 0)
				buf_printf(&seq, min == 0 ? "*" : min == 1 ? "+" : "{%d,}", min);
			else if (min == 0 && max == 1)
				buf_printf(&seq, "?");
			else if (min == max)
				buf_printf(&seq, "{%d}", min);
			else
				buf_printf(&seq, "{%d,%d}", min, max);
		}
		buf_free(&a);
	}
	if (top && x->p < x->end && *x->p == ')') {
		buf_free(&seq);
		return rx_fail(x, x->p, "a ) with no group open");
	}
	if (top && (!from || !to)) {	/* the unanchored ends: any characters */
		if (n == 0)
			buf_printf(out, "%s*", x->any);
		else {
			if (!from)
				buf_printf(out, "%s* ", x->any);
			buf_add(out, seq.s, seq.n);
			if (!to)
				buf_printf(out, " %s*", x->any);
		}
	} else if (n == 0)
		buf_printf(out, "\"\"");
	else
		buf_add(out, seq.s, seq.n);
	buf_free(&seq);
	return 0;
}

/* Sequences split by '|', as one element. */
static int
alternatives(struct rx *x, int top, struct buf *out)
{
	struct buf alt = { 0 };
	int n = 0;

	for (;;) {
		if (n++)
			buf_printf(&alt, " | ");
		if (sequence(x, top, &alt) < 0) {
			buf_free(&alt);
			return -1;
		}
		if (x->p < x->end && *x->p == '|') {
			x->p++;
			continue;
		}
		break;
	}
	if (n > 1 && top)
		buf_printf(out, "( ");
	buf_add(out, alt.s, alt.n);
	if (n > 1 && top)
		buf_printf(out, " )");
	buf_free(&alt);
	return 0;
}

int
regex_gbnf(const char *re, size_t n, const char *any, struct buf *out)
{
	struct rx x = { re, re, re + n, any, 0 };
	struct buf e = { 0 };

	if (alternatives(&x, 1, &e) < 0) {
		buf_free(&e);
		return -1;
	}
	buf_add(out, e.s, e.n);
	buf_free(&e);
	return 0;
}
