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

/* Ids are never 0, so 0 means none: null. */
static inline void jf_id(struct jbuf *b, const char *key, uint64_t id)
{
	jb_key(b, key);
	if (id)
		jb_u64(b, id);
	else
		jb_null(b);
}

/* v when known, else null. */
static inline void jf_i64_if(struct jbuf *b, const char *key, bool known, int64_t v)
{
	jb_key(b, key);
	if (known)
		jb_i64(b, v);
	else
		jb_null(b);
}

/* ns as milliseconds when known, else null. */
static inline void jf_ms_if(struct jbuf *b, const char *key, bool known, int64_t ns)
{
	jb_key(b, key);
	if (known)
		jb_ms(b, ns);
	else
		jb_null(b);
}

#endif
