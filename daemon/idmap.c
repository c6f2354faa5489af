/* idmap.c - linear probing with backward-shift deletion, so no tombstones
 * accumulate.  Each slot holds the id beside the entity pointer (a NULL
 * pointer marks an empty slot: a peer may well send id 0), so a probe reads
 * consecutive slots and touches one entity, on a hit.  (Comparing through
 * the pointer cost a cache miss per probe, and the lookup of each new task
 * was then most of the daemon's time in a fork storm.) */
#include "idmap.h"

#include <errno.h>
#include <stdlib.h>

static inline uint64_t ent_id(const void *ent)
{
	return *(const uint64_t *)ent;
}

static inline size_t slot_of(uint64_t id, size_t cap)
{
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* The slot holding id, or the empty one where it would go. */
static size_t find(const struct idmap *m, uint64_t id)
{
	size_t i = slot_of(id, m->cap);
	while (m->slots[i].e && m->slots[i].id != id)
		i = (i + 1) & (m->cap - 1);
	return i;
}

void *idmap_get(const struct idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	return m->slots[find(m, id)].e;
}

static int grow(struct idmap *m)
{
	struct idmap g = {.cap = m->cap ? m->cap * 2 : 16, .n = m->n};
	g.slots = calloc(g.cap, sizeof *g.slots);
	if (!g.slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].e)
			g.slots[find(&g, m->slots[i].id)] = m->slots[i];
	free(m->slots);
	*m = g;
	return 0;
}

int idmap_put(struct idmap *m, void *ent)
{
	/* Keep the load under 3/4 so probes stay short. */
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return -ENOMEM;
	m->slots[find(m, ent_id(ent))] = (struct idmap_slot){ent_id(ent), ent};
	m->n++;
	return 0;
}

void *idmap_del(struct idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1, i = find(m, id);
	void *found = m->slots[i].e;
	if (!found)
		return NULL;
	/* Shift later members of the probe run back into the hole. */
	for (size_t j = (i + 1) & mask; m->slots[j].e; j = (j + 1) & mask) {
		size_t home = slot_of(m->slots[j].id, m->cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i] = (struct idmap_slot){0, NULL};
	m->n--;
	return found;
}

void idmap_prefetch(const struct idmap *m, uint64_t id)
{
	if (m->cap)
		__builtin_prefetch(&m->slots[slot_of(id, m->cap)]);
}

void idmap_free(struct idmap *m)
{
	free(m->slots);
	*m = (struct idmap){0};
}
