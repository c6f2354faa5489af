/* utf8.h - text from peers made safe to keep and to show.  A name with byte
 * 0xff broke every client's list (their JSON parsers refuse it), and names
 * with newlines or ESC printed fake lines and terminal escapes; so the
 * daemon keeps names as valid UTF-8 with every control character (C0, DEL,
 * C1) and every invalid byte replaced by U+FFFD. */
#ifndef DAEMON_UTF8_H
#define DAEMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length (1..4) of the valid UTF-8 sequence at s (n bytes available),
 * or 0 when it is not one (overlong, surrogate, past U+10FFFF, cut). */
size_t utf8_seq(const unsigned char *s, size_t n);

/* Whether s[0..n) is valid UTF-8 without control characters. */
bool text_is_clean(const char *s, size_t n);

/* A NUL-terminated copy of s[0..n) (new, free()) with each invalid byte
 * and each control character replaced by U+FFFD; its length in *outlen
 * (may be NULL).  NULL when memory runs out. */
char *text_clean_dup(const char *s, size_t n, size_t *outlen);

#endif
