/* jtext.c - jansson serialization into one buffer that remembers a failed
 * append, because jansson ignores some of its callback's failures. */
#include <stdlib.h>
#include <string.h>

#include "jtext.h"

struct sink {
	char *p;
	size_t len, cap;
	bool failed;
};

static int append(const char *buf, size_t n, void *ctx)
{
	struct sink *s = ctx;
	if (s->failed)
		return -1;
	if (s->cap - s->len < n + 2) { /* room for the newline and the NUL */
		size_t ncap = s->cap ? s->cap : 256;
		while (ncap - s->len < n + 2)
			ncap *= 2;
		char *np = realloc(s->p, ncap);
		if (!np) {
			s->failed = true;
			return -1;
		}
		s->p = np;
		s->cap = ncap;
	}
	memcpy(s->p + s->len, buf, n);
	s->len += n;
	return 0;
}

char *jtext_dump(const json_t *j, size_t flags, bool newline, size_t *len)
{
	struct sink s = {0};
	/* An empty serialization still needs its terminator. */
	if (json_dump_callback(j, append, &s, flags) != 0 || s.failed || append("", 0, &s) != 0) {
		free(s.p);
		return NULL;
	}
	if (newline)
		s.p[s.len++] = '\n';
	s.p[s.len] = '\0';
	if (len)
		*len = s.len;
	return s.p;
}
