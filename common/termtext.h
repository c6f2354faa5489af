/* termtext.h - text from a target made safe to print on a terminal: what a
 * hostile program names (threads, scopes, values, source files) must not
 * move the cursor, change colours, set the title or start fake lines in
 * scopecmd's text output or scopetop.  Shared by dump/, dumper/ and tui/. */
#ifndef COMMON_TERMTEXT_H
#define COMMON_TERMTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Whether s (NULL counts as clean) is well-formed UTF-8 without C0 controls,
 * DEL or C1 controls (U+0080..U+009F): printable as it is. */
bool tt_clean(const char *s);

/* Copies s into dst (capacity cap, always terminated, cut at a character
 * boundary) with each control or ill-formed byte replaced: by repl when it
 * is not 0, else escaped as C does ("\n", "\t", "\r", "\x1b"; a C1
 * control as "\u009b"; a byte that is not UTF-8 as "\xff").  Returns the
 * length the whole result needs (as snprintf does). */
size_t tt_escape(char *dst, size_t cap, const char *s, char repl);

/* s (len bytes) as a new string (free()) of well-formed UTF-8: each byte
 * that does not start a well-formed sequence becomes U+FFFD, controls stay.
 * NULL when out of memory. */
char *tt_utf8_fix(const char *s, size_t len);

/* tt_escape(..., 0) into a new string (free()); NULL when out of memory. */
char *tt_escape_dup(const char *s);

/* s, escaped (repl 0), if it is not clean, into buf, else s itself:
 * for one short field in a printf.  NULL stays NULL. */
const char *tt_safe(const char *s, char *buf, size_t len);

/* Writes s escaped (repl 0) to out.  Returns 0 or EOF. */
int tt_fputs(const char *s, FILE *out);

#endif
