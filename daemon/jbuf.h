/* jbuf.h - a fast JSON writer into a growable buffer, for replies that can be megabytes. */
#ifndef DAEMON_JBUF_H
#define DAEMON_JBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JB_MAX_DEPTH 32

struct jbuf {
	char *p;
	size_t len, cap;
	bool oom; /* an allocation failed: the contents are unusable */
	int depth;
	bool after_key;
	bool first[JB_MAX_DEPTH];
};

void jb_init(struct jbuf *b);
void jb_free(struct jbuf *b);
/* Empties the buffer, keeping its memory. */
void jb_reset(struct jbuf *b);
/* Drops the first n bytes (already sent). */
void jb_consume(struct jbuf *b, size_t n);

void jb_raw(struct jbuf *b, const char *s, size_t n);
void jb_obj(struct jbuf *b);
void jb_obj_end(struct jbuf *b);
void jb_arr(struct jbuf *b);
void jb_arr_end(struct jbuf *b);
void jb_key(struct jbuf *b, const char *key);
void jb_str(struct jbuf *b, const char *s); /* NULL writes null */
void jb_strn(struct jbuf *b, const char *s, size_t n);
void jb_u64(struct jbuf *b, uint64_t v);
void jb_i64(struct jbuf *b, int64_t v);
void jb_bool(struct jbuf *b, bool v);
void jb_null(struct jbuf *b);
/* Nanoseconds written as milliseconds with up to three decimals. */
void jb_ms(struct jbuf *b, int64_t ns);
/* A value already encoded as JSON text. */
void jb_json(struct jbuf *b, const char *text, size_t n);

#endif
