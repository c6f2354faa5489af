/* jbuf.c - JSON writer: escapes strings, formats integers by hand, tracks commas per level. */
#include "jbuf.h"

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

/* Length of the well-formed UTF-8 sequence at s[0..n) (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Strings from peers are bytes (a thread name, a file name): what is not
 * UTF-8 is written as U+FFFD, since JSON text must be UTF-8 (fuzz_model). */
static void quoted(struct jbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	if (!reserve(b, n + 2))
		return;
	put(b, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x80) {
			size_t len = utf8_len((const unsigned char *)s + i, n - i);
			if (len) {
				jb_raw(b, s + i, len);
				i += len - 1;
			} else {
				jb_raw(b, "\\ufffd", 6);
			}
		} else if (c >= 0x20 && c != '"' && c != '\\') {
			put(b, (char)c);
		} else if (c == '"' || c == '\\') {
			put(b, '\\');
			put(b, (char)c);
		} else {
			char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			jb_raw(b, esc, 6);
		}
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
