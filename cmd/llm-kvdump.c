/* llm-kvdump: slices of a KV snapshot as text or raw floats. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/snapshot.h"
#include "../lib/util.h"

static void
usage(int status)
{
	fprintf(status ? stderr : stdout, "usage: %s [--k | --v] [--layer L] [--pos A[-B]] "
	    "[--head H] [--raw] [--tokens] FILE\n", argv0);
	exit(status);
}

int
main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "k", no_argument, NULL, 'k' },
		{ "v", no_argument, NULL, 'v' },
		{ "layer", required_argument, NULL, 'l' },
		{ "pos", required_argument, NULL, 'p' },
		{ "head", required_argument, NULL, 'H' },
		{ "raw", no_argument, NULL, 'r' },
		{ "tokens", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct snapshot s;
	const char *path, *pos_arg = NULL;
	char *end;
	long layer = -1, head = -1, pa = 0, pb = -1;
	int c, which = -1, raw = 0, tokens = 0, w;
	uint32_t l, p, d, d0, d1, l0, l1;

	argv0 = "llm-kvdump";
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'k': which = 0; break;
		case 'v': which = 1; break;
		case 'l': layer = opt_int("--layer", optarg, 0, INT32_MAX); break;
		case 'p':
			/* A or A-B: both whole numbers, A <= B */
			pos_arg = optarg;
			if ((end = strchr(optarg, '-')) != NULL)
				*end++ = '\0';
			pa = opt_int("--pos", optarg, 0, INT32_MAX);
			pb = end ? opt_int("--pos", end, pa, INT32_MAX) : pa;
			if (end)
				end[-1] = '-';	/* for messages */
			break;
		case 'H': head = opt_int("--head", optarg, 0, INT32_MAX); break;
		case 'r': raw = 1; break;
		case 't': tokens = 1; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (optind != argc - 1)
		usage(2);
	path = argv[optind];
	if (snapshot_open(&s, path) < 0)
		die(1, "%s: %s", path, llm_err());

	if (tokens) {
		for (p = 0; p < s.n_pos; p++)
			if (printf("%u\n", snapshot_token(&s, p)) < 0)
				die(1, "stdout:");
		if (fflush(stdout) == EOF)
			die(1, "stdout:");
		return 0;
	}
	if (layer >= (long)s.meta.n_layers)
		die(1, "%s: --layer %ld is out of range (0-%u)", path, layer, s.meta.n_layers - 1);
	if (head >= (long)s.meta.n_kv_heads)
		die(1, "%s: --head %ld is out of range (0-%u)", path, head, s.meta.n_kv_heads - 1);
	if (s.n_pos == 0 && pos_arg)
		die(1, "%s: --pos %s is out of range: the snapshot holds no positions", path, pos_arg);
	if (pos_arg && pb >= (long)s.n_pos)
		die(1, "%s: --pos %s is out of range (0-%u)", path, pos_arg, s.n_pos - 1);
	if (!pos_arg)
		pb = (long)s.n_pos - 1;
	l0 = layer < 0 ? 0 : (uint32_t)layer;
	l1 = layer < 0 ? s.meta.n_layers : (uint32_t)layer + 1;
	d0 = head < 0 ? 0 : (uint32_t)head * s.meta.head_dim;
	d1 = head < 0 ? s.meta.kv_dim : d0 + s.meta.head_dim;

	if (!raw && printf("layer\tkv\tpos\thead\tdim\tvalue\n") < 0)
		die(1, "stdout:");
	for (l = l0; l < l1; l++)
		for (w = 0; w < 2; w++) {
			const float *x;
			if (which >= 0 && w != which)
				continue;
			if (snapshot_verify_block(&s, l, w) < 0)
				die(1, "%s: %s", path, llm_err());
			x = snapshot_block(&s, l, w);
			for (p = (uint32_t)pa; (long)p <= pb; p++) {
				const float *row = x + (uint64_t)p * s.meta.kv_dim;
				if (raw) {
					if (fwrite(row + d0, sizeof(float), d1 - d0, stdout) != d1 - d0)
						die(1, "stdout:");
					continue;
				}
				for (d = d0; d < d1; d++)
					if (printf("%u\t%c\t%u\t%u\t%u\t%.9g\n", l, w ? 'v' : 'k', p,
					    d / s.meta.head_dim, d % s.meta.head_dim, row[d]) < 0)
						die(1, "stdout:");
			}
		}
	if (fflush(stdout) == EOF)
		die(1, "stdout:");
	snapshot_close(&s);
	return 0;
}
