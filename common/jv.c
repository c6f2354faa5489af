/* jv.c - one-pass JSON parser into an arena of values with child tables,
 * for reading multi-megabyte daemon replies quickly. */
#include "jv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jv_doc {
	char *text; /* our copy; strings are decoded in place */
	jv *nodes;
	size_t nnodes, capnodes;
	uint32_t *kids; /* child node indices, each container's contiguous */
	size_t nkids, capkids;
	const jv **items; /* kids as pointers, once nodes stop moving */
	uint16_t *tags;	  /* and their key digests, side by side */
	uint32_t *stack;  /* open children of every open container */
	size_t nstack, capstack;
};

struct parser {
	struct jv_doc *doc;
	char *p, *end;
	const char *err;
};

static int grow(void **buf, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 256;
	while (ncap < need)
		ncap *= 2;
	void *nb = realloc(*buf, ncap * size);
	if (!nb)
		return -ENOMEM;
	*buf = nb;
	*cap = ncap;
	return 0;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\t' || *ps->p == '\r'))
		ps->p++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static long hex4(const char *s)
{
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(s[i]);
		if (h < 0)
			return -1;
		v = v * 16 + h;
	}
	return v;
}

static char *put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | (cp >> 6));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | (cp >> 12));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | (cp >> 18));
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

/* Decodes the string starting after its opening quote, in place: the
 * result never outgrows the source, and its terminator lands where the
 * closing quote (or an escape) was. */
static char *string(struct parser *ps, uint32_t *len)
{
	char *start = ps->p, *o = ps->p;
	/* Most strings hold no escape: skip to the first quote, backslash or
	 * control character without copying. */
	while (ps->p < ps->end && (unsigned char)*ps->p >= 0x20 && *ps->p != '"' && *ps->p != '\\')
		ps->p++;
	o = ps->p;
	while (ps->p < ps->end) {
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"') {
			ps->p++;
			*o = '\0';
			*len = (uint32_t)(o - start);
			return start;
		}
		if (c < 0x20) {
			ps->err = "control character in a string";
			return NULL;
		}
		if (c != '\\') {
			*o++ = (char)c;
			ps->p++;
			continue;
		}
		if (ps->end - ps->p < 2)
			break;
		char e = ps->p[1];
		static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
		const char *hit = strchr(from, e);
		if (e && hit) {
			*o++ = to[hit - from];
			ps->p += 2;
			continue;
		}
		if (e != 'u' || ps->end - ps->p < 6) {
			ps->err = "bad escape in a string";
			return NULL;
		}
		long cp = hex4(ps->p + 2);
		ps->p += 6;
		if (cp >= 0xd800 && cp < 0xdc00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
		    ps->p[1] == 'u') {
			long lo = hex4(ps->p + 2);
			if (lo >= 0xdc00 && lo < 0xe000) {
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				ps->p += 6;
			}
		}
		if (cp < 0 || cp == 0 || (cp >= 0xd800 && cp < 0xe000)) {
			ps->err = "bad \\u escape in a string";
			return NULL;
		}
		o = put_utf8(o, (unsigned long)cp);
	}
	ps->err = "unterminated string";
	return NULL;
}

static int number(struct parser *ps, jv *v)
{
	char *s = ps->p;
	bool real = false;
	if (s < ps->end && *s == '-')
		s++;
	if (s >= ps->end || *s < '0' || *s > '9') {
		ps->err = "unexpected character";
		return -1;
	}
	while (s < ps->end && ((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' ||
			       *s == '+' || *s == '-')) {
		if (*s == '.' || *s == 'e' || *s == 'E')
			real = true;
		s++;
	}
	/* Plain integers that fit are the common case: no copy, no strtoll. */
	if (!real && s - ps->p <= 18) {
		const char *q = ps->p;
		bool neg = *q == '-';
		int64_t i = 0;
		for (q += neg; q < s && *q >= '0' && *q <= '9'; q++)
			i = i * 10 + (*q - '0');
		if (q == s && s > ps->p + neg) {
			v->type = JV_INT;
			v->u.i = neg ? -i : i;
			ps->p = s;
			return 0;
		}
	}
	char buf[64];
	size_t n = (size_t)(s - ps->p);
	if (n >= sizeof buf) {
		ps->err = "number too long";
		return -1;
	}
	memcpy(buf, ps->p, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	if (!real) {
		long long i = strtoll(buf, &end, 10);
		if (*end == '\0' && errno == 0) {
			v->type = JV_INT;
			v->u.i = i;
			ps->p = s;
			return 0;
		}
		/* Past INT64_MAX and within u64: an id, kept exact. */
		errno = 0;
		unsigned long long u = buf[0] == '-' ? 0 : strtoull(buf, &end, 10);
		if (buf[0] != '-' && *end == '\0' && errno == 0) {
			v->type = JV_INT;
			v->big = 1;
			v->u.i = (int64_t)u;
			ps->p = s;
			return 0;
		}
	}
	double d = strtod(buf, &end);
	if (*end != '\0') {
		ps->err = "malformed number";
		return -1;
	}
	v->type = JV_REAL;
	v->u.d = d;
	ps->p = s;
	return 0;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static jv *new_node(struct parser *ps, uint32_t *idx)
{
	struct jv_doc *d = ps->doc;
	if (grow((void **)&d->nodes, &d->capnodes, d->nnodes + 1, sizeof *d->nodes) < 0) {
		ps->err = "out of memory";
		return NULL;
	}
	*idx = (uint32_t)d->nnodes;
	jv *v = &d->nodes[d->nnodes++];
	memset(v, 0, sizeof *v);
	return v;
}

/* The containers being parsed, innermost last; each remembers where its
 * children start on the doc's stack. */
struct open {
	uint32_t node;
	size_t base;
};

static int push_child(struct parser *ps, uint32_t idx)
{
	struct jv_doc *d = ps->doc;
	if (grow((void **)&d->stack, &d->capstack, d->nstack + 1, sizeof *d->stack) < 0) {
		ps->err = "out of memory";
		return -1;
	}
	d->stack[d->nstack++] = idx;
	return 0;
}

/* Moves the children of a closing container from the stack to the table. */
static int close_container(struct parser *ps, struct open *o)
{
	struct jv_doc *d = ps->doc;
	size_t n = d->nstack - o->base;
	if (grow((void **)&d->kids, &d->capkids, d->nkids + n, sizeof *d->kids) < 0) {
		ps->err = "out of memory";
		return -1;
	}
	if (n)
		memcpy(d->kids + d->nkids, d->stack + o->base, n * sizeof *d->kids);
	jv *v = &d->nodes[o->node];
	v->n = (uint32_t)n;
	/* The table offset waits in items until the pointers are final. */
	v->items = (const jv *const *)(uintptr_t)d->nkids;
	d->nkids += n;
	d->nstack = o->base;
	return 0;
}

static int parse_all(struct parser *ps)
{
	struct open open[JV_MAX_DEPTH];
	int depth = 0;
	const char *key = NULL;
	uint32_t klen = 0;

	for (;;) {
		skip_ws(ps);
		if (ps->p >= ps->end) {
			ps->err = "unexpected end";
			return -1;
		}
		/* A value, or the end of an empty container. */
		if (depth && (*ps->p == ']' || *ps->p == '}') &&
		    ps->doc->nstack == open[depth - 1].base && !key) {
			char want =
			    ps->doc->nodes[open[depth - 1].node].type == JV_ARRAY ? ']' : '}';
			if (*ps->p != want) {
				ps->err = "mismatched bracket";
				return -1;
			}
			ps->p++;
			if (close_container(ps, &open[--depth]) < 0)
				return -1;
			goto after_value;
		}
		if (depth && ps->doc->nodes[open[depth - 1].node].type == JV_OBJECT && !key) {
			if (*ps->p != '"') {
				ps->err = "expected a member name";
				return -1;
			}
			ps->p++;
			key = string(ps, &klen);
			if (!key)
				return -1;
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				ps->err = "expected ':'";
				return -1;
			}
			ps->p++;
			continue;
		}
		uint32_t idx;
		jv *v = new_node(ps, &idx);
		if (!v)
			return -1;
		v->key = key;
		if (key)
			v->ktag = jv_key_tag(key, strnlen(key, klen));
		key = NULL;
		if (depth && push_child(ps, idx) < 0)
			return -1;
		char c = *ps->p;
		if (c == '{' || c == '[') {
			if (depth == JV_MAX_DEPTH) {
				ps->err = "nested too deep";
				return -1;
			}
			v->type = c == '{' ? JV_OBJECT : JV_ARRAY;
			open[depth].node = idx;
			open[depth].base = ps->doc->nstack;
			depth++;
			ps->p++;
			continue;
		}
		if (c == '"') {
			ps->p++;
			v->type = JV_STRING;
			v->u.s = string(ps, &v->n);
			if (!v->u.s)
				return -1;
		} else if (literal(ps, "true")) {
			v->type = JV_TRUE;
		} else if (literal(ps, "false")) {
			v->type = JV_FALSE;
		} else if (literal(ps, "null")) {
			v->type = JV_NULL;
		} else if (number(ps, v) < 0) {
			return -1;
		}
	after_value:
		/* After a value: a comma, the end of its container, or the end. */
		for (;;) {
			skip_ws(ps);
			if (!depth)
				return ps->p == ps->end ? 0
							: (ps->err = "garbage after the value", -1);
			if (ps->p >= ps->end) {
				ps->err = "unexpected end";
				return -1;
			}
			char want =
			    ps->doc->nodes[open[depth - 1].node].type == JV_ARRAY ? ']' : '}';
			if (*ps->p == ',') {
				ps->p++;
				break;
			}
			if (*ps->p != want) {
				ps->err = "expected ',' or a closing bracket";
				return -1;
			}
			ps->p++;
			if (close_container(ps, &open[--depth]) < 0)
				return -1;
		}
	}
}

int jv_parse(const char *text, size_t len, struct jv_doc **out, char *err, size_t errlen)
{
	*out = NULL;
	if (len >= UINT32_MAX) {
		snprintf(err, errlen, "JSON text of %zu bytes is too large", len);
		return -EINVAL;
	}
	struct jv_doc *d = calloc(1, sizeof *d);
	if (!d || !(d->text = malloc(len + 1))) {
		free(d);
		snprintf(err, errlen, "out of memory parsing %zu bytes of JSON", len);
		return -ENOMEM;
	}
	memcpy(d->text, text, len);
	d->text[len] = '\0';
	struct parser ps = {.doc = d, .p = d->text, .end = d->text + len};
	int rc = parse_all(&ps);
	if (rc == 0) {
		d->items = malloc((d->nkids ? d->nkids : 1) * sizeof *d->items);
		d->tags = malloc((d->nkids ? d->nkids : 1) * sizeof *d->tags);
		if (!d->items || !d->tags) {
			ps.err = "out of memory";
			rc = -1;
		}
	}
	if (rc < 0) {
		bool oom = ps.err && strcmp(ps.err, "out of memory") == 0;
		snprintf(err, errlen, "malformed JSON at byte %zu: %s", (size_t)(ps.p - d->text),
			 ps.err ? ps.err : "?");
		jv_free(d);
		return oom ? -ENOMEM : -EINVAL;
	}
	for (size_t i = 0; i < d->nkids; i++) {
		d->items[i] = &d->nodes[d->kids[i]];
		d->tags[i] = d->nodes[d->kids[i]].ktag;
	}
	for (size_t i = 0; i < d->nnodes; i++) {
		jv *v = &d->nodes[i];
		if (v->type == JV_OBJECT)
			v->u.tags = d->tags + (uintptr_t)v->items;
		if (v->type == JV_ARRAY || v->type == JV_OBJECT)
			v->items = d->items + (uintptr_t)v->items;
	}
	free(d->stack);
	d->stack = NULL;
	*out = d;
	return 0;
}

void jv_free(struct jv_doc *d)
{
	if (!d)
		return;
	free(d->text);
	free(d->nodes);
	free(d->kids);
	free(d->items);
	free(d->tags);
	free(d->stack);
	free(d);
}

const jv *jv_root(const struct jv_doc *d)
{
	return d && d->nnodes ? &d->nodes[0] : NULL;
}

const jv *jv_get_tagged(const jv *obj, const char *key, uint16_t tag)
{
	if (!jv_is_object(obj))
		return NULL;
	/* The digest settles most misses without reading the name (dumps look
	 * up members of thousands of objects), and the digests of an object's
	 * members lie side by side: a miss touches no member.  From the last:
	 * of a name given twice, the last one counts. */
	const uint16_t *tags = obj->u.tags;
	for (size_t i = obj->n; i-- > 0;)
		if (tags[i] == tag && strcmp(obj->items[i]->key, key) == 0)
			return obj->items[i];
	return NULL;
}

size_t jv_size(const jv *v)
{
	return jv_is_array(v) || jv_is_object(v) ? v->n : 0;
}

const jv *jv_at(const jv *v, size_t i)
{
	return i < jv_size(v) ? v->items[i] : NULL;
}

const char *jv_string(const jv *v)
{
	return jv_is_string(v) ? v->u.s : NULL;
}

int64_t jv_integer(const jv *v)
{
	return jv_is_integer(v) ? v->u.i : 0;
}

double jv_number(const jv *v)
{
	if (jv_is_big(v))
		return (double)(uint64_t)v->u.i;
	return jv_is_integer(v) ? (double)v->u.i : jv_is(v, JV_REAL) ? v->u.d : 0;
}
