/* fuzz_dump.c - libFuzzer target for the thread dump builder (dump/): any
 * reply jv accepts is built both ways, as the JSON text scopecmd writes
 * straight from it and as the jansson tree scopetop and the text forms
 * read; the text must parse, and (when the reply fixes the dump's time) be
 * byte for byte jansson's print of the tree; the text forms of the tree
 * must render. */
#include "jv.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../../dump/jdkdump.h"
#include "../../dump/jstackdump.h"
#include "../../dump/textdump.h"
#include "jtext.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct jv_doc *doc = NULL;
	char err[256];
	size_t len, tlen;

	if (jv_parse((const char *)data, size, &doc, err, sizeof err) != 0)
		return 0;
	const jv *r = jv_root(doc);
	char *text = jdkdump_json_doc(r, &len, err, sizeof err);
	json_t *tree = jdkdump_build_doc(r, err, sizeof err);
	if (jv_is_object(r) && (!text || !tree))
		abort(); /* no allocation fails here: both must build */
	if (text) {
		json_error_t e;
		json_t *back = json_loadb(text, len, 0, &e);
		if (!back || strlen(text) != len)
			abort();
		json_decref(back);
	}
	if (text && tree && jv_is_number(jv_get(jv_get(r, "model"), "now_ms"))) {
		char *printed = jtext_dump(tree, JSON_INDENT(2) | JSON_PRESERVE_ORDER, true, &tlen);
		if (!printed || tlen != len || memcmp(printed, text, len) != 0)
			abort();
		free(printed);
	}
	if (tree) {
		free(textdump_string(tree, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED));
		free(jstackdump_string(tree, JSTACKDUMP_LOCKS));
	}
	json_decref(tree);
	free(text);
	jv_free(doc);
	return 0;
}
