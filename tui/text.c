/* text.c - UTF-8 aware width and fitting, so names from the target never
 * overflow a column or break the layout, with an ASCII fallback. */
#include "text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

/* Decodes one UTF-8 sequence at s (length into *len); invalid bytes decode
 * as U+FFFD of length 1, so bad input still advances. */
static uint32_t utf8_next(const unsigned char *s, int *len)
{
	if (s[0] < 0x80) {
		*len = 1;
		return s[0];
	}
	int n = (s[0] >= 0xF0) ? 4 : (s[0] >= 0xE0) ? 3 : (s[0] >= 0xC0) ? 2 : 0;
	if (!n) {
		*len = 1;
		return 0xFFFD;
	}
	uint32_t c = s[0] & (0x7F >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*len = 1;
			return 0xFFFD;
		}
		c = (c << 6) | (s[i] & 0x3F);
	}
	*len = n;
	return c;
}

/* Columns of one code point as drawn: control characters are drawn as '?'
 * (tx_append), so they take one column like any unknown character. */
static int cp_width(uint32_t c)
{
	if (c < 0xa0)
		return 1;
	int w = wcwidth((wchar_t)c);
	return w < 0 ? 1 : w;
}

int ttx_width(const char *s, bool ascii)
{
	int w = 0, len;
	for (const unsigned char *p = (const unsigned char *)s; p && *p; p += len) {
		uint32_t c = utf8_next(p, &len);
		w += ascii && c >= 0x80 ? 1 : cp_width(c);
	}
	return w;
}

int ttx_append(char *dst, size_t cap, const char *src, int cols, bool ascii)
{
	size_t at = strlen(dst);
	int used = 0, len;
	for (const unsigned char *p = (const unsigned char *)src; p && *p; p += len) {
		uint32_t c = utf8_next(p, &len);
		/* Control characters become '?': visible, but never sent. */
		bool bad = c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0);
		int w = (bad || (ascii && c >= 0x80)) ? 1 : cp_width(c);
		if (used + w > cols)
			break;
		if (bad || (ascii && c >= 0x80)) {
			if (at + 1 >= cap)
				break;
			dst[at++] = '?';
		} else {
			if (at + (size_t)len >= cap)
				break;
			memcpy(dst + at, p, (size_t)len);
			at += (size_t)len;
		}
		used += w;
	}
	dst[at] = 0;
	return used;
}

int ttx_append_cut(char *dst, size_t cap, const char *src, int cols, bool ascii)
{
	if (cols < 2 || ttx_width(src, ascii) <= cols)
		return ttx_append(dst, cap, src, cols, ascii);
	int used = ttx_append(dst, cap, src, cols - 1, ascii);
	return used + ttx_append(dst, cap, ascii ? "~" : "\u2026", 1, ascii);
}

void ttx_pad(char *dst, size_t cap, int used, int cols)
{
	size_t at = strlen(dst);
	while (used < cols && at + 1 < cap) {
		dst[at++] = ' ';
		used++;
	}
	dst[at] = 0;
}

void ttx_duration(char *buf, size_t len, double ms)
{
	const char *sign = ms < 0 ? "-" : "";
	double a = fabs(ms);
	if (a < 1000)
		snprintf(buf, len, "%s%.0fms", sign, a);
	else if (a < 60e3)
		snprintf(buf, len, "%s%.1fs", sign, a / 1e3);
	else if (a < 3600e3)
		snprintf(buf, len, "%s%dm%02ds", sign, (int)(a / 60e3), (int)fmod(a / 1e3, 60));
	else if (a < 86400e3)
		snprintf(buf, len, "%s%dh%02dm", sign, (int)(a / 3600e3), (int)fmod(a / 60e3, 60));
	else
		snprintf(buf, len, "%s%dd%02dh", sign, (int)fmin(a / 86400e3, 99999),
			 (int)fmod(a / 3600e3, 24));
}
