/* strtab.h - per-process interning of the site strings (file, function) a peer sends. */
#ifndef DAEMON_STRTAB_H
#define DAEMON_STRTAB_H

#include <stddef.h>

struct strtab {
	char **slots;
	size_t cap, n;
	size_t bytes, max_bytes; /* bytes held, and the cap (0: 8 MiB) */
};

/* Returns the interned copy of s[0..len) (borrowed until strtab_free()), or
 * NULL when the table is over its byte cap or out of memory. */
const char *strtab_intern(struct strtab *t, const char *s, size_t len);
void strtab_free(struct strtab *t);

#endif
