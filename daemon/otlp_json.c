/* otlp_json.c - --otlp-protocol http/json: the OTLP request trace.c wrote as
 * protobuf, rewritten in OTLP/JSON (the protobuf JSON mapping with OTLP's
 * exceptions: trace and span ids as hex, enums as numbers), driven by a
 * table of the messages and fields trace.c writes. */
#include "otlp_json.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

enum kind {
	K_MSG,	  /* a nested message (LEN) */
	K_STR,	  /* string (LEN) */
	K_HEX,	  /* bytes as lowercase hex: OTLP's ids (LEN) */
	K_NUM,	  /* varint as a JSON number: enums, counts */
	K_I64,	  /* varint int64 as a decimal string */
	K_FIX64,  /* fixed64 as a decimal string: times */
	K_BOOL,	  /* varint 0/1 */
	K_DOUBLE, /* fixed64 bits of a double */
};

struct msg;
struct field {
	unsigned num;
	const char *name;
	enum kind kind;
	bool repeated;
	const struct msg *msg;
};
struct msg {
	const struct field *f;
	size_t n;
};

#define MSG(name, ...)                                                                             \
	static const struct field name##_f[] = {__VA_ARGS__};                                      \
	static const struct msg name = {name##_f, sizeof name##_f / sizeof name##_f[0]}

/* opentelemetry/proto/{common,resource,trace,collector/trace}/v1. */
static const struct msg any_value, key_value;
MSG(array_value, {1, "values", K_MSG, true, &any_value});
MSG(kvlist_value, {1, "values", K_MSG, true, &key_value});
MSG(any_value, {1, "stringValue", K_STR, false, NULL}, {2, "boolValue", K_BOOL, false, NULL},
    {3, "intValue", K_I64, false, NULL}, {4, "doubleValue", K_DOUBLE, false, NULL},
    {5, "arrayValue", K_MSG, false, &array_value}, {6, "kvlistValue", K_MSG, false, &kvlist_value},
    {7, "bytesValue", K_HEX, false, NULL});
MSG(key_value, {1, "key", K_STR, false, NULL}, {2, "value", K_MSG, false, &any_value});
MSG(resource, {1, "attributes", K_MSG, true, &key_value},
    {2, "droppedAttributesCount", K_NUM, false, NULL});
MSG(scope, {1, "name", K_STR, false, NULL}, {2, "version", K_STR, false, NULL},
    {3, "attributes", K_MSG, true, &key_value});
MSG(event, {1, "timeUnixNano", K_FIX64, false, NULL}, {2, "name", K_STR, false, NULL},
    {3, "attributes", K_MSG, true, &key_value});
MSG(status, {2, "message", K_STR, false, NULL}, {3, "code", K_NUM, false, NULL});
MSG(span, {1, "traceId", K_HEX, false, NULL}, {2, "spanId", K_HEX, false, NULL},
    {3, "traceState", K_STR, false, NULL}, {4, "parentSpanId", K_HEX, false, NULL},
    {5, "name", K_STR, false, NULL}, {6, "kind", K_NUM, false, NULL},
    {7, "startTimeUnixNano", K_FIX64, false, NULL}, {8, "endTimeUnixNano", K_FIX64, false, NULL},
    {9, "attributes", K_MSG, true, &key_value}, {11, "events", K_MSG, true, &event},
    {15, "status", K_MSG, false, &status});
MSG(scope_spans, {1, "scope", K_MSG, false, &scope}, {2, "spans", K_MSG, true, &span},
    {3, "schemaUrl", K_STR, false, NULL});
MSG(resource_spans, {1, "resource", K_MSG, false, &resource},
    {2, "scopeSpans", K_MSG, true, &scope_spans}, {3, "schemaUrl", K_STR, false, NULL});
MSG(request, {1, "resourceSpans", K_MSG, true, &resource_spans});

/* One field as read from the wire. */
struct wire {
	unsigned num, type;
	uint64_t v;	  /* varint, fixed64, fixed32 */
	const uint8_t *p; /* LEN */
	size_t len;
};

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return true;
	}
	return false;
}

/* Reads the field at *p; false at the end or on bytes that do not parse. */
static bool next(const uint8_t **p, const uint8_t *end, struct wire *w)
{
	uint64_t key;

	if (*p >= end || !varint(p, end, &key) || key >> 3 == 0)
		return false;
	w->num = (unsigned)(key >> 3);
	w->type = (unsigned)(key & 7);
	switch (w->type) {
	case 0:
		return varint(p, end, &w->v);
	case 1:
		if (end - *p < 8)
			return false;
		memcpy(&w->v, *p, 8); /* little-endian on the wire, as on the hosts we build for */
		*p += 8;
		return true;
	case 2:
		if (!varint(p, end, &w->v) || w->v > (uint64_t)(end - *p))
			return false;
		w->p = *p;
		w->len = (size_t)w->v;
		*p += w->len;
		return true;
	case 5:
		if (end - *p < 4)
			return false;
		w->v = 0;
		memcpy(&w->v, *p, 4);
		*p += 4;
		return true;
	default:
		return false;
	}
}

static int message(struct jbuf *out, const struct msg *m, const uint8_t *p, size_t n, int depth);

static int value(struct jbuf *out, const struct field *f, const struct wire *w, int depth)
{
	static const char hex[] = "0123456789abcdef";
	char num[32];
	double d;

	switch (f->kind) {
	case K_MSG:
		return w->type == 2 ? message(out, f->msg, w->p, w->len, depth + 1) : -1;
	case K_STR:
		if (w->type != 2)
			return -1;
		jb_strn(out, (const char *)w->p, w->len);
		return 0;
	case K_HEX: {
		char buf[2 * 64];
		if (w->type != 2 || w->len > 64)
			return -1;
		for (size_t i = 0; i < w->len; i++) {
			buf[2 * i] = hex[w->p[i] >> 4];
			buf[2 * i + 1] = hex[w->p[i] & 15];
		}
		jb_strn(out, buf, 2 * w->len);
		return 0;
	}
	case K_NUM:
		if (w->type != 0)
			return -1;
		jb_u64(out, w->v);
		return 0;
	case K_I64:
		if (w->type != 0)
			return -1;
		snprintf(num, sizeof num, "%lld", (long long)(int64_t)w->v);
		jb_str(out, num);
		return 0;
	case K_FIX64:
		if (w->type != 1)
			return -1;
		snprintf(num, sizeof num, "%llu", (unsigned long long)w->v);
		jb_str(out, num);
		return 0;
	case K_BOOL:
		if (w->type != 0)
			return -1;
		jb_bool(out, w->v != 0);
		return 0;
	case K_DOUBLE:
		if (w->type != 1)
			return -1;
		memcpy(&d, &w->v, 8);
		if (d != d || d > 1.7976931348623157e308 || d < -1.7976931348623157e308) {
			jb_str(out, d != d ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
			return 0;
		}
		snprintf(num, sizeof num, "%.17g", d);
		jb_json(out, num, strlen(num));
		return 0;
	}
	return -1;
}

/* Writes the message at p as a JSON object, fields in the table's order; a
 * repeated field's occurrences make one array wherever they stand. */
static int message(struct jbuf *out, const struct msg *m, const uint8_t *p, size_t n, int depth)
{
	const uint8_t *end = p + n;

	if (depth >= JB_MAX_DEPTH - 2)
		return -1;
	jb_obj(out);
	for (size_t i = 0; i < m->n; i++) {
		const struct field *f = &m->f[i];
		const uint8_t *q = p;
		struct wire w = {0};
		bool seen = false;
		while (q < end) {
			if (!next(&q, end, &w))
				return -1;
			if (w.num != f->num)
				continue;
			if (!seen) {
				jb_key(out, f->name);
				if (f->repeated)
					jb_arr(out);
				seen = true;
			} else if (!f->repeated) {
				return -1; /* trace.c writes a singular field once */
			}
			if (value(out, f, &w, depth) < 0)
				return -1;
		}
		if (seen && f->repeated)
			jb_arr_end(out);
	}
	jb_obj_end(out);
	return 0;
}

int otlp_json_request(const void *pb, size_t n, struct jbuf *out)
{
	return message(out, &request, pb, n, 0) < 0 || out->oom ? -1 : 0;
}
