/* fuzz_jv.c - libFuzzer target for common/jv.c, the read-only JSON parser of
 * the clients: whatever it accepts is walked whole, written back out as JSON,
 * and the text written must parse again (with jv and with jansson) to the
 * same values; what it refuses must come with a reason. */
#include "jv.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct text {
	char *p;
	size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		t->cap = (t->len + n + 1) * 2;
		t->p = realloc(t->p, t->cap);
		if (!t->p)
			abort();
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
}

static void put_str(struct text *t, const char *s, size_t n)
{
	put(t, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		if (c < 0x20 || c == '"' || c == '\\') {
			snprintf(esc, sizeof esc, "\\u%04x", c);
			put(t, esc, 6);
		} else {
			put(t, (const char *)&c, 1);
		}
	}
	put(t, "\"", 1);
}

/* Writes v as JSON; every accessor is exercised on the way. */
static void write_value(struct text *t, const jv *v)
{
	char num[40];
	switch (v->type) {
	case JV_NULL:
		put(t, "null", 4);
		break;
	case JV_FALSE:
		put(t, "false", 5);
		break;
	case JV_TRUE:
		put(t, "true", 4);
		break;
	case JV_INT:
		if (jv_is_big(v)) /* past INT64_MAX: its u64 value */
			put(t, num,
			    (size_t)snprintf(num, sizeof num, "%llu",
					     (unsigned long long)(uint64_t)jv_integer(v)));
		else
			put(t, num,
			    (size_t)snprintf(num, sizeof num, "%lld", (long long)jv_integer(v)));
		break;
	case JV_REAL: {
		double d = jv_number(v);
		if (isnan(d))
			abort(); /* JSON has no NaN */
		if (isinf(d))
			put(t, d > 0 ? "1e999" : "-1e999", d > 0 ? 5 : 6);
		else
			put(t, num, (size_t)snprintf(num, sizeof num, "%.17g", d));
		break;
	}
	case JV_STRING:
		if (!jv_string(v) || jv_string(v)[v->n] != '\0')
			abort(); /* the length and the terminator disagree */
		put_str(t, jv_string(v), v->n);
		break;
	case JV_ARRAY:
	case JV_OBJECT:
		put(t, v->type == JV_ARRAY ? "[" : "{", 1);
		for (size_t i = 0; i < jv_size(v); i++) {
			const jv *item = jv_at(v, i);
			if (!item)
				abort();
			if (i)
				put(t, ",", 1);
			if (v->type == JV_OBJECT) {
				if (!item->key)
					abort();
				put_str(t, item->key, strlen(item->key));
				put(t, ":", 1);
			}
			write_value(t, item);
		}
		if (jv_at(v, jv_size(v)))
			abort(); /* past the end */
		put(t, v->type == JV_ARRAY ? "]" : "}", 1);
		break;
	default:
		abort();
	}
}

static bool same_number(double a, double b)
{
	if (a == b)
		return true;
	return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b));
}

/* Whether a and b (from the text a was written as) hold the same values. */
static bool same(const jv *a, const jv *b)
{
	if (a->type != b->type)
		return a->type == JV_REAL && jv_is_number(b) &&
		       same_number(jv_number(a), jv_number(b));
	switch (a->type) {
	case JV_INT:
		return jv_integer(a) == jv_integer(b) && jv_is_big(a) == jv_is_big(b);
	case JV_REAL:
		return same_number(jv_number(a), jv_number(b));
	case JV_STRING:
		return a->n == b->n && !memcmp(jv_string(a), jv_string(b), a->n);
	case JV_ARRAY:
	case JV_OBJECT:
		if (jv_size(a) != jv_size(b))
			return false;
		for (size_t i = 0; i < jv_size(a); i++) {
			const jv *x = jv_at(a, i), *y = jv_at(b, i);
			if (a->type == JV_OBJECT && strcmp(x->key, y->key))
				return false;
			if (!same(x, y))
				return false;
		}
		return true;
	default:
		return true;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jv_doc *doc = NULL, *again = NULL;
	char err[160] = "";

	int rc = jv_parse((const char *)data, size, &doc, err, sizeof err);
	if (rc != 0) {
		if (doc || !err[0])
			abort(); /* a refusal leaves nothing and says why */
		return 0;
	}
	struct text t = {0};
	write_value(&t, jv_root(doc));
	if (jv_parse(t.p, t.len, &again, err, sizeof err) != 0) {
		fprintf(stderr, "jv refuses what it wrote (%s): %.*s\n", err, (int)t.len, t.p);
		abort();
	}
	if (!same(jv_root(doc), jv_root(again)))
		abort();
	/* jansson reads it too, but for what it is stricter about: nesting
	 * depth, number range, and bytes that are not UTF-8 (jv passes those
	 * through). */
	json_error_t jerr;
	json_t *j = json_loadb(t.p, t.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (!j && !strstr(jerr.text, "depth") && !strstr(jerr.text, "too big") &&
	    !strstr(jerr.text, "overflow") && !strstr(jerr.text, "unable to decode byte") &&
	    !strstr(jerr.text, "NUL byte")) {
		fprintf(stderr, "jansson refuses what jv accepted (%s): %.*s\n", jerr.text,
			(int)(t.len > 2000 ? 2000 : t.len), t.p);
		abort();
	}
	json_decref(j);
	free(t.p);
	jv_free(again);
	jv_free(doc);
	return 0;
}
