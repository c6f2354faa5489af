/* idmap.c - linear probing with backward-shift deletion, so no tombstones accumulate. */
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

void *idmap_get(const struct idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(id, m->cap);; i = (i + 1) & (m->cap - 1)) {
		void *e = m->slots[i];
		if (!e)
			return NULL;
		if (ent_id(e) == id)
			return e;
	}
}

static void place(void **slots, size_t cap, void *ent)
{
	size_t i = slot_of(ent_id(ent), cap);
	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = ent;
}

static int grow(struct idmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	void **slots = calloc(cap, sizeof *slots);
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i])
			place(slots, cap, m->slots[i]);
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

int idmap_put(struct idmap *m, void *ent)
{
	/* Keep the load under 3/4 so probes stay short. */
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return -ENOMEM;
	place(m->slots, m->cap, ent);
	m->n++;
	return 0;
}

void *idmap_del(struct idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	size_t mask = m->cap - 1, i = slot_of(id, m->cap);
	while (m->slots[i] && ent_id(m->slots[i]) != id)
		i = (i + 1) & mask;
	void *found = m->slots[i];
	if (!found)
		return NULL;
	/* Shift later members of the probe run back into the hole. */
	for (size_t j = (i + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
		size_t home = slot_of(ent_id(m->slots[j]), m->cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i] = NULL;
	m->n--;
	return found;
}

void idmap_free(struct idmap *m)
{
	free(m->slots);
	*m = (struct idmap){0};
}
