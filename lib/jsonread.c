/* jsonread.c: JSON text read into a tree (a recursive descent, depth-bounded). */
#include <stdio.h>
#include <string.h>

#include "jsonread.h"
#include "unicode.h"
#include "util.h"

struct reader {
	const char *s, *p, *end;
	int err;
};

static void
rerr(struct reader *r, const char *at, const char *msg)
{
	int line = 1, col = 1;

	if (r->err)
		return;
	r->err = 1;
	for (const char *q = r->s; q < at && q < r->end; q++)
		if (*q == '\n')
			line++, col = 1;
		else if (((unsigned char)*q & 0xc0) != 0x80)
			col++;
	llm_seterr("%d:%d: %s", line, col, msg);
}

static void
blank(struct reader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int
hex4(const char *p, const char *end, unsigned *out)
{
	unsigned v = 0;

	if (end - p < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		int c = p[k];
		int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (h < 0)
			return -1;
		v = v << 4 | (unsigned)h;
	}
	*out = v;
	return 0;
}

/* A string at r->p (its opening quote), its text into b, NUL-ended. */
static int
string(struct reader *r, struct buf *b)
{
	const char *start = r->p++;
	char u[4];

	b->n = 0;
	for (;;) {
		if (r->p >= r->end) {
			rerr(r, start, "a string with no end");
			return -1;
		}
		unsigned char c = (unsigned char)*r->p;
		if (c == '"') {
			r->p++;
			break;
		}
		if (c < 0x20) {
			rerr(r, r->p, "a control character in a string (it must be escaped)");
			return -1;
		}
		if (c != '\\') {
			uint32_t cp;
			int len = utf8_decode((const unsigned char *)r->p, (size_t)(r->end - r->p), &cp);
			if (cp >= UNICODE_RAW || (cp >= 0xd800 && cp < 0xe000)) {
				rerr(r, r->p, "not UTF-8");
				return -1;
			}
			buf_add(b, r->p, (size_t)len);
			r->p += len;
			continue;
		}
		const char *esc = r->p;
		if (r->p + 1 >= r->end) {
			rerr(r, start, "a string with no end");
			return -1;
		}
		r->p += 2;
		switch (esc[1]) {
		case '"': case '\\': case '/': buf_add(b, esc + 1, 1); break;
		case 'b': buf_add(b, "\b", 1); break;
		case 'f': buf_add(b, "\f", 1); break;
		case 'n': buf_add(b, "\n", 1); break;
		case 'r': buf_add(b, "\r", 1); break;
		case 't': buf_add(b, "\t", 1); break;
		case 'u': {
			unsigned cp, lo;
			if (hex4(r->p, r->end, &cp) < 0) {
				rerr(r, esc, "expected four hexadecimal digits after \\u");
				return -1;
			}
			r->p += 4;
			if (cp >= 0xdc00 && cp < 0xe000) {
				rerr(r, esc, "a low surrogate with no high one before it");
				return -1;
			}
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
				    hex4(r->p + 2, r->end, &lo) < 0 || lo < 0xdc00 || lo >= 0xe000) {
					rerr(r, esc, "a high surrogate with no low one after it");
					return -1;
				}
				r->p += 6;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			buf_add(b, u, (size_t)utf8_encode(cp, u));
			break;
		}
		default:
			rerr(r, esc, "an unknown escape in a string");
			return -1;
		}
	}
	buf_add(b, "", 1);
	b->n--;
	return 0;
}

static int
number(struct reader *r)
{
	const char *p = r->p;

	if (p < r->end && *p == '-')
		p++;
	if (p < r->end && *p == '0')
		p++;
	else if (p < r->end && *p >= '1' && *p <= '9')
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
	else {
		rerr(r, r->p, "expected a value");
		return -1;
	}
	if (p < r->end && *p == '.') {
		if (++p >= r->end || *p < '0' || *p > '9') {
			rerr(r, p, "expected a digit after the decimal point");
			return -1;
		}
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < r->end && (*p == 'e' || *p == 'E')) {
		if (++p < r->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= r->end || *p < '0' || *p > '9') {
			rerr(r, p, "expected a digit in the exponent");
			return -1;
		}
		while (p < r->end && *p >= '0' && *p <= '9')
			p++;
	}
	r->p = p;
	return 0;
}

static int
word(struct reader *r, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0) {
		rerr(r, r->p, "expected a value");
		return -1;
	}
	r->p += n;
	return 0;
}

static struct jv *
push(struct jv *o, int *cap)
{
	if (o->n == *cap) {
		*cap = *cap ? 2 * *cap : 4;
		o->v = xrealloc(o->v, (size_t)*cap * sizeof *o->v);
		if (o->type == JV_OBJECT)
			o->key = xrealloc(o->key, (size_t)*cap * sizeof *o->key);
	}
	memset(&o->v[o->n], 0, sizeof o->v[o->n]);
	return &o->v[o->n++];
}

static char *
dup(const struct buf *b)
{
	return memcpy(xmalloc(b->n + 1), b->s, b->n + 1);
}

static int
value(struct reader *r, struct jv *v, int depth, struct buf *b)
{
	int cap = 0;

	memset(v, 0, sizeof *v);
	blank(r);
	if (r->p >= r->end) {
		rerr(r, r->p, "unexpected end of the text: expected a value");
		return -1;
	}
	switch (*r->p) {
	case 'n': v->type = JV_NULL; return word(r, "null");
	case 't': v->type = JV_TRUE; return word(r, "true");
	case 'f': v->type = JV_FALSE; return word(r, "false");
	case '"':
		v->type = JV_STRING;
		if (string(r, b) < 0)
			return -1;
		v->s = dup(b), v->len = b->n;
		return 0;
	case '[': case '{':
		break;
	default: {
		const char *start = r->p;
		v->type = JV_NUMBER;
		if (number(r) < 0)
			return -1;
		v->len = (size_t)(r->p - start);
		v->s = memcpy(xcalloc(v->len + 1, 1), start, v->len);
		return 0;
	}
	}
	if (depth >= JV_MAX_DEPTH) {
		rerr(r, r->p, "nested too deep");
		return -1;
	}
	char close = *r->p == '[' ? ']' : '}';
	v->type = close == ']' ? JV_ARRAY : JV_OBJECT;
	r->p++;
	blank(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		if (v->type == JV_OBJECT) {
			blank(r);
			if (r->p >= r->end || *r->p != '"') {
				rerr(r, r->p, "expected a member's name (a string)");
				return -1;
			}
			const char *at = r->p;
			if (string(r, b) < 0)
				return -1;
			if (strlen(b->s) != b->n) {
				rerr(r, at, "a NUL in a member's name");
				return -1;
			}
			if (jv_get(v, b->s)) {
				rerr(r, at, "a name given twice in one object");
				return -1;
			}
			char *key = dup(b);
			blank(r);
			if (r->p >= r->end || *r->p != ':') {
				free(key);
				rerr(r, r->p, "expected ':' after a member's name");
				return -1;
			}
			r->p++;
			struct jv *m = push(v, &cap);
			v->key[v->n - 1] = key;
			if (value(r, m, depth + 1, b) < 0)
				return -1;
		} else if (value(r, push(v, &cap), depth + 1, b) < 0)
			return -1;
		blank(r);
		if (r->p < r->end && *r->p == ',') {
			r->p++;
			continue;
		}
		if (r->p < r->end && *r->p == close) {
			r->p++;
			return 0;
		}
		rerr(r, r->p, close == ']' ? "expected ',' or ']'" : "expected ',' or '}'");
		return -1;
	}
}

int
jv_parse(struct jv *v, const char *text, size_t n)
{
	struct reader r = { text, text, text + n, 0 };
	struct buf b = { 0 };
	int rc = value(&r, v, 0, &b);

	if (rc == 0) {
		blank(&r);
		if (r.p < r.end) {
			rerr(&r, r.p, "text after the value");
			rc = -1;
		}
	}
	buf_free(&b);
	if (rc < 0) {
		jv_free(v);
		return -1;
	}
	return 0;
}

void
jv_free(struct jv *v)
{
	for (int i = 0; i < v->n; i++) {
		jv_free(&v->v[i]);
		if (v->key)
			free(v->key[i]);
	}
	free(v->v);
	free(v->key);
	free(v->s);
	memset(v, 0, sizeof *v);
}

const struct jv *
jv_get(const struct jv *o, const char *key)
{
	if (o->type != JV_OBJECT)
		return NULL;
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			return &o->v[i];
	return NULL;
}
