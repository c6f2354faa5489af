/* jtext.h - jansson serialization that fails cleanly when memory runs out
 * (json_dumps() can then drop a member name and return malformed text). */
#ifndef COMMON_JTEXT_H
#define COMMON_JTEXT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Serializes j (borrowed) with jansson's flags, followed by '\n' when
 * newline is set, NUL-terminated.  Returns new text (free()) with its
 * length in *len (may be NULL), or NULL when memory ran out or j cannot be
 * serialized. */
char *jtext_dump(const json_t *j, size_t flags, bool newline, size_t *len);

#endif
