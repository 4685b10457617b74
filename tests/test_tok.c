/*
 * test_tok: the tokenizers against the reference vectors in
 * ../shared/vocab, and on small vocabularies of our own.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/chat.h"
#include "../lib/gguf.h"
#include "../lib/pretok.h"
#include "../lib/tok.h"
#include "../lib/unicode.h"
#include "../lib/util.h"
#include "check.h"
#include "../tools/fixture.h"
#include "../tools/ggufw.h"

static char tmpdir[256], shared[256];

static int
read_file(const char *path, struct buf *b)
{
	size_t n;
	unsigned char *p = read_whole(path, &n);

	if (!p)
		return -1;
	buf_add(b, p, n);
	free(p);
	return 0;
}

static void
decode_all(const struct tok *t, const int *ids, size_t n, struct buf *out)
{
	struct tok_decoder d;
	size_t i;

	tok_decoder_init(&d, t, 0);
	for (i = 0; i < n; i++)
		tok_decode(&d, ids[i], out);
	tok_decode_finish(&d, out);
}

/* Check every vector of one vocabulary; skip if the files are absent. */
static void
reference_vectors(const char *name)
{
	char path[512];
	struct buf inp = { 0 }, outp = { 0 };
	struct gguf g;
	struct tok t;
	const char *sep = "\n__ggml_vocab_test__\n";
	char *in, *line, *next_in, *next_line;
	int ncase = 0, bad_enc = 0, bad_dec = 0;

	snprintf(path, sizeof path, "%s/vocab/%s.inp", shared, name);
	if (read_file(path, &inp) < 0)
		SKIP("%s not present", path);
	snprintf(path, sizeof path, "%s/vocab/%s.out", shared, name);
	CHECK(read_file(path, &outp) == 0, "%s", path);
	snprintf(path, sizeof path, "%s/vocab/%s", shared, name);
	CHECK(gguf_open(&g, path) == 0, "%s", llm_err());
	CHECK(tok_load(&t, &g) == 0, "%s", llm_err());

	for (in = inp.s, line = outp.s; in && *in && line && *line; in = next_in, line = next_line) {
		struct ids want = { 0 }, got = { 0 };
		struct buf text = { 0 };
		char *end = strstr(in, sep), *p, *q;
		size_t len = end ? (size_t)(end - in) : strlen(in);

		next_in = end ? end + strlen(sep) : NULL;
		next_line = strchr(line, '\n');
		if (next_line)
			*next_line++ = '\0';
		for (p = line; *p;) {
			long v = strtol(p, &q, 10);
			if (q == p)
				break;
			ids_push(&want, (int)v);
			p = q;
		}
		tok_encode(&t, in, len, 0, &got);
		if (got.n != want.n || (got.n && memcmp(got.v, want.v, got.n * sizeof *got.v))) {
			fprintf(stderr, "  %s case %d '%.*s': got", name, ncase, (int)len, in);
			for (size_t i = 0; i < got.n; i++)
				fprintf(stderr, " %d", got.v[i]);
			fprintf(stderr, ", want %s\n", line);
			bad_enc++;
		}
		decode_all(&t, want.v, want.n, &text);
		if (text.n != len || memcmp(text.s ? text.s : "", in, len)) {
			fprintf(stderr, "  %s case %d: decode gives '%.*s', want '%.*s'\n",
			    name, ncase, (int)text.n, text.s, (int)len, in);
			bad_dec++;
		}
		ids_free(&want);
		ids_free(&got);
		buf_free(&text);
		ncase++;
	}
	CHECK(ncase > 40, "%s: only %d cases", name, ncase);
	CHECK(bad_enc == 0, "%s: %d of %d cases encode wrongly", name, bad_enc, ncase);
	CHECK(bad_dec == 0, "%s: %d of %d cases decode wrongly", name, bad_dec, ncase);
	tok_free(&t);
	gguf_close(&g);
	buf_free(&inp);
	buf_free(&outp);
}

/* Cutting SentencePiece input into words must not change a single id. */
static void
llama_spm_word_split_changes_nothing(void)
{
	char path[512];
	struct gguf g;
	struct tok t;
	struct buf text = { 0 };
	struct ids a = { 0 }, b = { 0 };
	int i;

	snprintf(path, sizeof path, "%s/vocab/ggml-vocab-llama-spm.gguf", shared);
	if (gguf_open(&g, path) < 0)
		SKIP("%s not present", path);
	CHECK(tok_load(&t, &g) == 0, "%s", llm_err());
	CHECK(t.spm_words == 1, "llama-spm should allow the word split");
	for (i = 0; i < 300; i++) {
		static const char *parts[] = { "Hello", " world", "  ", "\n", "int main(void) {",
		    " \u00e9t\u00e9", " 3.14159", "\t", "--", " the", "ing", " \xe4\xb8\xad\xe6\x96\x87",
		    "   x", "\xf0\x9f\x98\x80", "''", " don't" };
		buf_add(&text, parts[(i * 7 + i / 5) % 16], strlen(parts[(i * 7 + i / 5) % 16]));
	}
	tok_encode(&t, text.s, text.n, 0, &a);
	t.spm_words = 0;
	tok_encode(&t, text.s, text.n, 0, &b);
	CHECK(a.n == b.n && memcmp(a.v, b.v, a.n * sizeof *a.v) == 0, "%zu vs %zu ids", a.n, b.n);
	ids_free(&a), ids_free(&b), buf_free(&text);
	tok_free(&t);
	gguf_close(&g);
}

static void gpt2_reference_vectors(void) { reference_vectors("ggml-vocab-gpt-2.gguf"); }
static void starcoder_reference_vectors(void) { reference_vectors("ggml-vocab-starcoder.gguf"); }
static void llama_spm_reference_vectors(void) { reference_vectors("ggml-vocab-llama-spm.gguf"); }

/* ---- our own vocabularies ---- */

/* Split text with a pre-tokenizer and join the pieces with '|'. */
static void
pieces(const char *name, const char *text, char *out, size_t cap)
{
	int ignore;
	struct pretok *p = pretok_new(name, &ignore);
	uint32_t cps[256];
	size_t off[257], n = 0, i = 0, k, len = strlen(text), o = 0;
	struct span *sp = NULL;
	size_t spcap = 0, ns;

	out[0] = '\0';
	if (!p)
		return;
	while (i < len) {
		off[n] = i;
		i += (size_t)utf8_decode((const unsigned char *)text + i, len - i, &cps[n]);
		n++;
	}
	off[n] = len;
	ns = pretok_split(p, cps, n, &sp, &spcap);
	for (k = 0; k < ns && o + 2 < cap; k++) {
		o += (size_t)snprintf(out + o, cap - o, "%s%.*s", k ? "|" : "",
		    (int)(off[sp[k].end] - off[sp[k].start]), text + off[sp[k].start]);
	}
	free(sp);
	pretok_free(p);
}

static void
check_split(const char *name, const char *text, const char *want)
{
	char got[1024];

	pieces(name, text, got, sizeof got);
	CHECK(strcmp(got, want) == 0, "%s: '%s' splits as '%s', want '%s'", name, text, got, want);
}

static void
pretokenizers_split_like_their_upstream_regexes(void)
{
	static const char *gpt2_family[] = { "default", "gpt-2", "mpt", "gpt-neox" };

	for (size_t i = 0; i < 4; i++) {
		check_split(gpt2_family[i], "Hello world's 123  x", "Hello| world|'s| 123| | x");
		check_split(gpt2_family[i], "a\tb  \n", "a|\t|b|  \n");
	}
	check_split("starcoder", "abc 123", "abc| |1|2|3");
	check_split("smollm", "x=42;", "x|=|4|2|;");
	check_split("refact", "v2 ", "v|2| ");
	check_split("llama3", "Hello 12345 world!!\n\n", "Hello| |123|45| world|!!\n\n");
	check_split("llama-bpe", "I'VE  it", "I|'VE| | it");
	check_split("qwen2", "ab 123", "ab| |1|2|3");
	check_split("falcon", "a+b 1234", "a|+|b| |123|4");
	check_split("deepseek-coder", "Hi 12\nok", "Hi| |1|2|\n|ok");
	check_split("deepseek-llm", "Hi 12\n", "Hi| |12|\n");
	CHECK(!pretok_known("no-such-thing"), "unknown name accepted");
}

/*
 * o200k (gpt-4o: gpt-oss's) against tiktoken's pattern as Python's regex
 * module (an engine independent of ours) runs it, \p{Lu} to \p{Lo} and
 * (?i:...) included: camelCase and capitals, accented, Cyrillic and Greek
 * words, marks (Devanagari), Lo (CJK), Lt (U+01C5), Lm (U+02B0), the
 * contractions in any case and with long s (U+017F), digits in threes,
 * punctuation taking newlines and slashes.
 */
static void
o200k_splits_as_tiktoken(void)
{
	static const struct { const char *text, *want; } cases[] = {
		{ "HelloWorld's HTTPServer camelCase \xc3""\x89""COLE \xc3""\x89""cole na\xc3""\xaf""ve",
		    "Hello|World's| HTTPServer| camel|Case| \xc3""\x89""COLE| \xc3""\x89""cole| na\xc3""\xaf""ve" },
		{ "I'VE done it; he'S \xc5""\xbf"" Bob'\xc5""\xbf""",
		    "I'VE| done| it|;| he'S| \xc5""\xbf""| Bob'\xc5""\xbf""" },
		{ "123456 7890\n\n  x/\n",
		    "123|456| |789|0|\n\n| | x|/\n" },
		{ "a//\n\nb  !!\n/",
		    "a|//\n\n|b| | !!\n/" },
		{ "\xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82"" \xd0""\x9c""\xd0""\x98""\xd0""\xa0""\xd1""\x83"" \xce""\x91""\xce""\x92""\xce""\x93"" \xce""\xb1""\xce""\xb2""\xce""\xb3""",
		    "\xd0""\x9f""\xd1""\x80""\xd0""\xb8""\xd0""\xb2""\xd0""\xb5""\xd1""\x82""| \xd0""\x9c""\xd0""\x98""\xd0""\xa0""\xd1""\x83""| \xce""\x91""\xce""\x92""\xce""\x93""| \xce""\xb1""\xce""\xb2""\xce""\xb3""" },
		{ "\xe0""\xa4""\xa8""\xe0""\xa4""\xae""\xe0""\xa4""\xb8""\xe0""\xa5""\x8d""\xe0""\xa4""\xa4""\xe0""\xa5""\x87"" \xe4""\xb8""\xad""\xe6""\x96""\x87""\xe5""\xad""\x97""\xe7""\xac""\xa6"" \xc7""\x85""ungla \xca""\xb0""ello",
		    "\xe0""\xa4""\xa8""\xe0""\xa4""\xae""\xe0""\xa4""\xb8""\xe0""\xa5""\x8d""\xe0""\xa4""\xa4""\xe0""\xa5""\x87""| \xe4""\xb8""\xad""\xe6""\x96""\x87""\xe5""\xad""\x97""\xe7""\xac""\xa6""| \xc7""\x85""ungla| \xca""\xb0""ello" },
		{ "x  y   \n z",
		    "x| | y|   \n| z" },
		{ "CAPS'LL lower'Ll",
		    "CAPS'LL| lower'Ll" },
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		check_split("gpt-4o", cases[i].text, cases[i].want);
}

/*
 * deepseek-llm against its upstream pattern, with the pattern's true
 * code points: ASCII punctuation, Latin-1, Hebrew, Arabic, Devanagari,
 * the Greek and letterlike code points that normalization changes, and
 * whitespace at the end.  The expected pieces were produced by Python's
 * re module (an engine independent of ours), each of the six regexes
 * applied in turn to every piece of the one before, as Hugging Face and
 * llama.cpp apply them.  Note that the punctuation class's range :-~
 * holds the ASCII letters, so "caf" splits from an accented letter.
 */
static void
deepseek_llm_splits_as_its_upstream_pattern(void)
{
	check_split("deepseek-llm", "Hello, world! (x+y)=z; a_b~c",
	    "Hello|,| world|!| (|x|+|y|)=|z|;| a|_|b|~|c");
	check_split("deepseek-llm", "caf\u00E9 na\u00EFve \u00D7\u00F7 \u00DCber \u00BFqu\u00E9?",
	    "caf|\u00E9| na|\u00EF|ve| \u00D7\u00F7| \u00DC|ber| \u00BF|qu|\u00E9|?");
	check_split("deepseek-llm", "\u05E9\u05DC\u05D5\u05DD \u05E2\u05D5\u05DC\u05DD, hi",
	    "\u05E9\u05DC\u05D5\u05DD \u05E2\u05D5\u05DC\u05DD|,| hi");
	check_split("deepseek-llm", "\u0645\u0631\u062D\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645!",
	    "\u0645\u0631\u062D\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645|!");
	check_split("deepseek-llm", "\u0928\u092E\u0938\u094D\u0924\u0947 \u0926\u0941\u0928\u093F\u092F\u093E 42",
	    "\u0928\u092E\u0938\u094D\u0924\u0947| |\u0926\u0941\u0928\u093F\u092F\u093E| |42");
	check_split("deepseek-llm", "\u1F7D\u1FBE \u1FD3\u1FDB x\u2126y \u212Aelvin K-1 \u212B",
	    "\u1F7D\u1FBE| |\u1FD3\u1FDB| x|\u2126|y| |\u212A|elvin| K|-|1| |\u212B");
	check_split("deepseek-llm", "\u03CE\u03B9 \u0390\u038A \u03A9 \u00C5",
	    "\u03CE\u03B9| \u0390\u038A| \u03A9| \u00C5");
	check_split("deepseek-llm", "end   ",
	    "end|   ");
	check_split("deepseek-llm", "a  b \t c\n\n  d",
	    "a| | b| \t| c|\n|\n| | d");
	check_split("deepseek-llm", "x1y22 z\r\nw 3.14",
	    "x|1|y|22| z|\r|\n|w| |3|.|14");
	check_split("deepseek-llm", "\uFF28\uFF45\uFF4C\uFF4C\uFF4F\uFF01\u3000\u201Cq\u201D",
	    "\uFF28\uFF45\uFF4C\uFF4C\uFF4F|\uFF01|\u3000\u201C|q|\u201D");
	check_split("deepseek-llm", "\u4F60\u597D \uC138\uACC4 \u3053\u3093\u306B\u3061\u306F",
	    "\u4F60\u597D| |\uC138\uACC4| |\u3053\u3093\u306B\u3061\u306F");
}

static void
regex_matcher_basics(void)
{
	static const struct { const char *re, *text; long end; } cases[] = {
		{ "a|ab", "ab", 1 },		/* leftmost alternative wins */
		{ "ab|a", "ab", 2 },
		{ "\\s+(?!\\S)", "   x", 2 },	/* backs off one space */
		{ "\\p{N}{1,3}", "12345", 3 },
		{ "[^a-c]+", "xyza", 3 },
		{ "a$", "a", 1 },
		{ "a$", "ab", -1 },
		{ "(?:ab)+", "ababa", 4 },
	};
	uint32_t cps[16];

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct regex *re = regex_compile(cases[i].re);
		size_t n = 0;
		CHECK(re != NULL, "%s: %s", cases[i].re, llm_err());
		if (!re)
			continue;
		for (const char *p = cases[i].text; *p; p++)
			cps[n++] = (unsigned char)*p;
		long e = regex_match_at(re, cps, n, 0);
		CHECK(e == cases[i].end, "/%s/ on '%s': %ld, want %ld", cases[i].re, cases[i].text, e, cases[i].end);
		regex_free(re);
	}
	CHECK(regex_compile("(a") == NULL, "unbalanced accepted");
}

/* A byte-level BPE vocabulary: the 256 byte stand-ins, a few merges, one control token. */

/* A SentencePiece vocabulary: specials, byte fallback, and scored pieces. */

static int
load_vocab(const char *path, struct gguf *g, struct tok *t)
{
	if (gguf_open(g, path) < 0 || tok_load(t, g) < 0) {
		CHECK(0, "%s: %s", path, llm_err());
		return -1;
	}
	return 0;
}

/*
 * harmony's reply as gpt-oss writes it, analysis then final, tokenized
 * with its control tokens: a reader is shown the final channel's text
 * alone; a commentary message and a reply that never names a channel
 * show nothing; the other families show every token.
 */
static void
harmony_shows_the_final_channel(void)
{
	static const struct { const char *reply, *shown; } cases[] = {
		{ "<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant<|channel|>final"
		  "<|message|>Four.<|return|>", "Four." },
		{ "<|channel|>commentary<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>"
		  "A<|end|>", "A" },
		{ "no channel at all", "" },
		{ "<|channel|>finally<|message|>not it<|end|>", "" },
	};
	struct fixture f;
	struct gguf g;
	struct tok t;
	char path[512];

	fixture_tiny(&f, GGML_F32);
	f.chat = "harmony";
	snprintf(path, sizeof path, "%s/harmony.gguf", tmpdir);
	CHECK(fixture_write(&f, path) == 0, "write %s", path);
	if (load_vocab(path, &g, &t) < 0)
		return;
	CHECK(chat_detect(&g) == CHAT_HARMONY && chat_end_id(&t, CHAT_HARMONY) ==
	    tok_lookup(&t, "<|return|>", 10), "harmony detected, <|return|> its end");
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct ids ids = { 0 };
		struct buf shown = { 0 }, all = { 0 };
		struct chat_view v, other;
		struct tok_decoder dec;
		tok_encode(&t, cases[i].reply, strlen(cases[i].reply), 1, &ids);
		chat_view_init(&v, &t, CHAT_HARMONY);
		chat_view_init(&other, &t, CHAT_CHATML);
		tok_decoder_init(&dec, &t, 0);
		for (size_t k = 0; k < ids.n; k++) {	/* as llm-chat shows a reply */
			if (chat_shown(&v, ids.v[k]))
				tok_decode(&dec, ids.v[k], &shown);
			if (chat_shown(&other, ids.v[k]))
				tok_piece(&t, ids.v[k], 1, &all);
		}
		tok_decode_finish(&dec, &shown);
		buf_add(&shown, "", 1);
		/* the fixture's SentencePiece text keeps a leading space after a control token */
		CHECK(strcmp(shown.s + (shown.s[0] == ' '), cases[i].shown) == 0,
		    "harmony reply %zu: shown '%s', want '%s'", i, shown.s, cases[i].shown);
		CHECK(all.n >= strlen(cases[i].reply), "chatml shows all of reply %zu", i);
		ids_free(&ids), buf_free(&shown), buf_free(&all);
	}
	tok_free(&t);
	gguf_close(&g);
}

static void
encodes_to(struct tok *t, const char *text, int special, const int *want, size_t n)
{
	struct ids got = { 0 };

	tok_encode(t, text, strlen(text), special, &got);
	CHECK(got.n == n && memcmp(got.v, want, n * sizeof *want) == 0,
	    "'%s': %zu ids, want %zu (first %d)", text, got.n, n, got.n ? got.v[0] : -1);
	ids_free(&got);
}

static const char *current_vocab = "";

static void
roundtrips(struct tok *t, const char *text, size_t len)
{
	struct ids ids = { 0 };
	struct buf back = { 0 };

	tok_encode(t, text, len, 0, &ids);
	decode_all(t, ids.v, ids.n, &back);
	if (back.n != len || memcmp(back.s ? back.s : "", text, len) != 0) {
		CHECK(0, "round trip through %s changed the text:", current_vocab);
		fprintf(stderr, "    in: ");
		for (size_t i = 0; i < len; i++)
			fprintf(stderr, "%02x", (unsigned char)text[i]);
		fprintf(stderr, "\n    out:");
		for (size_t i = 0; i < back.n; i++)
			fprintf(stderr, "%02x", (unsigned char)back.s[i]);
		fprintf(stderr, "\n");
	}
	ids_free(&ids);
	buf_free(&back);
}

static void
byte_level_bpe_merges_by_rank(void)
{
	char path[512];
	struct gguf g;
	struct tok t;
	/* 'h' is byte 104, 'l' 108, '<' 60, '|' 124 */
	const int hello_world[] = { 259, 264 }, hel[] = { 256, 108 };
	const int eot_plain[] = { 259, 60, 124, 101, 110, 100, 111, 102, 116, 101, 120, 116, 124, 62 };
	const int eot_special[] = { 259, 266 };

	snprintf(path, sizeof path, "%s/bpe.gguf", tmpdir);
	CHECK(fixture_bpe_vocab(path, "gpt-2") == 0, "write %s", path);
	if (load_vocab(path, &g, &t) < 0)
		return;
	CHECK(t.model == TOK_BPE && !t.add_bos, "model %d add_bos %d", t.model, t.add_bos);
	encodes_to(&t, "hello world", 0, hello_world, 2);
	encodes_to(&t, "hel", 0, hel, 2);	/* "h e" ranks before "e l" */
	encodes_to(&t, "hello<|endoftext|>", 0, eot_plain, 14);
	encodes_to(&t, "hello<|endoftext|>", 1, eot_special, 2);
	roundtrips(&t, "hello world \xe2\x82\xac\x01\xff\xfe", 17);	/* invalid UTF-8 included */
	tok_free(&t);
	gguf_close(&g);
}

static void
every_pre_tokenizer_encodes_with_a_small_vocabulary(void)
{
	static const char *names[] = { "default", "gpt-2", "mpt", "gpt-neox", "starcoder",
	    "smollm", "refact", "llama3", "llama-bpe", "qwen2", "falcon", "deepseek-llm",
	    "deepseek-coder", "gpt-4o" };
	const int hello_world[] = { 259, 264 };
	char path[512];

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct gguf g;
		struct tok t;

		snprintf(path, sizeof path, "%s/bpe-%s.gguf", tmpdir, names[i]);
		CHECK(fixture_bpe_vocab(path, names[i]) == 0, "write %s", path);
		if (load_vocab(path, &g, &t) < 0)
			continue;
		CHECK(strcmp(t.pre_name, names[i]) == 0 && !t.warning[0], "%s: %s", names[i], t.warning);
		encodes_to(&t, "hello world", 0, hello_world, 2);
		roundtrips(&t, "hello world 2024, x+y\n\n\t\xe4\xb8\xad!", 28);
		tok_free(&t);
		gguf_close(&g);
	}
}

static void
unknown_pre_tokenizer_warns_and_uses_gpt2(void)
{
	char path[512];
	struct gguf g;
	struct tok t;

	snprintf(path, sizeof path, "%s/bpe-unknown.gguf", tmpdir);
	CHECK(fixture_bpe_vocab(path, "martian") == 0, "write %s", path);
	if (load_vocab(path, &g, &t) < 0)
		return;
	CHECK(strstr(t.warning, "martian") != NULL, "warning '%s'", t.warning);
	CHECK(strcmp(t.pre_name, "gpt-2") == 0, "pre %s", t.pre_name);
	tok_free(&t);
	gguf_close(&g);
}

static void
sentencepiece_merges_by_score_with_byte_fallback(void)
{
	char path[512];
	struct gguf g;
	struct tok t;
	const int hello[] = { 268 }, two[] = { 268, 259, 268 };	/* "▁h" outscores "▁▁" */
	const int accent[] = { 264, 3 + 0xc3, 3 + 0xa9 };	/* "▁h", then é as bytes */
	const int special[] = { 1, 268, 2 }, plain_s[] = { 259, 3 + '<', 3 + 's', 3 + '>' };

	snprintf(path, sizeof path, "%s/spm.gguf", tmpdir);
	CHECK(fixture_spm_vocab(path) == 0, "write %s", path);
	if (load_vocab(path, &g, &t) < 0)
		return;
	CHECK(t.model == TOK_SPM && t.add_bos && t.add_space_prefix, "defaults");
	encodes_to(&t, "hello", 0, hello, 1);
	encodes_to(&t, "hello  hello", 0, two, 3);
	encodes_to(&t, "h\xc3\xa9", 0, accent, 3);
	encodes_to(&t, "<s>hello</s>", 1, special, 3);
	encodes_to(&t, "<s>", 0, plain_s, 4);
	roundtrips(&t, "hello h\xc3\xa9llo\n\xff", 12);
	roundtrips(&t, " hello", 6);
	tok_free(&t);
	gguf_close(&g);
}

static uint64_t rng = 88172645463325252ull;

static uint32_t
rnd(uint32_t n)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* Random text: ASCII, spaces and newlines, Latin, CJK, emoji; never U+2581. */
static size_t
random_text(char *out, const struct tok *t)
{
	static const uint32_t ranges[][2] = { { 'a', 'z' }, { ' ', ' ' }, { '\n', '\n' },
	    { '!', '@' }, { 0xc0, 0x17f }, { 0x4e00, 0x4e80 }, { 0x1f600, 0x1f64f }, { '0', '9' },
	    { 0x3b1, 0x3c9 }, { '\t', '\t' } };
	size_t n = 0;
	int k, len = 1 + (int)rnd(60);

	for (k = 0; k < len; k++) {
		if (t && rnd(8) == 0) {
			int b;
			/* a stray byte, one the vocabulary can encode */
			while (t->byte_id[b = 0x80 + (int)rnd(128)] < 0)
				;
			out[n++] = (char)b;
			continue;
		}
		const uint32_t *r = ranges[rnd(10)];
		n += (size_t)utf8_encode(r[0] + rnd(r[1] - r[0] + 1), out + n);
	}
	return n;
}

static void
random_text_round_trips(void)
{
	static const char *names[] = { "ggml-vocab-gpt-2.gguf", "ggml-vocab-starcoder.gguf",
	    "ggml-vocab-llama-spm.gguf", NULL, NULL };
	char path[512], text[512];
	int v, i;

	for (v = 0; v < 5; v++) {
		struct gguf g;
		struct tok t;

		if (v < 3)
			snprintf(path, sizeof path, "%s/vocab/%s", shared, names[v]);
		else
			snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, v == 3 ? "bpe" : "spm");
		if (v == 3)
			CHECK(fixture_bpe_vocab(path, "llama3") == 0, "write %s", path);
		if (v == 4)
			CHECK(fixture_spm_vocab(path) == 0, "write %s", path);
		if (gguf_open(&g, path) < 0)
			continue;	/* ../shared absent: our own vocabularies still run */
		current_vocab = path;
		CHECK(tok_load(&t, &g) == 0, "%s", llm_err());
		for (i = 0; i < 300; i++) {
			size_t n = random_text(text, NULL);
			roundtrips(&t, text, n);
		}
		for (i = 0; i < 100; i++) {
			size_t n = random_text(text, &t);	/* invalid UTF-8: no crash, bytes kept */
			roundtrips(&t, text, n);
		}
		/* Every byte either round-trips or, having no token at all, is dropped. */
		for (i = 0; i < 256; i++) {
			struct ids ids = { 0 };
			char c = (char)i;
			tok_encode(&t, &c, 1, 0, &ids);
			if (t.byte_id[i] >= 0 || t.model == TOK_SPM)
				roundtrips(&t, &c, 1);
			else
				CHECK(ids.n == 0, "%s: byte %02x gave %zu ids", path, i, ids.n);
			ids_free(&ids);
		}
		tok_free(&t);
		gguf_close(&g);
	}
}

static void
decoder_holds_back_split_characters(void)
{
	char path[512];
	struct gguf g;
	struct tok t;
	struct tok_decoder d;
	struct buf out = { 0 };

	snprintf(path, sizeof path, "%s/spm.gguf", tmpdir);
	CHECK(fixture_spm_vocab(path) == 0, "write %s", path);
	if (load_vocab(path, &g, &t) < 0)
		return;
	tok_decoder_init(&d, &t, 0);
	tok_decode(&d, 268, &out);		/* "▁hello": the leading space goes */
	CHECK(out.n == 5 && memcmp(out.s, "hello", 5) == 0, "'%.*s'", (int)out.n, out.s);
	tok_decode(&d, 3 + 0xe2, &out);		/* first byte of "€" */
	tok_decode(&d, 3 + 0x82, &out);
	CHECK(out.n == 5, "a partial character was written (%zu bytes)", out.n);
	tok_decode(&d, 3 + 0xac, &out);
	CHECK(out.n == 8 && memcmp(out.s + 5, "\xe2\x82\xac", 3) == 0, "%zu bytes", out.n);
	tok_decode(&d, 3 + 0xe2, &out);		/* a dangling byte comes out at the end */
	tok_decode_finish(&d, &out);
	CHECK(out.n == 9, "%zu bytes after finish", out.n);
	tok_decode(&d, 1, &out);		/* control tokens are silent */
	buf_free(&out);
	tok_free(&t);
	gguf_close(&g);
}

/* ---- one tokenizer, many threads ---- */

enum { SHARED_TEXTS = 64, SHARED_THREADS = 4 };

struct shared_job {
	const struct tok *t;
	char (*text)[512];
	size_t *len;
	struct ids *want;
	int mismatches;
};

static void *
encode_all(void *arg)
{
	struct shared_job *j = arg;

	for (int round = 0; round < 20; round++)
		for (int i = 0; i < SHARED_TEXTS; i++) {
			struct ids got = { 0 };
			tok_encode(j->t, j->text[i], j->len[i], 0, &got);
			j->mismatches += got.n != j->want[i].n ||
			    (got.n && memcmp(got.v, j->want[i].v, got.n * sizeof *got.v) != 0);
			ids_free(&got);
		}
	return NULL;
}

/* Threads that share a tokenizer each get what one thread alone gets. */
static void
one_tokenizer_encodes_in_many_threads(void)
{
	static char text[SHARED_TEXTS][512];
	static size_t len[SHARED_TEXTS];
	struct ids want[SHARED_TEXTS];
	char path[512];
	int v, i, k;

	for (v = 0; v < 2; v++) {
		struct shared_job job[SHARED_THREADS];
		pthread_t th[SHARED_THREADS];
		struct gguf g;
		struct tok t;

		snprintf(path, sizeof path, "%s/%s.gguf", tmpdir, v ? "spm" : "bpe-deepseek-llm");
		if (v)
			CHECK(fixture_spm_vocab(path) == 0, "write %s", path);
		else
			CHECK(fixture_bpe_vocab(path, "deepseek-llm") == 0, "write %s", path);
		if (load_vocab(path, &g, &t) < 0)
			continue;
		for (i = 0; i < SHARED_TEXTS; i++) {
			len[i] = random_text(text[i], NULL);
			memset(&want[i], 0, sizeof want[i]);
			tok_encode(&t, text[i], len[i], 0, &want[i]);
		}
		for (k = 0; k < SHARED_THREADS; k++) {
			job[k] = (struct shared_job){ &t, text, len, want, 0 };
			CHECK(pthread_create(&th[k], NULL, encode_all, &job[k]) == 0, "thread");
		}
		for (k = 0; k < SHARED_THREADS; k++) {
			pthread_join(th[k], NULL);
			CHECK(job[k].mismatches == 0, "%s: thread %d: %d encodings differ from one thread's",
			    path, k, job[k].mismatches);
		}
		for (i = 0; i < SHARED_TEXTS; i++)
			ids_free(&want[i]);
		tok_free(&t);
		gguf_close(&g);
	}
}

/*
 * Long runs of one kind of character are where a backtracking matcher
 * goes quadratic (\s+$ on k spaces followed by a letter took k^2 steps).
 * Each family gets 2M code points: runs of 256K whitespace, punctuation,
 * digits and letters, then runs of mixed units.  A linear matcher takes
 * well under a second per family; a quadratic one takes hours, so each
 * family runs in a child that an alarm stops after 10 s (60 s under
 * emulation, LLM_CROSS set, where a starved core can take ten times as
 * long).  The pieces must also cover the input exactly.
 */
static int
split_covers(const char *name, const uint32_t *cps, size_t n)
{
	int ignore;
	struct pretok *p = pretok_new(name, &ignore);
	struct span *sp = NULL;
	size_t cap = 0, ns, k, at = 0;

	if (!p)
		return 0;
	ns = pretok_split(p, cps, n, &sp, &cap);
	for (k = 0; k < ns && sp[k].start == at && sp[k].end > at; k++)
		at = sp[k].end;
	free(sp);
	pretok_free(p);
	return k == ns && at == n;
}

static void
every_pretokenizer_is_linear_on_long_runs(void)
{
	/* one name for each distinct set of regexes */
	static const char *family[] = { "gpt-2", "starcoder", "llama3", "qwen2", "falcon",
	    "deepseek-llm", "deepseek-coder" };
	/*
	 * Whitespace is followed by what the regexes before \s+$ leave in its
	 * piece (Hebrew, digits), so the run is not at the end of the piece.
	 */
	static const uint32_t one[][4] = {
		{ ' ' }, { 0x5d0 }, { '\t' }, { '7' }, { '!' }, { 'a' }, { '\n' }, { 0x4e00 },
	};
	static const uint32_t mixed[][4] = {
		{ ' ', '\n' }, { ' ', 'a' }, { 'a', '1' }, { '\'', 's' }, { ' ', '!' }, { '\t', ' ' },
		{ '\r', '\n' }, { ' ', 0x5d0 },
	};
	enum { RUN = 1 << 18, N = 8 * RUN };
	uint32_t *cps = xmalloc(N * sizeof *cps);
	size_t f, r, i, len;
	int status;
	unsigned limit = getenv("LLM_CROSS") ? 60 : 10;
	pid_t pid;

	for (f = 0; f < sizeof family / sizeof family[0]; f++) {
		if ((pid = fork()) == 0) {
			alarm(limit);
			for (r = 0; r < 8; r++)
				for (i = 0; i < RUN; i++)
					cps[r * RUN + i] = one[r][0];
			if (!split_covers(family[f], cps, N))
				_exit(1);
			for (r = 0; r < 8; r++) {
				for (len = 0; mixed[r][len]; len++)
					;
				for (i = 0; i < RUN; i++)
					cps[r * RUN + i] = mixed[r][i % len];
			}
			_exit(split_covers(family[f], cps, N) ? 0 : 1);
		}
		CHECK(pid > 0, "fork");
		if (pid < 0)
			break;
		waitpid(pid, &status, 0);
		CHECK(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM),
		    "%s: 2M code points of long runs took more than %u s", family[f], limit);
		CHECK(!WIFSIGNALED(status) || WTERMSIG(status) == SIGALRM,
		    "%s: killed by signal %d", family[f], WTERMSIG(status));
		CHECK(!WIFEXITED(status) || WEXITSTATUS(status) == 0,
		    "%s: the pieces do not cover the input", family[f]);
	}
	free(cps);
}

/*
 * A byte token's text lies in the mapped file, with no NUL after it.
 * Here it is a heap buffer of exactly its six bytes, so reading one past
 * it (as sscanf did) is an error AddressSanitizer reports.
 */
static void
byte_pieces_are_read_within_their_length(void)
{
	static const char *texts[] = { "<0x41>", "<0x0a>", "<0xFF>", "<0xG1>", "<0x4>x" };
	static const char *want[] = { "A", "\n", "\xff", "<0xG1>", "<0x4>x" };
	struct gguf_str piece;
	int32_t type = TT_BYTE;
	struct tok t;

	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct buf out = { 0 };
		char *p = xmalloc(6);
		memcpy(p, texts[i], 6);
		memset(&t, 0, sizeof t);
		t.model = TOK_SPM;
		t.n_vocab = 1;
		piece.s = p, piece.n = 6;
		t.piece = &piece;
		t.type = &type;
		tok_piece(&t, 0, 0, &out);
		CHECK(out.n == strlen(want[i]) && memcmp(out.s, want[i], out.n) == 0, "%s gave '%.*s'",
		    texts[i], (int)out.n, out.s ? out.s : "");
		buf_free(&out);
		free(p);
	}
}

int
main(void)
{
	snprintf(tmpdir, sizeof tmpdir, "%s", getenv("LLM_TEST_TMP") ? getenv("LLM_TEST_TMP") : "tests/tmp");
	snprintf(shared, sizeof shared, "%s", getenv("LLM_SHARED") ? getenv("LLM_SHARED") : "../shared");
	TEST(gpt2_reference_vectors);
	TEST(starcoder_reference_vectors);
	TEST(llama_spm_reference_vectors);
	TEST(llama_spm_word_split_changes_nothing);
	TEST(pretokenizers_split_like_their_upstream_regexes);
	TEST(o200k_splits_as_tiktoken);
	TEST(harmony_shows_the_final_channel);
	TEST(deepseek_llm_splits_as_its_upstream_pattern);
	TEST(every_pretokenizer_is_linear_on_long_runs);
	TEST(one_tokenizer_encodes_in_many_threads);
	TEST(regex_matcher_basics);
	TEST(byte_level_bpe_merges_by_rank);
	TEST(every_pre_tokenizer_encodes_with_a_small_vocabulary);
	TEST(unknown_pre_tokenizer_warns_and_uses_gpt2);
	TEST(sentencepiece_merges_by_score_with_byte_fallback);
	TEST(random_text_round_trips);
	TEST(decoder_holds_back_split_characters);
	TEST(byte_pieces_are_read_within_their_length);
	CHECK_EXIT();
}
