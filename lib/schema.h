/*
 * schema.h: a JSON Schema compiled into a GBNF grammar (grammar.h), so
 * that what a generation completes is JSON that validates against it.
 *
 * The subset, and what the grammar makes of it (llm-decode(1) says it for
 * users, as a table): type (one or a list), properties in the schema's
 * order, each required one present and the others optional;
 * additionalProperties (true or a schema: undeclared properties after the
 * declared ones; absent beside properties: none; a schema for them makes
 * a map when there are no properties); required; enum and const (their
 * values written as compact JSON); items, minItems, maxItems; tuples
 * (prefixItems, items as an array, additionalItems); minLength, maxLength
 * (in code points); pattern (regex.h); format date, time, date-time and
 * uuid; minimum, maximum, exclusiveMinimum, exclusiveMaximum on integers
 * and numbers, exactly; anyOf, and oneOf as anyOf; allOf of one schema;
 * $ref to "#" or a JSON pointer in the same document ($defs,
 * definitions); the schemas true and false.  Annotations (title,
 * description, default, examples, $comment, $schema, $id, deprecated,
 * readOnly, writeOnly) are allowed and change nothing.  Any other
 * keyword, or format, is refused, by name.
 *
 * Whitespace: none before the value or after it, so the grammar ends with
 * it; between tokens a space, or a newline and up to 20 blanks.  Numbers
 * have at most 16 digits before the point and after it, and an exponent
 * of at most 2 digits.  Escapes \uXXXX of surrogates are not generated
 * (the character is written as it is), so lengths count as a validator
 * counts them.
 */
#ifndef LLM_SCHEMA_H
#define LLM_SCHEMA_H

#include <stddef.h>

/*
 * Compile the schema text[0..n): 0 with *gbnf the grammar (malloc'd, NUL-
 * ended; its rule root is the value), or -1 with llm_err() naming the
 * place: "LINE:COL: ..." for text that is not JSON, else the schema's
 * JSON pointer, "/properties/age: unsupported keyword \"format\"" (the
 * whole schema is "/").  A schema with no valid value is refused so.
 */
int schema_to_gbnf(const char *text, size_t n, char **gbnf);

#endif
