/* idmap.c - linear probing with backward-shift deletion, so no tombstones
 * accumulate.  Each slot holds the id beside the entity pointer (a NULL
 * pointer marks an empty slot: a peer may well send id 0), so a probe reads
 * consecutive slots and touches one entity, on a hit.  (Comparing through
 * the pointer cost a cache miss per probe, and the lookup of each new task
 * was then most of the daemon's time in a fork storm.) */
#include "idmap.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

/* A probe run longer than this on insert means the ids collide under the
 * map's key (a peer may choose its ids to): the map takes a new key. */
#define LONG_RUN 128

static inline uint64_t ent_id(const void *ent)
{
	return *(const uint64_t *)ent;
}

/* Ids come from the peer.  The multiplicative hash spreads the counters a
 * real agent sends perfectly, and costs one multiply; but ids chosen to
 * collide under it (multiples of 2^47) made every insert walk all the
 * others.  So a map whose probe runs grow long takes a secret key, and from
 * then on hashes with MurmurHash3's 64-bit finalizer on the id xored with
 * the key (about 2.7x the lookup time of the plain hash on counters, in a
 * micro-benchmark; so it is not the default). */
static inline size_t slot_of(uint64_t id, uint64_t key, size_t cap)
{
	if (!key)
		return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
	uint64_t x = id ^ key;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

/* A fresh key, never 0: a counter seeded from the kernel's random source,
 * mixed (splitmix64), so that no two maps share one. */
static uint64_t new_key(void)
{
	static uint64_t state;
	if (!state && getrandom(&state, sizeof state, GRND_NONBLOCK) != sizeof state) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state =
		    (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)(uintptr_t)&ts;
	}
	uint64_t z = (state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z ? z : 1;
}

/* The slot holding id, or the empty one where it would go. */
static size_t find(const struct idmap *m, uint64_t id)
{
	size_t i = slot_of(id, m->key, m->cap);
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

/* Moves every entry into a table of cap slots hashed with key. */
static int rehash(struct idmap *m, size_t cap, uint64_t key)
{
	struct idmap g = {.cap = cap, .n = m->n, .key = key, .rekeyed_cap = m->rekeyed_cap};
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
	if ((m->n + 1) * 4 > m->cap * 3 && rehash(m, m->cap ? m->cap * 2 : 16, m->key) < 0)
		return -ENOMEM;
	uint64_t id = ent_id(ent);
	size_t i = find(m, id);
	/* At most once per size, so that rehashing stays amortized like
	 * growing, even should a secret key meet a long run by chance. */
	if (((i - slot_of(id, m->key, m->cap)) & (m->cap - 1)) > LONG_RUN &&
	    m->rekeyed_cap != m->cap && rehash(m, m->cap, new_key()) == 0) {
		m->rekeyed_cap = m->cap;
		i = find(m, id);
	}
	m->slots[i] = (struct idmap_slot){id, ent};
	m->n++;
	return 0;
}

void *idmap_get_slot(const struct idmap *m, uint64_t id, size_t *slot)
{
	*slot = SIZE_MAX;
	if (!m->cap)
		return NULL;
	size_t i = find(m, id);
	*slot = i;
	return m->slots[i].e;
}

int idmap_put_at(struct idmap *m, void *ent, size_t slot)
{
	/* The general way when the map must grow first, or when the slot
	 * ends a long run (which may take a new key). */
	if (slot >= m->cap || (m->n + 1) * 4 > m->cap * 3 ||
	    ((slot - slot_of(ent_id(ent), m->key, m->cap)) & (m->cap - 1)) > LONG_RUN)
		return idmap_put(m, ent);
	m->slots[slot] = (struct idmap_slot){ent_id(ent), ent};
	m->n++;
	return 0;
}

size_t idmap_longest_run(const struct idmap *m)
{
	size_t best = 0, run = 0;
	/* Twice round, so that a run wrapping past the end counts whole. */
	for (size_t k = 0; k < 2 * m->cap; k++) {
		run = m->slots[k & (m->cap - 1)].e ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	return best < m->cap ? best : m->cap;
}

void *idmap_del(struct idmap *m, uint64_t id)
{
	if (!m->cap)
		return NULL;
	return idmap_del_at(m, find(m, id));
}

void *idmap_del_at(struct idmap *m, size_t i)
{
	if (i >= m->cap)
		return NULL;
	size_t mask = m->cap - 1;
	void *found = m->slots[i].e;
	if (!found)
		return NULL;
	/* Shift later members of the probe run back into the hole. */
	for (size_t j = (i + 1) & mask; m->slots[j].e; j = (j + 1) & mask) {
		size_t home = slot_of(m->slots[j].id, m->key, m->cap);
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
		__builtin_prefetch(&m->slots[slot_of(id, m->key, m->cap)]);
}

void idmap_free(struct idmap *m)
{
	free(m->slots);
	*m = (struct idmap){0};
}
