/* mkmodel: write a random Llama model in GGUF, for tests, the demo and the benchmark. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/gguf.h"
#include "../cmd/tool.h"
#include "../lib/util.h"
#include "fixture.h"

static void
usage(void)
{
	fprintf(stderr, "usage: %s [-s tiny|small|smollm2-135m|qwen2.5-0.5b|llama3.2-1b|qwen3-30b-a3b|gpt-oss-20b|gemma3-270m|gemma3-1b] [-t f32|f16|bf16|q8_0|q4_0|...|q6_K|q2_K|q3_K|iq4_nl|iq4_xs|q4_K_mix|q2_K_mix] "
	    "[-c CTX] [-S SEED] [-E EOS] [-v VOCAB | -V VOCAB.gguf] [-w STD] [-C CHAT] [-B PRE] [-A ARCH] [-L LAYERS] [-W SWA] [-P PATTERN] [-K SOFTCAP] [-R] [-Y] [-T EOT] [-M EOM] -o OUT.gguf\n", argv0);
	exit(2);
}

int
main(int argc, char *argv[])
{
	const char *out = NULL, *shape = "tiny", *tname = "f32";
	struct fixture f;
	uint32_t type;
	int c, ctx = 0, eos = -1, vocab = 0, mix;
	long long seed = -1;
	float std = 0;

	argv0 = "mkmodel";
	const char *chat = NULL, *bpe = NULL, *arch = NULL, *vocab_from = NULL;
	int rope_freqs = 0, eot = 0, eom = 0, layers = 0, swa = -1, pattern = 0, oss_rope = 0;
	float softcap = 0;

	while ((c = getopt(argc, argv, "s:t:c:S:E:v:V:w:C:B:A:L:W:P:K:RYT:M:o:h")) != -1) {
		switch (c) {
		case 's': shape = optarg; break;
		case 't': tname = optarg; break;
		case 'c': ctx = atoi(optarg); break;
		case 'S': seed = atoll(optarg); break;
		case 'E': eos = atoi(optarg); break;
		case 'v': vocab = atoi(optarg); break;
		case 'V': vocab_from = optarg; break;	/* a real vocabulary: its tokenizer copied */
		case 'w': std = (float)atof(optarg); break;
		case 'C': chat = optarg; break;
		case 'B': bpe = optarg; break;
		case 'A': arch = optarg; break;		/* llama, qwen2, qwen3, qwen3moe, phi3, gemma3, gpt-oss */
		case 'L': layers = atoi(optarg); break;
		case 'W': swa = atoi(optarg); break;	/* gemma3, gpt-oss: the sliding window */
		case 'P': pattern = atoi(optarg); break;	/* gemma3: sliding_window_pattern */
		case 'K': softcap = (float)atof(optarg); break;	/* gemma3: final_logit_softcapping */
		case 'R': rope_freqs = 1; break;	/* Llama 3's rope_freqs.weight */
		case 'Y': oss_rope = 1; break;	/* gpt-oss-20b's RoPE: heads of 64, base 150000, YaRN 32 from 4096 */
		case 'T': eot = atoi(optarg); break;
		case 'M': eom = atoi(optarg); break;	/* a byte-level BPE vocabulary alone, pre-tokenizer PRE */
		case 'o': out = optarg; break;
		default: usage();
		}
	}
	if (!out || optind != argc)
		usage();
	if (bpe) {
		if (fixture_bpe_vocab(out, bpe) < 0)
			die(1, "%s:", out);
		return 0;
	}
	for (type = 0; type < GGML_NTYPES; type++)
		if (gguf_type_info(type) && strcmp(gguf_type_name(type), tname) == 0)
			break;
	mix = strcmp(tname, "q4_K_mix") == 0 ? 1 : strcmp(tname, "q2_K_mix") == 0 ? 2 : 0;
	if (mix)
		type = mix == 1 ? GGML_Q4_K : GGML_Q2_K;
	if (type == GGML_NTYPES)
		die(2, "-t %s: unknown type", tname);
	if (strcmp(shape, "tiny") == 0)
		fixture_tiny(&f, type);
	else if (strcmp(shape, "smollm2-135m") == 0)
		fixture_smollm2_135m(&f, type);
	else if (strcmp(shape, "small") == 0)
		fixture_small(&f, type);
	else if (strcmp(shape, "qwen2.5-0.5b") == 0)
		fixture_qwen25_05b(&f, type);
	else if (strcmp(shape, "llama3.2-1b") == 0)
		fixture_llama32_1b(&f, type);
	else if (strcmp(shape, "qwen3-30b-a3b") == 0)
		fixture_qwen3_30b_a3b(&f, type);
	else if (strcmp(shape, "gpt-oss-20b") == 0)
		fixture_gpt_oss_20b(&f, type);
	else if (strcmp(shape, "gemma3-270m") == 0)
		fixture_gemma3_270m(&f, type);
	else if (strcmp(shape, "gemma3-1b") == 0)
		fixture_gemma3_1b(&f, type);
	else
		die(2, "-s %s: unknown shape", shape);
	f.q4k_mix = mix;
	if (ctx > 0)
		f.ctx = ctx;
	if (eos >= 0)
		f.eos_id = eos;
	if (vocab > 0) {
		if (vocab < 260)
			die(2, "-v %d: a vocabulary needs at least 260 tokens", vocab);
		f.vocab = vocab;
	}
	if (seed >= 0)
		f.seed = (uint64_t)seed;
	f.std = std;
	f.chat = chat;
	if (arch)
		f.arch = arch;
	/*
	 * -A gemma3 on a small shape: 7 layers, so that with the pattern of
	 * 6 layers 0-4 and 6 slide and 5 is global, a window of 48 that a
	 * test stream outgrows, and a global RoPE base unlike the sliding
	 * layers' 10000.
	 */
	if (arch && strcmp(arch, "gemma3") == 0 && !f.n_swa) {
		f.n_layers = 7;
		f.n_swa = 48;
		f.rope_base = 1000000;
	}
	/*
	 * -A gpt-oss on another shape: a window of 32 (a q8_0 cache's group), and YaRN 32 from a
	 * context of 128 with a RoPE base of 4, so that its ramp spans every
	 * dimension unclamped by either end, and llama.cpp's rounding of
	 * the ends (rope_yarn in lib/rope.c) changes nothing: the fixture
	 * checks the rest of YaRN against llama.cpp.
	 */
	if (arch && strcmp(arch, "gpt-oss") == 0 && !f.n_swa) {
		f.n_swa = 32;
		f.yarn_factor = 32;
		f.yarn_orig_ctx = 128;
		f.rope_base = 4;
	}
	if (oss_rope) {
		struct fixture g;
		fixture_gpt_oss_20b(&g, type);
		f.head_dim = g.head_dim, f.rope_base = g.rope_base;
		f.yarn_factor = g.yarn_factor, f.yarn_orig_ctx = g.yarn_orig_ctx;
	}
	if (layers > 0)
		f.n_layers = layers;
	if (swa >= 0)
		f.n_swa = swa;
	f.swa_pattern = pattern;
	f.softcap = softcap;
	f.rope_freqs = rope_freqs;
	f.eot_id = eot;
	f.eom_id = eom;
	if (vocab_from) {
		struct gguf g;
		if (gguf_open(&g, vocab_from) < 0)
			die(1, "-V %s: %s", vocab_from, llm_err());
		gguf_close(&g);
		f.vocab_from = vocab_from;
	}
	if (fixture_write(&f, out) < 0)
		die(1, "%s:", out);
	return 0;
}
