/* textdump.h - the human-readable thread dump: the JDK JSON dump printed as
 * an indented container tree with `#tid "name" STATE` and `at frame` lines. */
#ifndef DUMP_TEXTDUMP_H
#define DUMP_TEXTDUMP_H

#include <jansson.h>
#include <stdio.h>

enum textdump_flags {
	TEXTDUMP_LOCKS = 0x1,	 /* -l: what each thread is blocked in, stack errors */
	TEXTDUMP_EXTENDED = 0x2, /* -e: task, fork site, times, scoped values */
};

/* Prints dump (borrowed; what jdkdump_build() returns) to out.  Tolerates
 * any shape of input.  Returns 0, -EIO when writing failed, or -ENOMEM
 * (part of the dump may have been written then). */
int textdump_write(FILE *out, const json_t *dump, unsigned flags);

/* The same into a new string (free()), or NULL when out of memory. */
char *textdump_string(const json_t *dump, unsigned flags);

#endif
