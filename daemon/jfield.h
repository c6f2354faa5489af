/* jfield.h - one JSON member (key and value) per call, for the renderers that
 * write objects of many members. */
#ifndef DAEMON_JFIELD_H
#define DAEMON_JFIELD_H

#include "jbuf.h"

#include <stdbool.h>
#include <stdint.h>

/* v NULL writes null. */
static inline void jf_str(struct jbuf *b, const char *key, const char *v)
{
	jb_key(b, key);
	jb_str(b, v);
}

static inline void jf_u64(struct jbuf *b, const char *key, uint64_t v)
{
	jb_key(b, key);
	jb_u64(b, v);
}

static inline void jf_i64(struct jbuf *b, const char *key, int64_t v)
{
	jb_key(b, key);
	jb_i64(b, v);
}

static inline void jf_bool(struct jbuf *b, const char *key, bool v)
{
	jb_key(b, key);
	jb_bool(b, v);
}

/* Writes key, and null for a value that is not known: true when the caller
 * is to write the value. */
static inline bool jf_known(struct jbuf *b, const char *key, bool known)
{
	jb_key(b, key);
	if (!known)
		jb_null(b);
	return known;
}

/* Ids are never 0, so 0 means none: null. */
static inline void jf_id(struct jbuf *b, const char *key, uint64_t id)
{
	if (jf_known(b, key, id != 0))
		jb_u64(b, id);
}

static inline void jf_i64_if(struct jbuf *b, const char *key, bool known, int64_t v)
{
	if (jf_known(b, key, known))
		jb_i64(b, v);
}

/* ns as milliseconds. */
static inline void jf_ms_if(struct jbuf *b, const char *key, bool known, int64_t ns)
{
	if (jf_known(b, key, known))
		jb_ms(b, ns);
}

#endif
