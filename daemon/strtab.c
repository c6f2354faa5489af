/* strtab.c - string interning with a byte cap, so a peer cannot grow it without bound. */
#include "strtab.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int grow(struct strtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	char **slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t i = 0; i < t->cap; i++) {
		char *s = t->slots[i];
		if (!s)
			continue;
		size_t j = hash(s, strlen(s)) & (cap - 1);
		while (slots[j])
			j = (j + 1) & (cap - 1);
		slots[j] = s;
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

const char *strtab_intern(struct strtab *t, const char *s, size_t len)
{
	size_t max = t->max_bytes ? t->max_bytes : (8u << 20);
	if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
		return NULL;
	size_t i = hash(s, len) & (t->cap - 1);
	for (; t->slots[i]; i = (i + 1) & (t->cap - 1))
		if (strncmp(t->slots[i], s, len) == 0 && t->slots[i][len] == '\0')
			return t->slots[i];
	if (t->bytes + len + 1 > max)
		return NULL;
	char *copy = malloc(len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = '\0';
	t->slots[i] = copy;
	t->n++;
	t->bytes += len + 1;
	return copy;
}

void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->slots[i]);
	free(t->slots);
	*t = (struct strtab){0};
}
