/* jw.c - the dump writer's two ends (jw.h): text laid out byte for byte as
 * jansson's JSON_INDENT(2) output, or a jansson tree. */
#include "jw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jdkdump.h"
#include "jdkjson.h"

void jw_init(struct jw *w, bool tree)
{
	memset(w, 0, sizeof *w);
	w->tree = tree;
}

void jw_fini(struct jw *w)
{
	free(w->buf);
	for (int d = 1; d <= w->depth && d < JW_MAX_DEPTH; d++)
		json_decref(w->stack[d]);
	json_decref(w->root);
	memset(w, 0, sizeof *w);
}

/* Room for n more bytes (and a NUL) in the text, or false (failed set). */
static bool reserve(struct jw *w, size_t n)
{
	if (w->failed)
		return false;
	if (w->cap - w->len > n)
		return true;
	size_t ncap = w->cap ? w->cap : 64 * 1024;
	while (ncap - w->len <= n)
		ncap *= 2;
	char *nb = realloc(w->buf, ncap);
	if (!nb) {
		w->failed = true;
		return false;
	}
	w->buf = nb;
	w->cap = ncap;
	return true;
}

bool jw_reserve(struct jw *w, size_t len)
{
	return w->tree || reserve(w, len);
}

size_t jw_offset(const struct jw *w)
{
	return w->len;
}

bool jw_copy_own(struct jw *w, size_t off, size_t len)
{
	if (w->tree || off > w->len || len > w->len - off || !reserve(w, len))
		return false;
	/* After reserve(): the buffer may have moved. */
	memcpy(w->buf + w->len, w->buf + off, len);
	w->len += len;
	return true;
}

static void put(struct jw *w, const char *s, size_t n)
{
	if (reserve(w, n)) {
		memcpy(w->buf + w->len, s, n);
		w->len += n;
	}
}

/* A newline and the indent of level depth (two spaces a level), after a
 * comma unless this is the level's first entry. */
static void newline(struct jw *w, bool comma, int depth)
{
	size_t n = (size_t)depth * 2 + 2;
	if (!reserve(w, n))
		return;
	if (comma)
		w->buf[w->len++] = ',';
	w->buf[w->len++] = '\n';
	memset(w->buf + w->len, ' ', (size_t)depth * 2);
	w->len += (size_t)depth * 2;
}

/* s as a JSON string: only '"', '\\' and control characters escaped, as
 * jansson writes without JSON_ENSURE_ASCII. */
static void put_string(struct jw *w, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)s;
	put(w, "\"", 1);
	for (;;) {
		const unsigned char *run = p;
		while (*p >= 0x20 && *p != '"' && *p != '\\')
			p++;
		put(w, (const char *)run, (size_t)(p - run));
		if (!*p)
			break;
		/* The short escapes JSON has, else \u00XX. */
		static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
		const char *short_esc = strchr(from, *p);
		char esc[7] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15], 0};
		size_t n = 6;
		if (short_esc) {
			esc[1] = to[short_esc - from];
			n = 2;
		}
		put(w, esc, n);
		p++;
	}
	put(w, "\"", 1);
}

/* Before a value: in an array, its separator (a member's came with its key). */
static void before_value(struct jw *w)
{
	if (w->tree || w->depth == 0 || w->key)
		return;
	newline(w, !w->empty[w->depth], w->depth);
	w->empty[w->depth] = false;
}

/* Tree end: v (stolen) goes under the pending key, into the array, or
 * becomes the root. */
static void tree_add(struct jw *w, json_t *v)
{
	if (!v) {
		w->failed = true;
	} else if (w->depth == 0) {
		json_decref(w->root);
		w->root = v;
	} else {
		json_t *top = w->stack[w->depth];
		int rc = json_is_object(top) ? json_object_set_new(top, w->key ? w->key : "", v)
					     : json_array_append_new(top, v);
		if (rc)
			w->failed = true;
	}
	w->key = NULL;
}

void jw_key(struct jw *w, const char *key)
{
	if (w->tree) {
		w->key = key;
		return;
	}
	newline(w, !w->empty[w->depth], w->depth);
	w->empty[w->depth] = false;
	put_string(w, key);
	put(w, ": ", 2);
	w->key = key;
}

static void open_level(struct jw *w, bool arr)
{
	if (w->depth + 1 >= JW_MAX_DEPTH) {
		w->failed = true;
		return;
	}
	before_value(w);
	if (w->tree) {
		/* The level keeps a reference of its own, so that writing on
		 * into it stays safe when adding it to its parent failed. */
		json_t *v = arr ? json_array() : json_object();
		tree_add(w, json_incref(v));
		w->stack[w->depth + 1] = v;
	} else {
		put(w, arr ? "[" : "{", 1);
		w->key = NULL;
	}
	w->depth++;
	w->empty[w->depth] = true;
	w->arr[w->depth] = arr;
}

void jw_obj(struct jw *w)
{
	open_level(w, false);
}

void jw_arr(struct jw *w)
{
	open_level(w, true);
}

void jw_end(struct jw *w)
{
	if (w->depth <= 0) {
		w->failed = true;
		return;
	}
	if (!w->tree) {
		const char *close = w->arr[w->depth] ? "]" : "}";
		if (!w->empty[w->depth])
			newline(w, false, w->depth - 1);
		put(w, close, 1);
	} else {
		json_decref(w->stack[w->depth]);
		w->stack[w->depth] = NULL;
	}
	w->depth--;
	w->key = NULL;
}

/* Writes the real as jansson does: "%.17g", with ".0" when that reads as
 * an integer, and the exponent without '+' or leading zeros. */
static void put_real(struct jw *w, double v)
{
	char b[64], out[64];
	int n = snprintf(b, sizeof b, "%.17g", v);
	if (n <= 0 || (size_t)n >= sizeof b - 3) {
		w->failed = true;
		return;
	}
	if (!strchr(b, '.') && !strchr(b, 'e'))
		memcpy(b + n, ".0", 3);
	size_t o = 0;
	for (const char *p = b; *p; p++) {
		out[o++] = *p;
		if (*p != 'e')
			continue;
		p++;
		if (*p == '-')
			out[o++] = *p++;
		else if (*p == '+')
			p++;
		while (*p == '0' && p[1])
			p++;
		while (*p)
			out[o++] = *p++;
		break;
	}
	put(w, out, o);
}

void jw_str(struct jw *w, const char *s)
{
	before_value(w);
	if (w->tree)
		tree_add(w, json_string(s ? s : ""));
	else
		put_string(w, s ? s : "");
	w->key = NULL;
}

void jw_text_str(struct jw *w, const char *s)
{
	if (w->tree) {
		tree_add(w, jj_string_new(s));
		return;
	}
	char buf[JDKDUMP_MAX_STR + 1];
	jj_strcpy(buf, sizeof buf, s, "");
	jw_str(w, buf);
}

void jw_int(struct jw *w, int64_t v)
{
	before_value(w);
	if (w->tree) {
		tree_add(w, json_integer((json_int_t)v));
	} else {
		char b[24], *e = b + sizeof b, *d = e;
		uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
		do
			*--d = (char)('0' + u % 10);
		while (u /= 10);
		if (v < 0)
			*--d = '-';
		put(w, d, (size_t)(e - d));
	}
	w->key = NULL;
}

void jw_real(struct jw *w, double v)
{
	before_value(w);
	if (w->tree)
		tree_add(w, json_real(v));
	else
		put_real(w, v);
	w->key = NULL;
}

void jw_bool(struct jw *w, bool v)
{
	before_value(w);
	if (w->tree)
		tree_add(w, json_boolean(v));
	else
		put(w, v ? "true" : "false", v ? 4 : 5);
	w->key = NULL;
}

void jw_null(struct jw *w)
{
	before_value(w);
	if (w->tree)
		tree_add(w, json_null());
	else
		put(w, "null", 4);
	w->key = NULL;
}

void jw_json(struct jw *w, const json_t *v)
{
	if (!v) {
		w->failed = true;
		w->key = NULL;
		return;
	}
	if (w->tree) {
		before_value(w);
		tree_add(w, json_incref((json_t *)v));
		return;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *m;
		jw_obj(w);
		json_object_foreach((json_t *)v, k, m)
		{
			jw_key(w, k);
			jw_json(w, m);
		}
		jw_end(w);
		break;
	}
	case JSON_ARRAY:
		jw_arr(w);
		for (size_t i = 0; i < json_array_size(v); i++)
			jw_json(w, json_array_get(v, i));
		jw_end(w);
		break;
	case JSON_STRING:
		jw_str(w, json_string_value(v));
		break;
	case JSON_INTEGER:
		jw_int(w, json_integer_value(v));
		break;
	case JSON_REAL:
		jw_real(w, json_real_value(v));
		break;
	case JSON_TRUE:
		jw_bool(w, true);
		break;
	case JSON_FALSE:
		jw_bool(w, false);
		break;
	default:
		jw_null(w);
	}
}

void jw_json_new(struct jw *w, json_t *v)
{
	jw_json(w, v);
	json_decref(v);
}

void jw_kstr(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

void jw_kint(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_int(w, v);
}

void jw_kjson_new(struct jw *w, const char *key, json_t *v)
{
	jw_key(w, key);
	jw_json_new(w, v);
}

void jw_kstr_or_null(struct jw *w, const char *key, const jv *obj, const char *k)
{
	const char *s = jj_str(obj, k);
	jw_key(w, key);
	if (s)
		jw_text_str(w, s);
	else
		jw_null(w);
}

void jw_kid_or_null(struct jw *w, const char *key, const jv *obj, const char *k)
{
	const jv *v = jv_get(obj, k);
	jw_key(w, key);
	if (!jv_is_integer(v)) {
		jw_null(w);
	} else if (jv_integer(v) >= 0) {
		jw_int(w, jv_integer(v));
	} else { /* an id past INT64_MAX, as jj_id_new() writes it */
		char b[24];
		snprintf(b, sizeof b, "%llu", (unsigned long long)(uint64_t)jv_integer(v));
		jw_str(w, b);
	}
}

void jw_kenum_or_null(struct jw *w, const char *key, const jv *obj, const char *k,
		      const char *const *allowed)
{
	const char *s = jj_str(obj, k), *hit = NULL;
	for (size_t i = 0; s && !hit && allowed[i]; i++)
		if (strcmp(s, allowed[i]) == 0)
			hit = allowed[i];
	jw_key(w, key);
	if (hit)
		jw_str(w, hit);
	else
		jw_null(w);
}

const char *jw_text(struct jw *w, size_t *len)
{
	if (w->tree || w->depth != 0 || !reserve(w, 2))
		return NULL;
	w->buf[w->len++] = '\n';
	w->buf[w->len] = '\0';
	if (len)
		*len = w->len;
	return w->buf;
}

json_t *jw_take(struct jw *w)
{
	if (!w->tree || w->failed || w->depth != 0) {
		return NULL;
	}
	json_t *r = w->root;
	w->root = NULL;
	return r;
}
