/* tmap.c - linear-probing id -> index map with backward-shift deletion, so
 * no tombstones pile up while tasks come and go for hours. */
#include "tmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_of(int64_t key, size_t cap)
{
	uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 32) & (cap - 1);
}

long tmap_get(const struct tmap *m, int64_t key)
{
	if (!m->cap)
		return -1;
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i])
			return -1;
		if (m->keys[i] == key)
			return m->vals[i];
	}
}

static int grow(struct tmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64;
	struct tmap g = {
	    .keys = malloc(ncap * sizeof *g.keys),
	    .vals = malloc(ncap * sizeof *g.vals),
	    .used = calloc(ncap, 1),
	    .cap = ncap,
	};
	if (!g.keys || !g.vals || !g.used) {
		tmap_free(&g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i])
			tmap_put(&g, m->keys[i], m->vals[i]);
	tmap_free(m);
	*m = g;
	return 0;
}

int tmap_put(struct tmap *m, int64_t key, uint32_t val)
{
	/* Keep the load under 1/2: probes stay short even with clustered ids. */
	if ((m->n + 1) * 2 > m->cap) {
		int rc = grow(m);
		if (rc)
			return rc;
	}
	size_t i = slot_of(key, m->cap);
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->used[i]) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}

void tmap_del(struct tmap *m, int64_t key)
{
	if (!m->cap)
		return;
	size_t mask = m->cap - 1, i = slot_of(key, m->cap);
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & mask;
	if (!m->used[i])
		return;
	m->used[i] = 0;
	m->n--;
	/* Shift later members of the cluster back so lookups never stop early. */
	for (size_t j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
		size_t home = slot_of(m->keys[j], m->cap);
		int movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
		if (movable) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			m->used[i] = 1;
			m->used[j] = 0;
			i = j;
		}
	}
}

void tmap_clear(struct tmap *m)
{
	if (m->cap)
		memset(m->used, 0, m->cap);
	m->n = 0;
}

void tmap_free(struct tmap *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof *m);
}
