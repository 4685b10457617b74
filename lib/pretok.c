/*
 * pretok.c: a backtracking regex matcher, enough for the pre-tokenizer
 * patterns: literals, classes with ranges and \p{L} \p{N} \p{P} \s (and the
 * letters' \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo}),
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
	CL_S = 1 << UC_S, CL_Z = 1 << UC_Z, CL_C = 1 << UC_C, CL_SPACE = 1 << 16 };

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
		int sub = unicode_subcategory(cp);
		unsigned bits = 1u << sub | (sub >= UC_Lu ? CL_L : 0);
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

/* A compiled pattern.  It is never written after regex_compile, so many
 * threads may match with it at once; each match brings its own state. */
struct regex {
	struct inst *prog;
	int n, cap;
	struct cclass *classes;
	int nclasses;
	/* parser state */
	const unsigned char *p, *end;
	const char *err;
};

/*
 * The state of matching one piece: the backtrack stack, and a bitmap of
 * the (pc, position) states already explored.  A backtracker without it
 * takes time quadratic or worse: \s+$ tried at each of k spaces that
 * are not at the end runs to the end of the run k times.  A state that
 * was explored and did not lead to a match cannot lead to one later,
 * from any start: the outcome of (pc, sp) depends on nothing else.  So
 * the bitmap is kept across the failed start positions of a search and
 * cleared, through the list of the bits set, only after a match, whose
 * own path must not be taken for a failure.  Each state is then tried
 * at most once between two matches (as in RE2's BitState).
 */
struct matcher {
	struct thread *stack;
	size_t stack_cap;
	uint64_t *seen;		/* bit sp * prog_len + pc; NULL until needed */
	size_t *set;		/* the words of seen that are not zero */
	size_t nset, set_cap;
	size_t len;		/* the piece's length, which sizes seen */
	int prog_len;
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
	re->classes = xrealloc(re->classes, (size_t)(re->nclasses + 1) * sizeof *re->classes);
	memset(&re->classes[re->nclasses], 0, sizeof *re->classes);
	return re->nclasses++;
}

static void
class_add_range(struct cclass *c, uint32_t lo, uint32_t hi)
{
	c->ranges = xrealloc(c->ranges, (size_t)(c->nranges + 1) * sizeof *c->ranges);
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
		if (re->end - re->p >= 4 && re->p[0] == '{' && re->p[1] == 'L' && re->p[3] == '}') {
			switch (re->p[2]) {	/* a letter's own category */
			case 'u': c->cats |= 1u << UC_Lu; break;
			case 'l': c->cats |= 1u << UC_Ll; break;
			case 't': c->cats |= 1u << UC_Lt; break;
			case 'm': c->cats |= 1u << UC_Lm; break;
			case 'o': c->cats |= 1u << UC_Lo; break;
			default: re->err = "unknown category"; return -1;
			}
			re->p += 4;
			return 1;
		}
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
		re->prog = xrealloc(re->prog, (size_t)re->cap * sizeof *re->prog);
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
	free(re);
}

static void
matcher_free(struct matcher *ms)
{
	free(ms->stack);
	free(ms->seen);
	free(ms->set);
	memset(ms, 0, sizeof *ms);
}

/* Forget the explored states: only the words that were set are cleared. */
static void
matcher_forget(struct matcher *ms)
{
	size_t i;

	for (i = 0; i < ms->nset; i++)
		ms->seen[ms->set[i]] = 0;
	ms->nset = 0;
}

/* Start a piece of len code points for a program of prog_len instructions. */
static void
matcher_piece(struct matcher *ms, size_t len, int prog_len)
{
	size_t words = ((len + 1) * (size_t)prog_len + 63) / 64;

	if (ms->seen && words <= (((ms->len + 1) * (size_t)ms->prog_len + 63) / 64)) {
		matcher_forget(ms);
	} else {
		free(ms->seen);
		ms->seen = xcalloc(words, sizeof *ms->seen);
		ms->nset = 0;
	}
	ms->len = len;
	ms->prog_len = prog_len;
}

/* Mark (pc, sp) explored; 1 if it already was. */
static int
matcher_seen(struct matcher *ms, int pc, size_t sp)
{
	size_t bit = sp * (size_t)ms->prog_len + (size_t)pc, w = bit / 64;
	uint64_t mask = (uint64_t)1 << (bit % 64);

	if (ms->seen[w] & mask)
		return 1;
	if (ms->seen[w] == 0) {
		if (ms->nset == ms->set_cap) {
			ms->set_cap = ms->set_cap ? 2 * ms->set_cap : 256;
			ms->set = xrealloc(ms->set, ms->set_cap * sizeof *ms->set);
		}
		ms->set[ms->nset++] = w;
	}
	ms->seen[w] |= mask;
	return 0;
}

/*
 * Run the program from pc at sp; the end of the first match in priority
 * order, or -1.  Backtrack points live on ms->stack above base, so a
 * lookahead can run nested above its caller's entries.  Only the top
 * level uses the explored-state bitmap (memo): a lookahead's body may
 * succeed, and a success is not a failure to remember.
 */
static long
run(const struct regex *re, struct matcher *ms, int pc, const uint32_t *cps, size_t n,
    size_t sp, size_t base, int memo)
{
	const struct inst *in;
	size_t top = base;

#define PUSH(P, S) do { \
	if (top == ms->stack_cap) { \
		ms->stack_cap = ms->stack_cap ? 2 * ms->stack_cap : 256; \
		ms->stack = xrealloc(ms->stack, ms->stack_cap * sizeof *ms->stack); \
	} \
	ms->stack[top].pc = (P); \
	ms->stack[top].sp = (S); \
	top++; \
} while (0)
	PUSH(pc, sp);
	while (top > base) {
		top--;
		pc = ms->stack[top].pc;
		sp = ms->stack[top].sp;
		for (;;) {
			if (memo && matcher_seen(ms, pc, sp))
				break;	/* explored before, without a match */
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
			} else if (in->op == I_NEGLOOK && run(re, ms, pc + 1, cps, n, sp, top, 0) < 0) {
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
regex_match_at(const struct regex *re, const uint32_t *cps, size_t n, size_t i)
{
	struct matcher ms = { 0 };
	long e;

	matcher_piece(&ms, n, re->n);
	e = run(re, &ms, 0, cps, n, i, 0, 1);
	matcher_free(&ms);
	return e;
}

/* ---- the pre-tokenizers ---- */

#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* llama.cpp's spelling of (?i:'s|'t|...) */
#define CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define O200K_CONTRACTIONS "(?:'[sS\u017F]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

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
	/*
	 * o200k (gpt-oss, GPT-4o), as tiktoken writes it: a word is its
	 * capitals then its small letters, or capitals alone (camelCase
	 * splits), marks in both, (?i:'s|'t|...) after it (case folding also
	 * takes U+017F, long s, for s).  llama.cpp stands ASCII's case in for
	 * Lu and Ll ([^a-z], [^A-Z]), which splits non-ASCII words otherwise.
	 */
	{ " gpt-4o ", 0,
	    { "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" O200K_CONTRACTIONS "?"
	      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" O200K_CONTRACTIONS "?"
	      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+" } },
	{ " falcon ", 0,
	    { "[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_RE, "[0-9][0-9][0-9]" } },
	{ " deepseek-llm ", 0,
	    /*
	     * The letter class is Unicode's cased letters (Lu, Ll, Lt) as the
	     * upstream pattern lists them.  Written as \u escapes: several of
	     * these code points have singleton canonical decompositions
	     * (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A), which a
	     * normalizing editor silently replaces, turning ranges around.
	     */
	    { "[\\r\\n]",
	      "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF"
	      "\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D"
	      "\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481"
	      "\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD"
	      "\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A"
	      "\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57"
	      "\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
	      "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC"
	      "\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D"
	      "\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F"
	      "\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
	      "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787"
	      "\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A"
	      "\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB"
	      "\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
	      "\U0001E900-\U0001E943]+",
	      "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+",
	      "\\s+$",
	      "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+",
	      "\\p{N}+" } },
	{ " deepseek-coder ", 0,
	    { "[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
	      "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+", "\\p{N}" } },
};

/* Read-only once made: pretok_split keeps its state on its own. */
struct pretok {
	struct regex *re[6];
	int nre;
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
	free(p);
}

static void
push_span(struct span **s, size_t *n, size_t *cap, size_t a, size_t b)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		*s = xrealloc(*s, *cap * sizeof **s);
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
split_one(const struct regex *re, struct matcher *ms, const uint32_t *cps,
    const struct span *in, size_t nin, struct span **out, size_t *cap)
{
	size_t i, n = 0, pos, s;
	long e = -1;

	for (i = 0; i < nin; i++) {
		const uint32_t *base = cps + in[i].start;
		size_t len = in[i].end - in[i].start;

		matcher_piece(ms, len, re->n);
		for (pos = 0; pos < len;) {
			/*
			 * Most searches match at their first start, where the memo
			 * buys nothing: it starts after an attempt fails (one scan
			 * unremembered keeps the time linear) and ends at a match.
			 */
			int memo = 0;
			for (s = pos; s < len; s++) {
				e = run(re, ms, 0, base, len, s, 0, memo);
				if (e >= 0 && memo)
					matcher_forget(ms);	/* see struct matcher */
				memo = e < 0;
				if (e > (long)s)
					break;
			}
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
pretok_split(const struct pretok *p, const uint32_t *cps, size_t n, struct span **spans,
    size_t *cap)
{
	struct matcher ms = { 0 };
	struct span whole = { 0, n }, *tmp = NULL;
	size_t nspans = 0, ntmp, tmp_cap = 0;
	int i;

	if (n == 0)
		return 0;
	nspans = split_one(p->re[0], &ms, cps, &whole, 1, spans, cap);
	for (i = 1; i < p->nre; i++) {
		/* Swap: the last output is the next input. */
		struct span *t = tmp;
		size_t tc = tmp_cap;
		tmp = *spans;
		tmp_cap = *cap;
		*spans = t;
		*cap = tc;
		ntmp = nspans;
		nspans = split_one(p->re[i], &ms, cps, tmp, ntmp, spans, cap);
	}
	free(tmp);
	matcher_free(&ms);
	return nspans;
}
