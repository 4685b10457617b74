/* grammar.c: GBNF parsed into rules, and the stacks that match text to them. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "util.h"

#define MAX_REPEAT 1000		/* {m,n}: a bound past this is refused, not expanded */
#define MAX_DEPTH 4096		/* a stack this deep the matcher refuses */
#define MAX_ELEMS (1 << 22)	/* elements once repetitions are expanded */
#define MAX_SEEN (1 << 14)	/* stacks one character's expansion may meet: past it, too ambiguous */
#define AMBIGUOUS "the grammar is too ambiguous: a character of the text meets more than %d stacks"

/* ---- building ---- */

static void
emit(struct grammar *g, int type, int a, int n)
{
	if (g->n_e == g->cap_e) {
		g->cap_e = g->cap_e ? 2 * g->cap_e : 256;
		g->e = xrealloc(g->e, (size_t)g->cap_e * sizeof *g->e);
	}
	g->e[g->n_e++] = (struct gelem){ type, a, n };
}

static int
add_range(struct grammar *g, uint32_t lo, uint32_t hi)
{
	if (g->n_r + 2 > g->cap_r) {
		g->cap_r = g->cap_r ? 2 * g->cap_r : 256;
		g->ranges = xrealloc(g->ranges, (size_t)g->cap_r * sizeof *g->ranges);
	}
	g->ranges[g->n_r++] = lo;
	g->ranges[g->n_r++] = hi;
	return g->n_r - 2;
}

/* The rule named name[0..n), made (undefined: start -1) if new. */
static int
rule_id(struct grammar *g, const char *name, size_t n)
{
	for (int i = 0; i < g->n_rules; i++)
		if (strlen(g->name[i]) == n && memcmp(g->name[i], name, n) == 0)
			return i;
	if (g->n_rules == g->cap_rules) {
		g->cap_rules = g->cap_rules ? 2 * g->cap_rules : 32;
		g->name = xrealloc(g->name, (size_t)g->cap_rules * sizeof *g->name);
		g->start = xrealloc(g->start, (size_t)g->cap_rules * sizeof *g->start);
		g->chain = xrealloc(g->chain, (size_t)g->cap_rules * sizeof *g->chain);
	}
	g->name[g->n_rules] = memcpy(xcalloc(n + 1, 1), name, n);
	g->start[g->n_rules] = -1;
	g->chain[g->n_rules] = 0;
	return g->n_rules++;
}

/* A rule for a group or repetition, named after the rule it is in ('~' is in no name written). */
static int
new_rule(struct grammar *g, int in)
{
	char name[256];

	snprintf(name, sizeof name, "%.200s~%d", g->name[in], g->n_rules);
	return rule_id(g, name, strlen(name));
}

/*
 * Rules are written into the element array as they are parsed, but a
 * group's rule is made while its parent's alternative is half written:
 * each rule's elements are built in a buffer of their own, then moved.
 */
struct body {
	struct gelem *e;
	int n, cap;
};

static void
put(struct body *b, int type, int a, int n)
{
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 16;
		b->e = xrealloc(b->e, (size_t)b->cap * sizeof *b->e);
	}
	b->e[b->n++] = (struct gelem){ type, a, n };
}

static int
define(struct grammar *g, int rule, struct body *b)
{
	if (g->start[rule] >= 0) {
		llm_seterr("rule '%s' is defined twice", g->name[rule]);
		free(b->e);
		return -1;
	}
	g->start[rule] = g->n_e;
	for (int i = 0; i < b->n; i++)
		emit(g, b->e[i].type, b->e[i].a, b->e[i].n);
	emit(g, G_END, 0, 0);
	free(b->e);
	return 0;
}

/* ---- parsing ---- */

struct parser {
	struct grammar *g;
	const char *s, *p, *end;
	int err;
	char msg[200];
	const char *at;
};

static void
perr(struct parser *ps, const char *at, const char *msg)
{
	if (ps->err)
		return;
	ps->err = 1;
	ps->at = at;
	snprintf(ps->msg, sizeof ps->msg, "%s", msg);
}

static int
word_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

/* Blanks and comments; newlines too when nested (in a group, after ::= or |). */
static void
space(struct parser *ps, int newlines)
{
	while (ps->p < ps->end) {
		char c = *ps->p;
		if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n'))
			ps->p++;
		else if (c == '#')
			while (ps->p < ps->end && *ps->p != '\n')
				ps->p++;
		else
			break;
	}
}

static int
hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	    c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One character of a literal or class, escapes undone; -1 at an error. */
static long
character(struct parser *ps)
{
	const unsigned char *p = (const unsigned char *)ps->p;
	uint32_t cp;
	int len, k;

	if (ps->p >= ps->end) {
		perr(ps, ps->p, "unexpected end of the grammar");
		return -1;
	}
	if (*p == '\\') {
		if (ps->p + 1 >= ps->end) {
			perr(ps, ps->p, "unexpected end of the grammar");
			return -1;
		}
		ps->p += 2;
		switch (p[1]) {
		case 'n': return '\n';
		case 't': return '\t';
		case 'r': return '\r';
		case '\\': case '"': case '[': case ']': case '-': case '^': case '\'':
			return p[1];
		case 'x': len = 2; break;
		case 'u': len = 4; break;
		case 'U': len = 8; break;
		default:
			perr(ps, (const char *)p, "unknown escape");
			return -1;
		}
		for (cp = 0, k = 0; k < len; k++) {
			int h = ps->p + k < ps->end ? hexval(ps->p[k]) : -1;
			if (h < 0) {
				perr(ps, (const char *)p, "expected hexadecimal digits after the escape");
				return -1;
			}
			cp = cp * 16 + (uint32_t)h;
		}
		ps->p += len;
		if (cp > 0x10ffff) {
			perr(ps, (const char *)p, "not a Unicode code point");
			return -1;
		}
		return cp;
	}
	/* a UTF-8 character as it is */
	len = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
	if (!len || ps->p + len > ps->end) {
		perr(ps, ps->p, "not UTF-8");
		return -1;
	}
	cp = len == 1 ? *p : (uint32_t)(*p & (0x7f >> len));
	for (k = 1; k < len; k++) {
		if ((p[k] & 0xc0) != 0x80) {
			perr(ps, ps->p, "not UTF-8");
			return -1;
		}
		cp = cp << 6 | (p[k] & 0x3f);
	}
	ps->p += len;
	return cp;
}

static int parse_alternates(struct parser *ps, int rule, struct body *b, int nested);

/* A decimal count of a repetition bound. */
static int
count(struct parser *ps)
{
	long v = 0;
	const char *at = ps->p;

	if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
		perr(ps, ps->p, "expected a number");
		return -1;
	}
	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && v <= MAX_REPEAT)
		v = v * 10 + (*ps->p++ - '0');
	if (v > MAX_REPEAT) {
		perr(ps, at, "a repetition bound above 1000");
		return -1;
	}
	return (int)v;
}

/*
 * The element last[0..n) (one element, or a literal's characters)
 * repeated from min to max times (max -1: no bound), as rules: X{m,n} is
 * m copies, then n - m nested optional ones; X{m,} is m copies and R ::=
 * X R | empty.
 */
static void
repeat(struct parser *ps, int rule, struct body *b, int from, int min, int max)
{
	struct grammar *g = ps->g;
	int n = b->n - from, i, k, r;
	struct gelem x[64];

	if ((long)b->n + (long)(n < 64 ? n : 1) * (min + (max > min ? 2 * (max - min) : 1)) +
	    (long)g->n_e > MAX_ELEMS) {
		perr(ps, ps->p, "the grammar is too large once its repetitions are expanded");
		return;
	}
	if (n > 64) {	/* a long literal: as a rule of its own */
		struct body sub = { 0 };
		r = new_rule(g, rule);
		for (i = from; i < b->n; i++)
			put(&sub, b->e[i].type, b->e[i].a, b->e[i].n);
		define(g, r, &sub);
		b->n = from;
		put(b, G_RULE, r, 0);
		n = 1;
	}
	memcpy(x, b->e + from, (size_t)n * sizeof *x);
	b->n = from;
	for (k = 0; k < min; k++)
		for (i = 0; i < n; i++)
			put(b, x[i].type, x[i].a, x[i].n);
	if (max < 0) {
		struct body sub = { 0 };
		r = new_rule(g, rule);
		for (i = 0; i < n; i++)
			put(&sub, x[i].type, x[i].a, x[i].n);
		put(&sub, G_RULE, r, 0);
		put(&sub, G_ALT, 0, 0);
		define(g, r, &sub);
		g->chain[r] = -1;
		put(b, G_RULE, r, 0);
		return;
	}
	/* the optional ones, innermost first: R_k ::= X R_{k+1} | empty */
	int next = -1;
	for (k = max - min; k > 0; k--) {
		struct body sub = { 0 };
		r = new_rule(g, rule);
		g->chain[r] = max - min - k + 1;
		for (i = 0; i < n; i++)
			put(&sub, x[i].type, x[i].a, x[i].n);
		if (next >= 0)
			put(&sub, G_RULE, next, 0);
		put(&sub, G_ALT, 0, 0);
		define(g, r, &sub);
		next = r;
	}
	if (next >= 0)
		put(b, G_RULE, next, 0);
}

/* A sequence of elements, up to |, ) or the end of the line (or of the group). */
static int
parse_sequence(struct parser *ps, int rule, struct body *b, int nested)
{
	struct grammar *g = ps->g;
	int last = -1;		/* where the last element starts in b, for a repetition */

	for (;;) {
		space(ps, nested);
		if (ps->p >= ps->end || *ps->p == '|' || *ps->p == ')' || *ps->p == '\n')
			return 0;
		const char *at = ps->p;
		char c = *ps->p;
		if (c == '"') {
			ps->p++;
			last = b->n;
			while (ps->p < ps->end && *ps->p != '"') {
				long cp = character(ps);
				if (cp < 0)
					return -1;
				put(b, G_CHAR, add_range(g, (uint32_t)cp, (uint32_t)cp), 1);
			}
			if (ps->p >= ps->end) {
				perr(ps, at, "a string that does not end");
				return -1;
			}
			ps->p++;
			if (b->n == last)
				last = -1;	/* "": nothing to repeat */
		} else if (c == '[') {
			int neg = 0, first = -1, n = 0;
			ps->p++;
			if (ps->p < ps->end && *ps->p == '^')
				neg = 1, ps->p++;
			while (ps->p < ps->end && *ps->p != ']') {
				long lo = character(ps), hi;
				if (lo < 0)
					return -1;
				hi = lo;
				if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
					ps->p++;
					if ((hi = character(ps)) < 0)
						return -1;
					if (hi < lo) {
						perr(ps, at, "a range whose end is before its start");
						return -1;
					}
				}
				int r = add_range(g, (uint32_t)lo, (uint32_t)hi);
				if (first < 0)
					first = r;
				n++;
			}
			if (ps->p >= ps->end) {
				perr(ps, at, "a character class that does not end");
				return -1;
			}
			ps->p++;
			if (n == 0 && !neg) {
				perr(ps, at, "an empty character class matches nothing");
				return -1;
			}
			last = b->n;
			put(b, neg ? G_CHAR_NOT : G_CHAR, first < 0 ? 0 : first, n);
		} else if (c == '.') {
			ps->p++;
			last = b->n;
			put(b, G_CHAR_NOT, 0, 0);
		} else if (word_char((unsigned char)c)) {
			const char *w = ps->p;
			while (ps->p < ps->end && word_char((unsigned char)*ps->p))
				ps->p++;
			/* "name ::=" on a new line would start a rule: a rule ends at its line's end */
			last = b->n;
			int r = rule_id(g, w, (size_t)(ps->p - w));
			put(b, G_RULE, r, (int)(w - ps->s) + 1);	/* where it is used, for errors */
		} else if (c == '(') {
			struct body sub = { 0 };
			int r = new_rule(g, rule);
			ps->p++;
			if (parse_alternates(ps, r, &sub, 1) < 0) {
				free(sub.e);
				return -1;
			}
			space(ps, 1);
			if (ps->p >= ps->end || *ps->p != ')') {
				free(sub.e);
				perr(ps, at, "a group that does not end");
				return -1;
			}
			ps->p++;
			if (define(g, r, &sub) < 0)
				return -1;
			last = b->n;
			put(b, G_RULE, r, 0);
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			if (last < 0) {
				perr(ps, at, "a repetition of nothing");
				return -1;
			}
			int min = 0, max = -1;
			ps->p++;
			if (c == '+')
				min = 1;
			else if (c == '?')
				max = 1;
			else if (c == '{') {
				space(ps, 0);
				if ((min = count(ps)) < 0)
					return -1;
				space(ps, 0);
				max = min;
				if (ps->p < ps->end && *ps->p == ',') {
					ps->p++;
					space(ps, 0);
					max = -1;
					if (ps->p < ps->end && *ps->p != '}' && (max = count(ps)) < 0)
						return -1;
					space(ps, 0);
				}
				if (ps->p >= ps->end || *ps->p != '}') {
					perr(ps, at, "expected '}' to end the repetition");
					return -1;
				}
				ps->p++;
				if (max >= 0 && max < min) {
					perr(ps, at, "a repetition whose maximum is below its minimum");
					return -1;
				}
			}
			repeat(ps, rule, b, last, min, max);
			last = -1;
		} else {
			perr(ps, at, "expected a string, a character class, a rule name or a group");
			return -1;
		}
		if (ps->err)
			return -1;
	}
}

static int
parse_alternates(struct parser *ps, int rule, struct body *b, int nested)
{
	for (;;) {
		if (parse_sequence(ps, rule, b, nested) < 0)
			return -1;
		space(ps, nested);
		if (ps->p >= ps->end || *ps->p != '|')
			return 0;
		ps->p++;
		space(ps, 1);
		put(b, G_ALT, 0, 0);
	}
}

/* Where at is in the text, as LINE:COL. */
static void
where(const char *s, const char *at, int *line, int *col)
{
	*line = 1, *col = 1;
	for (; s < at; s++)
		if (*s == '\n')
			++*line, *col = 1;
		else
			++*col;
}

/* ---- checks ---- */

/*
 * Mark the rules with an alternative each of whose elements passes: a
 * reference to a rule marked, or with chars a character too.  chars 0:
 * the rules that can be empty; 1: those that derive some finite text.
 */
static void
fixpoint(const struct grammar *g, unsigned char *set, int chars)
{
	int changed = 1, r, i, ok;

	memset(set, 0, (size_t)g->n_rules);
	while (changed) {
		changed = 0;
		for (r = 0; r < g->n_rules; r++) {
			if (set[r])
				continue;
			for (i = g->start[r], ok = 1; ; i++) {
				const struct gelem *e = &g->e[i];
				if (e->type == G_ALT || e->type == G_END) {
					if (ok) {
						set[r] = 1, changed = 1;
						break;
					}
					if (e->type == G_END)
						break;
					ok = 1;
				} else if (e->type == G_RULE ? !set[e->a] : !chars)
					ok = 0;
			}
		}
	}
}

/*
 * Left recursion: a rule that can reach itself through references each
 * preceded in its alternative by what can be empty.  The matcher expands
 * references until a character is on top, which such a rule never
 * gives.  Depth-first over those edges; -1 with the rule named.  One
 * edge is not followed: X{m,}'s rule R ::= X R | empty coming back to
 * itself at its end.  When X can be empty that puts the matcher's stack
 * back as it was (a tail call), and expand cuts it there: (X)* means
 * the repetition of X's non-empty texts, as llama.cpp reads it.
 */
static int
left_visit(const struct grammar *g, const unsigned char *null, unsigned char *mark, int r, int depth)
{
	int i, lead = 1;

	if (mark[r] == 2)
		return 0;
	if (depth > MAX_DEPTH) {
		llm_seterr("the grammar nests deeper than %d", MAX_DEPTH);
		return -1;
	}
	if (mark[r] == 1) {
		const char *tilde = strchr(g->name[r], '~');
		if (tilde)	/* a rule made for a group or repetition: name the rule it is in */
			llm_seterr("rule '%.*s' is left-recursive: a group or repetition in it can come "
			    "back to itself before any character", (int)(tilde - g->name[r]), g->name[r]);
		else
			llm_seterr("rule '%s' is left-recursive: it can come back to itself before "
			    "any character", g->name[r]);
		return -1;
	}
	mark[r] = 1;
	for (i = g->start[r]; ; i++) {
		const struct gelem *e = &g->e[i];
		if (e->type == G_ALT) {
			lead = 1;
			continue;
		}
		if (e->type == G_END)
			break;
		if (lead && e->type == G_RULE && !(e->a == r && g->chain[r] < 0) &&
		    left_visit(g, null, mark, e->a, depth + 1) < 0)
			return -1;
		if (e->type != G_RULE || !null[e->a])
			lead = 0;
	}
	mark[r] = 2;
	return 0;
}

static int
check(struct grammar *g, const char *text)
{
	unsigned char *null, *mark;
	int r, i, line, col, status = 0;

	for (i = 0; i < g->n_e; i++)
		if (g->e[i].type == G_RULE && g->start[g->e[i].a] < 0) {
			where(text, text + g->e[i].n - 1, &line, &col);
			llm_seterr("%d:%d: undefined rule '%s'", line, col, g->name[g->e[i].a]);
			return -1;
		}
	/* named only where nothing is left of it, as x{0}: undefined all the same */
	for (r = 0; r < g->n_rules; r++)
		if (g->start[r] < 0) {
			llm_seterr("undefined rule '%s'", g->name[r]);
			return -1;
		}
	g->root = -1;
	for (r = 0; r < g->n_rules; r++)
		if (strcmp(g->name[r], "root") == 0)
			g->root = r;
	if (g->root < 0) {
		llm_seterr("no rule named root: the grammar starts there");
		return -1;
	}
	null = xmalloc((size_t)g->n_rules);
	mark = xcalloc((size_t)g->n_rules, 1);
	fixpoint(g, null, 0);
	for (r = 0; r < g->n_rules && status == 0; r++)
		status = left_visit(g, null, mark, r, 0);
	if (status == 0) {
		fixpoint(g, mark, 1);
		if (!mark[g->root]) {
			llm_seterr("the grammar's language is empty: root derives no finite text");
			status = -1;
		}
	}
	free(null);
	free(mark);
	return status;
}

int
grammar_parse(struct grammar *g, const char *text, size_t n)
{
	struct parser ps = { g, text, text, text + n, 0, "", NULL };
	int line, col;

	memset(g, 0, sizeof *g);
	for (;;) {
		space(&ps, 1);
		if (ps.p >= ps.end)
			break;
		const char *w = ps.p;
		while (ps.p < ps.end && word_char((unsigned char)*ps.p))
			ps.p++;
		if (ps.p == w) {
			perr(&ps, w, "expected a rule name");
			break;
		}
		int r = rule_id(g, w, (size_t)(ps.p - w));
		space(&ps, 0);
		if (ps.end - ps.p < 3 || memcmp(ps.p, "::=", 3) != 0) {
			perr(&ps, ps.p, "expected ::=");
			break;
		}
		ps.p += 3;
		space(&ps, 1);
		struct body b = { 0 };
		if (parse_alternates(&ps, r, &b, 0) < 0) {
			free(b.e);
			break;
		}
		if (ps.p < ps.end && *ps.p == ')') {
			free(b.e);
			perr(&ps, ps.p, "a ')' with no group open");
			break;
		}
		if (define(g, r, &b) < 0) {
			perr(&ps, w, llm_err());
			break;
		}
	}
	if (ps.err) {
		where(text, ps.at, &line, &col);
		llm_seterr("%d:%d: %s", line, col, ps.msg);
		grammar_free(g);
		return -1;
	}
	if (check(g, text) < 0) {
		char msg[512];
		snprintf(msg, sizeof msg, "%s", llm_err());
		grammar_free(g);
		llm_seterr("%s", msg);
		return -1;
	}
	g->rule_of = xcalloc((size_t)g->n_e + 1, sizeof *g->rule_of);
	for (int r = 0; r < g->n_rules; r++)
		for (int i = g->start[r]; i >= 0 && i < g->n_e; i++) {
			g->rule_of[i] = r;
			if (g->e[i].type == G_END)
				break;
		}
	return 0;
}

void
grammar_free(struct grammar *g)
{
	for (int i = 0; i < g->n_rules; i++)
		free(g->name[i]);
	free(g->name);
	free(g->start);
	free(g->chain);
	free(g->rule_of);
	free(g->e);
	free(g->ranges);
	memset(g, 0, sizeof *g);
}

/* ---- matching ---- */

static void
stack_push(struct gstack *s, int v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = xrealloc(s->v, (size_t)s->cap * sizeof *s->v);
	}
	s->v[s->n++] = v;
}

/* Set stack s to v[0..n). */
static void
stack_set(struct gstack *s, const int *v, int n)
{
	if (n > s->cap) {
		s->cap = n > 16 ? n : 16;
		free(s->v);
		s->v = xmalloc((size_t)s->cap * sizeof *s->v);
	}
	if (n)
		memcpy(s->v, v, (size_t)n * sizeof *v);
	s->n = n;
}

/* Add a copy of stack v[0..n) to the state. */
static void
put_stack(struct gstate *st, const int *v, int n)
{
	if (st->n == st->cap) {
		st->cap = st->cap ? 2 * st->cap : 8;
		st->s = xrealloc(st->s, (size_t)st->cap * sizeof *st->s);
		memset(st->s + st->n, 0, (size_t)(st->cap - st->n) * sizeof *st->s);
	}
	stack_set(&st->s[st->n++], v, n);
}

/*
 * The stacks one expansion met (the start's, or one character's): a
 * stack met again expands to what it did the first time, so it is
 * expanded once.  That keeps an ambiguous grammar's expansion to the
 * stacks it meets, not the paths to them: in (a? b?){1000}, every one of
 * the thousand places a text can be read to end in meets the same few
 * thousand stacks.  Each stack is its height, then its positions, in an
 * arena; a table of slots indexes them by hash, a slot free unless its
 * mark is the expansion's.
 */
struct gseen {
	int *arena;
	size_t n_arena, cap_arena;
	uint64_t *hash;		/* by slot */
	size_t *at;		/* by slot: the stack's place in the arena */
	unsigned *mark;		/* by slot: in use by the expansion marked so */
	size_t size;		/* slots: a power of two, at least twice n */
	unsigned now;		/* the expansion's mark */
	int n;
	int *work;		/* the stacks still to expand (expand's list) */
	size_t n_work, cap_work;
};

/* A stack's hash: its height, then its positions (FNV-1a) */
static uint64_t
stack_hash(const int *v, int n)
{
	uint64_t h = (1469598103934665603u ^ (uint32_t)n) * 1099511628211u;

	for (int i = 0; i < n; i++)
		h = (h ^ (uint32_t)v[i]) * 1099511628211u;
	return h;
}

static void
seen_start(struct gseen *m)
{
	m->n = 0, m->n_arena = 0;
	if (++m->now == 0) {	/* (the marks wrapped: every slot free) */
		memset(m->mark, 0, m->size * sizeof *m->mark);
		m->now = 1;
	}
}

static void
seen_free(struct gseen *m)
{
	if (m)
		free(m->arena), free(m->hash), free(m->at), free(m->mark), free(m->work);
	free(m);
}

/* The slots again, size of them (the arena holds every stack met). */
static void
seen_index(struct gseen *m, size_t size)
{
	free(m->hash), free(m->at), free(m->mark);
	m->size = size;
	m->hash = xmalloc(size * sizeof *m->hash);
	m->at = xmalloc(size * sizeof *m->at);
	m->mark = xcalloc(size, sizeof *m->mark);
	m->now = 1;
	for (size_t a = 0; a < m->n_arena; a += 1 + (size_t)m->arena[a]) {
		uint64_t h = stack_hash(m->arena + a + 1, m->arena[a]);
		size_t k = (size_t)h & (size - 1);
		while (m->mark[k] == m->now)
			k = (k + 1) & (size - 1);
		m->hash[k] = h, m->at[k] = a, m->mark[k] = m->now;
	}
}

/* Whether stack v[0..n) is new to the expansion (then kept): 1, 0 if met, -1 if MAX_SEEN were. */
static int
seen_add(struct gseen *m, const int *v, int n)
{
	uint64_t h = stack_hash(v, n);
	size_t k;

	for (k = (size_t)h & (m->size - 1); m->size && m->mark[k] == m->now; k = (k + 1) & (m->size - 1))
		if (m->hash[k] == h && m->arena[m->at[k]] == n &&
		    (n == 0 || memcmp(m->arena + m->at[k] + 1, v, (size_t)n * sizeof *v) == 0))
			return 0;
	if (m->n == MAX_SEEN)
		return -1;
	if (m->n_arena + 1 + (size_t)n > m->cap_arena) {
		m->cap_arena = 2 * (m->n_arena + 1 + (size_t)n);
		m->arena = xrealloc(m->arena, m->cap_arena * sizeof *m->arena);
	}
	m->arena[m->n_arena] = n;
	if (n)
		memcpy(m->arena + m->n_arena + 1, v, (size_t)n * sizeof *v);
	m->n_arena += 1 + (size_t)n;
	if (2 * (size_t)++m->n > m->size)
		seen_index(m, m->size ? 2 * m->size : 64);	/* (indexes the new stack too) */
	else
		m->hash[k] = h, m->at[k] = m->n_arena - 1 - (size_t)n, m->mark[k] = m->now;
	return 1;
}

/*
 * Put stack v[0..n), and x on top of it if x >= 0, on the work list of
 * stacks to expand: its positions, then its height.
 */
static void
work_push(struct gseen *m, const int *v, int n, int x)
{
	int h = n + (x >= 0);

	if (m->n_work + (size_t)h + 1 > m->cap_work) {
		m->cap_work = 2 * (m->n_work + (size_t)h + 1);
		m->work = xrealloc(m->work, m->cap_work * sizeof *m->work);
	}
	if (n)
		memcpy(m->work + m->n_work, v, (size_t)n * sizeof *v);
	m->n_work += (size_t)n;
	if (x >= 0)
		m->work[m->n_work++] = x;
	m->work[m->n_work++] = h;
}

/* Put stack v[0..n) with each of rule's alternatives on top on the work list, the last first. */
static void
work_push_rule(struct gseen *m, const struct grammar *g, int rule, const int *v, int n)
{
	int last;

	for (last = g->start[rule]; g->e[last].type != G_END; last++)
		;
	for (int i = last; i >= g->start[rule]; i--)
		if (i == g->start[rule] || g->e[i - 1].type == G_ALT)
			work_push(m, v, n, i);
}

/*
 * Expand the stacks on the work list until a character is on top of each
 * (or it is empty: a whole sentence), into out: a finished alternative is
 * popped, a reference on top becomes its rule's alternatives, a stack
 * each.  The list is a stack itself, the alternatives put on it last
 * first, so the stacks come out in the order a depth-first walk meets
 * them; no recursion, so a grammar's nesting costs no C stack, and
 * ("a"? "b"?){1000} is passed through whole.  A stack met already adds
 * nothing: so X{m,}'s R ::= X R | empty, back at its own end with
 * nothing taken, stops.  s is scratch.  0; -1 if a stack grew past
 * MAX_DEPTH (that way is dropped); -2 if more than MAX_SEEN stacks were
 * met (the list is then emptied).
 */
static int
expand(const struct grammar *g, struct gstate *out, struct gseen *m, struct gstack *s)
{
	int status = 0;

	while (m->n_work > 0) {
		int h = m->work[--m->n_work], top, next;
		m->n_work -= (size_t)h;
		stack_set(s, m->work + m->n_work, h);
		if (h > MAX_DEPTH) {
			status = -1;
			continue;
		}
		int fresh = seen_add(m, s->v, h);
		if (fresh < 0) {
			m->n_work = 0;
			return -2;
		}
		if (!fresh)
			continue;
		if (h == 0) {
			put_stack(out, NULL, 0);
			continue;
		}
		if (h > out->peak)
			out->peak = h;
		top = s->v[h - 1];
		switch (g->e[top].type) {
		case G_END:
		case G_ALT:
			work_push(m, s->v, h - 1, -1);
			continue;
		case G_CHAR:
		case G_CHAR_NOT:
			put_stack(out, s->v, h);
			continue;
		}
		/* a reference: what follows it, unless nothing does (a tail call), then the rule */
		next = top + 1;
		if (g->e[next].type == G_END || g->e[next].type == G_ALT)
			s->n--;
		else
			s->v[h - 1] = next;
		work_push_rule(m, g, g->e[top].a, s->v, s->n);
	}
	return status;
}

int
gstate_init(struct gstate *st, const struct grammar *g)
{
	struct gstack s = { 0 };
	struct gseen *seen = xcalloc(1, sizeof *seen);
	int status;

	memset(st, 0, sizeof *st);
	st->g = g;
	/* root's alternatives, each a stack */
	seen_start(seen);
	work_push_rule(seen, g, g->root, NULL, 0);
	status = expand(g, st, seen, &s);
	free(s.v);
	seen_free(seen);
	if (status == -1)
		llm_seterr("the grammar nests deeper than %d", MAX_DEPTH);
	else if (status < 0)
		llm_seterr("the grammar is too ambiguous: its start meets more than %d stacks", MAX_SEEN);
	return status < 0 ? -1 : 0;
}

void
gstate_free(struct gstate *st)
{
	for (int i = 0; i < st->cap; i++)
		free(st->s[i].v);
	free(st->s);
	seen_free(st->seen);
	memset(st, 0, sizeof *st);
}

void
gstate_copy(struct gstate *dst, const struct gstate *src)
{
	dst->g = src->g;
	dst->n = 0;
	for (int i = 0; i < src->n; i++)	/* src's stacks are distinct already */
		put_stack(dst, src->s[i].v, src->s[i].n);
	dst->partial = src->partial, dst->need = src->need, dst->len = src->len;
	dst->spm = src->spm, dst->strip = src->strip;
}

/* Whether element e matches a code point in [lo, hi]. */
static int
matches(const struct grammar *g, const struct gelem *e, uint32_t lo, uint32_t hi)
{
	const uint32_t *r = e->n ? g->ranges + e->a : NULL;
	int i;

	if (e->type == G_CHAR) {
		for (i = 0; i < e->n; i++)
			if (r[2 * i] <= hi && lo <= r[2 * i + 1])
				return 1;
		return 0;
	}
	/* a negated class: some point of [lo, hi] outside all its ranges */
	for (uint32_t c = lo; ; ) {
		int in = 0;
		for (i = 0; i < e->n; i++)
			if (r[2 * i] <= c && c <= r[2 * i + 1]) {
				c = r[2 * i + 1] + 1, in = 1;
				break;
			}
		if (!in)
			return c <= hi;
		if (c > hi || c == 0)
			return 0;
	}
}

/*
 * Advance every stack whose top matches code point c: 1 if any did, 0 if
 * none, -1 if the grammar is too ambiguous there (MAX_SEEN).  tmp and s
 * are scratch.
 */
static int
advance(struct gstate *st, uint32_t c, struct gstate *tmp, struct gstack *scratch)
{
	const struct grammar *g = st->g;
	struct gstack s = *scratch;
	int over = 0;

	tmp->g = g;
	tmp->n = 0;
	if (!tmp->seen)
		tmp->seen = xcalloc(1, sizeof *tmp->seen);
	seen_start(tmp->seen);
	for (int i = 0; i < st->n && !over; i++) {
		struct gstack *k = &st->s[i];
		if (k->n == 0 || !matches(g, &g->e[k->v[k->n - 1]], c, c))
			continue;
		/* the stack past c; one that would grow past MAX_DEPTH is dropped: that way is not taken */
		work_push(tmp->seen, k->v, k->n - 1, k->v[k->n - 1] + 1);
		over = expand(g, tmp, tmp->seen, &s) == -2;
	}
	*scratch = s;
	if (over)
		return -1;
	/* tmp becomes the state: swap the stacks */
	struct gstack *sv = st->s;
	int n = st->n, cap = st->cap;
	st->s = tmp->s, st->n = tmp->n, st->cap = tmp->cap;
	tmp->s = sv, tmp->n = n, tmp->cap = cap;
	return st->n > 0;
}

/* The least code point a UTF-8 character of len bytes may hold: one written longer is refused. */
static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };

/* A whole character of the text: SentencePiece's space mark, a dropped first space. */
static int
accept_char(struct gstate *st, uint32_t c, struct gstate *tmp, struct gstack *scratch)
{
	if (st->spm && c == 0x2581)
		c = ' ';
	if (st->strip) {
		st->strip = 0;
		if (c == ' ')
			return 1;
	}
	return advance(st, c, tmp, scratch);
}

/* gstate_accept's answer (1, 0, or -1: too ambiguous), with tmp and scratch the caller's */
static int
accept_bytes(struct gstate *st, const char *text, size_t n, struct gstate *tmp, struct gstack *scratch)
{
	const unsigned char *p = (const unsigned char *)text;
	int alive = 1;

	for (size_t i = 0; i < n && alive == 1; i++) {
		unsigned b = p[i];
		if (st->need) {
			if ((b & 0xc0) != 0x80) {
				alive = 0;
				break;
			}
			st->partial = st->partial << 6 | (b & 0x3f);
			if (--st->need == 0)
				alive = st->partial >= least[st->len] && st->partial <= 0x10ffff &&
				    (st->partial < 0xd800 || st->partial > 0xdfff) &&
				    accept_char(st, st->partial, tmp, scratch);
			continue;
		}
		if (b < 0x80) {
			alive = accept_char(st, b, tmp, scratch);
			continue;
		}
		int len = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
		if (!len) {
			alive = 0;
			break;
		}
		st->partial = b & (0x7f >> len);
		st->need = len - 1;
		st->len = len;
	}
	/* a character begun: some stack must take one of the points it can still be */
	if (alive == 1 && st->need) {
		uint32_t lo = st->partial << (6 * st->need), hi = lo | ((1u << (6 * st->need)) - 1);
		if (lo < least[st->len])
			lo = least[st->len];
		if (hi > 0x10ffff)
			hi = 0x10ffff;
		alive = 0;
		/* it may be SentencePiece's space mark: a space, or nothing at the start */
		if (st->spm && lo <= 0x2581 && 0x2581 <= hi) {
			alive = st->strip;
			for (int i = 0; i < st->n && !alive; i++)
				alive = st->s[i].n > 0 && matches(st->g, &st->g->e[st->s[i].v[st->s[i].n - 1]], ' ', ' ');
		}
		/* the points it can be, less the surrogates, which UTF-8 never holds */
		uint32_t part[2][2] = { { lo, hi < 0xd7ff ? hi : 0xd7ff }, { lo > 0xe000 ? lo : 0xe000, hi } };
		for (int i = 0; i < st->n && !alive; i++)
			for (int k = 0; k < 2 && !alive; k++)
				alive = st->s[i].n > 0 && part[k][0] <= part[k][1] &&
				    matches(st->g, &st->g->e[st->s[i].v[st->s[i].n - 1]], part[k][0], part[k][1]);
	}
	return alive;
}

void
gstate_for(struct gstate *st, const struct tok *t)
{
	st->spm = t->model == TOK_SPM;
	st->strip = st->spm && t->add_space_prefix;
}

int
gstate_accept(struct gstate *st, const char *text, size_t n)
{
	struct gstate tmp = { 0 };
	struct gstack scratch = { 0 };
	int alive = accept_bytes(st, text, n, &tmp, &scratch);

	gstate_free(&tmp);
	free(scratch.v);
	if (alive < 0)
		llm_seterr(AMBIGUOUS, MAX_SEEN);
	return alive;
}

int
gstate_complete(const struct gstate *st)
{
	if (st->need)
		return 0;
	for (int i = 0; i < st->n; i++)
		if (st->s[i].n == 0)
			return 1;
	return 0;
}

int
gstate_finished(const struct gstate *st)
{
	return gstate_complete(st) && st->n == 1;
}

/* ---- the walks' states ---- */

static void
steps_reset(struct gsteps *d)
{
	d->n = 0, d->n_arena = 0, d->n_steps = 0, d->work_id = -1;
	if (d->index)
		memset(d->index, 0xff, d->index_size * sizeof *d->index);
	if (d->step)
		memset(d->step, 0, d->steps_size * sizeof *d->step);
}

static void
steps_free(struct gsteps *d)
{
	free(d->arena), free(d->at), free(d->hash), free(d->left), free(d->index);
	free(d->step), free(d->key.v);
	gstate_free(&d->work);
	memset(d, 0, sizeof *d);
}

/* Index the states (again) in a table of size slots. */
static void
index_states(struct gsteps *d, size_t size)
{
	free(d->index);
	d->index_size = size;
	d->index = xmalloc(size * sizeof *d->index);
	memset(d->index, 0xff, size * sizeof *d->index);
	for (int i = 0; i < d->n; i++) {
		size_t at = (size_t)d->hash[i] & (size - 1);
		while (d->index[at] >= 0)
			at = (at + 1) & (size - 1);
		d->index[at] = i;
	}
}

/* The id of state st, kept if new. */
static int
intern(struct gsteps *d, const struct gstate *st)
{
	struct gstack *key = &d->key;
	uint64_t h = 1469598103934665603u;
	size_t at;
	int left = st->n > 0 ? 2 : 0;

	key->n = 0;
	stack_push(key, st->n);
	stack_push(key, (int)st->partial);
	stack_push(key, st->need);
	stack_push(key, st->len);
	stack_push(key, st->spm << 1 | st->strip);
	for (int i = 0; i < st->n; i++) {
		stack_push(key, st->s[i].n);
		left = st->s[i].n == 0 ? left | 1 : left & 1;
		for (int j = 0; j < st->s[i].n; j++)
			stack_push(key, st->s[i].v[j]);
	}
	for (int i = 0; i < key->n; i++)
		h = (h ^ (uint32_t)key->v[i]) * 1099511628211u;
	if (2 * ((size_t)d->n + 1) > d->index_size)
		index_states(d, d->index_size ? 2 * d->index_size : 1024);
	for (at = (size_t)h & (d->index_size - 1); d->index[at] >= 0; at = (at + 1) & (d->index_size - 1)) {
		int i = d->index[at];
		if (d->hash[i] == h && memcmp(d->arena + d->at[i], key->v, (size_t)key->n * sizeof *key->v) == 0)
			return i;
	}
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 256;
		d->at = xrealloc(d->at, (size_t)d->cap * sizeof *d->at);
		d->hash = xrealloc(d->hash, (size_t)d->cap * sizeof *d->hash);
		d->left = xrealloc(d->left, (size_t)d->cap);
	}
	if (d->n_arena + (size_t)key->n > d->cap_arena) {
		d->cap_arena = 2 * (d->n_arena + (size_t)key->n);
		d->arena = xrealloc(d->arena, d->cap_arena * sizeof *d->arena);
	}
	memcpy(d->arena + d->n_arena, key->v, (size_t)key->n * sizeof *key->v);
	d->at[d->n] = d->n_arena;
	d->n_arena += (size_t)key->n;
	d->hash[d->n] = h;
	d->left[d->n] = (char)(left & 1 ? left : 0);
	d->index[at] = d->n;
	return d->n++;
}

/* State id as a gstate, into out. */
static void
load(const struct gsteps *d, int id, const struct grammar *g, struct gstate *out)
{
	const int *v = d->arena + d->at[id];
	int n = v[0];

	out->g = g;
	out->n = 0;
	out->partial = (uint32_t)v[1], out->need = v[2], out->len = v[3];
	out->spm = v[4] >> 1, out->strip = v[4] & 1;
	v += 5;
	for (int i = 0; i < n; i++) {
		put_stack(out, v + 1, v[0]);
		v += 1 + v[0];
	}
}

/* A step's first slot in the table: a hash of (state << 8 | byte) + 1 */
#define STEP_SLOT(k, size) ((size_t)((k) * 0x9e3779b97f4a7c15u >> 20) & ((size) - 1))

/* The steps' table, size slots (again). */
static void
index_steps(struct gsteps *d, size_t size)
{
	struct gstep *old = d->step;
	size_t n = d->steps_size;

	d->steps_size = size;
	d->step = xcalloc(size, sizeof *d->step);
	for (size_t i = 0; i < n; i++)
		if (old[i].from) {
			size_t at = STEP_SLOT(old[i].from, size);
			while (d->step[at].from)
				at = (at + 1) & (size - 1);
			d->step[at] = old[i];
		}
	free(old);
}

/*
 * State id on past byte b: the next state's id, -1 if none, -2 if the
 * grammar is too ambiguous there; *peak raised to the step's highest stack.
 */
static int
step(struct gmask *m, const struct grammar *g, int id, unsigned char b, int *peak)
{
	struct gsteps *d = &m->steps;
	uint64_t k = ((uint64_t)id << 8 | b) + 1;
	size_t at;

	if (2 * (d->n_steps + 1) > d->steps_size)
		index_steps(d, d->steps_size ? 2 * d->steps_size : 4096);
	for (at = STEP_SLOT(k, d->steps_size); d->step[at].from;
	    at = (at + 1) & (d->steps_size - 1))
		if (d->step[at].from == k) {
			if (d->step[at].peak > *peak)
				*peak = d->step[at].peak;
			return d->step[at].to;
		}
	if (d->work_id != id)	/* (a walk mostly steps on from the state it just made) */
		load(d, id, g, &d->work);
	m->tmp.peak = 0;
	int alive = accept_bytes(&d->work, (const char *)&b, 1, &m->tmp, &m->scratch);
	int next = alive > 0 ? intern(d, &d->work) : alive < 0 ? -2 : -1;
	d->work_id = next;
	d->step[at] = (struct gstep){ k, next, m->tmp.peak };
	d->n_steps++;
	if (m->tmp.peak > *peak)
		*peak = m->tmp.peak;
	return next;
}

/* ---- masks ---- */

/*
 * The length classes: the most bytes a class's tokens have (the last:
 * any).  A token of at most k bytes cannot tell apart the counts of a
 * repetition past k + 1 (state_key), so near a bound only the classes of
 * the longer tokens are walked again.
 */
static const int class_most[GMASK_CLASSES] = { 2, 3, 4, 5, 6, 8, 11, 16, 24, -1 };

static int
class_of(size_t len)
{
	int c = 0;

	while (class_most[c] >= 0 && len > (size_t)class_most[c])
		c++;
	return c;
}

/* The vocabulary's texts by class, then in byte order (of a class's tokens: sorting's). */
static int
text_cmp(const void *a, const void *b, void *arg)
{
	const struct gmask *m = arg;
	int x = *(const int *)a, y = *(const int *)b;
	size_t n = m->len[x] < m->len[y] ? m->len[x] : m->len[y];
	int c = memcmp(m->text[x], m->text[y], n);

	return c ? c : m->len[x] < m->len[y] ? -1 : m->len[x] > m->len[y];
}

/* qsort without qsort_r: the comparison's context in a static, set for the call */
static struct gmask *sorting;

static int
text_cmp_static(const void *a, const void *b)
{
	return text_cmp(a, b, sorting);
}

void
gmask_init(struct gmask *m, const struct tok *t)
{
	struct buf piece = { 0 };
	int c;

	memset(m, 0, sizeof *m);
	m->t = t;
	m->text = xcalloc((size_t)t->n_vocab, sizeof *m->text);
	m->len = xcalloc((size_t)t->n_vocab, sizeof *m->len);
	m->order = xmalloc((size_t)t->n_vocab * sizeof *m->order);
	m->lcp = xmalloc((size_t)t->n_vocab * sizeof *m->lcp);
	for (int id = 0; id < t->n_vocab; id++) {
		if (t->type[id] == TT_CONTROL || t->type[id] == TT_UNKNOWN)
			continue;
		piece.n = 0;
		tok_piece(t, id, 0, &piece);
		if (piece.n == 0)
			continue;
		m->text[id] = memcpy(xmalloc(piece.n), piece.s, piece.n);
		m->len[id] = piece.n;
		if (piece.n > m->max_len)
			m->max_len = piece.n;
		m->order[m->n++] = id;
	}
	buf_free(&piece);
	/* by class (each class's count, then where each begins), then in byte order within each */
	int *by = xmalloc(((size_t)m->n + 1) * sizeof *by), at[GMASK_CLASSES];
	for (int i = 0; i < m->n; i++)
		m->from[class_of(m->len[m->order[i]]) + 1]++;
	for (c = 0; c < GMASK_CLASSES; c++)
		m->from[c + 1] += m->from[c], at[c] = m->from[c];
	for (int i = 0; i < m->n; i++)
		by[at[class_of(m->len[m->order[i]])]++] = m->order[i];
	memcpy(m->order, by, (size_t)m->n * sizeof *by);
	free(by);
	sorting = m;
	for (c = 0; c < GMASK_CLASSES; c++)
		qsort(m->order + m->from[c], (size_t)(m->from[c + 1] - m->from[c]), sizeof *m->order,
		    text_cmp_static);
	sorting = NULL;
	/* the texts in that order, for the walks to read in turn */
	size_t all = 0;
	m->at = xmalloc(((size_t)m->n + 1) * sizeof *m->at);
	for (int i = 0; i < m->n; i++)
		m->at[i] = all, all += m->len[m->order[i]];
	m->at[m->n] = all;
	m->bytes = xmalloc(all + 1);
	for (int i = 0; i < m->n; i++) {	/* each token's text is its place there from now on */
		memcpy(m->bytes + m->at[i], m->text[m->order[i]], m->len[m->order[i]]);
		free(m->text[m->order[i]]);
		m->text[m->order[i]] = m->bytes + m->at[i];
	}
	for (int i = 0; i < m->n; i++) {
		size_t k = 0;
		if (i > 0 && class_of(m->len[m->order[i - 1]]) == class_of(m->len[m->order[i]])) {
			int a = m->order[i - 1], b = m->order[i];
			while (k < m->len[a] && k < m->len[b] && m->text[a][k] == m->text[b][k])
				k++;
		}
		m->lcp[i] = (int)k;
	}
	m->lv = xcalloc(m->max_len + 1, sizeof *m->lv);
	for (c = 0; c < GMASK_CLASSES; c++) {
		size_t bytes = 0;
		for (int i = m->from[c]; i < m->from[c + 1]; i++)
			bytes += m->len[m->order[i]];
		if (bytes > m->most_bytes)
			m->most_bytes = bytes;
	}
	/* the walks' states and steps: a class's walk at least, and a few small ones */
	m->steps.bound = 2 * m->most_bytes > 1u << 16 ? 2 * m->most_bytes : 1u << 16;
	m->steps.work_id = -1;
	m->left = xcalloc(m->max_len + 1, 1);
	m->bits = xmalloc(((size_t)m->n + 7) / 8 + 1);
	m->slot = xmalloc(2 * GMASK_CACHE * sizeof *m->slot);
	memset(m->slot, 0xff, 2 * GMASK_CACHE * sizeof *m->slot);
	m->allowed = xmalloc((size_t)t->n_vocab);
}

void
gmask_free(struct gmask *m)
{
	steps_free(&m->steps);
	for (int i = 0; i < m->n_cache; i++)
		free(m->cache[i].key), free(m->cache[i].mask), free(m->cache[i].unsure);
	gstate_free(&m->tmp);
	gstate_free(&m->top);
	free(m->scratch.v), free(m->unsure.v), free(m->left), free(m->bits);
	free(m->cache), free(m->slot), free(m->text), free(m->len), free(m->order), free(m->lcp), free(m->lv);
	free(m->bytes), free(m->at);
	free(m->key.v);
	free(m->allowed);
	memset(m, 0, sizeof *m);
}

/* The kinds of mask kept: a whole state's; a state's tops'; the rest of a state after its tops'. */
enum { K_WHOLE, K_TOP, K_REST };

/*
 * The state as a key for the tokens of at most most bytes (most < 0: of
 * any length), for a kind of mask: its stacks in order, each with its
 * length, then the character begun, most and the kind.  A position in a
 * rule of a repetition's tail that can still take more than most X is
 * keyed as the same place in the tail's rule that can take most + 1:
 * such a token cannot tell them apart, since each X takes a character at
 * least.
 */
static uint64_t
state_key(const struct gstate *st, int most, int kind, struct gstack *key)
{
	const struct grammar *g = st->g;
	uint64_t h = 1469598103934665603u;

	key->n = 0;
	for (int i = 0; i < st->n; i++) {
		stack_push(key, st->s[i].n);
		for (int j = 0; j < st->s[i].n; j++) {
			int p = st->s[i].v[j], r = g->rule_of[p], c = g->chain[r];
			if (most >= 0 && c > most + 1 && g->chain[r - (c - most - 1)] == most + 1)
				p = g->start[r - (c - most - 1)] + (p - g->start[r]);
			stack_push(key, p);
		}
	}
	stack_push(key, (int)st->partial);
	stack_push(key, st->need);
	stack_push(key, st->len);
	stack_push(key, st->spm << 1 | st->strip);
	stack_push(key, most);
	stack_push(key, kind);
	for (int i = 0; i < key->n; i++)
		h = (h ^ (uint32_t)key->v[i]) * 1099511628211u;
	return h;
}

/* How many frames at the bottom every stack of st shares, leaving each one at least: 0 if none. */
static int
context(const struct gstate *st)
{
	int cut = INT_MAX;

	for (int i = 0; i < st->n; i++) {
		const struct gstack *a = &st->s[0], *b = &st->s[i];
		int k = 0;
		while (k < a->n && k < b->n && a->v[k] == b->v[k])
			k++;
		if (k > b->n - 1)
			k = b->n - 1;
		if (k < cut)
			cut = k;
	}
	return st->n && cut > 0 ? cut : 0;
}

/*
 * The tokens at order[from + pos[j]] (pos NULL: order[from + j]), j < n,
 * that st allows, a bit each at bits[pos[j]] (j), by their byte order: a
 * token shares with the one before it a prefix whose states are known,
 * so each byte of the prefix tree is taken once, and a prefix no
 * sentence begins with rules out every token that begins with it.
 *
 * With unsure, st is a state's tops, whose emptied stacks mean "back in
 * the context": a token that dies after one did (the context could have
 * taken what killed it), or that lives to its end on an emptied stack
 * alone (the context goes on from there), goes into unsure, neither
 * allowed nor refused.  One that lives to its end on a stack of the tops
 * is allowed whatever the context.  The steps go through m->steps; the
 * highest stack they met is returned.
 */
static int
walk(struct gmask *m, const struct gstate *st, int from, const int *pos, int n, unsigned char *bits,
    struct gstack *unsure)
{
	size_t dead = SIZE_MAX;		/* the last text's prefix this long begins no sentence */
	int dead_unsure = 0;		/* and it left the top first */
	int prev = -1, peak = 0;

	/* room for every step the walk may add */
	if ((size_t)m->steps.n + m->most_bytes > m->steps.bound ||
	    m->steps.n_steps + m->most_bytes > m->steps.bound)
		steps_reset(&m->steps);
	m->lv[0] = intern(&m->steps, st);
	m->left[0] = 0;
	m->walk_over = 0;
	for (int j = 0; j < n; j++) {
		int p = pos ? pos[j] : j;
		size_t c = 0, k, len = m->at[from + p + 1] - m->at[from + p];
		const char *t = m->bytes + m->at[from + p];
		if (!pos)
			c = j ? (size_t)m->lcp[from + p] : 0;
		else if (prev >= 0) {
			size_t plen = m->at[from + prev + 1] - m->at[from + prev];
			const char *pt = m->bytes + m->at[from + prev];
			while (c < plen && c < len && pt[c] == t[c])
				c++;
		}
		prev = p;
		if (dead <= c) {	/* it begins with the dead prefix */
			if (dead_unsure)
				stack_push(unsure, p);
			continue;
		}
		/* lv[0..c] hold the states after the prefix it shares with the last (alive up to c) */
		dead = SIZE_MAX;
		for (k = c; k < len; k++) {
			if ((m->lv[k + 1] = step(m, st->g, m->lv[k], (unsigned char)t[k], &peak)) < 0) {
				m->walk_over |= m->lv[k + 1] == -2;	/* (that token is refused, and the mask fails) */
				dead = k + 1;
				dead_unsure = unsure && m->left[k];
				break;
			}
			m->left[k + 1] = m->left[k] || m->steps.left[m->lv[k + 1]];
		}
		if (dead == SIZE_MAX && !(unsure && m->steps.left[m->lv[len]] == 3))
			bits[p / 8] |= (unsigned char)(1u << (p % 8));
		else if (dead == SIZE_MAX || dead_unsure)	/* it ends in the context alone, or died after */
			stack_push(unsure, p);
	}
	return peak;
}

/* The kept mask of the key in m->key (hash h), or NULL. */
static struct gmask_entry *
find(struct gmask *m, uint64_t h)
{
	const size_t mask = 2 * GMASK_CACHE - 1;

	for (size_t at = (size_t)(h & mask); m->slot[at] >= 0; at = (at + 1) & mask) {
		struct gmask_entry *e = &m->cache[m->slot[at]];
		if (e->hash == h && e->n == m->key.n &&
		    memcmp(e->key, m->key.v, (size_t)m->key.n * sizeof *m->key.v) == 0)
			return e;
	}
	return NULL;
}

/*
 * A new entry for the key in m->key, its mask copied from m->bits (bytes
 * long), over if its walks met a step too ambiguous; full: start again.
 */
static struct gmask_entry *
keep(struct gmask *m, uint64_t h, size_t bytes, int over)
{
	const size_t mask = 2 * GMASK_CACHE - 1;
	size_t at;
	struct gmask_entry *e;

	if (m->n_cache == GMASK_CACHE) {
		for (int i = 0; i < m->n_cache; i++)
			free(m->cache[i].key), free(m->cache[i].mask), free(m->cache[i].unsure);
		m->n_cache = 0;
		memset(m->slot, 0xff, 2 * GMASK_CACHE * sizeof *m->slot);
	}
	if (!m->cache)
		m->cache = xcalloc(GMASK_CACHE, sizeof *m->cache);
	for (at = (size_t)(h & mask); m->slot[at] >= 0; at = (at + 1) & mask)
		;
	m->slot[at] = m->n_cache;
	e = &m->cache[m->n_cache++];
	memset(e, 0, sizeof *e);
	e->hash = h;
	e->n = m->key.n;
	e->key = memcpy(xmalloc((size_t)m->key.n * sizeof *e->key), m->key.v,
	    (size_t)m->key.n * sizeof *e->key);
	e->mask = memcpy(xmalloc(bytes), m->bits, bytes);
	e->over = over;
	return e;
}

/* st's tops into m->top (each stack less the frames all share), and how many frames were cut: 0 if none. */
static int
tops(struct gmask *m, const struct gstate *st)
{
	int cut = context(st);

	m->top.g = st->g;
	m->top.n = 0;
	for (int i = 0; cut > 0 && i < st->n; i++)
		put_stack(&m->top, st->s[i].v + cut, st->s[i].n - cut);
	m->top.partial = st->partial, m->top.need = st->need, m->top.len = st->len;
	m->top.spm = st->spm, m->top.strip = st->strip;
	return cut;
}

/*
 * The mask of class c's tokens for st (walk's bits), whose tops are in
 * m->top with cut frames cut: kept, or walked and kept.  m->over is
 * raised if a mask it is made of met a step too ambiguous.
 */
static const unsigned char *
lookup(struct gmask *m, const struct gstate *st, int cut, int c)
{
	int from = m->from[c], n = m->from[c + 1] - from;
	size_t bytes = ((size_t)n + 7) / 8;
	struct gmask_entry *e;
	uint64_t h;

	if (cut > 0) {
		h = state_key(&m->top, class_most[c], K_TOP, &m->key);
		if (!(e = find(m, h))) {
			memset(m->bits, 0, bytes);
			m->unsure.n = 0;
			int peak = walk(m, &m->top, from, NULL, n, m->bits, &m->unsure);
			e = keep(m, h, bytes, m->walk_over);
			e->peak = peak;
			/* a top that many tokens leave: not worth a list */
			e->n_unsure = m->unsure.n <= n / 16 ? m->unsure.n : -1;
			if (e->n_unsure > 0)
				e->unsure = memcpy(xmalloc((size_t)m->unsure.n * sizeof *e->unsure), m->unsure.v,
				    (size_t)m->unsure.n * sizeof *e->unsure);
		}
		/* (a stack the context makes too high is dropped: the tops cannot say) */
		if (e->n_unsure == 0 && e->peak + cut <= MAX_DEPTH) {
			m->over |= e->over;
			return e->mask;
		}
		if (e->n_unsure > 0 && e->peak + cut <= MAX_DEPTH) {	/* the rest, in context */
			struct gmask_entry *top = e;
			h = state_key(st, class_most[c], K_REST, &m->key);
			if (!(e = find(m, h))) {
				memcpy(m->bits, top->mask, bytes);
				walk(m, st, from, top->unsure, top->n_unsure, m->bits, NULL);
				e = keep(m, h, bytes, top->over | m->walk_over);
			}
			m->over |= e->over;
			return e->mask;
		}
	}
	h = state_key(st, class_most[c], K_WHOLE, &m->key);
	if (!(e = find(m, h))) {
		memset(m->bits, 0, bytes);
		walk(m, st, from, NULL, n, m->bits, NULL);
		e = keep(m, h, bytes, m->walk_over);
	}
	m->over |= e->over;
	return e->mask;
}

const unsigned char *
gmask_compute(struct gmask *m, const struct gstate *st, const int *end, int n_end)
{
	const struct tok *t = m->t;
	unsigned char *allowed = m->allowed;
	int complete = gstate_complete(st), i, cut = tops(m, st);

	m->over = 0;
	memset(allowed, 0, (size_t)t->n_vocab);
	/* class by class (a lookup may empty the cache: each mask is read at once) */
	for (int c = 0; c < GMASK_CLASSES; c++) {
		if (m->from[c] == m->from[c + 1])
			continue;
		const unsigned char *bits = lookup(m, st, cut, c);
		for (i = m->from[c]; i < m->from[c + 1]; i++)
			allowed[m->order[i]] = (bits[(i - m->from[c]) / 8] >> ((i - m->from[c]) % 8)) & 1;
	}
	for (i = 0; i < n_end; i++)
		if (end[i] >= 0 && end[i] < t->n_vocab)
			allowed[end[i]] = (unsigned char)complete;
	return allowed;
}

int
gmask_apply(struct gmask *m, const struct gstate *st, const int *end, int n_end, float *logits)
{
	const unsigned char *allowed = gmask_compute(m, st, end, n_end);
	int n = 0;

	if (m->over) {
		llm_seterr(AMBIGUOUS, MAX_SEEN);
		return -1;
	}
	for (int id = 0; id < m->t->n_vocab; id++) {
		if (!allowed[id])
			logits[id] = -INFINITY;
		n += allowed[id];
	}
	return n;
}

int
gmask_take(struct gmask *m, struct gstate *st, int id)
{
	int alive;

	if (id < 0 || id >= m->t->n_vocab || !m->text[id])
		return 0;
	if ((alive = accept_bytes(st, m->text[id], m->len[id], &m->tmp, &m->scratch)) < 0)
		llm_seterr(AMBIGUOUS, MAX_SEEN);
	return alive;
}
