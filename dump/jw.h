/* jw.h - one writer interface for the thread dump with two ends: text,
 * streamed into a buffer exactly as jansson prints the same tree with
 * JSON_INDENT(2) (what scopecmd writes to a file, with no tree in between),
 * or a jansson tree (what scopetop and the text renderers read).  The dump
 * builder writes every member once, through this. */
#ifndef DUMP_JW_H
#define DUMP_JW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JW_MAX_DEPTH 64

struct jw {
	bool tree;   /* which end: a jansson tree, else text */
	bool failed; /* memory ran out, or a value could not be made */
	int depth;
	bool empty[JW_MAX_DEPTH]; /* text: nothing written yet in this level */
	bool arr[JW_MAX_DEPTH];	  /* text: the level is an array */
	/* text */
	char *buf;
	size_t len, cap;
	/* tree */
	json_t *stack[JW_MAX_DEPTH];
	json_t *root;
	const char *key; /* the pending member name (text: written already) */
};

/* Starts w as a text writer or a tree writer; jw_fini() frees what it holds. */
void jw_init(struct jw *w, bool tree);
/* Text writers: room for about len bytes before any is written (the text
 * then grows without copies); false when memory ran out. */
bool jw_reserve(struct jw *w, size_t len);
void jw_fini(struct jw *w);

/* The text written (owned by w; NUL-terminated, with a final newline added
 * once by this call), or NULL when anything failed.  Text writers only. */
const char *jw_text(struct jw *w, size_t *len);
/* The finished tree (new reference), or NULL when anything failed.  Tree
 * writers only. */
json_t *jw_take(struct jw *w);

/* Text writers: how many bytes are written so far; and a copy of the
 * len bytes written at off appended again (false, with nothing written,
 * when memory ran out or the writer is a tree).  For text that is a
 * function of its input alone, written the same way at the same depth
 * after a member of the same object. */
size_t jw_offset(const struct jw *w);
bool jw_copy_own(struct jw *w, size_t off, size_t len);

/* Structure: a member name (the next value's), then one value.  Objects and
 * arrays open with jw_obj()/jw_arr() and close with jw_end(). */
void jw_key(struct jw *w, const char *key);
void jw_obj(struct jw *w);
void jw_arr(struct jw *w);
void jw_end(struct jw *w);

/* Values.  jw_str() takes s as it is (valid UTF-8: constants, times,
 * names already cut); jw_text_str() cuts s to JDKDUMP_MAX_STR bytes at a
 * character boundary and makes it UTF-8 ('?' for stray bytes), as
 * jj_string_new(); NULL gives "". */
void jw_str(struct jw *w, const char *s);
void jw_text_str(struct jw *w, const char *s);
void jw_int(struct jw *w, int64_t v);
void jw_real(struct jw *w, double v);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);
/* v (borrowed; NULL counts as a failure) written whole. */
void jw_json(struct jw *w, const json_t *v);
/* Takes v (stolen) and writes it whole: for small parts the builder makes
 * as jansson values. */
void jw_json_new(struct jw *w, json_t *v);

/* key then value, for the common cases. */
void jw_kstr(struct jw *w, const char *key, const char *s);
void jw_kint(struct jw *w, const char *key, int64_t v);
void jw_kjson_new(struct jw *w, const char *key, json_t *v);

struct jv;
/* key, then what jj_str_or_null(), jj_id_or_null() or jj_enum_or_null()
 * (jdkjson.h) give for member k of obj, with no jansson value made when
 * w writes text (a thread or task has several such members). */
void jw_kstr_or_null(struct jw *w, const char *key, const struct jv *obj, const char *k);
void jw_kid_or_null(struct jw *w, const char *key, const struct jv *obj, const char *k);
void jw_kenum_or_null(struct jw *w, const char *key, const struct jv *obj, const char *k,
		      const char *const *allowed);

#endif
