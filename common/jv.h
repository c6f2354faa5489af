/* jv.h - a fast read-only JSON document for large daemon replies: one pass,
 * one arena, no per-value allocation (jansson needs ~5x longer for a
 * 1,000-thread dump).  Every accessor takes NULL and wrong types quietly. */
#ifndef COMMON_JV_H
#define COMMON_JV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define JV_MAX_DEPTH 256

enum jv_type { JV_NULL, JV_FALSE, JV_TRUE, JV_INT, JV_REAL, JV_STRING, JV_ARRAY, JV_OBJECT };

/* One value.  Read through the functions below, not the fields. */
typedef struct jv {
	uint8_t type;
	/* JV_INT past INT64_MAX (ids are u64 on the wire): u.i holds its bits. */
	uint8_t big;
	uint16_t ktag;		       /* a digest of key, so lookups skip most names unread */
	uint32_t n;		       /* members, items, or string length */
	const char *key;	       /* the member name when inside an object, else NULL */
	const struct jv *const *items; /* members or items, in order */
	union {
		int64_t i;
		double d;
		const char *s;	      /* NUL-terminated, escapes decoded */
		const uint16_t *tags; /* JV_OBJECT: its members' ktag, in order */
	} u;
} jv;

struct jv_doc;

/* Parses len bytes of text (copied; text need not be terminated).  *out is
 * new (jv_free()).  Returns 0, -EINVAL with the byte offset and reason in err
 * for malformed JSON (trailing garbage included), or -ENOMEM. */
int jv_parse(const char *text, size_t len, struct jv_doc **out, char *err, size_t errlen);
void jv_free(struct jv_doc *doc);

/* The top-level value (borrowed from doc). */
const jv *jv_root(const struct jv_doc *doc);

static inline bool jv_is(const jv *v, enum jv_type t)
{
	return v && v->type == t;
}
static inline bool jv_is_object(const jv *v)
{
	return jv_is(v, JV_OBJECT);
}
static inline bool jv_is_array(const jv *v)
{
	return jv_is(v, JV_ARRAY);
}
static inline bool jv_is_string(const jv *v)
{
	return jv_is(v, JV_STRING);
}
static inline bool jv_is_integer(const jv *v)
{
	return jv_is(v, JV_INT);
}
static inline bool jv_is_number(const jv *v)
{
	return jv_is(v, JV_INT) || jv_is(v, JV_REAL);
}
static inline bool jv_is_true(const jv *v)
{
	return jv_is(v, JV_TRUE);
}
static inline bool jv_is_false(const jv *v)
{
	return jv_is(v, JV_FALSE);
}

/* jv_get() with key's digest (jv_key_tag()) already made. */
const jv *jv_get_tagged(const jv *obj, const char *key, uint16_t tag);

/* A digest of a member name (what jv_get compares before the name). */
static inline uint16_t jv_key_tag(const char *k, size_t len)
{
	if (!len)
		return 0;
	return (uint16_t)((len << 10) ^ ((unsigned char)k[0] << 2) ^
			  ((unsigned char)k[len / 2] << 5) ^ (unsigned char)k[len - 1]);
}

/* Member key of an object (the last one when a key repeats), or NULL.
 * Inline, so that a constant key's length and digest are the compiler's
 * work (a dump looks up tens of thousands of members). */
static inline const jv *jv_get(const jv *obj, const char *key)
{
	return jv_get_tagged(obj, key, jv_key_tag(key, strlen(key)));
}

/* Items of an array or members of an object: count and the i-th. */
size_t jv_size(const jv *v);
const jv *jv_at(const jv *v, size_t i);

const char *jv_string(const jv *v); /* NULL unless a string */
/* 0 unless an integer.  An integer from INT64_MAX + 1 to UINT64_MAX (an id:
 * they are u64 on the wire) is an integer too, read as its two's-complement
 * bits, so ids compare exactly; jv_is_big() tells it from a negative one. */
int64_t jv_integer(const jv *v);
double jv_number(const jv *v); /* 0 unless a number */
static inline bool jv_is_big(const jv *v)
{
	return jv_is(v, JV_INT) && v->big;
}

#endif
