/* model_json.c - the checked readers scopetop uses on every member the
 * daemon sends (types verified, strings capped and cleaned), and the
 * id tables the model keeps entities in. */
#include "model_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/termtext.h"

/* ---- JSON readers ----------------------------------------------------- */

/* Copies a peer string, capped at a character boundary and with control
 * characters (C0, DEL, C1) and ill-formed UTF-8 replaced by '?', so nothing
 * the peer sends can move the cursor or change colours. */
char *tm_str_copy(const char *s)
{
	if (!s)
		return NULL;
	size_t n = tt_escape(NULL, 0, s, '?'); /* '?' for each: never longer */
	n = n < TM_MAX_STR ? n + 1 : TM_MAX_STR;
	char *d = malloc(n);
	if (d)
		tt_escape(d, n, s, '?');
	return d;
}

char *tm_jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? tm_str_copy(json_string_value(v)) : NULL;
}

void tm_jstr_buf(json_t *o, const char *k, char *buf, size_t len)
{
	json_t *v = json_object_get(o, k);
	if (json_is_string(v)) {
		char *s = tm_str_copy(json_string_value(v));
		snprintf(buf, len, "%s", s ? s : "");
		free(s);
	} else {
		buf[0] = 0;
	}
}

const char *tm_jraw(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

int64_t tm_jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_real(v)) {
		double d = json_real_value(v);
		return (d > -9e15 && d < 9e15) ? (int64_t)d : 0;
	}
	return 0;
}

double tm_jnum(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0.0;
}

/* A member that may be a string or a number (an error code): as text. */
char *tm_jtext(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	if (json_is_string(v))
		return tm_str_copy(json_string_value(v));
	if (json_is_integer(v)) {
		char b[32];
		snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
		return tm_str_copy(b);
	}
	if (json_is_object(v))
		return tm_jtext(v, "message");
	return NULL;
}

void tm_site_read(struct tm_site *s, json_t *o)
{
	json_t *site = json_object_get(o, "site");
	s->file = tm_jstr(site, "file");
	s->func = tm_jstr(site, "func");
	int64_t line = tm_jint(site, "line");
	s->line = (line > 0 && line < 1000000000) ? (int)line : 0;
}

void tm_site_free(struct tm_site *s)
{
	free(s->file);
	free(s->func);
}

/* ---- tables ------------------------------------------------------------ */

void *tm_table_get(const struct tm_table *t, int64_t id)
{
	long i = tmap_get(&t->map, id);
	return i < 0 ? NULL : t->v[i];
}

/* Puts item (new, first member an int64 id) in t, returning what it
 * replaced (for the caller to carry state over and free) or NULL. */
int tm_table_put(struct tm_table *t, void *item, void **old)
{
	int64_t id = *(int64_t *)item;
	long i = tmap_get(&t->map, id);
	*old = NULL;
	if (i >= 0) {
		*old = t->v[i];
		t->v[i] = item;
		return 0;
	}
	if (t->n >= TM_MAX_ITEMS)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		void **nv = realloc(t->v, ncap * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		t->v = nv;
		t->cap = ncap;
	}
	if (tmap_put(&t->map, id, (uint32_t)t->n))
		return -ENOMEM;
	t->v[t->n++] = item;
	return 0;
}

/* Unlinks id from t and returns the item for the caller to free. */
void *tm_table_take(struct tm_table *t, int64_t id)
{
	long i = tmap_get(&t->map, id);
	if (i < 0)
		return NULL;
	void *item = t->v[i];
	tmap_del(&t->map, id);
	t->n--;
	if ((size_t)i != t->n) {
		t->v[i] = t->v[t->n];
		tmap_put(&t->map, *(int64_t *)t->v[i], (uint32_t)i);
	}
	return item;
}
