/*
 * schema.c: a JSON Schema compiled into GBNF.  Each schema becomes an
 * expression (a rule's name, or a group); what needs a name of its own
 * (an object's properties, a $ref's target) becomes a rule.  The shared
 * pieces (a string, a number, any value) are written once, at the end,
 * when something used them.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonread.h"
#include "regex.h"
#include "schema.h"
#include "unicode.h"
#include "util.h"

#define MAX_COUNT 1000		/* minLength, maxItems...: grammar.c's bound on a repetition */

/* The types, as bits. */
enum { T_NULL = 1, T_BOOLEAN = 2, T_INTEGER = 4, T_NUMBER = 8, T_STRING = 16, T_ARRAY = 32,
	T_OBJECT = 64, T_ALL = 127 };
static const char *const type_name[] = { "null", "boolean", "integer", "number", "string",
	"array", "object" };

/* The keywords, as bits. */
enum { K_TYPE, K_PROPERTIES, K_REQUIRED, K_ADDITIONAL, K_ENUM, K_CONST, K_ITEMS, K_MINITEMS,
	K_MAXITEMS, K_MINLENGTH, K_MAXLENGTH, K_ANYOF, K_ONEOF, K_ALLOF, K_REF, K_DEFS, K_ANNOT,
	K_BOUND, K_PREFIX, K_ADDITEMS, K_PATTERN, K_FORMAT };
#define B(k) (1u << (k))
/* What may stand beside $ref, anyOf, allOf: what constrains nothing. */
#define SIDE (B(K_DEFS) | B(K_ANNOT))

static const struct {
	const char *name;
	int k;
} keywords[] = {
	{ "type", K_TYPE }, { "properties", K_PROPERTIES }, { "required", K_REQUIRED },
	{ "additionalProperties", K_ADDITIONAL }, { "enum", K_ENUM }, { "const", K_CONST },
	{ "items", K_ITEMS }, { "minItems", K_MINITEMS }, { "maxItems", K_MAXITEMS },
	{ "minLength", K_MINLENGTH }, { "maxLength", K_MAXLENGTH }, { "anyOf", K_ANYOF },
	{ "oneOf", K_ONEOF }, { "allOf", K_ALLOF }, { "$ref", K_REF }, { "$defs", K_DEFS },
	{ "definitions", K_DEFS }, { "title", K_ANNOT }, { "description", K_ANNOT },
	{ "default", K_ANNOT }, { "examples", K_ANNOT }, { "$comment", K_ANNOT },
	{ "$schema", K_ANNOT }, { "$id", K_ANNOT }, { "deprecated", K_ANNOT },
	{ "readOnly", K_ANNOT }, { "writeOnly", K_ANNOT }, { "minimum", K_BOUND },
	{ "maximum", K_BOUND }, { "exclusiveMinimum", K_BOUND }, { "exclusiveMaximum", K_BOUND },
	{ "prefixItems", K_PREFIX }, { "additionalItems", K_ADDITEMS }, { "pattern", K_PATTERN },
	{ "format", K_FORMAT },
};

/* The shared rules, as bits, and their text. */
enum { U_SPACE = 1, U_CHAR = 2, U_STRING = 4, U_INTEGER = 8, U_NUMBER = 16, U_VALUE = 32, U_DATE = 64,
	U_TIME = 128, U_DATETIME = 256, U_UUID = 512 };

/* The formats taken: a rule each, written when used. */
static const struct {
	const char *name;
	unsigned use;
} formats[] = {
	{ "date", U_DATE }, { "time", U_TIME }, { "date-time", U_DATETIME | U_DATE | U_TIME },
	{ "uuid", U_UUID },
};

struct ref {
	const struct jv *node;
	char *name, *path;
	int done;
};

struct sc {
	const struct jv *root;
	struct buf rules;	/* the rules made, a line each */
	struct buf path;	/* the JSON pointer of the schema at hand, NUL-ended */
	int n_names;
	unsigned used;
	struct ref *refs;
	int n_refs, cap_refs;
	char none[300];		/* why the last schema found with no valid value has none */
	int err;
};

static void
putn(struct buf *b, const char *s, size_t n)
{
	buf_add(b, s, n);
}

static const char *
where(struct sc *c)
{
	return c->path.n ? c->path.s : "/";
}

/* An error at the schema at hand: -1. */
static int
fail(struct sc *c, const char *fmt, ...)
{
	char msg[300];
	va_list ap;

	if (c->err)
		return -1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	llm_seterr("%s: %s", where(c), msg);
	c->err = 1;
	return -1;
}

/* The schema at hand has no valid value, for this reason: 0. */
static int
none(struct sc *c, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(c->none, sizeof c->none, "%s: the schema has no valid value: %s", where(c), msg);
	return 0;
}

/* The path one step down (a member's name or an index), undone by up(). */
static size_t
down(struct sc *c, const char *seg)
{
	size_t mark = c->path.n;

	putn(&c->path, "/", 1);
	for (; *seg; seg++)
		if (*seg == '~')
			putn(&c->path, "~0", 2);
		else if (*seg == '/')
			putn(&c->path, "~1", 2);
		else
			putn(&c->path, seg, 1);
	putn(&c->path, "", 1);
	c->path.n--;
	return mark;
}

static void
up(struct sc *c, size_t mark)
{
	c->path.n = mark;
	c->path.s[mark] = 0;
}

/* A new rule's name, after the last step of the path. */
static void
new_name(struct sc *c, char *name, size_t size)
{
	const char *last = c->path.n ? strrchr(c->path.s, '/') + 1 : "root";
	char hint[25];
	size_t k = 0;

	for (; *last && k < sizeof hint - 1; last++)
		if ((*last >= 'a' && *last <= 'z') || (*last >= 'A' && *last <= 'Z') ||
		    (*last >= '0' && *last <= '9'))
			hint[k++] = *last;
		else if (k && hint[k - 1] != '-')
			hint[k++] = '-';
	hint[k] = 0;
	snprintf(name, size, "%s-%d", k ? hint : "s", ++c->n_names);
}

static void
define(struct sc *c, const char *name, const struct buf *e)
{
	buf_printf(&c->rules, "%s ::= ", name);
	putn(&c->rules, e->s, e->n);
	putn(&c->rules, "\n", 1);
}

/* JSON's text for the string s[0..n). */
static void
json_string(struct buf *b, const char *s, size_t n)
{
	putn(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		switch (ch) {
		case '"': putn(b, "\\\"", 2); break;
		case '\\': putn(b, "\\\\", 2); break;
		case '\b': putn(b, "\\b", 2); break;
		case '\f': putn(b, "\\f", 2); break;
		case '\n': putn(b, "\\n", 2); break;
		case '\r': putn(b, "\\r", 2); break;
		case '\t': putn(b, "\\t", 2); break;
		default:
			if (ch < 0x20)
				buf_printf(b, "\\u%04x", ch);
			else
				putn(b, s + i, 1);
		}
	}
	putn(b, "\"", 1);
}

/* A value as compact JSON. */
static void
json_text(struct buf *b, const struct jv *v)
{
	switch (v->type) {
	case JV_NULL: putn(b, "null", 4); break;
	case JV_TRUE: putn(b, "true", 4); break;
	case JV_FALSE: putn(b, "false", 5); break;
	case JV_NUMBER: putn(b, v->s, v->len); break;
	case JV_STRING: json_string(b, v->s, v->len); break;
	default:
		putn(b, v->type == JV_ARRAY ? "[" : "{", 1);
		for (int i = 0; i < v->n; i++) {
			if (i)
				putn(b, ",", 1);
			if (v->type == JV_OBJECT) {
				json_string(b, v->key[i], strlen(v->key[i]));
				putn(b, ":", 1);
			}
			json_text(b, &v->v[i]);
		}
		putn(b, v->type == JV_ARRAY ? "]" : "}", 1);
	}
}

/* A GBNF literal matching the text s[0..n) exactly. */
static void
literal(struct buf *b, const char *s, size_t n)
{
	putn(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\')
			buf_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			buf_printf(b, "\\x%02x", ch);
		else
			putn(b, s + i, 1);
	}
	putn(b, "\"", 1);
}

/* The literal of a value's compact JSON. */
static void
value_literal(struct buf *b, const struct jv *v)
{
	struct buf t = { 0 };

	json_text(&t, v);
	literal(b, t.s, t.n);
	buf_free(&t);
}

/* The kinds of value v is, as type bits. */
static unsigned
kind(const struct jv *v)
{
	switch (v->type) {
	case JV_NULL: return T_NULL;
	case JV_TRUE: case JV_FALSE: return T_BOOLEAN;
	case JV_STRING: return T_STRING;
	case JV_ARRAY: return T_ARRAY;
	case JV_OBJECT: return T_OBJECT;
	default: {
		double d = strtod(v->s, NULL);
		return isfinite(d) && d == floor(d) ? T_NUMBER | T_INTEGER : T_NUMBER;
	}
	}
}

/* A count keyword (minLength...): 0 with *out (def if absent), or -1. */
static int
count(struct sc *c, const struct jv *s, const char *key, int def, int *out)
{
	const struct jv *v = jv_get(s, key);
	long n = 0;

	*out = def;
	if (!v)
		return 0;
	if (v->type != JV_NUMBER || v->s[0] == '-' || strspn(v->s, "0123456789") != v->len)
		return fail(c, "%s: expected a non-negative integer", key);
	for (size_t i = 0; i < v->len && n <= MAX_COUNT; i++)
		n = n * 10 + (v->s[i] - '0');
	if (n > MAX_COUNT)
		return fail(c, "%s %s: not supported above %d", key, v->s, MAX_COUNT);
	*out = (int)n;
	return 0;
}

/* The first keyword of s outside the bits allowed, or NULL. */
static const char *
other(const struct jv *s, unsigned allowed)
{
	for (int i = 0; i < s->n; i++)
		for (size_t k = 0; k < sizeof keywords / sizeof *keywords; k++)
			if (strcmp(s->key[i], keywords[k].name) == 0 && !(allowed & B(keywords[k].k)))
				return s->key[i];
	return NULL;
}

static int compile(struct sc *c, const struct jv *s, struct buf *e);

/* A schema down the path at seg (and seg2): compile it into e. */
static int
compile_at(struct sc *c, const struct jv *s, const char *seg, const char *seg2, struct buf *e)
{
	size_t mark = down(c, seg);
	int rc;

	if (seg2)
		down(c, seg2);
	rc = compile(c, s, e);
	up(c, mark);
	return rc;
}

/* $ref: the rule of the schema it names, made later (so a schema can name itself). */
static int
ref(struct sc *c, const struct jv *r, struct buf *e)
{
	const struct jv *t = c->root;
	const char *p;
	struct buf seg = { 0 };
	int i;

	if (r->type != JV_STRING)
		return fail(c, "$ref: expected a string");
	if (r->s[0] != '#')
		return fail(c, "$ref \"%s\": only references within the schema (\"#\", \"#/$defs/NAME\") "
		    "are supported", r->s);
	for (p = r->s + 1; *p && t;) {
		if (*p != '/') {
			buf_free(&seg);
			return fail(c, "$ref \"%s\": not a JSON pointer", r->s);
		}
		seg.n = 0;
		for (p++; *p && *p != '/'; p++)
			if (*p == '~' && (p[1] == '0' || p[1] == '1'))
				putn(&seg, p[1] == '0' ? "~" : "/", 1), p++;
			else
				putn(&seg, p, 1);
		putn(&seg, "", 1);
		if (t->type == JV_OBJECT)
			t = jv_get(t, seg.s);
		else if (t->type == JV_ARRAY && seg.n > 1 && strspn(seg.s, "0123456789") == seg.n - 1 &&
		    atol(seg.s) < t->n)
			t = &t->v[atol(seg.s)];
		else
			t = NULL;
	}
	buf_free(&seg);
	if (!t)
		return fail(c, "$ref \"%s\": no such place in the schema", r->s);
	for (i = 0; i < c->n_refs && c->refs[i].node != t; i++)
		;
	if (i == c->n_refs) {
		/* named after the place it names */
		char name[64], *here = strdup(c->path.s);
		size_t n = c->path.n;
		if (c->n_refs == c->cap_refs) {
			c->cap_refs = c->cap_refs ? 2 * c->cap_refs : 8;
			c->refs = xrealloc(c->refs, (size_t)c->cap_refs * sizeof *c->refs);
		}
		up(c, 0);
		putn(&c->path, r->s + 1, strlen(r->s + 1) + 1);
		c->path.n--;
		new_name(c, name, sizeof name);
		c->refs[i] = (struct ref){ t, strdup(name), strdup(c->path.s), 0 };
		c->n_refs++;
		up(c, 0);
		putn(&c->path, here, n + 1);
		c->path.n--;
		free(here);
	}
	buf_printf(e, "%s", c->refs[i].name);
	return 1;
}

/*
 * A string's pattern, or its format: either stands alone (beside
 * minLength or maxLength, or each other, they are refused).  0 if s has
 * neither.
 */
static int
string_shape(struct sc *c, const struct jv *s, struct buf *e)
{
	const struct jv *p = jv_get(s, "pattern"), *f = jv_get(s, "format");
	const char *len = jv_get(s, "minLength") ? "minLength" : jv_get(s, "maxLength") ? "maxLength" : NULL;
	size_t k;

	if (!p && !f)
		return 0;
	if (p && f)
		return fail(c, "\"pattern\" beside \"format\": not supported");
	if (len)
		return fail(c, "\"%s\" beside \"%s\": not supported", len, p ? "pattern" : "format");
	if (f) {
		if (f->type != JV_STRING)
			return fail(c, "format: expected a string");
		for (k = 0; k < sizeof formats / sizeof *formats && strcmp(formats[k].name, f->s) != 0; k++)
			;
		if (k == sizeof formats / sizeof *formats)
			return fail(c, "format \"%s\": not supported (date, time, date-time and uuid are)", f->s);
		c->used |= formats[k].use;
		buf_printf(e, "( \"\\\"\" json-%s \"\\\"\" )", f->s);
		return 1;
	}
	if (p->type != JV_STRING)
		return fail(c, "pattern: expected a string");
	buf_printf(e, "( \"\\\"\" ");
	if (regex_gbnf(p->s, p->len, "json-char", e) < 0)
		return fail(c, "pattern: %s", llm_err());
	buf_printf(e, " \"\\\"\" )");
	c->used |= U_CHAR;
	return 1;
}

static int
compile_string(struct sc *c, const struct jv *s, struct buf *e)
{
	int min, max, rc;

	if ((rc = string_shape(c, s, e)) != 0)
		return rc;
	if (count(c, s, "minLength", 0, &min) < 0 || count(c, s, "maxLength", -1, &max) < 0)
		return -1;
	if (max >= 0 && min > max)
		return none(c, "minLength %d is more than maxLength %d", min, max);
	if (min == 0 && max < 0) {
		c->used |= U_STRING;
		buf_printf(e, "json-string");
		return 1;
	}
	c->used |= U_CHAR;
	if (max < 0)
		buf_printf(e, "( \"\\\"\" json-char{%d,} \"\\\"\" )", min);
	else
		buf_printf(e, "( \"\\\"\" json-char{%d,%d} \"\\\"\" )", min, max);
	return 1;
}

/* The schema at s (a place named by seg, seg2) as a rule of its own, into name; its compile's 1, 0 or -1 */
static int
compile_rule(struct sc *c, const struct jv *s, const char *seg, const char *seg2, char *name, size_t size)
{
	struct buf b = { 0 };
	int rc = compile_at(c, s, seg, seg2, &b);

	if (rc > 0) {
		size_t mark = down(c, seg);
		if (seg2)
			down(c, seg2);
		new_name(c, name, size);
		up(c, mark);
		define(c, name, &b);
	}
	buf_free(&b);
	return rc;
}

/*
 * Item i of an array on, item i written: the tuple's (names, k of them)
 * or the rest's (rn; NULL: none), then, after a comma, the next (required
 * while fewer than min), up to max (-1: no bound).
 */
static void
array_items(struct buf *e, char (*names)[64], int k, const char *rn, int min, int max, int i)
{
	int lo, hi;

	if (i < k) {
		buf_printf(e, "%s", names[i]);
		if ((max < 0 || i + 1 < max) && (i + 1 < k || rn)) {
			buf_printf(e, " ( space \",\" space ");
			array_items(e, names, k, rn, min, max, i + 1);
			buf_printf(e, " )%s", i + 1 < min ? "" : "?");
		}
		return;
	}
	/* the rest: from max(1, min - k) to max - k of them */
	lo = min - k > 1 ? min - k : 1, hi = max < 0 ? -1 : max - k;
	buf_printf(e, "%s", rn);
	if (hi < 0)
		buf_printf(e, lo > 1 ? " ( space \",\" space %s ){%d,}" : " ( space \",\" space %s )*", rn, lo - 1);
	else if (hi > 1)
		buf_printf(e, " ( space \",\" space %s ){%d,%d}", rn, lo - 1, hi - 1);
}

/*
 * An array: a tuple's first items (prefixItems, or items as an array, as
 * draft 7 has it), then the rest (items after prefixItems, additionalItems
 * after an array of items, else items; absent: any values, false: none),
 * from minItems to maxItems of them in all.  An item whose schema has no
 * valid value ends the array before it.
 */
static int
compile_array(struct sc *c, const struct jv *s, struct buf *e)
{
	const struct jv *prefix = jv_get(s, "prefixItems"), *items = jv_get(s, "items");
	const struct jv *rest = items, *tuple = prefix;
	const char *tkey = "prefixItems", *rkey = "items";
	char (*names)[64] = NULL, rn[64];
	int min, max, k = 0, i, rc = 1, open;

	if (count(c, s, "minItems", 0, &min) < 0 || count(c, s, "maxItems", -1, &max) < 0)
		return -1;
	if (max >= 0 && min > max)
		return none(c, "minItems %d is more than maxItems %d", min, max);
	if (prefix && (prefix->type != JV_ARRAY || prefix->n == 0))
		return fail(c, "prefixItems: expected a non-empty array of schemas");
	if (prefix && items && items->type == JV_ARRAY)
		return fail(c, "items as an array beside prefixItems: not supported");
	if (jv_get(s, "additionalItems") && !(items && items->type == JV_ARRAY))
		return fail(c, "additionalItems without items as an array: not supported");
	if (items && items->type == JV_ARRAY) {	/* draft 7's tuple */
		tuple = items, tkey = "items";
		rest = jv_get(s, "additionalItems"), rkey = "additionalItems";
	}
	c->used |= U_SPACE;
	/* the tuple's items, each a rule, up to the first with no valid value */
	k = tuple ? tuple->n : 0;
	if (k > MAX_COUNT)
		return fail(c, "%s: a tuple of more than %d items: not supported", tkey, MAX_COUNT);
	names = xcalloc((size_t)k + 1, sizeof *names);
	for (i = 0; i < k; i++) {
		char at[16];
		snprintf(at, sizeof at, "%d", i);
		if ((rc = compile_rule(c, &tuple->v[i], tkey, at, names[i], sizeof names[i])) < 0)
			goto out;
		if (rc == 0)
			break;
	}
	if (i < k) {	/* item i cannot be: at most i items, none after */
		if (min > i)
			goto out;	/* why: the item's own reason */
		k = i, max = max < 0 || max > i ? i : max;
		open = 0;
	} else if (!rest) {	/* any values after */
		c->used |= U_VALUE;
		snprintf(rn, sizeof rn, "json-value");
		open = 1;
	} else if ((rc = compile_rule(c, rest, rkey, NULL, rn, sizeof rn)) < 0) {
		goto out;
	} else if (rc == 0) {	/* false, or no valid value: the tuple's items only */
		if (min > k)
			goto out;
		open = 0;
	} else
		open = 1;
	if (!open)
		max = max < 0 || max > k ? k : max;
	if (max == 0) {
		buf_printf(e, "( \"[\" space \"]\" )");
		rc = 1;
		goto out;
	}
	buf_printf(e, "( \"[\" space %s", min ? "" : "( ");
	array_items(e, names, k, open ? rn : NULL, min, max, 0);
	buf_printf(e, "%s space \"]\" )", min ? "" : " )?");
	rc = 1;
out:
	free(names);
	return rc;
}

static int
str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The rest of a name that is none of keys[0..n) (their JSON texts less
 * the quotes, sorted, all with the same first at bytes), its closing
 * quote included, as rule name: it ends where no key does; or takes a
 * plain character that a key takes next, going on as that key's rule
 * does; or one that no key takes next, then any characters.  Up to where
 * it leaves every key a name's characters are plain, no escapes: so its
 * text is what JSON writes for it, and differs from every key's.
 */
static void
other_name(struct sc *c, char **keys, int n, size_t at, const char *base, const char *name)
{
	struct buf r = { 0 }, not = { 0 };
	int i = 0, j;

	if (keys[0][at])	/* sorted: a key that ends here comes first */
		buf_printf(&r, "\"\\\"\" | ");
	else
		i = 1;
	for (; i < n; i = j) {
		uint32_t cp;
		int len = utf8_decode((const unsigned char *)keys[i] + at, strlen(keys[i] + at), &cp);
		char child[80];
		for (j = i + 1; j < n && strncmp(keys[j] + at, keys[i] + at, (size_t)len) == 0; j++)
			;
		buf_printf(&not, "\\U%08X", (unsigned)cp);
		if (keys[i][at] == '\\')	/* an escape: no plain character is it */
			continue;
		snprintf(child, sizeof child, "%s-%d", base, ++c->n_names);
		literal(&r, keys[i] + at, (size_t)len);
		buf_printf(&r, " %s | ", child);
		other_name(c, keys + i, j - i, at + (size_t)len, base, child);
	}
	c->used |= U_CHAR;
	buf_printf(&r, "[^\"\\\\\\x00-\\x1f");
	putn(&r, not.s, not.n);
	buf_printf(&r, "] json-char* \"\\\"\"");
	define(c, name, &r);
	buf_free(&r), buf_free(&not);
}

/*
 * The rule of a property the object does not declare, "name": value,
 * into name: names none of the n >= 1 declared ones (keys, JSON texts
 * with their quotes), values of add (true: any).  0 if add has no valid
 * value.
 */
static int
undeclared(struct sc *c, const struct jv *add, struct buf *keys, int n, char *name, size_t size)
{
	struct buf v = { 0 }, r = { 0 };
	char **k = xcalloc((size_t)n + 1, sizeof *k), other[80];
	int i, rc = 1;

	for (i = 0; i < n; i++)
		if (keys[i].n > 1000 + 2) {	/* other_name recurses a character at a time */
			free(k);
			return fail(c, "a property name of more than 1000 bytes beside additionalProperties: "
			    "not supported");
		}
	if (add->type == JV_TRUE) {
		c->used |= U_VALUE;
		buf_printf(&v, "json-value");
	} else if ((rc = compile_at(c, add, "additionalProperties", NULL, &v)) <= 0) {
		free(k);
		buf_free(&v);
		return rc;
	}
	size_t mark = down(c, "additionalProperties");
	new_name(c, name, size);
	up(c, mark);
	for (i = 0; i < n; i++)	/* the texts between the quotes */
		k[i] = strndup(keys[i].s + 1, keys[i].n - 2);
	qsort(k, (size_t)n, sizeof *k, str_cmp);
	snprintf(other, sizeof other, "%s-name", name);
	other_name(c, k, n, 0, name, other);
	buf_printf(&r, "\"\\\"\" %s space \":\" space ", other);
	putn(&r, v.s, v.n);
	define(c, name, &r);
	for (i = 0; i < n; i++)
		free(k[i]);
	free(k);
	buf_free(&v), buf_free(&r);
	return 1;
}

static int
compile_object(struct sc *c, const struct jv *s, struct buf *e)
{
	const struct jv *props = jv_get(s, "properties"), *req = jv_get(s, "required");
	const struct jv *add = jv_get(s, "additionalProperties");
	struct buf *kv = NULL;	/* each property's "name": value */
	int *need = NULL, n = 0, i, j, rc = 1;
	char base[64], extra[64] = "";

	if (props && props->type != JV_OBJECT)
		return fail(c, "properties: expected an object of schemas");
	if (req && req->type != JV_ARRAY)
		return fail(c, "required: expected an array of names");
	for (i = 0; req && i < req->n; i++) {
		if (req->v[i].type != JV_STRING)
			return fail(c, "required: expected an array of names");
		for (j = 0; j < i; j++)
			if (strcmp(req->v[j].s, req->v[i].s) == 0)
				return fail(c, "required: \"%s\" is named twice", req->v[i].s);
	}
	c->used |= U_SPACE;
	int np = props ? props->n : 0, nr = req ? req->n : 0;
	kv = xcalloc((size_t)(np + nr) + 1, sizeof *kv);
	need = xcalloc((size_t)(np + nr) + 1, sizeof *need);
	/* the properties, in the schema's order; then the required ones it does not list */
	for (i = 0; i < np + nr && rc > 0; i++) {
		const char *key = i < np ? props->key[i] : req->v[i - np].s;
		int required = 0, r;
		struct buf v = { 0 };
		for (j = 0; req && j < req->n; j++)
			required |= strcmp(req->v[j].s, key) == 0;
		if (i >= np && props && jv_get(props, key))
			continue;
		if (i < np)
			r = compile_at(c, &props->v[i], "properties", key, &v);
		else if (add && add->type == JV_FALSE) {
			size_t mark = down(c, "required");
			r = none(c, "\"%s\" is required, not among the properties, and "
			    "additionalProperties is false", key);
			up(c, mark);
		} else if (add && add->type != JV_TRUE)
			r = compile_at(c, add, "additionalProperties", NULL, &v);
		else {
			c->used |= U_VALUE;
			buf_printf(&v, "json-value");
			r = 1;
		}
		if (r <= 0 && (required || r < 0))
			rc = r < 0 ? -1 : 0;
		if (r > 0) {
			json_string(&kv[n], key, strlen(key));
			struct buf lit = { 0 };
			literal(&lit, kv[n].s, kv[n].n);
			kv[n].n = 0;
			putn(&kv[n], lit.s, lit.n);
			buf_free(&lit);
			buf_printf(&kv[n], " space \":\" space ");
			putn(&kv[n], v.s, v.n);
			need[n++] = required;
		}
		buf_free(&v);
	}
	if (rc <= 0)
		goto out;
	/* undeclared properties, after the declared ones, where additionalProperties allows them */
	if (np + nr > 0 && add && (add->type == JV_TRUE || add->type == JV_OBJECT)) {
		struct buf *names = xcalloc((size_t)(np + nr), sizeof *names);
		int m = 0;
		for (i = 0; i < np + nr; i++) {
			const char *key = i < np ? props->key[i] : req->v[i - np].s;
			if (i < np || !props || !jv_get(props, key))
				json_string(&names[m++], key, strlen(key));
		}
		rc = undeclared(c, add, names, m, extra, sizeof extra);
		for (i = 0; i < m; i++)
			buf_free(&names[i]);
		free(names);
		if (rc < 0)
			goto out;
		if (rc == 0)	/* none can be written: only the declared ones */
			extra[0] = 0;
		rc = 1;
	}
	if (n == 0 && extra[0]) {
		buf_printf(e, "( \"{\" space ( %s ( space \",\" space %s )* space )? \"}\" )", extra, extra);
		goto out;
	}
	if (n == 0) {
		struct buf v = { 0 };
		if (!add || add->type == JV_TRUE) {
			c->used |= U_VALUE;
			buf_printf(e, "json-object");
		} else if (add->type == JV_FALSE ||
		    (rc = compile_at(c, add, "additionalProperties", NULL, &v)) == 0) {
			buf_printf(e, "( \"{\" space \"}\" )");
			rc = 1;
		} else if (rc > 0) {
			/* a map: any names, each value add's */
			char m[64];
			size_t mark = down(c, "additionalProperties");
			new_name(c, m, sizeof m);
			up(c, mark);
			define(c, m, &v);
			c->used |= U_STRING;
			buf_printf(e, "( \"{\" space ( json-string space \":\" space %s ( space \",\" space "
			    "json-string space \":\" space %s )* space )? \"}\" )", m, m);
		}
		buf_free(&v);
		goto out;
	}
	/*
	 * Property i on, after one written: rest_i ::= ( space "," space KV_i )? rest_{i+1},
	 * the "?" only if it is optional.  Property i on, none written yet:
	 * first_i ::= KV_i rest_{i+1}, or if it is optional, that | first_{i+1}.
	 */
	new_name(c, base, sizeof base);
	/* first_0 is the object's; first_{i+1} is first_i's when property i is optional */
	int *first = xcalloc((size_t)n + 1, sizeof *first), empty = 1;
	first[0] = 1;
	for (i = 0; i < n; i++) {
		first[i + 1] = first[i] && !need[i];
		empty &= !need[i];
	}
	for (i = n - 1; i >= 0; i--) {
		struct buf r = { 0 }, f = { 0 };
		char rn[80], fn[80];
		snprintf(rn, sizeof rn, "%s-r%d", base, i);
		snprintf(fn, sizeof fn, "%s-f%d", base, i);
		if (i > 0) {	/* rest_0 follows nothing */
			buf_printf(&r, "( space \",\" space ");
			putn(&r, kv[i].s, kv[i].n);
			buf_printf(&r, " )%s", need[i] ? "" : "?");
			if (i + 1 < n)
				buf_printf(&r, " %s-r%d", base, i + 1);
			define(c, rn, &r);
		}
		if (first[i]) {
			putn(&f, kv[i].s, kv[i].n);
			if (i + 1 < n)
				buf_printf(&f, " %s-r%d", base, i + 1);
			if (first[i + 1] && i + 1 < n)
				buf_printf(&f, " | %s-f%d", base, i + 1);
			define(c, fn, &f);
		}
		buf_free(&r), buf_free(&f);
	}
	free(first);
	if (extra[0] && empty)	/* the declared ones, or an undeclared one first; then undeclared ones */
		buf_printf(e, "( \"{\" space ( ( %s-f0 | %s ) ( space \",\" space %s )* space )? \"}\" )", base, extra,
		    extra);
	else if (extra[0])
		buf_printf(e, "( \"{\" space %s-f0 ( space \",\" space %s )* space \"}\" )", base, extra);
	else if (empty)	/* all optional: the object may be empty */
		buf_printf(e, "( \"{\" space ( %s-f0 space )? \"}\" )", base);
	else
		buf_printf(e, "( \"{\" space %s-f0 space \"}\" )", base);
out:
	for (i = 0; i < np + nr; i++)
		buf_free(&kv[i]);
	free(kv), free(need);
	return rc;
}

/* The largest integer written: json-integer's 16 digits. */
#define INT_MOST 9999999999999999LL

/* A bound keyword's value as an integer bound: the least (up 0) or most (up 1) integer it allows. */
static int
bound(struct sc *c, const struct jv *v, const char *key, int up, int exclusive, long long *out)
{
	double d;
	char *end;

	if (v->type != JV_NUMBER)
		return fail(c, "%s: expected a number", key);
	errno = 0;
	long long n = strtoll(v->s, &end, 10);
	if (*end == 0 && errno == 0) {
		/* an integer as written: exact */
		*out = exclusive ? (up ? n - 1 : n + 1) : n;
	} else {
		d = strtod(v->s, NULL);
		d = up ? floor(d) : ceil(d);
		if (exclusive && d == strtod(v->s, NULL))
			d += up ? -1 : 1;
		*out = d > (double)INT_MOST ? INT_MOST + 1 : d < -(double)INT_MOST ? -INT_MOST - 1 :
		    (long long)d;
	}
	if (*out > INT_MOST + 1)
		*out = INT_MOST + 1;
	if (*out < -INT_MOST - 1)
		*out = -INT_MOST - 1;
	return 0;
}

/* The decimal digits of v (>= 0), exactly n of them with leading zeros. */
static void
digits(long long v, int n, char *out)
{
	for (int i = n - 1; i >= 0; i--, v /= 10)
		out[i] = (char)('0' + v % 10);
	out[n] = 0;
}

/* Strings of n digits from lo to hi (lo <= hi, both n long), as GBNF: digit by digit. */
static void
same_length(struct buf *e, const char *lo, const char *hi, int n)
{
	int k;

	if (n == 0)
		return;
	if (lo[0] == hi[0]) {
		buf_printf(e, "\"%c\" ", lo[0]);
		same_length(e, lo + 1, hi + 1, n - 1);
		return;
	}
	for (k = 1; k < n && lo[k] == '0' && hi[k] == '9'; k++)
		;
	if (k == n) {	/* [a-b] then any digits */
		buf_printf(e, "[%c-%c]", lo[0], hi[0]);
		if (n > 1)
			buf_printf(e, " [0-9]{%d}", n - 1);
		buf_printf(e, " ");
		return;
	}
	char nines[20], zeros[20];
	memset(nines, '9', (size_t)n - 1), nines[n - 1] = 0;
	memset(zeros, '0', (size_t)n - 1), zeros[n - 1] = 0;
	buf_printf(e, "( \"%c\" ", lo[0]);
	same_length(e, lo + 1, nines, n - 1);
	if (lo[0] + 1 <= hi[0] - 1) {
		buf_printf(e, "| [%c-%c]", lo[0] + 1, hi[0] - 1);
		if (n > 1)
			buf_printf(e, " [0-9]{%d}", n - 1);
		buf_printf(e, " ");
	}
	buf_printf(e, "| \"%c\" ", hi[0]);
	same_length(e, zeros, hi + 1, n - 1);
	buf_printf(e, ") ");
}

/* The integers from lo to hi, 0 <= lo <= hi, without leading zeros: by their number of digits. */
static void
non_negative(struct buf *e, long long lo, long long hi)
{
	long long p = 1;
	char a[20], b[20];
	int n, alt = 0;

	buf_printf(e, "( ");
	for (n = 1; n <= 16; n++, p *= 10) {
		long long from = lo > (n == 1 ? 0 : p) ? lo : (n == 1 ? 0 : p), to = hi < p * 10 - 1 ? hi : p * 10 - 1;
		if (from > to)
			continue;
		digits(from, n, a), digits(to, n, b);
		if (alt++)
			buf_printf(e, "| ");
		same_length(e, a, b, n);
	}
	buf_printf(e, ")");
}

/*
 * A number bound as an exact decimal: its sign, integer digits (no
 * leading zeros; "0"), fraction digits (no trailing zeros; ""), and big
 * if its integer part has more than 16 digits (beyond what is written).
 */
struct dec {
	int neg, big;
	char i[20], f[210];
};

/* v's number text as a decimal; -1 if it has more than 100 digits */
static int
dec_parse(const char *v, struct dec *d)
{
	char m[128];
	int n = 0, point = -1, k;
	long e = 0, pos;

	memset(d, 0, sizeof *d);
	if (*v == '-')
		d->neg = 1, v++;
	for (; *v && *v != 'e' && *v != 'E'; v++)
		if (*v == '.')
			point = n;
		else if (n < 100)
			m[n++] = *v;
		else
			return -1;
	if (point < 0)
		point = n;
	if (*v)
		e = strtol(v + 1, NULL, 10);
	e = e > 1000 ? 1000 : e < -1000 ? -1000 : e;
	pos = point + e;	/* the point's place among the n digits */
	for (k = 0; k < n && m[k] == '0'; k++)
		;
	if (k == n) {	/* zero */
		strcpy(d->i, "0");
		d->neg = 0;
		return 0;
	}
	if (pos - k > 16) {
		d->big = 1;
		return 0;
	}
	/* the integer digits: m[k..pos) (zeros past n) */
	int ni = 0;
	for (long j = k; j < pos; j++)
		d->i[ni++] = j < n ? m[j] : '0';
	if (ni == 0)
		d->i[ni++] = '0';
	d->i[ni] = 0;
	/* the fraction digits: from pos on (zeros before m's first) */
	int nf = 0;
	if (pos < -100) {	/* a first digit past the 100th place is as good as one past the 16th */
		strcpy(d->f, "00000000000000000001");
		return 0;
	}
	for (long j = pos; j < n; j++)
		d->f[nf++] = j < 0 ? '0' : m[j];
	while (nf > 0 && d->f[nf - 1] == '0')
		nf--;
	d->f[nf] = 0;
	return 0;
}
/* Whether a fraction's rest, worth 0, is within what is left of the bounds (frac_more's) */
static int
frac_zero_ok(const char *lo, int lo_in, const char *hi, int hi_in)
{
	return (!lo || (!*lo && lo_in)) && (!hi || *hi || hi_in);
}

/*
 * Fraction digits r from the at-th on (16 in all at most), not empty,
 * with 0.r >= 0.lo (> if not lo_in) and 0.r <= 0.hi (< if not hi_in),
 * lo and hi what is left of the bounds' digits after those before (NULL:
 * no bound): digit by digit, a digit above lo's and below hi's leaving
 * any digits after.  1 if any r is, 0 if none.
 */
static int
frac_more(struct buf *e, const char *lo, int lo_in, const char *hi, int hi_in, int at)
{
	int n = 0, c, from = -1, rem = 16 - at;

	if (lo && !*lo && lo_in)
		lo = NULL;
	if (at >= 16 || (hi && !*hi && !hi_in))
		return 0;
	for (c = '0'; c <= '9' + 1; c++) {
		const char *L = lo, *H = hi;	/* what is left of each bound after c; NULL: met */
		int ok = c <= '9';
		if (ok && lo && *lo)
			L = c > lo[0] ? NULL : c == lo[0] ? lo + 1 : (ok = 0, lo);
		else if (ok && lo && c > '0')	/* "": above 0 still to come */
			L = NULL;
		if (ok && hi && *hi)
			H = c < hi[0] ? NULL : c == hi[0] ? hi + 1 : (ok = 0, hi);
		else if (ok && hi && c > '0')	/* "": only zeros left */
			ok = 0;
		if (L && !*L && lo_in)
			L = NULL;
		if (ok && !L && !H) {	/* free: a run of such digits, any after */
			if (from < 0)
				from = c;
			continue;
		}
		if (from >= 0) {
			buf_printf(e, "%s[%c-%c]", n++ ? " | " : "( ", from, c - 1);
			if (rem > 1)
				buf_printf(e, " [0-9]{0,%d}", rem - 1);
			from = -1;
		}
		if (!ok)
			continue;
		struct buf sub = { 0 };
		int more = frac_more(&sub, L, lo_in, H, hi_in, at + 1), zero = frac_zero_ok(L, lo_in, H, hi_in);
		if (more || zero) {
			buf_printf(e, "%s\"%c\"", n++ ? " | " : "( ", c);
			if (more) {
				putn(e, " ", 1);
				putn(e, sub.s, sub.n);
				buf_printf(e, zero ? "?" : "");
			}
		}
		buf_free(&sub);
	}
	if (n)
		buf_printf(e, " )");
	return n > 0;
}

/* The integer digits lit, then a fraction within lo and hi (frac_more's); 1 if any is, after sep */
static int
with_fraction(struct buf *e, const char *sep, const char *lit, const char *lo, int lo_in, const char *hi, int hi_in)
{
	struct buf f = { 0 };
	int more = frac_more(&f, lo, lo_in, hi, hi_in, 0), zero = frac_zero_ok(lo, lo_in, hi, hi_in);

	if (more || zero) {
		buf_printf(e, "%s\"%s\"", sep, lit);
		if (more) {
			buf_printf(e, zero ? " ( \".\" " : " \".\" ");
			putn(e, f.s, f.n);
			buf_printf(e, zero ? " )?" : "");
		}
	}
	buf_free(&f);
	return more || zero;
}

/*
 * The numbers from a to b (b NULL: no bound; in: whether each is), both
 * not negative, as alternatives after *n ones: by integer part, a's with
 * a fraction above a's, those between with any, b's with one below b's.
 */
static void
non_negative_numbers(struct buf *e, const struct dec *a, int a_in, const struct dec *b, int b_in, int *n)
{
	long long A = atoll(a->i), B = b && !b->big ? atoll(b->i) : INT_MOST + 1;

	if (a->big || A > B)
		return;
	if (A == B) {
		*n += with_fraction(e, *n ? " | " : "", a->i, a->f, a_in, b->f, b_in);
		return;
	}
	*n += with_fraction(e, *n ? " | " : "", a->i, a->f, a_in, NULL, 1);
	if (A + 1 <= B - 1 && A + 1 <= INT_MOST) {
		buf_printf(e, "%s", (*n)++ ? " | " : "");
		non_negative(e, A + 1, B - 1 < INT_MOST ? B - 1 : INT_MOST);
		buf_printf(e, " ( \".\" [0-9]{1,16} )?");
	}
	if (B <= INT_MOST)
		*n += with_fraction(e, *n ? " | " : "", b->i, NULL, 1, b->f, b_in);
}

/* a against b as numbers: -1, 0, 1 (two bounds past 16 digits: as equal) */
static int
dec_cmp(const struct dec *a, const struct dec *b)
{
	int r;

	if (a->neg != b->neg)
		return a->neg ? -1 : 1;
	if (a->big || b->big)
		r = a->big - b->big;
	else if (strlen(a->i) != strlen(b->i))
		r = strlen(a->i) < strlen(b->i) ? -1 : 1;
	else if ((r = strcmp(a->i, b->i)) == 0)
		r = strcmp(a->f, b->f);	/* no trailing zeros: as the fractions compare */
	r = r < 0 ? -1 : r > 0;
	return a->neg ? -r : r;
}

/*
 * A number with bounds, written without an exponent (narrower than JSON's
 * numbers, so that the bounds hold exactly): its non-negative part, then
 * "-" and the magnitudes of its negative part, above 0.
 */
static int
compile_number(struct sc *c, const struct jv *s, struct buf *e)
{
	static const char *keys[] = { "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum" };
	struct dec lo, hi, v, zero = { 0, 0, "0", "" };
	int has_lo = 0, has_hi = 0, lo_in = 1, hi_in = 1, n = 0, k = 0;
	struct buf alt = { 0 }, neg = { 0 };

	for (int i = 0; i < 4; i++) {
		const struct jv *b = jv_get(s, keys[i]);
		if (!b)
			continue;
		if (b->type != JV_NUMBER)
			return fail(c, "%s: expected a number", keys[i]);
		if (dec_parse(b->s, &v) < 0)
			return fail(c, "%s: more than 100 digits: not supported", keys[i]);
		int cmp = i < 2 ? (has_lo ? dec_cmp(&v, &lo) : 1) : (has_hi ? dec_cmp(&hi, &v) : 1);
		if (cmp > 0 || (cmp == 0 && i % 2)) {	/* the stricter bound */
			if (i < 2)
				lo = v, lo_in = !(i % 2), has_lo = 1;
			else
				hi = v, hi_in = !(i % 2), has_hi = 1;
		}
	}
	if (!has_lo && !has_hi) {
		c->used |= U_NUMBER;
		buf_printf(e, "json-number");
		return 1;
	}
	if (!has_hi || (!hi.neg && (dec_cmp(&hi, &zero) > 0 || hi_in)))
		non_negative_numbers(&alt, has_lo && !lo.neg ? &lo : &zero, has_lo && !lo.neg ? lo_in : 1,
		    has_hi ? &hi : NULL, hi_in, &n);
	if (!has_lo || lo.neg) {	/* magnitudes from |hi| (or above 0) to |lo| */
		struct dec mlo = has_hi && hi.neg ? hi : zero, mhi = lo;
		mlo.neg = mhi.neg = 0;
		non_negative_numbers(&neg, &mlo, has_hi && hi.neg ? hi_in : 0, has_lo ? &mhi : NULL, lo_in, &k);
		if (k) {
			buf_printf(&alt, "%s\"-\" ( ", n++ ? " | " : "");
			putn(&alt, neg.s, neg.n);
			buf_printf(&alt, " )");
		}
	}
	if (n) {
		buf_printf(e, "( ");
		putn(e, alt.s, alt.n);
		buf_printf(e, " )");
	}
	buf_free(&alt), buf_free(&neg);
	return n ? 1 : none(c, "no number of at most 16 digits before the point and 16 after it "
	    "is within its bounds");
}

/* An integer with bounds (minimum, maximum, exclusive ones): its digits' rules, or none. */
static int
compile_integer(struct sc *c, const struct jv *s, struct buf *e)
{
	static const char *keys[] = { "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum" };
	long long lo = -INT_MOST, hi = INT_MOST, v = 0;

	for (int i = 0; i < 4; i++) {
		const struct jv *k = jv_get(s, keys[i]);
		if (k && bound(c, k, keys[i], i >= 2, i % 2, &v) < 0)
			return -1;
		if (k && i < 2 && v > lo)
			lo = v;
		if (k && i >= 2 && v < hi)
			hi = v;
	}
	if (lo == -INT_MOST && hi == INT_MOST) {
		c->used |= U_INTEGER;
		buf_printf(e, "json-integer");
		return 1;
	}
	if (lo > hi)
		return none(c, "no integer of at most 16 digits is within its bounds");
	buf_printf(e, "( ");
	if (hi >= 0)
		non_negative(e, lo > 0 ? lo : 0, hi);
	if (lo < 0) {
		buf_printf(e, "%s\"-\" ", hi >= 0 ? " | " : "");
		non_negative(e, hi < 0 ? -hi : 1, -lo);
	}
	buf_printf(e, " )");
	return 1;
}

static int
compile_type(struct sc *c, const struct jv *s, unsigned t, struct buf *e)
{
	switch (t) {
	case T_NULL: buf_printf(e, "\"null\""); return 1;
	case T_BOOLEAN: buf_printf(e, "( \"true\" | \"false\" )"); return 1;
	case T_INTEGER: return compile_integer(c, s, e);
	case T_NUMBER: return compile_number(c, s, e);
	case T_STRING: return compile_string(c, s, e);
	case T_ARRAY: return compile_array(c, s, e);
	default: return compile_object(c, s, e);
	}
}

/* The types s allows: its "type", or what its keywords imply, or all. */
static int
types(struct sc *c, const struct jv *s, unsigned have, unsigned *out)
{
	const struct jv *t = jv_get(s, "type");
	unsigned m = 0;

	if (!t) {
		if (have & (B(K_PROPERTIES) | B(K_REQUIRED) | B(K_ADDITIONAL)))
			m |= T_OBJECT;
		if (have & (B(K_ITEMS) | B(K_MINITEMS) | B(K_MAXITEMS)))
			m |= T_ARRAY;
		if (have & (B(K_MINLENGTH) | B(K_MAXLENGTH) | B(K_PATTERN) | B(K_FORMAT)))
			m |= T_STRING;
		if (have & B(K_BOUND))
			m |= T_INTEGER;	/* bounds are generated for integers alone */
		*out = m ? m : T_ALL;
		return 0;
	}
	if (t->type != JV_STRING && (t->type != JV_ARRAY || t->n == 0))
		return fail(c, "type: expected a type's name or a list of them");
	for (int i = 0; i < (t->type == JV_ARRAY ? t->n : 1); i++) {
		const struct jv *v = t->type == JV_ARRAY ? &t->v[i] : t;
		int k;
		if (v->type != JV_STRING)
			return fail(c, "type: expected a type's name or a list of them");
		for (k = 0; k < 7 && strcmp(type_name[k], v->s) != 0; k++)
			;
		if (k == 7)
			return fail(c, "type: unknown type \"%s\"", v->s);
		m |= 1u << k;
	}
	*out = m;
	return 0;
}

/* enum, const: the values of the types allowed, each as its compact JSON. */
static int
compile_enum(struct sc *c, const struct jv *s, unsigned have, struct buf *e)
{
	const struct jv *en = jv_get(s, "enum"), *k = jv_get(s, "const");
	const char *o = other(s, SIDE | B(K_TYPE) | B(K_ENUM) | B(K_CONST));
	unsigned m;
	int n = 0;

	if (o)
		return fail(c, "\"%s\" beside \"%s\": not supported", o, en ? "enum" : "const");
	if (en && k)
		return fail(c, "\"enum\" beside \"const\": not supported");
	if (en && (en->type != JV_ARRAY || en->n == 0))
		return fail(c, "enum: expected a non-empty array of values");
	if (types(c, s, have, &m) < 0)
		return -1;
	if (m & T_NUMBER)
		m |= T_INTEGER;
	buf_printf(e, "( ");
	for (int i = 0; i < (en ? en->n : 1); i++) {
		const struct jv *v = en ? &en->v[i] : k;
		if (!(kind(v) & m))
			continue;
		if (n++)
			buf_printf(e, " | ");
		value_literal(e, v);
	}
	buf_printf(e, " )");
	if (n == 0)
		return none(c, "no value of its %s is of its type", en ? "enum" : "const");
	return 1;
}

/* anyOf, oneOf (as anyOf: a value may match more than one), allOf of one. */
static int
compile_of(struct sc *c, const struct jv *s, const char *kw, struct buf *e)
{
	const struct jv *a = jv_get(s, kw);
	const char *o = other(s, SIDE | B(strcmp(kw, "allOf") == 0 ? K_ALLOF :
	    strcmp(kw, "anyOf") == 0 ? K_ANYOF : K_ONEOF));
	int n = 0;
	char idx[16];

	if (o)
		return fail(c, "\"%s\" beside \"%s\": not supported", o, kw);
	if (a->type != JV_ARRAY || a->n == 0)
		return fail(c, "%s: expected a non-empty array of schemas", kw);
	if (strcmp(kw, "allOf") == 0 && a->n > 1)
		return fail(c, "allOf of more than one schema: not supported");
	buf_printf(e, "( ");
	for (int i = 0; i < a->n; i++) {
		struct buf b = { 0 };
		snprintf(idx, sizeof idx, "%d", i);
		int rc = compile_at(c, &a->v[i], kw, idx, &b);
		if (rc < 0) {
			buf_free(&b);
			return -1;
		}
		if (rc > 0) {
			if (n++)
				buf_printf(e, " | ");
			putn(e, b.s, b.n);
		}
		buf_free(&b);
	}
	buf_printf(e, " )");
	return n > 0;	/* none: the last branch's reason */
}

/* A schema into an expression (a name, or a group) appended to e: 1, 0 (no valid value), -1. */
static int
compile(struct sc *c, const struct jv *s, struct buf *e)
{
	unsigned have = 0, m;
	int i, n = 0;

	if (s->type == JV_TRUE) {
		c->used |= U_VALUE;
		buf_printf(e, "json-value");
		return 1;
	}
	if (s->type == JV_FALSE)
		return none(c, "it is false");
	if (s->type != JV_OBJECT)
		return fail(c, "expected a schema (an object, true or false)");
	for (i = 0; i < s->n; i++) {
		size_t k;
		for (k = 0; k < sizeof keywords / sizeof *keywords; k++)
			if (strcmp(s->key[i], keywords[k].name) == 0)
				break;
		if (k == sizeof keywords / sizeof *keywords)
			return fail(c, "unsupported keyword \"%s\"", s->key[i]);
		have |= B(keywords[k].k);
	}
	if (have & B(K_REF)) {
		const char *o = other(s, SIDE | B(K_REF));
		if (o)
			return fail(c, "\"%s\" beside \"$ref\": not supported", o);
		return ref(c, jv_get(s, "$ref"), e);
	}
	if ((have & B(K_ANYOF)) && (have & B(K_ONEOF)))
		return fail(c, "\"anyOf\" beside \"oneOf\": not supported");
	if (have & (B(K_ANYOF) | B(K_ONEOF) | B(K_ALLOF)))
		return compile_of(c, s, have & B(K_ANYOF) ? "anyOf" : have & B(K_ONEOF) ? "oneOf" :
		    "allOf", e);
	if (have & (B(K_ENUM) | B(K_CONST)))
		return compile_enum(c, s, have, e);
	if (types(c, s, have, &m) < 0)
		return -1;
	if ((have & (B(K_PATTERN) | B(K_FORMAT))) && !(m & T_STRING)) {
		/* for strings alone, but refused if it could never be used */
		struct buf scratch = { 0 };
		unsigned used = c->used;
		int rc = string_shape(c, s, &scratch);
		c->used = used;
		buf_free(&scratch);
		if (rc < 0)
			return -1;
	}
	if (m == T_ALL && !(have & ~SIDE & ~B(K_TYPE))) {
		c->used |= U_VALUE;
		buf_printf(e, "json-value");
		return 1;
	}
	if ((m & T_NUMBER) && (m & T_INTEGER))
		m &= ~T_INTEGER;	/* the numbers hold the integers */
	struct buf alt = { 0 };
	int rc = 0;
	for (unsigned t = 1; t <= T_OBJECT; t <<= 1) {
		struct buf b = { 0 };
		if (!(m & t))
			continue;
		if ((rc = compile_type(c, s, t, &b)) < 0) {
			buf_free(&b), buf_free(&alt);
			return -1;
		}
		if (rc > 0) {
			if (n++)
				buf_printf(&alt, " | ");
			putn(&alt, b.s, b.n);
		}
		buf_free(&b);
	}
	if (n == 1)
		putn(e, alt.s, alt.n);
	else if (n > 1) {
		buf_printf(e, "( ");
		putn(e, alt.s, alt.n);
		buf_printf(e, " )");
	}
	buf_free(&alt);
	return n > 0;
}

static const char shared_space[] = "space ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n";
static const char shared_char[] =
    "json-char ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] "
    "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )\n";
static const char shared_string[] = "json-string ::= \"\\\"\" json-char* \"\\\"\"\n";
static const char shared_integer[] = "json-integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n";
static const char shared_number[] =
    "json-number ::= json-integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?\n";
/* RFC 3339's full-date (years 0001 to 9999, the days each month has), full-time (seconds to 59) */
static const char shared_date[] =
    "json-date ::= ( \"0\" ( \"0\" ( \"0\" [1-9] | [1-9] [0-9] ) | [1-9] [0-9]{2} ) | [1-9] [0-9]{3} ) "
    "\"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) | "
    "( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
    "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) ) | json-leap-year \"-02-29\"\n"
    "json-leap-year ::= [0-9]{2} ( \"0\" [48] | [2468] [048] | [13579] [26] ) | "
    "( \"0\" [48] | [2468] [048] | [13579] [26] ) \"00\"\n";
static const char shared_time[] =
    "json-time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]+ )? "
    "( [Zz] | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n";
static const char shared_datetime[] = "json-date-time ::= json-date [Tt] json-time\n";
static const char shared_uuid[] =
    "json-uuid ::= [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
    "[0-9a-fA-F]{12}\n";
static const char shared_value[] =
    "json-value ::= json-object | json-array | json-string | json-number | \"true\" | \"false\" "
    "| \"null\"\n"
    "json-object ::= \"{\" space ( json-string space \":\" space json-value ( space \",\" space "
    "json-string space \":\" space json-value )* space )? \"}\"\n"
    "json-array ::= \"[\" space ( json-value ( space \",\" space json-value )* space )? \"]\"\n";

int
schema_to_gbnf(const char *text, size_t n, char **gbnf)
{
	struct jv root;
	struct sc c = { 0 };
	struct buf e = { 0 }, out = { 0 };
	int rc;

	if (jv_parse(&root, text, n) < 0)
		return -1;
	c.root = &root;
	putn(&c.path, "", 1);
	c.path.n = 0;
	/* "#" names the root */
	c.refs = xcalloc(1, sizeof *c.refs);
	c.refs[0] = (struct ref){ &root, strdup("root"), strdup(""), 1 };
	c.n_refs = c.cap_refs = 1;
	rc = compile(&c, &root, &e);
	if (rc > 0) {
		buf_printf(&out, "root ::= ");
		putn(&out, e.s, e.n);
		buf_printf(&out, "\n");
	}
	/* the schemas $ref names, each once (their own may add more) */
	for (int i = 1; i < c.n_refs && rc > 0; i++) {
		e.n = 0;
		up(&c, 0);
		putn(&c.path, c.refs[i].path, strlen(c.refs[i].path) + 1);
		c.path.n--;
		rc = compile(&c, c.refs[i].node, &e);
		if (rc == 0) {	/* named by a $ref: refused even where the reference is optional */
			llm_seterr("%s", c.none);
			rc = -1;
		}
		if (rc > 0)
			define(&c, c.refs[i].name, &e);
	}
	if (rc == 0)
		llm_seterr("%s", c.none);
	if (rc > 0) {
		if (c.used & U_VALUE)
			c.used |= U_STRING | U_NUMBER | U_SPACE;
		if (c.used & U_STRING)
			c.used |= U_CHAR;
		if (c.used & U_NUMBER)
			c.used |= U_INTEGER;
		putn(&out, c.rules.s, c.rules.n);
		if (c.used & U_VALUE)
			putn(&out, shared_value, strlen(shared_value));
		if (c.used & U_SPACE)
			putn(&out, shared_space, strlen(shared_space));
		if (c.used & U_STRING)
			putn(&out, shared_string, strlen(shared_string));
		if (c.used & U_CHAR)
			putn(&out, shared_char, strlen(shared_char));
		if (c.used & U_NUMBER)
			putn(&out, shared_number, strlen(shared_number));
		if (c.used & U_INTEGER)
			putn(&out, shared_integer, strlen(shared_integer));
		if (c.used & U_DATETIME)
			putn(&out, shared_datetime, strlen(shared_datetime));
		if (c.used & U_DATE)
			putn(&out, shared_date, strlen(shared_date));
		if (c.used & U_TIME)
			putn(&out, shared_time, strlen(shared_time));
		if (c.used & U_UUID)
			putn(&out, shared_uuid, strlen(shared_uuid));
		putn(&out, "", 1);
		*gbnf = out.s;
	} else
		buf_free(&out);
	for (int i = 0; i < c.n_refs; i++)
		free(c.refs[i].name), free(c.refs[i].path);
	free(c.refs);
	buf_free(&c.rules), buf_free(&c.path), buf_free(&e);
	jv_free(&root);
	return rc > 0 ? 0 : -1;
}
