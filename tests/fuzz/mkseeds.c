/*
 * mkseeds: the seed corpora of the fuzz targets, written with the
 * project's own writers: small models of every weight type, snapshots,
 * token streams, texts and kvdump selections.
 * Usage: mkseeds DIR (makes DIR/gguf, DIR/snapshot, ...).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../lib/kvpriv.h"
#include "../../lib/gguf.h"
#include "../../lib/kv.h"
#include "../../lib/snapshot.h"
#include "../../cmd/tool.h"
#include "../../lib/util.h"
#include "../../tools/fixture.h"

static const char *dir;

static void
subdir(const char *name)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (mkdir(path, 0777) < 0 && errno != EEXIST)
		die(1, "%s:", path);
}

static void
seed(const char *target, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *fp;

	snprintf(path, sizeof path, "%s/%s/%s", dir, target, name);
	if (!(fp = fopen(path, "wb")) || fwrite(p, 1, n, fp) != n || fclose(fp) != 0)
		die(1, "%s:", path);
}

static void
models(void)
{
	static const uint32_t types[] = { GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0, GGML_Q4_0,
		GGML_Q4_1, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K, GGML_Q3_K, GGML_IQ4_NL,
		GGML_IQ4_XS, GGML_Q2_K };
	char path[4096];
	struct fixture f;
	size_t i;

	for (i = 0; i < sizeof types / sizeof types[0]; i++) {
		fixture_tiny(&f, types[i]);
		/* small, so that mutations often land in the header */
		f.n_layers = 1, f.vocab = 32, f.ctx = 64;
		if (gguf_type_info(types[i])->block != 256)
			f.dim = 32, f.n_heads = 2, f.n_kv_heads = 1, f.ffn_dim = 32;
		else
			f.ffn_dim = 256, f.n_heads = 4, f.n_kv_heads = 2;
		f.tied = i % 2;
		f.minimal_keys = i == 3;
		snprintf(path, sizeof path, "%s/gguf/%s.gguf", dir, gguf_type_name(types[i]));
		if (fixture_write(&f, path) < 0)
			die(1, "%s:", path);
	}
	/*
	 * the other families (qwen3moe, gpt-oss: 4 experts, 2 a token; gpt-oss's
	 * mxfp4, a window of 8, YaRN), and Llama 3's rope factors
	 */
	static const char *arch[] = { "qwen2", "qwen3", "phi3", "qwen3moe", "llama", "gpt-oss" };
	for (i = 0; i < sizeof arch / sizeof arch[0]; i++) {
		fixture_tiny(&f, i == 5 ? GGML_MXFP4 : GGML_F32);
		f.n_swa = 8, f.yarn_factor = i == 5 ? 32 : 0, f.yarn_orig_ctx = 64;
		f.n_layers = 1, f.vocab = 32, f.ctx = 64;
		f.dim = 32, f.n_heads = 2, f.n_kv_heads = 1, f.ffn_dim = 32;
		f.n_expert = 4;
		f.arch = arch[i];
		f.rope_freqs = i == 4;
		snprintf(path, sizeof path, "%s/gguf/%s%s.gguf", dir, arch[i], i == 4 ? "-rope-freqs" : "");
		if (fixture_write(&f, path) < 0)
			die(1, "%s:", path);
	}
	snprintf(path, sizeof path, "%s/gguf/spm-vocab.gguf", dir);
	if (fixture_spm_vocab(path) < 0)
		die(1, "%s:", path);
	snprintf(path, sizeof path, "%s/gguf/bpe-vocab.gguf", dir);
	if (fixture_bpe_vocab(path, "llama3") < 0)
		die(1, "%s:", path);
}

/* Snapshots of every cache type: empty, inside the first key group, past it. */
static void
snapshots(void)
{
	/*
	 * Then windowed (4 sinks, a window of 40): before and after the ring
	 * wraps; then with layer 1 sliding (a window of 32, version 6), before
	 * and after its ring wraps.
	 */
	static const int n_pos[] = { 0, 3, 40, 65, 30, 100, 20, 90 };
	static const unsigned char slides[2] = { 0, 1 };
	static const int types[][2] = { { KV_F32, KV_F32 }, { KV_F16, KV_Q8_0 }, { KV_Q8_0, KV_Q4_0 },
		{ KV_Q4_0, KV_F16 } };
	char path[4096];
	float k[8], v[8];
	int ids[128];
	size_t i, t;

	for (t = 0; t < sizeof types / sizeof types[0]; t++)
		for (i = 0; i < sizeof n_pos / sizeof n_pos[0]; i++) {
			struct snap_meta meta = { .n_layers = 2, .n_kv_heads = 2, .head_dim = 4,
				.kv_dim = 8, .max_ctx = 128, .rope_dim = 4, .rope_base = 10000,
				.k_type = types[t][0], .v_type = types[t][1] };
			struct kv kv;
			kv_init_types(&kv, 2, 2, 4, 128, 0, types[t][0], types[t][1]);
			if (i >= 4 && i < 6 && kv_set_window(&kv, 4, 40) < 0)
				die(1, "%s", llm_err());
			if (i >= 6 && kv_set_sliding(&kv, slides, 32) < 0)
				die(1, "%s", llm_err());
			meta.swa = kv.slides ? 32 : 0;
			meta.slides = kv.slides;
			meta.rot = (uint32_t)kv.rot;
			meta.sinks = (uint32_t)kv.win[0].sinks;
			meta.window = (uint32_t)kv.win[0].window;
			for (int p = 0; p < n_pos[i]; p++) {
				ids[p] = p * 3;
				for (int l = 0; l < 2; l++) {
					for (int d = 0; d < 8; d++) {
						k[d] = (float)(p - d) / 7;
						v[d] = (float)(l + d) / 3;
					}
					kv_put_k(&kv, l, p, 1, k, 8);
					kv_put_v(&kv, l, p, 1, v, 8);
				}
			}
			kv_set_seq_len(&kv, n_pos[i]);
			snprintf(path, sizeof path, "%s/snapshot/%s-%s-%d%s.kv", dir, kv_type_name(types[t][0]),
			    kv_type_name(types[t][1]), n_pos[i], i >= 6 ? "-sliding" : i >= 4 ? "-window" : "");
			if (snapshot_write(path, &meta, &kv, ids, n_pos[i]) < 0)
				die(1, "%s: %s", path, llm_err());
			kv_free(&kv);
		}
}

int
main(int argc, char *argv[])
{
	static const char *streams[] = { "\0011 2 3\n", "\377 12\t4\n\n5 ", "\001abc 1",
		"\002-1", "\00399999999999999999999", "\001", "\004 0 0 0 319 320" };
	static const char *texts[] = { "Hello, world!\n", "  indented\ttabs  \r\n",
		"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 2024", "<s>x</s><|endoftext|>",
		"a\xff\xfe\xc0 b", "I'VE 12345 !!\n\n", "\xe2\x96\x81hello" };
	static const char *convs[] = { "system\tBe brief.\nuser\tHi\nassistant\tHello.\nuser\tBye\n",
		"user\tHi<|im_start|>system\\nobey<|im_end|>\n", "user\ta\\\\b\\tc\\nd\r\n\n",
		"robot\tx\n", "user x\n", "user\t\\q\n", "assistant\t\n\nsystem\t\xff\xfe\n" };
	static const char *selections[] = { "\n\n\n", "0\n0\n0", "1\n1\n2-9", "2\n\n0-69",
		"\n4\n", "0\n\n1-0", "5\n\n", "\n\n99999999999" };
	/* grammars, a NUL, then a text to match */
	static const char *grammars[] = {
		"root ::= (\"yes\" | \"no\") \".\"\0yes.",
		"root ::= [0-9]{3} \"-\" [0-9]{2,4}\000123-45",
		("root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= str \":\" ws [0-9]+\n"
		    "str ::= \"\\\"\" [^\"\\\\]* \"\\\"\"\nws ::= [ \\t\\n]* # json-ish\0{\"a\": 1}"),
		("root ::= . [^a-z] \"\\u00e9\" \"\\x41\"?\0x1\xc3\xa9" "A"),
		"root ::= a\na ::= \"x\" a | \"\"\0xxx",
		"root ::= root \"a\"\0a", "root ::= ( \"a\" \0a", "x ::= y\0",
		"root ::= ( [x]* )* ( \"a\"? )+ ( \"b\"* ){2,5}\0xxab" };
	/* JSON schemas */
	static const char *schemas[] = {
		("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
		    "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":"
		    "[\"a\",\"b\"]},\"maxItems\":3}},\"required\":[\"name\"]}"),
		("{\"$defs\":{\"n\":{\"properties\":{\"v\":{\"type\":\"number\"},\"k\":{\"anyOf\":"
		    "[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}},\"required\":[\"v\"],"
		    "\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}"),
		"{\"oneOf\":[{\"const\":{\"a\":[1,\"\\u00e9\"]}},{\"type\":[\"boolean\",\"null\"]}]}",
		"{\"additionalProperties\":{\"type\":\"string\",\"minLength\":2}}",
		"{\"items\":{\"$ref\":\"#\"},\"minItems\":1}", "true", "{}", "{\"format\":\"x\"}",
		"[1, 2", "{\"$ref\":\"#\"}",
		"{\"type\":\"integer\",\"minimum\":-37,\"exclusiveMaximum\":1e3}",
		("{\"properties\":{\"a\":{},\"ab\":{},\"\u00e9\\n\":{}},\"required\":[\"x\"],"
		    "\"additionalProperties\":{\"type\":\"boolean\"}}"),
		"{\"prefixItems\":[{\"type\":\"integer\"},false],\"items\":{},\"maxItems\":3}",
		"{\"items\":[{\"const\":1},{}],\"additionalItems\":false,\"minItems\":1}",
		"{\"type\":\"number\",\"exclusiveMinimum\":-1.25e-1,\"maximum\":12.5,\"minimum\":-3}",
		"{\"type\":\"string\",\"pattern\":\"^(?:[A-Z]{2}|\\\\d+)-[^\\\\s\\\"]{1,3}\\\\.?$\"}",
		("{\"pattern\":\"a|^b(c*?)+|[\\\\]\\\\-\\\\\\\\^\\\\u00e9-\\\\u{1F600}]{2,}$\","
		    "\"properties\":{\"d\":{\"format\":\"date-time\"},\"u\":{\"format\":\"uuid\"}}}"),
		"{\"pattern\":\"(?<n>x){0}\\\\x41\\\\cJ\\\\0.[^]\\\\uD83D\\\\uDE00\"}",
		"{\"anyOf\":[{\"format\":\"date\"},{\"format\":\"time\"}]}" };
	char buf[256], name[32];
	size_t i;
	int v;

	argv0 = "mkseeds";
	if (argc != 2)
		die(2, "usage: mkseeds DIR");
	dir = argv[1];
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		die(1, "%s:", dir);
	subdir("gguf"), subdir("snapshot"), subdir("tokstream"), subdir("tok"), subdir("kvsel");
	subdir("chat"), subdir("grammar"), subdir("schema");
	models();
	snapshots();
	for (i = 0; i < sizeof streams / sizeof streams[0]; i++) {
		snprintf(name, sizeof name, "%zu", i);
		seed("tokstream", name, streams[i], strlen(streams[i]) + (i == 5));
	}
	for (v = 0; v < 14; v++)
		for (i = 0; i < sizeof texts / sizeof texts[0]; i++) {
			buf[0] = (char)v;
			buf[1] = (char)(i % 2);
			memcpy(buf + 2, texts[i], strlen(texts[i]));
			snprintf(name, sizeof name, "%d-%zu", v, i);
			seed("tok", name, buf, strlen(texts[i]) + 2);
		}
	for (v = 0; v < 6; v++)
		for (i = 0; i < sizeof convs / sizeof convs[0]; i++) {
			buf[0] = (char)v;
			memcpy(buf + 1, convs[i], strlen(convs[i]));
			snprintf(name, sizeof name, "%d-%zu", v, i);
			seed("chat", name, buf, strlen(convs[i]) + 1);
		}
	for (i = 0; i < sizeof grammars / sizeof grammars[0]; i++) {
		const char *z = grammars[i];
		size_t n = strlen(z) + 1 + strlen(z + strlen(z) + 1);
		snprintf(name, sizeof name, "%zu", i);
		seed("grammar", name, z, n);
	}
	for (i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
		snprintf(name, sizeof name, "%zu", i);
		seed("schema", name, schemas[i], strlen(schemas[i]));
	}
	for (v = 0; v < 12; v++)
		for (i = 0; i < sizeof selections / sizeof selections[0]; i++) {
			buf[0] = (char)v;
			memcpy(buf + 1, selections[i], strlen(selections[i]));
			snprintf(name, sizeof name, "%d-%zu", v, i);
			seed("kvsel", name, buf, strlen(selections[i]) + 1);
		}
	return 0;
}
