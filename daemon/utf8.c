/* utf8.c - text from peers made safe to keep and to show: valid UTF-8, no
 * control characters (see utf8.h). */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

size_t utf8_seq(const unsigned char *s, size_t n)
{
	if (!n)
		return 0;
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlong forms */
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* nothing past U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

/* Whether the character at s (of seq bytes) is a control: C0, DEL or C1. */
static bool control(const unsigned char *s, size_t seq)
{
	return (seq == 1 && (s[0] < 0x20 || s[0] == 0x7f)) ||
	       (seq == 2 && s[0] == 0xc2 && s[1] < 0xa0);
}

bool text_is_clean(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		if (p[i] >= 0x20 && p[i] < 0x7f) {
			i++;
			continue;
		}
		size_t seq = utf8_seq(p + i, n - i);
		if (!seq || control(p + i, seq))
			return false;
		i += seq;
	}
	return true;
}

char *text_clean_dup(const char *s, size_t n, size_t *outlen)
{
	const unsigned char *p = (const unsigned char *)s;
	/* Each bad byte becomes three: room for the worst case. */
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n;) {
		size_t seq = utf8_seq(p + i, n - i);
		if (!seq || control(p + i, seq)) {
			memcpy(out + o, replacement, 3);
			o += 3;
			i += seq ? seq : 1;
		} else {
			memcpy(out + o, p + i, seq);
			o += seq;
			i += seq;
		}
	}
	out[o] = '\0';
	if (outlen)
		*outlen = o;
	return out;
}
