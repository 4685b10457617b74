/*
 * pretok.c: a backtracking regex matcher, enough for the pre-tokenizer
 * patterns: literals, classes with ranges and \p{L} \p{N} \p{P} \s,
 * groups (?:...), negative lookahead (?!...), alternation, the
 * quantifiers ? * + {n} {n,m} (greedy), and $.  Alternatives are tried
 * in order, as in the Oniguruma and fancy-regex engines that Hugging
 * Face tokenizers use, so the first match is the same.
 */
#include <stdlib.h>
#include <string.h>

#include "pretok.h"
#include "unicode.h"
#include "util.h"

/* ---- character classes ---- */

enum { CL_L = 1 << UC_L, CL_M = 1 << UC_M, CL_N = 1 << UC_N, CL_P = 1 << UC_P,
	CL_S = 1 << UC_S, CL_Z = 1 << UC_Z, CL_C = 1 << UC_C, CL_SPACE = 1 << 8 };

struct cclass {
	int negate;
	unsigned cats;		/* CL_* bits */
	unsigned notcats;	/* \S: members are those NOT in these */
	uint32_t (*ranges)[2];
	int nranges;
};

static int
class_has(const struct cclass *c, uint32_t cp)
{
	int in = 0, i;

	if (c->cats) {
		unsigned bits = 1u << unicode_category(cp);
		if (cp < UNICODE_RAW && unicode_is_space(cp))
			bits |= CL_SPACE;
		in = (bits & c->cats) != 0;
	}
	if (!in && c->notcats)
		in = !(unicode_is_space(cp));	/* only \S uses notcats */
	for (i = 0; !in && i < c->nranges; i++)
		in = cp >= c->ranges[i][0] && cp <= c->ranges[i][1];
	return in != c->negate;
}

/* ---- compiled program ---- */

enum { I_CHAR, I_CLASS, I_SPLIT, I_JMP, I_NEGLOOK, I_EOL, I_MATCH };

struct inst {
	int op;
	uint32_t c;		/* I_CHAR */
	int x, y;		/* I_SPLIT: prefer x; I_JMP: x; I_NEGLOOK: body at pc+1, continue at x */
	int cls;		/* I_CLASS */
};

/* AST, built by the parser and then emitted. */
enum { N_CHAR, N_CLASS, N_CAT, N_ALT, N_REPEAT, N_NEGLOOK, N_EOL, N_EMPTY };

struct node {
	int type;
	uint32_t c;
	int cls;
	int min, max;		/* N_REPEAT; max -1 = unbounded */
	struct node *a, *b;	/* children */
};

struct thread {
	int pc;
	size_t sp;
};

struct regex {
	struct inst *prog;
	int n, cap;
	struct cclass *classes;
	int nclasses;
	struct thread *stack;
	size_t stack_cap;
	/* parser state */
	const unsigned char *p, *end;
	const char *err;
};

static struct node *
mknode(int type, struct node *a, struct node *b)
{
	struct node *n = xcalloc(1, sizeof *n);

	n->type = type;
	n->a = a;
	n->b = b;
	return n;
}

static void
free_node(struct node *n)
{
	if (!n)
		return;
	free_node(n->a);
	free_node(n->b);
	free(n);
}

static uint32_t
next_cp(struct regex *re)
{
	uint32_t cp;

	re->p += utf8_decode(re->p, (size_t)(re->end - re->p), &cp);
	return cp;
}

static int
new_class(struct regex *re)
{
	re->classes = realloc(re->classes, (size_t)(re->nclasses + 1) * sizeof *re->classes);
	if (!re->classes)
		die(1, "out of memory");
	memset(&re->classes[re->nclasses], 0, sizeof *re->classes);
	return re->nclasses++;
}

static void
class_add_range(struct cclass *c, uint32_t lo, uint32_t hi)
{
	c->ranges = realloc(c->ranges, (size_t)(c->nranges + 1) * sizeof *c->ranges);
	if (!c->ranges)
		die(1, "out of memory");
	c->ranges[c->nranges][0] = lo;
	c->ranges[c->nranges][1] = hi;
	c->nranges++;
}

/*
 * After a backslash: a category or class escape adds to c and returns 1;
 * a literal escape stores it in *lit and returns 0; -1 on error.
 */
static int
parse_escape(struct regex *re, struct cclass *c, uint32_t *lit)
{
	unsigned char e;

	if (re->p >= re->end) {
		re->err = "trailing backslash";
		return -1;
	}
	e = *re->p++;
	switch (e) {
	case 's': c->cats |= CL_SPACE; return 1;
	case 'S': c->notcats |= CL_SPACE; return 1;
	case 'p':
		if (re->end - re->p < 3 || re->p[0] != '{' || re->p[2] != '}') {
			re->err = "bad \\p{...}";
			return -1;
		}
		switch (re->p[1]) {
		case 'L': c->cats |= CL_L; break;
		case 'M': c->cats |= CL_M; break;
		case 'N': c->cats |= CL_N; break;
		case 'P': c->cats |= CL_P; break;
		case 'S': c->cats |= CL_S; break;
		case 'Z': c->cats |= CL_Z; break;
		case 'C': c->cats |= CL_C; break;
		default: re->err = "unknown category"; return -1;
		}
		re->p += 3;
		return 1;
	case 'r': *lit = '\r'; return 0;
	case 'n': *lit = '\n'; return 0;
	case 't': *lit = '\t'; return 0;
	}
	*lit = e;
	return 0;
}

static struct node *parse_alt(struct regex *re);

static struct node *
parse_class(struct regex *re)
{
	int ci = new_class(re);
	uint32_t lo, hi;
	int r;

	if (re->p < re->end && *re->p == '^') {
		re->classes[ci].negate = 1;
		re->p++;
	}
	while (re->p < re->end && *re->p != ']') {
		if (*re->p == '\\') {
			re->p++;
			if ((r = parse_escape(re, &re->classes[ci], &lo)) < 0)
				return NULL;
			if (r == 1)
				continue;
		} else {
			lo = next_cp(re);
		}
		hi = lo;
		if (re->end - re->p >= 2 && re->p[0] == '-' && re->p[1] != ']') {
			re->p++;
			if (*re->p == '\\') {
				re->p++;
				if (parse_escape(re, &re->classes[ci], &hi) != 0) {
					re->err = "bad range end";
					return NULL;
				}
			} else {
				hi = next_cp(re);
			}
		}
		class_add_range(&re->classes[ci], lo, hi);
	}
	if (re->p >= re->end) {
		re->err = "unterminated class";
		return NULL;
	}
	re->p++;
	struct node *n = mknode(N_CLASS, NULL, NULL);
	n->cls = ci;
	return n;
}

static struct node *
parse_atom(struct regex *re)
{
	struct node *n;
	uint32_t lit;
	int ci, r;

	switch (*re->p) {
	case '(':
		re->p++;
		if (re->end - re->p >= 2 && re->p[0] == '?' && re->p[1] == ':') {
			re->p += 2;
			n = parse_alt(re);
		} else if (re->end - re->p >= 2 && re->p[0] == '?' && re->p[1] == '!') {
			re->p += 2;
			n = mknode(N_NEGLOOK, parse_alt(re), NULL);
		} else {
			n = parse_alt(re);	/* a plain group: no captures needed */
		}
		if (re->p >= re->end || *re->p != ')') {
			re->err = "missing )";
			free_node(n);
			return NULL;
		}
		re->p++;
		return n;
	case '[':
		re->p++;
		return parse_class(re);
	case '$':
		re->p++;
		return mknode(N_EOL, NULL, NULL);
	case '\\':
		re->p++;
		ci = new_class(re);
		if ((r = parse_escape(re, &re->classes[ci], &lit)) < 0)
			return NULL;
		if (r == 1) {
			n = mknode(N_CLASS, NULL, NULL);
			n->cls = ci;
			return n;
		}
		re->nclasses--;
		n = mknode(N_CHAR, NULL, NULL);
		n->c = lit;
		return n;
	}
	n = mknode(N_CHAR, NULL, NULL);
	n->c = next_cp(re);
	return n;
}

static int
parse_int(struct regex *re)
{
	int v = 0;

	while (re->p < re->end && *re->p >= '0' && *re->p <= '9')
		v = v * 10 + (*re->p++ - '0');
	return v;
}

static struct node *
parse_repeat(struct regex *re)
{
	struct node *n = parse_atom(re), *r;

	while (n && re->p < re->end) {
		int min, max;

		switch (*re->p) {
		case '?': min = 0, max = 1; break;
		case '*': min = 0, max = -1; break;
		case '+': min = 1, max = -1; break;
		case '{':
			re->p++;
			min = max = parse_int(re);
			if (re->p < re->end && *re->p == ',') {
				re->p++;
				max = re->p < re->end && *re->p == '}' ? -1 : parse_int(re);
			}
			if (re->p >= re->end || *re->p != '}' || (max >= 0 && max < min)) {
				re->err = "bad {n,m}";
				free_node(n);
				return NULL;
			}
			break;
		default:
			return n;
		}
		re->p++;
		r = mknode(N_REPEAT, n, NULL);
		r->min = min;
		r->max = max;
		n = r;
	}
	return n;
}

static struct node *
parse_cat(struct regex *re)
{
	struct node *n = mknode(N_EMPTY, NULL, NULL), *a;

	while (re->p < re->end && *re->p != '|' && *re->p != ')') {
		if (!(a = parse_repeat(re))) {
			free_node(n);
			return NULL;
		}
		n = mknode(N_CAT, n, a);
	}
	return n;
}

static struct node *
parse_alt(struct regex *re)
{
	struct node *n = parse_cat(re);

	while (n && re->p < re->end && *re->p == '|') {
		re->p++;
		struct node *b = parse_cat(re);
		if (!b) {
			free_node(n);
			return NULL;
		}
		n = mknode(N_ALT, n, b);
	}
	return n;
}

static int
emit(struct regex *re, int op)
{
	if (re->n == re->cap) {
		re->cap = re->cap ? 2 * re->cap : 64;
		if (!(re->prog = realloc(re->prog, (size_t)re->cap * sizeof *re->prog)))
			die(1, "out of memory");
	}
	memset(&re->prog[re->n], 0, sizeof re->prog[0]);
	re->prog[re->n].op = op;
	return re->n++;
}

static void
gen(struct regex *re, const struct node *n)
{
	int i, s, j;

	switch (n->type) {
	case N_EMPTY:
		break;
	case N_CHAR:
		i = emit(re, I_CHAR);
		re->prog[i].c = n->c;
		break;
	case N_CLASS:
		i = emit(re, I_CLASS);
		re->prog[i].cls = n->cls;
		break;
	case N_EOL:
		emit(re, I_EOL);
		break;
	case N_CAT:
		gen(re, n->a);
		gen(re, n->b);
		break;
	case N_ALT:
		s = emit(re, I_SPLIT);
		re->prog[s].x = re->n;
		gen(re, n->a);
		j = emit(re, I_JMP);
		re->prog[s].y = re->n;
		gen(re, n->b);
		re->prog[j].x = re->n;
		break;
	case N_NEGLOOK:
		s = emit(re, I_NEGLOOK);
		gen(re, n->a);
		emit(re, I_MATCH);
		re->prog[s].x = re->n;
		break;
	case N_REPEAT:
		for (i = 0; i < n->min; i++)
			gen(re, n->a);
		if (n->max < 0) {
			/* greedy star: L: split body, out; body; jmp L */
			s = emit(re, I_SPLIT);
			re->prog[s].x = re->n;
			gen(re, n->a);
			j = emit(re, I_JMP);
			re->prog[j].x = s;
			re->prog[s].y = re->n;
		} else {
			int splits[64], k = 0;
			for (i = n->min; i < n->max && k < 64; i++) {
				splits[k] = emit(re, I_SPLIT);
				re->prog[splits[k]].x = splits[k] + 1;
				k++;
				gen(re, n->a);
			}
			for (i = 0; i < k; i++)
				re->prog[splits[i]].y = re->n;
		}
		break;
	}
}

struct regex *
regex_compile(const char *pattern)
{
	struct regex *re = xcalloc(1, sizeof *re);
	struct node *ast;

	re->p = (const unsigned char *)pattern;
	re->end = re->p + strlen(pattern);
	ast = parse_alt(re);
	if (ast && re->p < re->end)
		re->err = "unbalanced )";
	if (!ast || re->err) {
		llm_seterr("regex /%s/: %s", pattern, re->err ? re->err : "syntax error");
		free_node(ast);
		regex_free(re);
		return NULL;
	}
	gen(re, ast);
	emit(re, I_MATCH);
	free_node(ast);
	return re;
}

void
regex_free(struct regex *re)
{
	int i;

	if (!re)
		return;
	for (i = 0; i < re->nclasses; i++)
		free(re->classes[i].ranges);
	free(re->classes);
	free(re->prog);
	free(re->stack);
	free(re);
}

/*
 * Run the program from pc at sp; the end of the first match in priority
 * order, or -1.  Backtrack points live on re->stack above base, so a
 * lookahead can run nested above its caller's entries.
 */
static long
run(struct regex *re, int pc, const uint32_t *cps, size_t n, size_t sp, size_t base)
{
	const struct inst *in;
	size_t top = base;

#define PUSH(P, S) do { \
	if (top == re->stack_cap) { \
		re->stack_cap = re->stack_cap ? 2 * re->stack_cap : 256; \
		if (!(re->stack = realloc(re->stack, re->stack_cap * sizeof *re->stack))) \
			die(1, "out of memory"); \
	} \
	re->stack[top].pc = (P); \
	re->stack[top].sp = (S); \
	top++; \
} while (0)
	PUSH(pc, sp);
	while (top > base) {
		top--;
		pc = re->stack[top].pc;
		sp = re->stack[top].sp;
		for (;;) {
			in = &re->prog[pc];
			if (in->op == I_CHAR && sp < n && cps[sp] == in->c) {
				pc++, sp++;
			} else if (in->op == I_CLASS && sp < n &&
			    class_has(&re->classes[in->cls], cps[sp])) {
				pc++, sp++;
			} else if (in->op == I_SPLIT) {
				PUSH(in->y, sp);
				pc = in->x;
			} else if (in->op == I_JMP) {
				pc = in->x;
			} else if (in->op == I_EOL && sp == n) {
				pc++;
			} else if (in->op == I_NEGLOOK && run(re, pc + 1, cps, n, sp, top) < 0) {
				pc = in->x;
			} else if (in->op == I_MATCH) {
				return (long)sp;
			} else {
				break;	/* this thread failed: backtrack */
			}
		}
	}
#undef PUSH
	return -1;
}

long
regex_match_at(struct regex *re, const uint32_t *cps, size_t n, size_t i)
{
	return run(re, 0, cps, n, i, 0);
}

/* ---- the pre-tokenizers ---- */

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* llama.cpp's spelling of (?i:'s|'t|...) */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

static const struct pretok_def {
	const char *names;	/* space-separated tokenizer.ggml.pre values */
	int ignore_merges;
	const char *regex[6];
} defs[] = {
	{ " default gpt-2 gpt2 mpt olmo jais gpt-neox ", 0, { GPT2_RE } },
	{ " starcoder refact smollm command-r codeshell exaone ", 0,
	    { "\\p{N}", GPT2_RE } },
	{ " llama3 llama-bpe dbrx smaug-bpe ", 1,
	    { CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
	      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ " qwen2 stablelm2 ", 0,
	    { CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
	      "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ " falcon ", 0,
	    { "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]" } },
	{ " deepseek-llm ", 0,
	    { "[\\r\\n]",
	      "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xcf\x8e\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xce\xb9\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xce\x90\xe1\xbf\x96-\xce\x8a\xe1\xbf\xa0-\xe1\xbf\xac\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xce\xa9\xe2\x84\xa8K-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+",
	      "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+",
	      "\\s+$",
	      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+",
	      "\\p{N}+" } },
	{ " deepseek-coder ", 0,
	    { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
	      "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+", "\\p{N}" } },
};

struct pretok {
	struct regex *re[6];
	int nre;
	struct span *tmp;
	size_t tmp_cap;
};

static const struct pretok_def *
find_def(const char *name)
{
	char key[80];
	size_t i;

	if (strlen(name) > sizeof key - 3)
		return NULL;
	snprintf(key, sizeof key, " %s ", name);
	for (i = 0; i < sizeof defs / sizeof defs[0]; i++)
		if (strstr(defs[i].names, key))
			return &defs[i];
	return NULL;
}

int
pretok_known(const char *name)
{
	return find_def(name) != NULL;
}

struct pretok *
pretok_new(const char *name, int *ignore_merges)
{
	const struct pretok_def *d = find_def(name);
	struct pretok *p;
	int i;

	if (!d) {
		llm_seterr("unknown pre-tokenizer '%s'", name);
		return NULL;
	}
	p = xcalloc(1, sizeof *p);
	for (i = 0; i < 6 && d->regex[i]; i++) {
		if (!(p->re[i] = regex_compile(d->regex[i]))) {
			pretok_free(p);
			return NULL;
		}
		p->nre++;
	}
	*ignore_merges = d->ignore_merges;
	return p;
}

void
pretok_free(struct pretok *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < p->nre; i++)
		regex_free(p->re[i]);
	free(p->tmp);
	free(p);
}

static void
push_span(struct span **s, size_t *n, size_t *cap, size_t a, size_t b)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		if (!(*s = realloc(*s, *cap * sizeof **s)))
			die(1, "out of memory");
	}
	(*s)[*n].start = a;
	(*s)[*n].end = b;
	(*n)++;
}

/*
 * One regex over each piece: the matches and the text between them
 * all become pieces, so nothing is dropped (as in llama.cpp).  Each
 * piece is matched on its own: lookaheads and $ see the piece's end.
 */
static size_t
split_one(struct regex *re, const uint32_t *cps, const struct span *in, size_t nin,
    struct span **out, size_t *cap)
{
	size_t i, n = 0, pos, s;
	long e = -1;

	for (i = 0; i < nin; i++) {
		const uint32_t *base = cps + in[i].start;
		size_t len = in[i].end - in[i].start;

		for (pos = 0; pos < len;) {
			for (s = pos; s < len; s++)
				if ((e = regex_match_at(re, base, len, s)) > (long)s)
					break;
			if (s == len) {
				push_span(out, &n, cap, in[i].start + pos, in[i].end);
				break;
			}
			if (s > pos)
				push_span(out, &n, cap, in[i].start + pos, in[i].start + s);
			push_span(out, &n, cap, in[i].start + s, in[i].start + (size_t)e);
			pos = (size_t)e;
		}
	}
	return n;
}

size_t
pretok_split(struct pretok *p, const uint32_t *cps, size_t n, struct span **spans, size_t *cap)
{
	size_t nspans = 0, ntmp;
	struct span whole = { 0, n };
	int i;

	if (n == 0)
		return 0;
	nspans = split_one(p->re[0], cps, &whole, 1, spans, cap);
	for (i = 1; i < p->nre; i++) {
		/* Swap: the last output is the next input. */
		struct span *t = p->tmp;
		size_t tc = p->tmp_cap;
		p->tmp = *spans;
		p->tmp_cap = *cap;
		*spans = t;
		*cap = tc;
		ntmp = nspans;
		nspans = split_one(p->re[i], cps, p->tmp, ntmp, spans, cap);
	}
	return nspans;
}
