/* model_int.h - what the model's own files share: checked JSON readers,
 * the id tables, and stack freeing.  Not for the views. */
#ifndef TUI_MODEL_INT_H
#define TUI_MODEL_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* A peer string capped at TM_MAX_STR with control characters replaced;
 * new (free()), NULL for NULL or out of memory. */
char *tm_str_copy(const char *s);
/* A stack from a {tid, state, frames, ...} object (new; tm_stack_free). */
struct tm_stack *tm_stack_parse(json_t *o, double now);
/* Member k of o: a new cleaned copy if it is a string, else NULL. */
char *tm_jstr(json_t *o, const char *k);
/* The same into buf ("" when absent). */
void tm_jstr_buf(json_t *o, const char *k, char *buf, size_t len);
/* Member k as the raw string (borrowed from o), or NULL. */
const char *tm_jraw(json_t *o, const char *k);
/* Member k as an integer (reals truncated, anything else 0). */
int64_t tm_jint(json_t *o, const char *k);
/* Member k as a number (0 when absent or not a number). */
double tm_jnum(json_t *o, const char *k);
/* Member k as text: a string, an integer printed, or an object's message. */
char *tm_jtext(json_t *o, const char *k);
void tm_site_read(struct tm_site *s, json_t *o);
void tm_site_free(struct tm_site *s);

/* Tables: items are heap structs whose first member is an int64_t id. */
void *tm_table_get(const struct tm_table *t, int64_t id);
/* Inserts or replaces; *old gets the replaced item (to free).  0, -E2BIG
 * past TM_MAX_ITEMS, -ENOMEM. */
int tm_table_put(struct tm_table *t, void *item, void **old);
/* Unlinks and returns the item (to free), or NULL. */
void *tm_table_take(struct tm_table *t, int64_t id);

void tm_stack_free(void *p);

#endif
