/*
 * tok.c: text to token ids and back, the way the reference tokenizers
 * do it (llama.cpp's, which match Hugging Face's on the test vectors).
 *
 * SentencePiece ("llama"): spaces become U+2581, a space is put in front
 * (add_space_prefix), and adjacent pieces merge best score first while the
 * merged text is a token; what is left unmatched falls back to <0xNN>.
 *
 * Byte-level BPE ("gpt2"): the pre-tokenizer splits the text into words,
 * each byte becomes a printable stand-in character, and adjacent symbols
 * merge lowest merge rank first.
 */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "pretok.h"
#include "tok.h"
#include "unicode.h"
#include "util.h"

#define SPACE_MARK "\xe2\x96\x81"	/* U+2581, SentencePiece's space */

static int is_mark(const char *s, size_t i, size_t n);

/* ---- hashing ---- */

static uint64_t
hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	while (n--)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static uint64_t
hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static size_t
table_size(size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

int
tok_lookup(const struct tok *t, const char *s, size_t n)
{
	size_t i = hash_bytes(s, n) & t->vocab.mask;
	int32_t id;

	while ((id = t->vocab.slot[i]) >= 0) {
		if (t->piece[id].n == n && memcmp(t->piece[id].s, s, n) == 0)
			return id;
		i = (i + 1) & t->vocab.mask;
	}
	return -1;
}

static void
vocab_index(struct tok *t)
{
	size_t cap = table_size((size_t)t->n_vocab), i;
	int id;

	t->vocab.slot = xmalloc(cap * sizeof *t->vocab.slot);
	memset(t->vocab.slot, 0xff, cap * sizeof *t->vocab.slot);
	t->vocab.mask = cap - 1;
	for (id = 0; id < t->n_vocab; id++) {
		i = hash_bytes(t->piece[id].s, t->piece[id].n) & t->vocab.mask;
		for (; t->vocab.slot[i] >= 0; i = (i + 1) & t->vocab.mask) {
			int old = t->vocab.slot[i];
			if (t->piece[old].n == t->piece[id].n &&
			    memcmp(t->piece[old].s, t->piece[id].s, t->piece[id].n) == 0)
				break;	/* a duplicate text: the later id wins, as in llama.cpp */
		}
		t->vocab.slot[i] = id;
	}
}

static int
pair_find(const struct tok_pairs *p, int l, int r, int *merged)
{
	uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
	size_t i;

	if (!p->key)
		return -1;
	for (i = hash_u64(key) & p->mask; p->rank[i] >= 0; i = (i + 1) & p->mask)
		if (p->key[i] == key) {
			*merged = p->merged[i];
			return p->rank[i];
		}
	return -1;
}

static int
load_merges(struct tok *t, const struct gguf *g)
{
	struct gguf_str *m;
	uint64_t n, k;
	size_t cap, i;
	int r;

	if ((r = gguf_get_str_arr(g, "tokenizer.ggml.merges", &m, &n)) <= 0) {
		if (r == 0)
			llm_seterr("byte-level BPE vocabulary has no tokenizer.ggml.merges");
		return -1;
	}
	cap = table_size(n);
	t->merges.key = xmalloc(cap * sizeof *t->merges.key);
	t->merges.rank = xmalloc(cap * sizeof *t->merges.rank);
	t->merges.merged = xmalloc(cap * sizeof *t->merges.merged);
	memset(t->merges.rank, 0xff, cap * sizeof *t->merges.rank);
	t->merges.mask = cap - 1;
	for (k = 0; k < n; k++) {
		const char *s = m[k].s, *sp;
		char both[512];
		int l, rr, lr, dummy;
		uint64_t key;

		/* "left right"; the split is the first space after the first byte */
		sp = m[k].n > 1 ? memchr(s + 1, ' ', m[k].n - 1) : NULL;
		if (!sp || m[k].n - 1 > sizeof both)
			continue;
		l = tok_lookup(t, s, (size_t)(sp - s));
		rr = tok_lookup(t, sp + 1, m[k].n - (size_t)(sp - s) - 1);
		memcpy(both, s, (size_t)(sp - s));
		memcpy(both + (sp - s), sp + 1, m[k].n - (size_t)(sp - s) - 1);
		lr = tok_lookup(t, both, m[k].n - 1);
		if (l < 0 || rr < 0 || lr < 0 || pair_find(&t->merges, l, rr, &dummy) >= 0)
			continue;	/* unusable, or a repeat: the first rank counts */
		key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rr;
		for (i = hash_u64(key) & t->merges.mask; t->merges.rank[i] >= 0;
		    i = (i + 1) & t->merges.mask)
			;
		t->merges.key[i] = key;
		t->merges.rank[i] = (int32_t)k;
		t->merges.merged[i] = lr;
	}
	free(m);
	return 0;
}

/* GPT-2's byte-to-unicode table: printable bytes stand for themselves. */
static void
byte_level_table(struct tok *t)
{
	uint32_t next = 256;
	int b;

	for (b = 0; b < 256; b++) {
		if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))
			t->byte_char[b] = (uint32_t)b;
		else
			t->byte_char[b] = next++;
	}
}

static int
by_length_desc(const void *a, const void *b, void *arg)
{
	const struct tok *t = arg;
	size_t x = t->piece[*(const int *)a].n, y = t->piece[*(const int *)b].n;

	if (x != y)
		return x < y ? 1 : -1;
	return *(const int *)a - *(const int *)b;
}

/* qsort has no context argument in C11: a small insertion-merge sort. */
static void
sort_specials(struct tok *t)
{
	int i, j, v;

	for (i = 1; i < t->n_special; i++) {
		v = t->special[i];
		for (j = i; j > 0 && by_length_desc(&t->special[j - 1], &v, t) > 0; j--)
			t->special[j] = t->special[j - 1];
		t->special[j] = v;
	}
}

static int
opt_id(const struct gguf *g, const char *key, int n_vocab, int *out)
{
	uint32_t v;
	int r = gguf_get_u32(g, key, &v);

	*out = -1;
	if (r < 0)
		return -1;
	if (r == 1 && v < (uint32_t)n_vocab)
		*out = (int)v;
	return 0;
}

int
tok_load(struct tok *t, const struct gguf *g)
{
	struct gguf_str model, pre;
	const void *data;
	uint64_t n, ntypes, nscores;
	int r, i, b;
	char name[16];

	memset(t, 0, sizeof *t);
	if ((r = gguf_get_str(g, "tokenizer.ggml.model", &model)) <= 0) {
		if (r == 0)
			llm_seterr("no tokenizer in this file (tokenizer.ggml.model is missing)");
		return -1;
	}
	if (model.n == 5 && memcmp(model.s, "llama", 5) == 0)
		t->model = TOK_SPM;
	else if (model.n == 4 && memcmp(model.s, "gpt2", 4) == 0)
		t->model = TOK_BPE;
	else {
		llm_seterr("tokenizer model '%.*s' is not supported (llama and gpt2 are)",
		    (int)(model.n > 32 ? 32 : model.n), model.s);
		return -1;
	}
	if ((r = gguf_get_str_arr(g, "tokenizer.ggml.tokens", &t->piece, &n)) <= 0) {
		if (r == 0)
			llm_seterr("missing key tokenizer.ggml.tokens");
		return -1;
	}
	if (n == 0 || n > INT32_MAX / 2) {
		llm_seterr("tokenizer.ggml.tokens: bad vocabulary size %llu", (unsigned long long)n);
		tok_free(t);
		return -1;
	}
	t->n_vocab = (int)n;
	t->type = xmalloc(n * sizeof *t->type);
	t->score = xcalloc(n, sizeof *t->score);
	for (i = 0; i < t->n_vocab; i++)
		t->type[i] = TT_NORMAL;
	if ((r = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_INT32, &data, &ntypes)) < 0)
		goto fail;
	if (r == 1)
		memcpy(t->type, data, (ntypes < n ? ntypes : n) * sizeof *t->type);
	if ((r = gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_FLOAT32, &data, &nscores)) < 0)
		goto fail;
	if (r == 1)
		memcpy(t->score, data, (nscores < n ? nscores : n) * sizeof *t->score);
	vocab_index(t);

	if (opt_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos) ||
	    opt_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos) ||
	    opt_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk))
		goto fail;
	/* SentencePiece adds BOS by default; byte-level BPE does not. */
	t->add_bos = t->model == TOK_SPM;
	t->add_space_prefix = t->model == TOK_SPM;
	if (gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos) < 0 ||
	    gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos) < 0 ||
	    gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix) < 0)
		goto fail;

	for (b = 0; b < 256; b++)
		t->byte_id[b] = -1;
	if (t->model == TOK_SPM) {
		t->spm_words = 1;
		for (i = 0; i < t->n_vocab && t->spm_words; i++)
			for (size_t j = 1; j < t->piece[i].n && t->spm_words; j++)
				if (is_mark(t->piece[i].s, j, t->piece[i].n) &&
				    !(j >= 3 && is_mark(t->piece[i].s, j - 3, t->piece[i].n)))
					t->spm_words = 0;
		for (b = 0; b < 256; b++) {
			snprintf(name, sizeof name, "<0x%02X>", b);
			t->byte_id[b] = tok_lookup(t, name, strlen(name));
		}
	} else {
		byte_level_table(t);
		for (b = 0; b < 256; b++) {
			char u[4];
			t->byte_id[b] = tok_lookup(t, u, (size_t)utf8_encode(t->byte_char[b], u));
		}
		if (load_merges(t, g) < 0)
			goto fail;
		snprintf(t->pre_name, sizeof t->pre_name, "default");
		if ((r = gguf_get_str(g, "tokenizer.ggml.pre", &pre)) < 0)
			goto fail;
		if (r == 1)
			snprintf(t->pre_name, sizeof t->pre_name, "%.*s",
			    (int)(pre.n < 60 ? pre.n : 60), pre.s);
		if (!pretok_known(t->pre_name)) {
			snprintf(t->warning, sizeof t->warning,
			    "unknown pre-tokenizer '%s', using gpt-2's", t->pre_name);
			snprintf(t->pre_name, sizeof t->pre_name, "gpt-2");
		}
		if (!(t->pre = pretok_new(t->pre_name, &t->ignore_merges)))
			goto fail;
	}

	t->special = xmalloc(n * sizeof *t->special);
	for (i = 0; i < t->n_vocab; i++)
		if ((t->type[i] == TT_CONTROL || t->type[i] == TT_USER_DEFINED ||
		    t->type[i] == TT_UNKNOWN) && t->piece[i].n > 0) {
			t->special[t->n_special++] = i;
			t->has_user_defined |= t->type[i] == TT_USER_DEFINED;
		}
	sort_specials(t);
	return 0;
fail:
	tok_free(t);
	return -1;
}

void
tok_free(struct tok *t)
{
	free(t->piece);
	free(t->type);
	free(t->score);
	free(t->vocab.slot);
	free(t->merges.key);
	free(t->merges.rank);
	free(t->merges.merged);
	free(t->special);
	pretok_free(t->pre);
	memset(t, 0, sizeof *t);
}

const char *
tok_type_name(int type)
{
	static const char *names[] = { "undefined", "normal", "unknown", "control",
		"user_defined", "unused", "byte" };

	return type >= 0 && type <= TT_BYTE ? names[type] : "invalid";
}

/* ---- merging, shared by both algorithms ---- */

struct sym {
	int prev, next;
	size_t start, len;	/* bytes of the working text */
	int id;			/* BPE: the token this symbol is */
};

struct bigram {
	double prio;		/* lower first */
	int left, right;
	size_t len;		/* SPM: combined length when queued */
	int lid, rid;		/* BPE: ids when queued */
	int merged;
};

struct heap {
	struct bigram *v;
	size_t n, cap;
};

static int
before(const struct bigram *a, const struct bigram *b)
{
	return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

static void
heap_push(struct heap *h, struct bigram b)
{
	size_t i, parent;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 64;
		h->v = xrealloc(h->v, h->cap * sizeof *h->v);
	}
	for (i = h->n++; i > 0 && before(&b, &h->v[parent = (i - 1) / 2]); i = parent)
		h->v[i] = h->v[parent];
	h->v[i] = b;
}

static struct bigram
heap_pop(struct heap *h)
{
	struct bigram top = h->v[0], last = h->v[--h->n];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < h->n) {
		if (c + 1 < h->n && before(&h->v[c + 1], &h->v[c]))
			c++;
		if (!before(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

static void
sym_split(struct sym **syms, size_t *cap, int *nsyms, const char *s, size_t n)
{
	size_t off = 0;
	uint32_t cp;
	int k = 0;

	if (n > *cap) {
		*cap = n;
		*syms = xrealloc(*syms, *cap * sizeof **syms);
	}
	while (off < n) {
		int len = utf8_decode((const unsigned char *)s + off, n - off, &cp);
		(*syms)[k].prev = k - 1;
		(*syms)[k].next = off + (size_t)len < n ? k + 1 : -1;
		(*syms)[k].start = off;
		(*syms)[k].len = (size_t)len;
		(*syms)[k].id = -1;
		off += (size_t)len;
		k++;
	}
	*nsyms = k;
}

/* ---- SentencePiece ---- */

/*
 * The working state of one encode call is its own, so a tokenizer is
 * read-only while it encodes and threads may share it.
 */
struct spm_work {
	struct sym *syms;
	size_t cap;
	struct heap h;
};

static void
spm_try(const struct tok *t, struct spm_work *w, const char *s, int l, int r)
{
	const struct sym *spm_syms = w->syms;
	struct bigram b;
	int id;

	if (l < 0 || r < 0)
		return;
	b.len = spm_syms[l].len + spm_syms[r].len;
	if ((id = tok_lookup(t, s + spm_syms[l].start, b.len)) < 0)
		return;
	b.prio = -(double)t->score[id];	/* best score first */
	b.left = l;
	b.right = r;
	heap_push(&w->h, b);
}

/* Merge one run of symbols s[0..n) and append its ids. */
static void
spm_segment(const struct tok *t, const char *s, size_t n, struct spm_work *w, struct ids *out)
{
	struct heap *h = &w->h;
	struct sym *spm_syms;
	size_t i;
	int nsym, k, id;

	sym_split(&w->syms, &w->cap, &nsym, s, n);
	spm_syms = w->syms;
	h->n = 0;
	for (k = 1; k < nsym; k++)
		spm_try(t, w, s, k - 1, k);
	while (h->n) {
		struct bigram b = heap_pop(h);
		struct sym *l = &spm_syms[b.left], *r = &spm_syms[b.right];

		/* Skip bigrams a merge has made stale. */
		if (l->len == 0 || r->len == 0 || l->len + r->len != b.len || l->next != b.right)
			continue;
		l->len += r->len;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			spm_syms[r->next].prev = b.left;
		spm_try(t, w, s, l->prev, b.left);
		spm_try(t, w, s, b.left, l->next);
	}
	for (k = 0; k != -1 && nsym > 0; k = spm_syms[k].next) {
		const struct sym *y = &spm_syms[k];
		if ((id = tok_lookup(t, s + y->start, y->len)) >= 0) {
			ids_push(out, id);
			continue;
		}
		/* byte fallback */
		for (i = 0; i < y->len; i++) {
			id = t->byte_id[(unsigned char)s[y->start + i]];
			ids_push(out, id >= 0 ? id : t->unk >= 0 ? t->unk : 0);
		}
	}
}

static int
is_mark(const char *s, size_t i, size_t n)
{
	return i + 3 <= n && memcmp(s + i, SPACE_MARK, 3) == 0;
}

static void
spm_encode(const struct tok *t, const char *text, size_t len, int prefix, struct ids *out)
{
	struct buf s = { 0 };
	struct spm_work w = { 0 };
	size_t i, seg;

	for (i = 0; i < len; i = seg) {
		for (seg = i; seg < len && text[seg] != ' '; seg++)
			;
		buf_add(&s, text + i, seg - i);
		if (seg < len) {
			buf_add(&s, SPACE_MARK, 3);
			seg++;
		}
	}
	if (prefix) {
		buf_add(&s, SPACE_MARK, 3);	/* then rotate it to the front */
		memmove(s.s + 3, s.s, s.n - 3);
		memcpy(s.s, SPACE_MARK, 3);
	}
	if (s.n == 0)
		return;
	/*
	 * A merge never joins a character to a following U+2581 when no token
	 * has one after another character (SentencePiece's whitespace split),
	 * so each word can be merged on its own: same result, smaller heaps.
	 */
	for (i = 0, seg = 0; i <= s.n; i++) {
		if (i < s.n && !(t->spm_words && i > 0 && is_mark(s.s, i, s.n) &&
		    !(i >= 3 && is_mark(s.s, i - 3, s.n))))
			continue;
		spm_segment(t, s.s + seg, i - seg, &w, out);
		seg = i;
	}
	free(w.h.v);
	free(w.syms);
	buf_free(&s);
}

/* ---- byte-level BPE ---- */

static void
bpe_try(const struct tok *t, struct heap *h, struct sym *y, int l, int r)
{
	struct bigram b;
	int rank;

	if (l < 0 || r < 0 || y[l].id < 0 || y[r].id < 0)
		return;
	if ((rank = pair_find(&t->merges, y[l].id, y[r].id, &b.merged)) < 0)
		return;
	b.prio = rank;
	b.left = l;
	b.right = r;
	b.lid = y[l].id;
	b.rid = y[r].id;
	heap_push(h, b);
}

static void
bpe_word(const struct tok *t, const unsigned char *w, size_t n, struct heap *h,
    struct sym **syms, size_t *cap, struct ids *out)
{
	struct buf mapped = { 0 };
	char u[4];
	size_t i;
	int k, id;

	if (t->ignore_merges) {
		for (i = 0; i < n; i++)
			buf_add(&mapped, u, (size_t)utf8_encode(t->byte_char[w[i]], u));
		id = tok_lookup(t, mapped.s, mapped.n);
		buf_free(&mapped);
		if (id >= 0) {
			ids_push(out, id);
			return;
		}
	}
	if (n > *cap) {
		*cap = n;
		*syms = xrealloc(*syms, *cap * sizeof **syms);
	}
	for (i = 0; i < n; i++) {
		(*syms)[i].prev = (int)i - 1;
		(*syms)[i].next = i + 1 < n ? (int)i + 1 : -1;
		(*syms)[i].id = t->byte_id[w[i]];
		(*syms)[i].len = 1;
	}
	h->n = 0;
	for (i = 1; i < n; i++)
		bpe_try(t, h, *syms, (int)i - 1, (int)i);
	while (h->n) {
		struct bigram b = heap_pop(h);
		struct sym *l = &(*syms)[b.left], *r = &(*syms)[b.right];

		if (l->len == 0 || r->len == 0 || l->next != b.right ||
		    l->id != b.lid || r->id != b.rid)
			continue;
		l->id = b.merged;
		r->len = 0;
		l->next = r->next;
		if (r->next >= 0)
			(*syms)[r->next].prev = b.left;
		bpe_try(t, h, *syms, l->prev, b.left);
		bpe_try(t, h, *syms, b.left, l->next);
	}
	/*
	 * A byte with no stand-in token (some vocabularies lack 0xF5-0xFF,
	 * which UTF-8 never uses) cannot be encoded: it is dropped, as
	 * llama.cpp does, rather than becoming an unknown or EOS id.
	 */
	for (k = 0; k != -1; k = (*syms)[k].next)
		if ((*syms)[k].id >= 0)
			ids_push(out, (*syms)[k].id);
}

static void
bpe_encode(const struct tok *t, const char *text, size_t len, struct ids *out)
{
	uint32_t *cps = xmalloc((len + 1) * sizeof *cps);
	size_t *off = xmalloc((len + 1) * sizeof *off);
	struct span *spans = NULL;
	size_t spans_cap = 0;
	struct sym *syms = NULL;
	size_t syms_cap = 0;
	struct heap h = { 0 };
	size_t n = 0, i = 0, k, nspans;

	while (i < len) {
		off[n] = i;
		i += (size_t)utf8_decode((const unsigned char *)text + i, len - i, &cps[n]);
		n++;
	}
	off[n] = len;
	nspans = pretok_split(t->pre, cps, n, &spans, &spans_cap);
	for (k = 0; k < nspans; k++)
		bpe_word(t, (const unsigned char *)text + off[spans[k].start],
		    off[spans[k].end] - off[spans[k].start], &h, &syms, &syms_cap, out);
	free(h.v);
	free(syms);
	free(spans);
	free(off);
	free(cps);
}

/* ---- special tokens, then the algorithm on the text between them ---- */

static int
special_at(const struct tok *t, const char *s, size_t n, int parse_special)
{
	int i, id;

	for (i = 0; i < t->n_special; i++) {
		id = t->special[i];
		if (!parse_special && t->type[id] != TT_USER_DEFINED)
			continue;
		if (t->piece[id].n <= n && (unsigned char)t->piece[id].s[0] == (unsigned char)s[0] &&
		    memcmp(t->piece[id].s, s, t->piece[id].n) == 0)
			return id;
	}
	return -1;
}

static void
encode_text(const struct tok *t, const char *s, size_t n, int after_special, struct ids *out)
{
	if (n == 0)
		return;
	if (t->model == TOK_SPM)
		/* llama.cpp puts the space prefix before text that starts the input or follows a special token */
		spm_encode(t, s, n, t->add_space_prefix && after_special, out);
	else
		bpe_encode(t, s, n, out);
}

void
tok_encode(const struct tok *t, const char *text, size_t len, int parse_special, struct ids *out)
{
	size_t i, start = 0;
	int id, after_special = 1;

	if (!parse_special && !t->has_user_defined) {
		encode_text(t, text, len, 1, out);
		return;
	}
	for (i = 0; i < len;) {
		if ((id = special_at(t, text + i, len - i, parse_special)) < 0) {
			i++;
			continue;
		}
		encode_text(t, text + start, i - start, after_special, out);
		ids_push(out, id);
		after_special = 1;
		i += t->piece[id].n;
		start = i;
	}
	encode_text(t, text + start, len - start, after_special, out);
}

/* ---- ids to text ---- */

static int
hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 :
	    c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* "<0xAB>": 1 with *byte set.  Pieces live in the map, unterminated. */
static int
byte_piece(const char *s, size_t n, unsigned char *byte)
{
	int hi, lo;

	if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' ||
	    (hi = hex_digit(s[3])) < 0 || (lo = hex_digit(s[4])) < 0)
		return 0;
	*byte = (unsigned char)(hi << 4 | lo);
	return 1;
}

void
tok_piece(const struct tok *t, int id, int special, struct buf *out)
{
	const struct gguf_str *p = &t->piece[id];
	size_t i = 0;
	uint32_t cp;
	unsigned char byte;
	int b;

	switch (t->type[id]) {
	case TT_CONTROL:
		if (special)
			buf_add(out, p->s, p->n);
		return;
	case TT_UNUSED:
		return;
	case TT_UNKNOWN:
		if (special)
			buf_add(out, p->s, p->n);
		else
			buf_add(out, "\xe2\x96\x85", 3);	/* U+2585, as llama.cpp shows unknowns */
		return;
	case TT_USER_DEFINED:
		buf_add(out, p->s, p->n);
		return;
	case TT_BYTE:
		if (t->model == TOK_SPM && byte_piece(p->s, p->n, &byte)) {
			buf_add(out, &byte, 1);
			return;
		}
		break;
	}
	if (t->model == TOK_SPM) {
		for (i = 0; i < p->n; i++) {
			if (i + 3 <= p->n && memcmp(p->s + i, SPACE_MARK, 3) == 0) {
				buf_add(out, " ", 1);
				i += 2;
			} else {
				buf_add(out, &p->s[i], 1);
			}
		}
		return;
	}
	/* byte-level: each character stands for one byte */
	while (i < p->n) {
		int len = utf8_decode((const unsigned char *)p->s + i, p->n - i, &cp);
		for (b = 0; b < 256 && t->byte_char[b] != cp; b++)
			;
		if (b < 256) {
			byte = (unsigned char)b;
			buf_add(out, &byte, 1);
		} else {
			buf_add(out, p->s + i, (size_t)len);	/* not a stand-in: keep it */
		}
		i += (size_t)len;
	}
}

void
tok_decoder_init(struct tok_decoder *d, const struct tok *t, int special)
{
	memset(d, 0, sizeof *d);
	d->t = t;
	d->special = special;
}

/* How many bytes at the end of s[0..n) are an unfinished UTF-8 character. */
static size_t
incomplete_tail(const unsigned char *s, size_t n)
{
	size_t back;
	int need;

	for (back = 1; back <= 4 && back <= n; back++) {
		unsigned char c = s[n - back];
		if ((c & 0xc0) == 0x80)
			continue;	/* a continuation byte: look further back */
		need = utf8_lead_len(c);
		return need > 1 && (size_t)need > back ? back : 0;
	}
	return 0;
}

/*
 * SentencePiece text: U+2581 is a space however it arrived (a piece or
 * byte-fallback tokens), and the space put in front of the text at
 * encoding is not part of it.
 */
static void
spm_text(struct tok_decoder *d, char *s, size_t *n)
{
	size_t i, o = 0;

	for (i = 0; i < *n; i++) {
		if (i + 3 <= *n && memcmp(s + i, SPACE_MARK, 3) == 0) {
			s[o++] = ' ';
			i += 2;
		} else {
			s[o++] = s[i];
		}
	}
	*n = o;
	if (!d->started && o > 0) {
		d->started = 1;
		if (d->t->add_space_prefix && s[0] == ' ') {
			memmove(s, s + 1, o - 1);
			(*n)--;
		}
	}
}

static void
release(struct tok_decoder *d, size_t n, struct buf *out)
{
	char *s = d->pending.s;
	size_t rest = d->pending.n - n;

	if (d->t->model == TOK_SPM)
		spm_text(d, s, &n);
	else if (n > 0)
		d->started = 1;
	buf_add(out, s, n);
	if (rest)	/* s is NULL while nothing was ever pending */
		memmove(s, d->pending.s + d->pending.n - rest, rest);
	d->pending.n = rest;
}

void
tok_decode(struct tok_decoder *d, int id, struct buf *out)
{
	tok_piece(d->t, id, d->special, &d->pending);
	release(d, d->pending.n - incomplete_tail((unsigned char *)d->pending.s, d->pending.n), out);
}

void
tok_decode_finish(struct tok_decoder *d, struct buf *out)
{
	if (d->pending.n)
		release(d, d->pending.n, out);
	buf_free(&d->pending);
}
