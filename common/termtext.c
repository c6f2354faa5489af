/* termtext.c - escaping of controls and ill-formed UTF-8 in text printed
 * on a terminal (see termtext.h). */
#include "termtext.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlongs,
 * no surrogates, nothing past U+10FFFF), or 0 when s does not start one;
 * the code point into *cp. */
static size_t utf8_seq(const unsigned char *s, uint32_t *cp)
{
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	size_t n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC2 ? 2 : 0;
	if (!n || s[0] > 0xF4)
		return 0;
	uint32_t c = s[0] & (0xFF >> (n + 1));
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3F);
	}
	static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return n;
}

static bool is_control(uint32_t c)
{
	return c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0);
}

bool tt_clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (p && *p) {
		/* Printable ASCII, nearly every byte of a dump: no decoding. */
		if (*p >= 0x20 && *p < 0x7f) {
			p++;
			continue;
		}
		uint32_t c;
		size_t n = utf8_seq(p, &c);
		if (!n || is_control(c))
			return false;
		p += n;
	}
	return true;
}

/* The escape of one control code point or bad byte into e (at least 8). */
static size_t escape_of(uint32_t c, bool bad_byte, char *e)
{
	static const char hex[] = "0123456789abcdef";
	if (!bad_byte && (c == '\n' || c == '\t' || c == '\r')) {
		e[0] = '\\';
		e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
		return 2;
	}
	if (!bad_byte && c >= 0x80) { /* C1: the code point, as \uXXXX */
		memcpy(e, "\\u00", 4);
		e[4] = hex[(c >> 4) & 0xF];
		e[5] = hex[c & 0xF];
		return 6;
	}
	e[0] = '\\';
	e[1] = 'x';
	e[2] = hex[(c >> 4) & 0xF];
	e[3] = hex[c & 0xF];
	return 4;
}

size_t tt_escape(char *dst, size_t cap, const char *s, char repl)
{
	size_t need = 0, at = 0;
	bool full = false; /* once a piece does not fit, nothing after it goes in */
	const unsigned char *p = (const unsigned char *)s;
	while (p && *p) {
		uint32_t c = 0;
		size_t n = utf8_seq(p, &c);
		char e[8];
		const char *piece = (const char *)p;
		size_t plen = n;
		if (!n || is_control(c)) {
			if (repl) {
				e[0] = repl;
				plen = 1;
			} else {
				plen = escape_of(n ? c : *p, !n, e);
			}
			piece = e;
			n = n ? n : 1;
		}
		if (!full && at + plen < cap) {
			memcpy(dst + at, piece, plen);
			at += plen;
		} else {
			full = true;
		}
		need += plen;
		p += n;
	}
	if (cap)
		dst[at] = 0;
	return need;
}

char *tt_utf8_fix(const char *s, size_t len)
{
	char *d = malloc(len * 3 + 1), *o = d; /* one byte: at most U+FFFD's three */
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	while (d && p < end) {
		uint32_t c;
		/* utf8_seq reads up to 4 bytes: only where they are there. */
		unsigned char tmp[5] = {0};
		size_t room = (size_t)(end - p) < 4 ? (size_t)(end - p) : 4;
		memcpy(tmp, p, room);
		size_t n = *p ? utf8_seq(tmp, &c) : 1;
		if (n && n <= room) {
			memcpy(o, p, n);
			o += n;
			p += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
		}
	}
	if (d)
		*o = 0;
	return d;
}

char *tt_escape_dup(const char *s)
{
	size_t n = tt_escape(NULL, 0, s, 0);
	char *d = malloc(n + 1);
	if (d)
		tt_escape(d, n + 1, s, 0);
	return d;
}

const char *tt_safe(const char *s, char *buf, size_t len)
{
	if (!s || tt_clean(s) || !len)
		return s;
	tt_escape(buf, len, s, 0);
	return buf;
}

int tt_fputs(const char *s, FILE *out)
{
	if (tt_clean(s))
		return s && fputs(s, out) == EOF ? EOF : 0;
	char *e = tt_escape_dup(s);
	int rc = e ? fputs(e, out) : EOF;
	free(e);
	return rc == EOF ? EOF : 0;
}
