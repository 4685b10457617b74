/* llm-kvdump: slices of a KV snapshot as text or raw floats. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/snapshot.h"
#include "../lib/tokstream.h"
#include "../lib/util.h"
#include "tool.h"

static void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s [--k | --v] [--layer L] [--pos A[-B]] "
	    "[--head H] [--raw] [--tokens] FILE\n", argv0);
	if (status == 0)
		printf("every option and what it does: man llm-kvdump, or man -l man/llm-kvdump.1\n");
	exit(status);
}

int
main(int argc, char *argv[])
{
	enum { O_K = 256, O_V, O_LAYER, O_POS, O_HEAD, O_RAW, O_TOKENS };
	static const struct option longopts[] = {
		{ "k", no_argument, NULL, O_K },
		{ "v", no_argument, NULL, O_V },
		{ "layer", required_argument, NULL, O_LAYER },
		{ "pos", required_argument, NULL, O_POS },
		{ "head", required_argument, NULL, O_HEAD },
		{ "raw", no_argument, NULL, O_RAW },
		{ "tokens", no_argument, NULL, O_TOKENS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct snap_slice sl = { .which = -1, .layer = -1, .head = -1 };
	struct snapshot s;
	const char *path;
	int c, raw = 0, tokens = 0, w, k = 0, v = 0;
	uint32_t l, p, d, i, r;
	float *row;

	argv0 = "llm-kvdump";
	argv[0] = (char *)argv0;	/* getopt's own messages name the tool as ours do */
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case O_K: k = 1; sl.which = KV_K; break;
		case O_V: v = 1; sl.which = KV_V; break;
		case O_LAYER: sl.layer = opt_int("--layer", optarg, 0, INT32_MAX); break;
		case O_POS:
			if (opt_range(optarg, &sl.pos_a, &sl.pos_b) < 0)
				die(2, "--pos: %s", llm_err());
			sl.have_pos = 1;
			break;
		case O_HEAD: sl.head = opt_int("--head", optarg, 0, INT32_MAX); break;
		case O_RAW: raw = 1; break;
		case O_TOKENS: tokens = 1; break;
		case 'h': usage(0); break;
		case 'V': version(); break;
		default: usage(2);
		}
	}
	if (optind != argc - 1)
		usage(2);
	/* Refused rather than resolved by order: neither means both. */
	if (k && v)
		die(2, "--k and --v conflict: give one, or neither for both");
	/* the tokens are the snapshot's, of no layer, head or store */
	if (tokens && (k || v || sl.layer >= 0 || sl.have_pos || sl.head >= 0 || raw))
		die(2, "--tokens and %s conflict: --tokens prints every position's token alone",
		    k ? "--k" : v ? "--v" : sl.layer >= 0 ? "--layer" : sl.have_pos ? "--pos" :
		    sl.head >= 0 ? "--head" : "--raw");
	/* binary floats would only garble a terminal */
	if (raw && isatty(STDOUT_FILENO))
		die(2, "--raw writes binary floats: redirect standard output to a file or a pipe");
	path = argv[optind];
	if (snapshot_open(&s, path) < 0)
		die(1, "%s: %s", path, llm_err());

	if (tokens) {
		int *ids = xmalloc((s.n_pos ? s.n_pos : 1) * sizeof *ids);
		for (p = 0; p < s.n_pos; p++)
			ids[p] = (int)snapshot_token(&s, p);
		if (tokstream_write_ids(stdout, ids, s.n_pos) < 0)
			die(1, "stdout:");
		free(ids);
		snapshot_close(&s);
		return 0;
	}
	if (snapshot_slice_check(&s, &sl) < 0)
		die(1, "%s: %s: %s", path, sl.bad == SLICE_LAYER ? "--layer" : sl.bad == SLICE_HEAD ?
		    "--head" : "--pos", llm_err());

	if (!raw && printf("layer\tkv\tpos\thead\tdim\tvalue\n") < 0)
		die(1, "stdout:");
	row = xmalloc(s.meta.kv_dim * sizeof *row);
	for (l = sl.l0; l < sl.l1; l++)
		for (w = KV_K; w <= KV_V; w++) {
			if (sl.which >= 0 && w != sl.which)
				continue;
			if (snapshot_verify_block(&s, l, w) < 0)
				die(1, "%s: %s", path, llm_err());
			uint32_t p0, p1;
			snapshot_slice_rows(&s, &sl, l, &p0, &p1);
			for (i = p0; i < p1; i++) {
				/* as the model computed it: dequantized, rotated back; a window's rows by position */
				r = snapshot_row_at(&s, l, i);
				p = snapshot_row_pos(&s, l, r);
				snapshot_row(&s, l, w, r, row);
				if (raw) {
					if (fwrite(row + sl.d0, sizeof(float), sl.d1 - sl.d0, stdout) != sl.d1 - sl.d0)
						die(1, "stdout:");
					continue;
				}
				for (d = sl.d0; d < sl.d1; d++)
					if (printf("%u\t%c\t%u\t%u\t%u\t%.9g\n", l, w ? 'v' : 'k', p,
					    d / s.meta.head_dim, d % s.meta.head_dim, row[d]) < 0)
						die(1, "stdout:");
			}
		}
	if (fflush(stdout) == EOF)
		die(1, "stdout:");
	free(row);
	snapshot_close(&s);
	return 0;
}
