/*
 * jsonread.h: JSON text (RFC 8259) read into a tree, for the schemas
 * --json-schema takes.  Objects keep their members in the order written.
 */
#ifndef LLM_JSONREAD_H
#define LLM_JSONREAD_H

#include <stddef.h>

enum { JV_NULL, JV_FALSE, JV_TRUE, JV_NUMBER, JV_STRING, JV_ARRAY, JV_OBJECT };

struct jv {
	int type;
	char *s;		/* JV_STRING: the text, escapes undone, NUL-ended; JV_NUMBER: as written */
	size_t len;
	struct jv *v;		/* JV_ARRAY: the items; JV_OBJECT: the members' values */
	char **key;		/* JV_OBJECT: the members' names (NUL-ended, no NUL inside) */
	int n;
};

/*
 * Parse the whole of text[0..n) into *v: 0, or -1 with llm_err() saying
 * "LINE:COL: what is wrong".  Refused as well as what is not JSON: a NUL
 * in a member's name, a name given twice in one object, nesting deeper
 * than JV_MAX_DEPTH.
 */
#define JV_MAX_DEPTH 256
int jv_parse(struct jv *v, const char *text, size_t n);
void jv_free(struct jv *v);

/* The member named key of object o, or NULL (and NULL if o is no object). */
const struct jv *jv_get(const struct jv *o, const char *key);

#endif
