/*
 * fuzz_schema: --json-schema's text.  A schema that compiles must make a
 * grammar that parses, or is refused as left-recursive (a $ref that comes
 * back to itself before any text) or empty (one whose every value holds
 * another without end: what the compiler cannot see), and the matcher must take a
 * few JSON texts without harm.
 */
#include <stdlib.h>
#include <string.h>

#include "../../lib/grammar.h"
#include "../../lib/schema.h"
#include "../../lib/util.h"
#include "fuzz.h"

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *texts[] = { "{\"a\": 1, \"b\": [true, null]}", "\"x\"", "-0.5e3", "[]",
		"{}", "null", "\"AB-12\"", "\"2024-02-29T12:00:00Z\"" };
	struct grammar gr;
	char *gbnf;

	if (schema_to_gbnf((const char *)data, size, &gbnf) < 0)
		return 0;
	if (grammar_parse(&gr, gbnf, strlen(gbnf)) < 0) {
		if (!strstr(llm_err(), "left-recursive") && !strstr(llm_err(), "language is empty"))
			abort();	/* the compiler wrote a grammar that does not parse */
		free(gbnf);
		return 0;
	}
	for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
		struct gstate st;
		if (gstate_init(&st, &gr) < 0)
			break;
		if (gstate_accept(&st, texts[i], strlen(texts[i])) > 0)
			(void)gstate_complete(&st);
		gstate_free(&st);
	}
	grammar_free(&gr);
	free(gbnf);
	return 0;
}
