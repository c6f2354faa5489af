/* jdkjson.h - defensive readers of the daemon's JSON (read with common/jv.h)
 * and the formatters (sites, frames, task, pool) that the dump builder shares;
 * they return jansson values for the dump being built. */
#ifndef DUMP_JDKJSON_H
#define DUMP_JDKJSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/jv.h"

/* json_object_set_new() and json_array_append_new() (value stolen, also on
 * failure) that remember a failure, which jj_failed_take() reports and
 * clears: a value that could not be made (NULL) counts as a failure. */
void jj_set(json_t *obj, const char *key, json_t *value);
void jj_append(json_t *arr, json_t *value);
bool jj_failed_take(void);
/* Records a failure as a failed add would. */
void jj_fail(void);

/* Member key of obj when it is a string, else NULL.  obj may be anything.
 * Inline, as jv_get(): keys are constants. */
static inline const char *jj_str(const jv *obj, const char *key)
{
	return jv_string(jv_get(obj, key));
}
static inline bool jj_str_is(const jv *obj, const char *key, const char *want)
{
	const char *s = jj_str(obj, key);
	return s && strcmp(s, want) == 0;
}

/* The same readers for jansson values (the dump being printed, small
 * replies such as list and tree). */
const char *jt_str(const json_t *obj, const char *key);
bool jt_str_is(const json_t *obj, const char *key, const char *want);
const json_t *jt_array(const json_t *obj, const char *key);

/* Member key of obj when it is an array, else NULL (jv_size(NULL) is 0,
 * so callers can iterate without checking). */
static inline const jv *jj_array(const jv *obj, const char *key)
{
	const jv *a = jv_get(obj, key);
	return jv_is_array(a) ? a : NULL;
}

/* Copies src (or def when src is NULL) into dst, cut at a UTF-8 character
 * boundary to fit. */
void jj_strcpy(char *dst, size_t len, const char *src, const char *def);

/* New JSON string of s cut to JDKDUMP_MAX_STR bytes; "" for NULL. */
json_t *jj_string_new(const char *s);

/* New JSON string of member key (cut), or null when it is not a string. */
json_t *jj_str_or_null(const jv *obj, const char *key);

/* Member key when it is one of the strings of the NULL-terminated list
 * allowed, else null: the dump's enums stay within what its schema says. */
json_t *jj_enum_or_null(const jv *obj, const char *key, const char *const *allowed);

extern const char *const jj_joiners[],
    *const jj_scope_states[], *const jj_cancel_reasons[], *const jj_task_states[],
							      *const jj_roles[],
								  *const jj_sources[],
								      *const jj_proc_states[];

/* New JSON integer of member key, or null when it is not an integer (an
 * integer past INT64_MAX included: only ids go there). */
json_t *jj_int_or_null(const jv *obj, const char *key);

/* An id (u64 on the wire; bits as jv_integer() reads it) as the dump
 * writes it: a JSON integer, or past INT64_MAX, which jansson and a Java
 * long cannot hold, its exact decimal digits as a string. */
json_t *jj_id_new(int64_t bits);
/* Member key as an id (jj_id_new), or null when it is not an integer. */
json_t *jj_id_or_null(const jv *obj, const char *key);
/* Whether v is an id as the dump or a reply holds it (a JSON integer, read
 * as u64, or the digit string of a big one); the id into *out. */
bool jt_id(const json_t *v, uint64_t *out);
/* v's id as decimal text into buf, or def when v is none.  Returns buf. */
const char *jt_id_text(const json_t *v, char *buf, size_t len, const char *def);
/* s as a string (cut and made UTF-8 as jj_string_new does), or null. */
json_t *jj_string_or_null(const char *s);
/* "SIGSEGV" for 11 and so on for the signals that end processes; NULL for others. */
const char *jj_signal_name(long long sig);
/* "SEGV_MAPERR" for (SIGSEGV, 1) and so on; NULL when not known. */
const char *jj_si_code_name(long long sig, long long code);

/* Member key of obj when it is a string, else def. */
const char *jt_str_or(const json_t *obj, const char *key, const char *def);

/* A text renderer of a whole dump (textdump, jstackdump): writes dump,
 * whose strings are already safe for a terminal, to out.  Returns 0 or a
 * negative errno. */
typedef int jj_render_fn(FILE *out, const json_t *dump, unsigned flags);

/* Runs render on dump (borrowed) with every string a target named made
 * safe for a terminal (jj_text_safe).  Returns what render returns, or
 * -ENOMEM. */
int jj_render(FILE *out, const json_t *dump, unsigned flags, jj_render_fn *render);

/* The same into a new string (free()), or NULL when it failed. */
char *jj_render_string(const json_t *dump, unsigned flags, jj_render_fn *render);

/* v (borrowed) ready for a text renderer: a new reference to v itself when
 * no string or key in it holds a control character or ill-formed UTF-8,
 * else a copy with each such string and key escaped (common/termtext.h).
 * NULL when out of memory. */
json_t *jj_text_safe(const json_t *v);

/* "func (file:line)" for a site {file,line,func}, or null. */
json_t *jj_site(const jv *site);

/* A new object holding the string-valued members of values (capped). */
json_t *jj_values(const jv *values);

/* The JDK state of a thread stack entry ("WAITING"...; "TERMINATED" for a
 * thread that exited during the capture), NULL when the entry gives none. */
const char *jj_thread_state(const jv *stack);

struct jw;

/* Writes member key: the frames of a stack entry as JDK frame strings, top
 * first, at most max: "func (file:line)", "func (module+0xoff)",
 * "func (0xaddr)", "0xaddr".  cache (an object, or NULL) maps addresses
 * already formatted in this dump to their strings: one address and its
 * place in that address's inline chain mean one frame within a process.
 * With inlined_key, member inlined_key follows when any frame is inlined
 * into the frame after it: the positions of those frames. */
void jj_write_stack(struct jw *w, const char *key, const char *inlined_key, const jv *stack,
		    size_t max, json_t *cache);

/* Writes {"id","state","function","forkSite","forkedAt","startedAt"} of a
 * model task, then "crashed": true when crashed, then "container" when
 * container is not NULL. */
void jj_write_task(struct jw *w, const jv *task, bool crashed, const char *container);

/* The statistics block of a model pool. */
json_t *jj_pool_stats(const jv *pool);

/* The advisor's figures and advice for a pool container, from one pool of
 * a dump reply's advice (pool) and that advice (its ncpu). */
json_t *jj_pool_advice(const jv *pool, const jv *advice);

#endif
