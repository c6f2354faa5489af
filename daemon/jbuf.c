/* jbuf.c - JSON writer: escapes strings, formats integers by hand, tracks commas per level. */
#include "jbuf.h"

#include "utf8.h"

#include <stdlib.h>
#include <string.h>

void jb_init(struct jbuf *b)
{
	memset(b, 0, sizeof *b);
	b->first[0] = true;
}

void jb_free(struct jbuf *b)
{
	free(b->p);
	jb_init(b);
}

void jb_reset(struct jbuf *b)
{
	char *p = b->p;
	size_t cap = b->cap;
	jb_init(b);
	b->p = p;
	b->cap = cap;
}

void jb_consume(struct jbuf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static bool reserve(struct jbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (b->len + n <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static inline void put(struct jbuf *b, char c)
{
	if (b->len < b->cap || reserve(b, 1))
		b->p[b->len++] = c;
}

/* Writes the separator a new value needs at the current level. */
static void sep(struct jbuf *b)
{
	if (b->after_key) {
		b->after_key = false;
		return;
	}
	if (!b->first[b->depth])
		put(b, ',');
	b->first[b->depth] = false;
}

static void open_level(struct jbuf *b, char c)
{
	sep(b);
	put(b, c);
	if (b->depth + 1 < JB_MAX_DEPTH)
		b->depth++;
	b->first[b->depth] = true;
}

static void close_(struct jbuf *b, char c)
{
	put(b, c);
	if (b->depth > 0)
		b->depth--;
}

void jb_obj(struct jbuf *b)
{
	open_level(b, '{');
}
void jb_obj_end(struct jbuf *b)
{
	close_(b, '}');
}
void jb_arr(struct jbuf *b)
{
	open_level(b, '[');
}
void jb_arr_end(struct jbuf *b)
{
	close_(b, ']');
}

/* The bytes a JSON string holds as they are: printable ASCII but the quote
 * and the backslash. */
static inline bool plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/* What a byte that is not plain becomes, from s[i] on (n bytes in all);
 * returns how many bytes of s it took. */
static size_t escape(struct jbuf *b, const char *s, size_t i, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = (unsigned char)s[i];
	if (c == '"' || c == '\\') {
		char esc[2] = {'\\', (char)c};
		jb_raw(b, esc, 2);
		return 1;
	}
	if (c < 0x80) {
		char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		jb_raw(b, esc, 6);
		return 1;
	}
	/* Output is always UTF-8, whatever came in (a thread's kernel name may
	 * hold any byte): an invalid byte becomes U+FFFD, a C1 control an
	 * escape. */
	size_t seq = utf8_seq((const unsigned char *)s + i, n - i);
	if (!seq) {
		jb_raw(b, "\xef\xbf\xbd", 3);
		return 1;
	}
	if (seq == 2 && c == 0xc2 && (unsigned char)s[i + 1] < 0xa0) {
		unsigned char c1 = (unsigned char)s[i + 1];
		char esc[6] = {'\\', 'u', '0', '0', hex[c1 >> 4], hex[c1 & 15]};
		jb_raw(b, esc, 6);
		return 2;
	}
	jb_raw(b, s + i, seq);
	return seq;
}

/* s as a JSON string.  Runs of plain bytes are copied whole: a dump's
 * reply is mostly names, states and symbols with nothing to escape, and a
 * byte at a time was most of the cost of writing it. */
static void quoted(struct jbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n + 2))
		return;
	b->p[b->len++] = '"';
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && plain((unsigned char)s[j]))
			j++;
		if (j > i) {
			/* Room for the run was reserved, unless escapes before
			 * it used some. */
			if (!reserve(b, j - i + 1))
				return;
			memcpy(b->p + b->len, s + i, j - i);
			b->len += j - i;
			i = j;
		}
		if (i < n)
			i += escape(b, s, i, n);
	}
	put(b, '"');
}

void jb_key(struct jbuf *b, const char *key)
{
	sep(b);
	quoted(b, key, strlen(key));
	put(b, ':');
	b->after_key = true;
}

void jb_strn(struct jbuf *b, const char *s, size_t n)
{
	sep(b);
	quoted(b, s, n);
}

void jb_str(struct jbuf *b, const char *s)
{
	if (!s) {
		jb_null(b);
		return;
	}
	jb_strn(b, s, strlen(s));
}

static void digits(struct jbuf *b, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	if (!reserve(b, (size_t)n))
		return;
	while (n)
		b->p[b->len++] = tmp[--n];
}

void jb_u64(struct jbuf *b, uint64_t v)
{
	sep(b);
	digits(b, v);
}

void jb_i64(struct jbuf *b, int64_t v)
{
	sep(b);
	if (v < 0) {
		put(b, '-');
		digits(b, (uint64_t)0 - (uint64_t)v);
	} else {
		digits(b, (uint64_t)v);
	}
}

void jb_bool(struct jbuf *b, bool v)
{
	sep(b);
	jb_raw(b, v ? "true" : "false", v ? 4 : 5);
}

void jb_null(struct jbuf *b)
{
	sep(b);
	jb_raw(b, "null", 4);
}

void jb_ms(struct jbuf *b, int64_t ns)
{
	sep(b);
	uint64_t a;
	if (ns < 0) {
		put(b, '-');
		a = (uint64_t)0 - (uint64_t)ns;
	} else {
		a = (uint64_t)ns;
	}
	digits(b, a / 1000000);
	unsigned frac = (unsigned)(a % 1000000 / 1000);
	if (frac) {
		char f[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
			     (char)('0' + frac % 10)};
		size_t n = 4;
		while (f[n - 1] == '0')
			n--;
		jb_raw(b, f, n);
	}
}

void jb_json(struct jbuf *b, const char *text, size_t n)
{
	sep(b);
	jb_raw(b, text, n);
}
