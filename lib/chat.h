/* chat.h: conversations rendered by a model's chat template, as token ids. */
#ifndef LLM_CHAT_H
#define LLM_CHAT_H

#include <stddef.h>

#include "gguf.h"
#include "tok.h"
#include "util.h"

/* The template families, recognized as llama.cpp recognizes them. */
enum { CHAT_NONE = -1, CHAT_CHATML, CHAT_LLAMA3, CHAT_LLAMA2, CHAT_ZEPHYR, CHAT_PHI3, CHAT_GEMMA,
	CHAT_HARMONY };

/* "chatml", "llama3", "llama2", "zephyr", "phi3", "gemma", "harmony"; NULL otherwise. */
const char *chat_name(int family);
/* The family of a name, or CHAT_NONE. */
int chat_parse(const char *name);
/* The names, comma-separated, for messages. */
const char *chat_names(void);
/* The family of the file's tokenizer.chat_template; CHAT_NONE if it has none or none is known. */
int chat_detect(const struct gguf *g);
/*
 * The system message a ChatML template puts first when the conversation
 * has none (SmolLM2-Instruct's "You are a helpful AI assistant named
 * SmolLM, ...", Qwen2.5's "You are Qwen, ..."), as Hugging Face's
 * apply_chat_template renders it: the text of the first string literal
 * that goes on from "<|im_start|>system\n" to "<|im_end|>", its escapes
 * undone; malloc'd, or NULL if the template has none.
 */
char *chat_default_system(const struct gguf *g);
/*
 * The system message the family's template renders when the user's is
 * given (NULL: none): the given one, ChatML's default where none is
 * given, and for Llama 3.1 to 3.3 the header their template always
 * writes (the knowledge cutoff and the template's own date) before the
 * given one; malloc'd, or NULL for none.
 */
char *chat_system(const struct gguf *g, int family, const char *given);

enum { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT };

struct chat_msg {
	int role;
	char *text;		/* NUL-terminated, escapes undone */
};

/*
 * Read a conversation: one message a line, ROLE TAB TEXT, the role
 * system, user or assistant, and in TEXT the escapes \n (newline), \t
 * (tab) and \\ (backslash).  Empty lines are skipped.  0, or -1 with
 * llm_err() naming the line.
 */
int chat_read(const char *s, size_t n, struct chat_msg **msgs, size_t *n_msgs);
void chat_free(struct chat_msg *msgs, size_t n_msgs);

/*
 * The ids of the conversation as the family renders it, ending with the
 * opening of the assistant's turn.  The template's markup is tokenized
 * with its control tokens; each message's text is tokenized alone and as
 * text, so it can neither forge nor merge with a control token.  BOS is
 * the caller's.  0, or -1 with llm_err().
 */
int chat_render(const struct tok *t, int family, const struct chat_msg *msgs, size_t n_msgs,
    struct ids *out);

/*
 * A conversation carried on a turn at a time, as llm-chat keeps it: the
 * ids that follow msgs[0..from) (rendered before, the assistant's
 * messages as generated and closed by chat_close) to render
 * msgs[from..n) and open the assistant's turn.  Only the roles of the
 * messages before from matter (Llama 2 and Gemma put the system message
 * in the first user turn).  Pieces rendered one after another are a
 * whole rendering's ids but that each assistant message is its tokens as
 * generated, after the opening tokenized alone, as in a whole rendering
 * made to generate it.  0, or -1 with llm_err().
 */
int chat_render_from(const struct tok *t, int family, const struct chat_msg *msgs,
    size_t n_msgs, size_t from, struct ids *out);
/* The control token that ends an assistant's message after its text; 0 or -1 with llm_err(). */
int chat_close(const struct tok *t, int family, struct ids *out);
/*
 * The control token that ends the assistant's reply as generated, or -1:
 * chat_close's, but harmony's <|return|> (its messages end with <|end|>).
 */
int chat_end_id(const struct tok *t, int family);

/*
 * What of a reply a reader sees.  harmony's reply is messages on
 * channels, <|channel|>NAME<|message|>TEXT<|end|>, each after
 * <|start|>assistant but the first: only the final channel's text is
 * the answer; the analysis (its reasoning) and commentary are not.  Fed
 * the reply's ids one at a time, chat_shown says whether the id's text
 * is shown.  The other families show every id.
 */
struct chat_view {
	const struct tok *t;
	int family;
	int state;		/* harmony: where in a message the reply is */
	char channel[64];	/* the channel's name so far (and a recipient, after a space) */
	int n_channel;
};

void chat_view_init(struct chat_view *v, const struct tok *t, int family);
int chat_shown(struct chat_view *v, int id);
/* That token's id, which ends a reply when generated; -1 if the vocabulary lacks it. */
int chat_end_id(const struct tok *t, int family);

#endif
