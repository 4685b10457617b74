/*
 * test_grammar: the matcher on strings, and the masks of the sorted walk
 * and its cache against each token tried alone.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/gguf.h"
#include "../lib/grammar.h"
#include "../lib/schema.h"
#include "../lib/tok.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/fixture.h"

static char path[300];

/* Whether s is a sentence (2), the start of one (1) or neither (0). */
static int
match(const char *gbnf, const char *s)
{
	struct grammar g;
	struct gstate st;
	int r;

	if (grammar_parse(&g, gbnf, strlen(gbnf)) < 0 || gstate_init(&st, &g) < 0) {
		fprintf(stderr, "  %s: %s\n", gbnf, llm_err());
		return -1;
	}
	r = gstate_accept(&st, s, strlen(s));
	r = r < 0 ? -2 : r ? 1 + gstate_complete(&st) : 0;	/* -2: too ambiguous */
	gstate_free(&st);
	grammar_free(&g);
	return r;
}

static void
strings_match_their_grammars(void)
{
	static const struct { const char *g, *s; int want; } cases[] = {
		{ "root ::= \"ab\" | \"ac\"", "ab", 2 },
		{ "root ::= \"ab\" | \"ac\"", "a", 1 },
		{ "root ::= \"ab\" | \"ac\"", "ad", 0 },
		{ "root ::= \"ab\" | \"ac\"", "abc", 0 },
		{ "root ::= [a-c]+", "abcab", 2 },
		{ "root ::= [a-c]+", "", 1 },
		{ "root ::= [a-c]*", "", 2 },
		{ "root ::= [^a-c]", "d", 2 },
		{ "root ::= [^a-c]", "b", 0 },
		{ "root ::= \"x\"{2,3}", "x", 1 },
		{ "root ::= \"x\"{2,3}", "xx", 2 },
		{ "root ::= \"x\"{2,3}", "xxx", 2 },
		{ "root ::= \"x\"{2,3}", "xxxx", 0 },
		{ "root ::= \"x\"{2,}", "xxxxxxx", 2 },
		{ "root ::= (\"ab\" [0-9])? \"!\"", "!", 2 },
		{ "root ::= (\"ab\" [0-9])? \"!\"", "ab7!", 2 },
		{ "root ::= (\"ab\" [0-9])? \"!\"", "ab!", 0 },
		{ "root ::= . \"\\n\"", "\xc3\xa9\n", 2 },
		{ "root ::= \"\\u00e9\"", "\xc3", 1 },		/* a character begun */
		{ "root ::= \"\\u00e9\"", "\xc3\xa8", 0 },
		{ "root ::= \"\\u00e9\"", "\xc4", 0 },		/* it cannot become é */
		{ "root ::= [\\x00-\\x7f]", "\xc2", 0 },
		{ "root ::= .", "\xf0\x80", 0 },		/* overlong */
		{ "root ::= .", "\xed\xa0\x80", 0 },		/* a surrogate */
		{ "root ::= .", "\xed\xa6", 0 },		/* that can only be one */
		{ "root ::= .", "\xed\x9f", 1 },		/* U+D7C0 to U+D7FF */
		{ "root ::= .", "\x80", 0 },
		{ "root ::= a b\na ::= \"x\" | \"\"\nb ::= \"y\"", "y", 2 },
		{ "root ::= \"[\" (v (\",\" v)*)? \"]\"\nv ::= [0-9]+ | root", "[1,[2,[]],33]", 2 },
		{ "root ::= \"[\" (v (\",\" v)*)? \"]\"\nv ::= [0-9]+ | root", "[1,[2,[]],33", 1 },
		{ "root ::= \"[\" (v (\",\" v)*)? \"]\"\nv ::= [0-9]+ | root", "[1,]", 0 },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		int r = match(cases[i].g, cases[i].s);
		CHECK(r == cases[i].want, "%s on '%s': %d, not %d", cases[i].g, cases[i].s, r,
		    cases[i].want);
	}
}

static uint64_t rng = 88172645463325252u;

static uint64_t
next(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return rng;
}

/*
 * Along random paths through each grammar, the mask (the sorted walk,
 * its cache) is what taking each token's text alone gives.
 */
static void
masks_are_each_token_tried_alone(void)
{
	static const char *const gbnfs[] = {
		("root ::= \"{\" ws \"\\\"k\\\":\" ws v (\",\" ws v)* ws \"}\"\n"
		    "v ::= [0-9]+ | \"\\\"\" [^\"\\\\]* \"\\\"\" | \"true\"\nws ::= [ \\t\\n]*"),
		"root ::= [a-z ]{1,40} \".\"",
		"root ::= (\"the\" | \"a\" | \"an\") \" \" [a-z]+ (\" \" [a-z]+)*",
		"root ::= .*",
		/* counts past the short tokens' length share their masks: walk down through them */
		"root ::= [a-z0-9 ]{0,100} \".\"",
		"root ::= (\"x\" [a-z0-9 ]{2,30} \";\"){0,25} [0-9]{0,18}",
		"root ::= \"<\" ([a-z ]{0,3} [0-9]{1,40}){0,50} \">\"",
		/* strings in contexts (a property, items): their tops' masks, and the tokens that leave them */
		("root ::= \"{\" ws \"\\\"a\\\":\" ws s ws \",\" ws \"\\\"t\\\":\" ws \"[\" ws (s (ws \",\" ws s){0,7})? "
		    "ws \"]\" ws \"}\"\ns ::= \"\\\"\" c{0,12} \"\\\"\"\nc ::= [^\"\\\\] | \"\\\\\" [\"\\\\n]\nws ::= [ ]{0,3}"),
		"root ::= (\"(\" [a-z]{0,5} \")\" | \"[\" [a-z]{0,5} \"]\"){1,20}",
		/* pieces that close s and go on in its context (" kathe1234": "1" closes it, "234" follows) */
		"root ::= (s [0-9]*){1,8} \".\"\ns ::= \"x\" [a-z ]{0,12} \"1\"",
	};
	struct fixture f;
	struct gguf gf;
	struct tok t;
	struct gmask gm;
	unsigned char *a, *b;
	struct buf piece = { 0 };
	int end[1];

	fixture_tiny(&f, GGML_F32);
	f.vocab = 2048;
	CHECK(fixture_write(&f, path) == 0, "write %s", path);
	CHECK(gguf_open(&gf, path) == 0 && tok_load(&t, &gf) == 0, "%s", llm_err());
	if (check_failed)
		return;
	end[0] = t.eos;
	gmask_init(&gm, &t);
	a = xmalloc((size_t)t.n_vocab);
	b = xmalloc((size_t)t.n_vocab);
	for (size_t k = 0; k < sizeof gbnfs / sizeof gbnfs[0]; k++) {
		struct grammar g;
		struct gstate st = { 0 }, s = { 0 };
		CHECK(grammar_parse(&g, gbnfs[k], strlen(gbnfs[k])) == 0, "%s", llm_err());
		if (check_failed)
			break;
		/* several random walks a grammar, as far as they go */
		for (int walk = 0; walk < 2 && !check_failed; walk++) {
			gstate_free(&st);
			gstate_init(&st, &g);
			gstate_for(&st, &t);
			for (int step = 0; step < 50; step++) {
				int n_ok = 0, bad = 0;
				memcpy(a, gmask_compute(&gm, &st, end, 1), (size_t)t.n_vocab);
				for (int id = 0; id < t.n_vocab; id++) {
					b[id] = 0;
					if (id == t.eos) {
						b[id] = (unsigned char)gstate_complete(&st);
						continue;
					}
					if (t.type[id] == TT_CONTROL || t.type[id] == TT_UNKNOWN)
						continue;
					piece.n = 0;
					tok_piece(&t, id, 0, &piece);
					gstate_copy(&s, &st);
					b[id] = piece.n > 0 && gstate_accept(&s, piece.s, piece.n);
				}
				for (int id = 0; id < t.n_vocab; id++) {
					bad += a[id] != b[id];
					n_ok += b[id] && id != t.eos;
				}
				CHECK(bad == 0, "grammar %zu, step %d: %d tokens differ", k, step, bad);
				if (bad || n_ok == 0)
					break;
				/* on along a random allowed token */
				int pick = (int)(next() % (uint64_t)n_ok), id;
				for (id = 0; id < t.n_vocab; id++)
					if (b[id] && id != t.eos && pick-- == 0)
						break;
				piece.n = 0;
				tok_piece(&t, id, 0, &piece);
				CHECK(gstate_accept(&st, piece.s, piece.n), "the allowed token %d", id);
			}
		}
		gstate_free(&s);
		gstate_free(&st);
		grammar_free(&g);
	}
	CHECK(gm.n_cache > 0, "no masks");
	free(a), free(b);
	buf_free(&piece);
	gmask_free(&gm);
	tok_free(&t);
	gguf_close(&gf);
}

/*
 * --json-schema's integer bounds: for bounds drawn at random (and at the
 * edges of 16 digits), every integer near them is a whole sentence of the
 * grammar exactly when lo <= v <= hi, by comparison, not by the grammar.
 */
static void
integer_bounds_are_exact(void)
{
	static const long long edges[][2] = { { 0, 9999999999999999LL }, { -9999999999999999LL, -1 },
		{ 999999999999990LL, 1000000000000010LL }, { -1000000000000010LL, -999999999999990LL } };
	char schema[256], v[40], *gbnf;
	struct grammar g;
	struct gstate st;

	for (int k = 0; k < 240 && !check_failed; k++) {
		long long lo, hi, from, to;
		if (k < 4) {
			lo = edges[k][0], hi = edges[k][1];
			from = lo - 12, to = lo + 12;
		} else {
			lo = (long long)(next() % 2400) - 1200;
			hi = lo + (long long)(next() % (k % 3 ? 300 : 2400));
			from = lo - 150, to = hi + 150;
		}
		snprintf(schema, sizeof schema, k % 2 ? "{\"type\":\"integer\",\"minimum\":%lld,"
		    "\"maximum\":%lld}" : "{\"type\":\"integer\",\"exclusiveMinimum\":%lld,"
		    "\"exclusiveMaximum\":%lld}", k % 2 ? lo : lo - 1, k % 2 ? hi : hi + 1);
		CHECK(schema_to_gbnf(schema, strlen(schema), &gbnf) == 0, "%s: %s", schema, llm_err());
		if (check_failed)
			break;
		CHECK(grammar_parse(&g, gbnf, strlen(gbnf)) == 0, "%s: %s", schema, llm_err());
		free(gbnf);
		if (check_failed)
			break;
		for (int pass = 0; pass < 2; pass++) {
			for (long long x = from; x <= to && !check_failed; x++) {
				snprintf(v, sizeof v, "%lld", x);
				gstate_init(&st, &g);
				int whole = gstate_accept(&st, v, strlen(v)) && gstate_complete(&st);
				gstate_free(&st);
				CHECK(whole == (lo <= x && x <= hi), "%s: %lld %s", schema, x,
				    whole ? "taken" : "refused");
			}
			if (k >= 4)
				break;
			from = hi - 12, to = hi + 12;	/* the edges: the upper bound's too */
		}
		grammar_free(&g);
	}
	/* no leading zeros, no "-0" */
	const char *sch = "{\"type\":\"integer\",\"minimum\":-5,\"maximum\":50}";
	CHECK(schema_to_gbnf(sch, strlen(sch), &gbnf) == 0, "%s", llm_err());
	CHECK(match(gbnf, "07") == 0 && match(gbnf, "-0") == 0 && match(gbnf, "-05") == 0 &&
	    match(gbnf, "50") == 2 && match(gbnf, "-5") == 2, "leading zeros");
	free(gbnf);
}

/*
 * An ambiguous grammar, whose text can be read many ways at once, costs
 * the stacks its readings meet, not the ways to them: in
 * "x" ("A"? "B"? "-"? [0-9]?){100} every count of the repetition can be
 * where the text is, and walking every way took the matcher hours (a
 * fuzzed schema's pattern found it); a thousand groups that can be empty
 * are passed through whole.  They run in a child an alarm stops
 * after 20 s (each takes milliseconds).  One that meets too many stacks
 * at a character (more than 16384) is refused as too ambiguous, by
 * gstate_accept and by the masks, never followed wrongly.
 */
static void
ambiguous_grammars_are_followed_or_refused(void)
{
	static const struct { const char *g, *s; int want; } cases[] = {
		{ "root ::= \"x\" (\"A\"? \"B\"? \"-\"? [0-9]?){100}", "xAB-12", 2 },
		{ "root ::= \"x\" (\"A\"? \"B\"? \"-\"? [0-9]?){100}", "xAB-1x", 0 },
		{ "root ::= \"x\" (\"A\"? \"B\"? \"-\"? [0-9]?){100} \"!\"", "xAAAAAAAAAAAAAAAAAAAA!", 2 },
		{ "root ::= \"x\" ((\"a\"?){0,20}){0,20}", "xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 2 },
		/* a thousand empty groups passed to reach the "!" (a recursive walk ran out of depth) */
		{ "root ::= \"x\" (\"a\"? \"b\"?){1000} \"!\"", "xabab!", 2 },
		{ "root ::= \"x\" (((\"a\"?){0,10}){0,10}){0,10} \"b\"", "xaaaaaaaaaaaaaaaaaaaab", 2 },
		{ "root ::= \"x\" (((\"a\"?){0,10}){0,10}){0,10} \"b\"", "xaaaaaaaaaaaaaaaaaaaaba", 0 },
	};
	const char *over = "root ::= \"x\" ((\"a\"?){0,50}){0,50}";
	const char *sch = "{\"type\":\"string\",\"pattern\":\"^(A?B?-?[0-9]?){100}$\"}";
	char *gbnf;
	int status;
	pid_t pid;

	if ((pid = fork()) == 0) {
		alarm(20);
		for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
			if (match(cases[k].g, cases[k].s) != cases[k].want)
				_exit(10 + (int)k);
		if (schema_to_gbnf(sch, strlen(sch), &gbnf) < 0 || match(gbnf, "\"AB-12\"") != 2)
			_exit(9);
		_exit(0);
	}
	CHECK(pid > 0, "fork");
	if (pid < 0)
		return;
	waitpid(pid, &status, 0);
	CHECK(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM), "the ambiguous grammars took more than 20 s");
	CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 9, "%s: not matched", sch);
	CHECK(!WIFEXITED(status) || WEXITSTATUS(status) < 10, "%s on %s: not %d",
	    cases[WEXITSTATUS(status) - 10].g, cases[WEXITSTATUS(status) - 10].s, cases[WEXITSTATUS(status) - 10].want);
	CHECK(WIFEXITED(status), "killed by signal %d", WTERMSIG(status));

	/* too ambiguous: refused at the first a, by the matcher and by the masks after "x" */
	CHECK(match(over, "x") == 2, "%s: x not taken", over);
	CHECK(match(over, "xa") == -2 && strstr(llm_err(), "too ambiguous"), "%s: xa not refused (%s)", over,
	    llm_err());

	struct fixture f;
	struct gguf gf;
	struct tok t;
	struct gmask gm;
	struct grammar g;
	struct gstate st;
	int end[1];
	float *logits;

	fixture_tiny(&f, GGML_F32);
	CHECK(fixture_write(&f, path) == 0, "write %s", path);
	CHECK(gguf_open(&gf, path) == 0 && tok_load(&t, &gf) == 0, "%s", llm_err());
	CHECK(grammar_parse(&g, over, strlen(over)) == 0, "%s", llm_err());
	if (check_failed)
		return;
	end[0] = t.eos;
	gmask_init(&gm, &t);
	logits = xcalloc((size_t)t.n_vocab, sizeof *logits);
	gstate_init(&st, &g);
	gstate_for(&st, &t);
	CHECK(gmask_apply(&gm, &st, end, 1, logits) > 0, "the start's mask: %s", llm_err());
	CHECK(gstate_accept(&st, "x", 1) == 1, "x");
	llm_seterr("none");
	CHECK(gmask_apply(&gm, &st, end, 1, logits) == -1 && strstr(llm_err(), "too ambiguous"),
	    "the mask after x: not refused (%s)", llm_err());
	/* again, from the masks kept */
	llm_seterr("none");
	CHECK(gmask_apply(&gm, &st, end, 1, logits) == -1 && strstr(llm_err(), "too ambiguous"),
	    "the kept mask after x: not refused (%s)", llm_err());
	free(logits);
	gstate_free(&st);
	grammar_free(&g);
	gmask_free(&gm);
	tok_free(&t);
	gguf_close(&gf);
}

int
main(void)
{
	const char *tmp = getenv("LLM_TEST_TMP") ? getenv("LLM_TEST_TMP") : "tests/tmp";

	mkdir(tmp, 0777);
	snprintf(path, sizeof path, "%s/grammar.gguf", tmp);
	TEST(strings_match_their_grammars);
	TEST(masks_are_each_token_tried_alone);
	TEST(integer_bounds_are_exact);
	TEST(ambiguous_grammars_are_followed_or_refused);
	CHECK_EXIT();
}
