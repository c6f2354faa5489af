/* text.h - terminal text helpers: display width of UTF-8, fitting text into
 * a number of columns, ASCII fallback, and short human durations. */
#ifndef TUI_TEXT_H
#define TUI_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Columns s takes on screen (ascii: every non-ASCII byte counts as one '?'). */
int ttx_width(const char *s, bool ascii);

/* Appends src to dst (NUL-terminated, capacity cap) using at most cols
 * columns; in ascii mode non-ASCII characters become '?'.  Returns the
 * columns used. */
int ttx_append(char *dst, size_t cap, const char *src, int cols, bool ascii);

/* As ttx_append(), but text that does not fit ends in an ellipsis ("…",
 * "~" in ascii mode) in its last column, so a cut name reads as cut. */
int ttx_append_cut(char *dst, size_t cap, const char *src, int cols, bool ascii);

/* Pads dst with spaces up to cols columns (dst already uses used columns). */
void ttx_pad(char *dst, size_t cap, int used, int cols);

/* "850ms", "12.3s", "5m03s", "2h05m", "3d04h"; negative values get a '-'. */
void ttx_duration(char *buf, size_t len, double ms);

#endif
