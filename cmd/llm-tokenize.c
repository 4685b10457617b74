/* llm-tokenize: text to token ids, and token ids back to text. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/chat.h"
#include "../lib/gguf.h"
#include "../lib/tok.h"
#include "../lib/tokstream.h"
#include "../lib/util.h"
#include "tool.h"

static void
usage(int status)
{
	fprintf(status ? stderr : stdout,
	    "usage: %s -m MODEL [-q] [--bos | --no-bos] [--eos] [--special] [--keep-newline] [TEXT ...]\n"
	    "       %s -m MODEL --chat [--template NAME] [--bos | --no-bos]\n"
	    "       %s -m MODEL -d [-n] [--special]\n"
	    "       %s -m MODEL --vocab\n", argv0, argv0, argv0, argv0);
	if (status == 0)
		printf("every option and what it does: man llm-tokenize, or man -l man/llm-tokenize.1\n");
	exit(status);
}

static int last_byte = -1;	/* the last byte written, or -1 */

static void
put(const char *s, size_t n)
{
	if (n && (fwrite(s, 1, n, stdout) != n || fflush(stdout) == EOF))
		die(1, "stdout:");
	if (n)
		last_byte = (unsigned char)s[n - 1];
}

/*
 * Ids on stdin to text on stdout, written as soon as characters complete;
 * at the end a newline, unless the text ends with one or nonl says not:
 * the text is a line, and a shell's prompt comes after it.
 */
static void
detokenize(const struct tok *t, int special, int nonl)
{
	struct tokstream ts;
	struct tok_decoder d;
	struct buf out = { 0 };
	int id, r;

	tokstream_init(&ts, stdin, t->n_vocab);
	tok_decoder_init(&d, t, special);
	while ((r = tokstream_next(&ts, &id)) == 1) {
		out.n = 0;
		tok_decode(&d, id, &out);
		put(out.s, out.n);
	}
	out.n = 0;
	tok_decode_finish(&d, &out);
	put(out.s, out.n);
	buf_free(&out);
	if (r < 0)
		die(1, "stdin: %s", llm_err());
	if (!nonl && last_byte != '\n')
		put("\n", 1);
}

/* One line per token: id, type, piece; tabs, newlines and backslashes escaped. */
static void
list_vocab(const struct tok *t)
{
	int id;
	size_t i;

	for (id = 0; id < t->n_vocab; id++) {
		printf("%d\t%s\t", id, tok_type_name(t->type[id]));
		for (i = 0; i < t->piece[id].n; i++) {
			unsigned char c = (unsigned char)t->piece[id].s[i];
			if (c == '\\')
				fputs("\\\\", stdout);
			else if (c == '\t')
				fputs("\\t", stdout);
			else if (c == '\n')
				fputs("\\n", stdout);
			else if (c == '\r')
				fputs("\\r", stdout);
			else if (c < 0x20 || c == 0x7f)
				printf("\\x%02x", c);
			else
				putchar(c);
		}
		putchar('\n');
	}
	if (fflush(stdout) == EOF || ferror(stdout))
		die(1, "stdout:");
}

int
main(int argc, char *argv[])
{
	enum { O_BOS = 256, O_NO_BOS, O_EOS, O_SPECIAL, O_VOCAB, O_CHAT, O_TEMPLATE, O_KEEP_NL };
	static const struct option longopts[] = {
		{ "bos", no_argument, NULL, O_BOS },
		{ "no-bos", no_argument, NULL, O_NO_BOS },
		{ "eos", no_argument, NULL, O_EOS },
		{ "special", no_argument, NULL, O_SPECIAL },
		{ "vocab", no_argument, NULL, O_VOCAB },
		{ "chat", no_argument, NULL, O_CHAT },
		{ "template", required_argument, NULL, O_TEMPLATE },
		{ "keep-newline", no_argument, NULL, O_KEEP_NL },
		{ "decode", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	struct gguf g;
	struct tok t;
	struct buf text = { 0 };
	struct ids ids = { 0 };
	int c, bos = -1, eos = 0, special = 0, decode = 0, vocab = 0, chat = 0, family = CHAT_NONE, i;
	int quiet = 0, nonl = 0, keep_nl = 0;
	struct chat_msg *msgs;
	size_t n_msgs;

	argv0 = "llm-tokenize";
	argv[0] = (char *)argv0;	/* getopt's own messages name the tool as ours do */
	while ((c = getopt_long(argc, argv, "m:dnqh", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': path = optarg; break;
		case 'd': decode = 1; break;
		case 'n': nonl = 1; break;
		case O_KEEP_NL: keep_nl = 1; break;
		case 'q': quiet = 1; break;
		case O_BOS: bos = 1; break;
		case O_NO_BOS: bos = 0; break;
		case O_EOS: eos = 1; break;
		case O_SPECIAL: special = 1; break;
		case O_VOCAB: vocab = 1; break;
		case O_CHAT: chat = 1; break;
		case O_TEMPLATE:
			if ((family = chat_parse(optarg)) == CHAT_NONE)
				die(2, "--template: '%s': expected one of %s", optarg, chat_names());
			break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (!path || (decode && (optind < argc || vocab)) || (vocab && optind < argc))
		usage(2);
	/* one standard input: the model, or what is tokenized */
	if (strcmp(path, "-") == 0 && (decode || chat || (!vocab && optind >= argc)))
		die(2, "-m -: the model and the %s cannot both come on standard input: give %s",
		    decode ? "ids" : chat ? "conversation" : "text",
		    decode || chat ? "the model's path" : "the text as arguments, or the model's path");
	if (family != CHAT_NONE && !chat)
		die(2, "--template goes with --chat");
	if (nonl && !decode)
		die(2, "-n goes with -d: it leaves out the newline that ends the text");
	if (keep_nl && (decode || chat || vocab || optind < argc))
		die(2, "--keep-newline goes with text on standard input");
	/* the conversation is on stdin; its markup comes from the template alone */
	if (chat && (decode || vocab || special || eos || optind < argc))
		die(2, "--chat reads a conversation on stdin and takes no %s",
		    decode ? "-d" : vocab ? "--vocab" : special ? "--special" : eos ? "--eos" : "TEXT");
	if (gguf_open(&g, path) < 0 || tok_load(&t, &g) < 0)
		die(1, "%s: %s", path, llm_err());
	if (t.warning[0] && !quiet)
		weprintf("%s: %s", path, t.warning);

	if (vocab) {
		list_vocab(&t);
	} else if (decode) {
		detokenize(&t, special, nonl);
	} else {
		if (chat) {
			if (family == CHAT_NONE && (family = chat_detect(&g)) == CHAT_NONE)
				die(1, "%s: no chat template recognized in tokenizer.chat_template; give "
				    "--template with one of %s", path, chat_names());
			if (buf_read_all(&text, stdin) < 0)
				die(1, "stdin:");
			if (chat_read(text.s ? text.s : "", text.n, &msgs, &n_msgs) < 0)
				die(1, "stdin: %s", llm_err());
			/* the system message as the template renders it: its own where none is given */
			int given = n_msgs > 0 && msgs[0].role == CHAT_SYSTEM;
			char *sys = chat_system(&g, family, given ? msgs[0].text : NULL);
			if (given) {
				free(msgs[0].text);
				msgs[0].text = sys;
			} else if (sys) {
				msgs = xrealloc(msgs, (n_msgs + 1) * sizeof *msgs);
				memmove(msgs + 1, msgs, n_msgs * sizeof *msgs);
				msgs[0] = (struct chat_msg){ .role = CHAT_SYSTEM, .text = sys };
				n_msgs++;
			}
		} else if (optind < argc) {
			for (i = optind; i < argc; i++) {
				if (i > optind)
					buf_add(&text, " ", 1);
				buf_add(&text, argv[i], strlen(argv[i]));
			}
		} else {
			if (buf_read_all(&text, stdin) < 0)
				die(1, "stdin:");
			/*
			 * The newline that ends the input's last line (echo's, an
			 * editor's) is not part of the text, as the shell's $(...)
			 * drops it: one, with a CR before it.
			 */
			if (!keep_nl && text.n && text.s[text.n - 1] == '\n') {
				text.n--;
				if (text.n && text.s[text.n - 1] == '\r')
					text.n--;
			}
		}
		if (bos < 0)
			bos = t.add_bos;
		if (bos && t.bos < 0)
			die(1, "%s: the vocabulary has no BOS token", path);
		/* a conversation ends where the assistant's turn opens: no EOS */
		eos = !chat && (eos || t.add_eos);
		if (eos && t.eos < 0)
			die(1, "%s: the vocabulary has no EOS token", path);
		if (bos)
			ids_push(&ids, t.bos);
		if (!chat)
			tok_encode(&t, text.s ? text.s : "", text.n, special, &ids);
		else if (chat_render(&t, family, msgs, n_msgs, &ids) < 0)
			die(1, "%s", llm_err());
		else
			chat_free(msgs, n_msgs);
		if (eos)
			ids_push(&ids, t.eos);
		if (tokstream_write_ids(stdout, ids.v, ids.n) < 0)
			die(1, "stdout:");
	}
	ids_free(&ids);
	buf_free(&text);
	tok_free(&t);
	gguf_close(&g);
	return 0;
}
