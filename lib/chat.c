/*
 * chat.c: chat templates.  A GGUF carries its template as a Jinja
 * program (tokenizer.chat_template); like llama.cpp, we do not run it but
 * recognize its family by the markers it uses and render that family
 * ourselves.  Control tokens come from the template alone: a message is
 * always tokenized as text, so that a user who types "<|im_start|>" gets
 * those characters, not a new turn.
 */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "util.h"

static const char *const names[] = { "chatml", "llama3", "llama2", "zephyr", "phi3", "gemma", "harmony" };
static const char *const roles[] = { "system", "user", "assistant" };

const char *
chat_name(int family)
{
	return family >= 0 && family < (int)(sizeof names / sizeof names[0]) ? names[family] : NULL;
}

int
chat_parse(const char *name)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcmp(name, names[i]) == 0)
			return (int)i;
	return CHAT_NONE;
}

const char *
chat_names(void)
{
	static char list[64];	/* every name and ", " between them */

	if (!list[0])
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
			strcat(list, i ? ", " : "");
			strcat(list, names[i]);
		}
	return list;
}

static int
has(const struct gguf_str *s, const char *marker)
{
	return mem_find(s->s, (size_t)s->n, marker, strlen(marker)) != NULL;
}

int
chat_detect(const struct gguf *g)
{
	struct gguf_str tpl;

	if (gguf_get_str(g, "tokenizer.chat_template", &tpl) != 1)
		return CHAT_NONE;
	/* the most specific markers first: Phi-3 and Zephyr share <|user|>, harmony <|end|> with Phi-3 */
	if (has(&tpl, "<|channel|>") && has(&tpl, "<|start|>"))
		return CHAT_HARMONY;
	if (has(&tpl, "<|im_start|>"))
		return CHAT_CHATML;
	if (has(&tpl, "<|start_header_id|>"))
		return CHAT_LLAMA3;
	if (has(&tpl, "<start_of_turn>"))
		return CHAT_GEMMA;
	if (has(&tpl, "<|end|>") && has(&tpl, "<|assistant|>"))
		return CHAT_PHI3;
	if (has(&tpl, "<|user|>"))
		return CHAT_ZEPHYR;
	if (has(&tpl, "[INST]"))
		return CHAT_LLAMA2;
	return CHAT_NONE;
}

/*
 * The text of the template's first string literal that goes on from
 * open: what follows open, escapes undone, up to the literal's end, or
 * with stop up to stop, which must come first; malloc'd, or NULL.
 */
static char *
literal_after(const struct gguf_str *tpl, const char *open, const char *stop)
{
	const char *lim = tpl->s + tpl->n, *p, *q;
	struct buf out = { 0 };

	for (p = tpl->s; (p = mem_find(p, (size_t)(lim - p), open, strlen(open))) != NULL; p++) {
		out.n = 0;
		for (q = p + strlen(open); ; q++) {
			if (stop && (size_t)(lim - q) >= strlen(stop) && memcmp(q, stop, strlen(stop)) == 0)
				break;
			/* the literal's end, which must not come before stop */
			if (q == lim || *q == '\'' || *q == '"') {
				q = stop ? NULL : q;
				break;
			}
			/* no Jinja inside: a literal, not an expression */
			if (*q == '{' || *q == '}') {
				q = NULL;
				break;
			}
			if (*q == '\\' && q + 1 < lim) {
				q++;
				buf_add(&out, *q == 'n' ? "\n" : *q == 't' ? "\t" : q, 1);
			} else
				buf_add(&out, q, 1);
		}
		if (!q)
			continue;
		buf_add(&out, "", 1);
		return out.s;
	}
	buf_free(&out);
	return NULL;
}

char *
chat_default_system(const struct gguf *g)
{
	struct gguf_str tpl;
	char *s;

	if (gguf_get_str(g, "tokenizer.chat_template", &tpl) != 1)
		return NULL;
	/* ChatML's "<|im_start|>system\n" and literal text to "<|im_end|>" */
	s = literal_after(&tpl, "<|im_start|>system\\n", "<|im_end|>");
	if (!s)
		s = literal_after(&tpl, "<|im_start|>system\n", "<|im_end|>");
	if (s && !*s) {
		free(s);
		s = NULL;
	}
	return s;
}

char *
chat_system(const struct gguf *g, int family, const char *given)
{
	struct gguf_str tpl;
	struct buf out = { 0 };
	char *cut, *date;

	if (family == CHAT_CHATML && !given)
		return chat_default_system(g);
	/*
	 * Llama 3.1 to 3.3 open every conversation with a system turn that
	 * states the knowledge cutoff and the date, then the system message
	 * if any, trimmed: the date is the template's own (date_string,
	 * "26 Jul 2024"), so a rendering does not change with the day.
	 */
	if (family == CHAT_LLAMA3 && gguf_get_str(g, "tokenizer.chat_template", &tpl) == 1 &&
	    (cut = literal_after(&tpl, "Cutting Knowledge Date:", NULL)) != NULL) {
		date = literal_after(&tpl, "set date_string = \"", NULL);
		buf_add(&out, "Cutting Knowledge Date:", strlen("Cutting Knowledge Date:"));
		buf_add(&out, cut, strlen(cut));
		buf_add(&out, "Today Date: ", strlen("Today Date: "));
		buf_add(&out, date && *date ? date : "26 Jul 2024", strlen(date && *date ? date : "26 Jul 2024"));
		buf_add(&out, "\n\n", 2);
		if (given) {
			size_t n = strlen(given), i = 0;
			while (i < n && strchr(" \t\n\r", given[i]))
				i++;
			while (n > i && strchr(" \t\n\r", given[n - 1]))
				n--;
			buf_add(&out, given + i, n - i);
		}
		buf_add(&out, "", 1);
		free(cut), free(date);
		return out.s;
	}
	if (!given)
		return NULL;
	return memcpy(xmalloc(strlen(given) + 1), given, strlen(given) + 1);
}

/* ---- reading ---- */

void
chat_free(struct chat_msg *msgs, size_t n_msgs)
{
	for (size_t i = 0; i < n_msgs; i++)
		free(msgs[i].text);
	free(msgs);
}

/* One message from line[0..n): 0, or -1 with llm_err(). */
static int
parse_line(const char *line, size_t n, long no, struct chat_msg *m)
{
	const char *tab = memchr(line, '\t', n);
	size_t i, k = 0, rlen;
	char *out;

	if (!tab) {
		llm_seterr("line %ld: expected ROLE<TAB>TEXT", no);
		return -1;
	}
	rlen = (size_t)(tab - line);
	m->role = -1;
	for (i = 0; i < sizeof roles / sizeof roles[0]; i++)
		if (rlen == strlen(roles[i]) && memcmp(line, roles[i], rlen) == 0)
			m->role = (int)i;
	if (m->role < 0) {
		llm_seterr("line %ld: role '%.*s': expected system, user or assistant", no,
		    (int)(rlen < 40 ? rlen : 40), line);
		return -1;
	}
	out = m->text = xmalloc(n - rlen);
	for (i = rlen + 1; i < n; i++) {
		if (line[i] != '\\') {
			out[k++] = line[i];
			continue;
		}
		switch (i + 1 < n ? line[++i] : 0) {
		case 'n': out[k++] = '\n'; break;
		case 't': out[k++] = '\t'; break;
		case '\\': out[k++] = '\\'; break;
		default:
			llm_seterr("line %ld: a backslash must start \\n, \\t or \\\\", no);
			free(m->text);
			m->text = NULL;
			return -1;
		}
	}
	out[k] = '\0';
	return 0;
}

int
chat_read(const char *s, size_t n, struct chat_msg **msgs, size_t *n_msgs)
{
	size_t cap = 0, len;
	const char *end = s + n, *nl;
	long no = 0;

	*msgs = NULL;
	*n_msgs = 0;
	while (s < end) {
		nl = memchr(s, '\n', (size_t)(end - s));
		len = (size_t)((nl ? nl : end) - s);
		no++;
		if (len && s[len - 1] == '\r')
			len--;
		if (len > 0) {
			if (*n_msgs == cap) {
				cap = cap ? 2 * cap : 8;
				*msgs = xrealloc(*msgs, cap * sizeof **msgs);
			}
			if (parse_line(s, len, no, &(*msgs)[*n_msgs]) < 0) {
				chat_free(*msgs, *n_msgs);
				*msgs = NULL;
				*n_msgs = 0;
				return -1;
			}
			(*n_msgs)++;
		}
		s = nl ? nl + 1 : end;
	}
	return 0;
}

/* ---- rendering ---- */

/*
 * The rendered conversation is a run of fragments: the template's
 * control tokens, and raw text in between, which joins the markup's
 * plain characters (role names, newlines) with the messages.  Raw text
 * is tokenized without special parsing, a whole run at once, as
 * llama.cpp tokenizes the text between two control tokens: the same ids
 * as rendering the template to a string, except that a message can
 * never turn into control tokens.
 */
struct render {
	const struct tok *t;
	struct buf raw;
	struct ids *out;
	const char *missing;	/* the first control token the vocabulary lacks */
};

static void
flush(struct render *r)
{
	if (r->raw.n && r->out)
		tok_encode(r->t, r->raw.s, r->raw.n, 0, r->out);
	r->raw.n = 0;
}

static void
raw(struct render *r, const char *s)
{
	buf_add(&r->raw, s, strlen(s));
}

/* A marker of the template: its control token, or text if the vocabulary has none. */
static void
marker(struct render *r, const char *s)
{
	int id = tok_lookup(r->t, s, strlen(s));

	if (id < 0 || r->t->type[id] != TT_CONTROL) {
		raw(r, s);
		return;
	}
	flush(r);
	if (r->out)
		ids_push(r->out, id);
}

/*
 * A control token of the template, which the vocabulary must have: as
 * text, a model trained on the token would read another prompt, so its
 * lack is an error (the first one is named).
 */
static void
ctl(struct render *r, const char *s)
{
	int id = tok_lookup(r->t, s, strlen(s));

	if ((id < 0 || r->t->type[id] != TT_CONTROL) && !r->missing)
		r->missing = s;
	marker(r, s);
}

/* 0, or -1 naming the first control token of the template the vocabulary lacks. */
static int
missing(const struct render *r, int family)
{
	if (!r->missing)
		return 0;
	llm_seterr("the %s template needs the control token %s, which the vocabulary lacks",
	    chat_name(family), r->missing);
	return -1;
}

int
chat_render_from(const struct tok *t, int family, const struct chat_msg *msgs, size_t n_msgs,
    size_t from, struct ids *out)
{
	struct render r = { t, { 0 }, NULL, NULL };
	const char *system = NULL;
	size_t i;
	int first_user = 1;

	if (!chat_name(family)) {
		llm_seterr("unknown chat template (known: %s)", chat_names());
		return -1;
	}
	/*
	 * harmony (gpt-oss) opens with its system message, always, as
	 * openai-harmony's renderer writes it by default: no current date,
	 * reasoning medium.  A system message of the conversation is the
	 * developer's instructions.
	 */
	if (family == CHAT_HARMONY) {
		r.out = from == 0 ? out : NULL;
		ctl(&r, "<|start|>"), raw(&r, "system"), ctl(&r, "<|message|>");
		raw(&r, "You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\n"
		    "Reasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be "
		    "included for every message."), ctl(&r, "<|end|>");
	}
	for (i = 0; i < n_msgs; i++) {
		const struct chat_msg *m = &msgs[i];
		const char *role = roles[m->role];

		/*
		 * The messages before from only set the state: what they render
		 * is dropped, but for the text after their last control token,
		 * which joins what comes next as in a whole rendering.
		 */
		if (i == from)
			r.out = out;

		switch (family) {
		case CHAT_CHATML:	/* <|im_start|>ROLE\nTEXT<|im_end|>\n */
			ctl(&r, "<|im_start|>"), raw(&r, role), raw(&r, "\n"), raw(&r, m->text);
			ctl(&r, "<|im_end|>"), raw(&r, "\n");
			break;
		case CHAT_LLAMA3:	/* <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> */
			ctl(&r, "<|start_header_id|>"), raw(&r, role), ctl(&r, "<|end_header_id|>");
			raw(&r, "\n\n"), raw(&r, m->text), ctl(&r, "<|eot_id|>");
			break;
		case CHAT_ZEPHYR:	/* <|ROLE|>\nTEXT</s>\n */
		case CHAT_PHI3:		/* <|ROLE|>\nTEXT<|end|>\n */
			/* Zephyr's role markers are text in TinyLlama's vocabulary, Phi-3's tokens */
			if (m->role == CHAT_SYSTEM)
				marker(&r, "<|system|>");
			else
				marker(&r, m->role == CHAT_USER ? "<|user|>" : "<|assistant|>");
			raw(&r, "\n"), raw(&r, m->text);
			ctl(&r, family == CHAT_PHI3 ? "<|end|>" : "</s>"), raw(&r, "\n");
			break;
		case CHAT_HARMONY:	/* <|start|>ROLE<|message|>TEXT<|end|>; the assistant's on the final channel */
			ctl(&r, "<|start|>"), raw(&r, m->role == CHAT_SYSTEM ? "developer" : role);
			if (m->role == CHAT_ASSISTANT)
				ctl(&r, "<|channel|>"), raw(&r, "final");
			ctl(&r, "<|message|>");
			if (m->role == CHAT_SYSTEM)
				raw(&r, "# Instructions\n\n");
			raw(&r, m->text), ctl(&r, "<|end|>");
			break;
		case CHAT_LLAMA2:
		case CHAT_GEMMA:
			/* no system turn of their own: it opens the first user turn */
			if (m->role == CHAT_SYSTEM) {
				system = m->text;
				break;
			}
			if (family == CHAT_GEMMA) {	/* <start_of_turn>user\nTEXT<end_of_turn>\n */
				ctl(&r, "<start_of_turn>");
				raw(&r, m->role == CHAT_USER ? "user\n" : "model\n");
				if (m->role == CHAT_USER && system && first_user)
					raw(&r, system), raw(&r, "\n\n");
				raw(&r, m->text), ctl(&r, "<end_of_turn>"), raw(&r, "\n");
			} else if (m->role == CHAT_USER) {	/* [INST] <<SYS>>..<</SYS>> TEXT [/INST] */
				if (!first_user)
					ctl(&r, "<s>");
				raw(&r, "[INST] ");
				if (system && first_user)
					raw(&r, "<<SYS>>\n"), raw(&r, system), raw(&r, "\n<</SYS>>\n\n");
				raw(&r, m->text), raw(&r, " [/INST]");
			} else {			/* TEXT</s> */
				raw(&r, " "), raw(&r, m->text), ctl(&r, "</s>");
			}
			if (m->role == CHAT_USER)
				first_user = 0;
			break;
		}
	}
	r.out = out;
	/* the opening of the assistant's turn */
	switch (family) {
	case CHAT_CHATML: ctl(&r, "<|im_start|>"), raw(&r, "assistant\n"); break;
	case CHAT_LLAMA3:
		ctl(&r, "<|start_header_id|>"), raw(&r, "assistant"), ctl(&r, "<|end_header_id|>");
		raw(&r, "\n\n");
		break;
	case CHAT_ZEPHYR: case CHAT_PHI3: marker(&r, "<|assistant|>"), raw(&r, "\n"); break;
	case CHAT_GEMMA: ctl(&r, "<start_of_turn>"), raw(&r, "model\n"); break;
	case CHAT_LLAMA2: break;	/* the answer follows [/INST] */
	case CHAT_HARMONY: ctl(&r, "<|start|>"), raw(&r, "assistant"); break;
	}
	flush(&r);
	buf_free(&r.raw);
	return missing(&r, family);
}

int
chat_render(const struct tok *t, int family, const struct chat_msg *msgs, size_t n_msgs,
    struct ids *out)
{
	return chat_render_from(t, family, msgs, n_msgs, 0, out);
}

/* The control token that closes an assistant's message. */
static const char *
close_token(int family)
{
	switch (family) {
	case CHAT_CHATML: return "<|im_end|>";
	case CHAT_LLAMA3: return "<|eot_id|>";
	case CHAT_PHI3: return "<|end|>";
	case CHAT_GEMMA: return "<end_of_turn>";
	case CHAT_ZEPHYR: case CHAT_LLAMA2: return "</s>";
	case CHAT_HARMONY: return "<|end|>";
	}
	return NULL;
}

int
chat_close(const struct tok *t, int family, struct ids *out)
{
	struct render r = { t, { 0 }, out, NULL };
	const char *tk = close_token(family);

	if (!tk) {
		llm_seterr("unknown chat template (known: %s)", chat_names());
		return -1;
	}
	ctl(&r, tk);
	return missing(&r, family);
}

int
chat_end_id(const struct tok *t, int family)
{
	const char *tk = family == CHAT_HARMONY ? "<|return|>" : close_token(family);
	int id = tk ? tok_lookup(t, tk, strlen(tk)) : -1;

	return id >= 0 && t->type[id] == TT_CONTROL ? id : -1;
}

/* harmony's states: the role after <|start|>, a channel's name, a message's text, between */
enum { V_BETWEEN, V_ROLE, V_CHANNEL, V_TEXT };

void
chat_view_init(struct chat_view *v, const struct tok *t, int family)
{
	memset(v, 0, sizeof *v);
	v->t = t;
	v->family = family;
	v->state = V_ROLE;	/* the reply starts after <|start|>assistant */
}

/* id is the control token s */
static int
is_ctl(const struct tok *t, int id, const char *s)
{
	size_t n = strlen(s);

	return t->type[id] == TT_CONTROL && t->piece[id].n == n && memcmp(t->piece[id].s, s, n) == 0;
}

int
chat_shown(struct chat_view *v, int id)
{
	const struct tok *t = v->t;

	if (v->family != CHAT_HARMONY)
		return 1;
	if (is_ctl(t, id, "<|start|>")) {
		v->state = V_ROLE;
	} else if (is_ctl(t, id, "<|channel|>")) {
		v->state = V_CHANNEL;
		v->n_channel = 0;
	} else if (is_ctl(t, id, "<|message|>")) {
		v->state = V_TEXT;
	} else if (t->type[id] == TT_CONTROL) {	/* <|end|>, <|return|>, <|call|>, <|constrain|>, ... */
		v->state = V_BETWEEN;
	} else if (v->state == V_CHANNEL) {	/* the name, as it comes */
		struct buf b = { 0 };
		tok_piece(t, id, 0, &b);
		for (size_t i = 0; i < b.n && v->n_channel < (int)sizeof v->channel - 1; i++)
			v->channel[v->n_channel++] = b.s[i];
		v->channel[v->n_channel] = '\0';
		buf_free(&b);
	} else if (v->state == V_TEXT) {
		/*
		 * the channel's first word ("commentary to=functions.f" names a
		 * recipient after it), after any space: SentencePiece's U+2581 too
		 */
		const char *w = v->channel;
		for (;;)
			if (*w == ' ' || *w == '\t' || *w == '\n')
				w++;
			else if (strncmp(w, "\xe2\x96\x81", 3) == 0)
				w += 3;
			else
				break;
		return strncmp(w, "final", 5) == 0 && (w[5] == '\0' || strchr(" \t\n\xe2", w[5]));
	}
	return 0;
}
