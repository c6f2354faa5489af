/* agent_site.c - call sites numbered once per process (protocol v2): the
 * events that name a site (SCOPE_OPEN, TASK_FORK) carry its number, and a
 * SITE frame defines the number once, instead of two strings in every
 * event of a fork storm. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "agent.h"

#define SITE_MAX 65535u /* numbered sites; past it, events carry no site */
#define CACHE_SLOTS 64u /* per thread, direct-mapped */

struct site_slot {
	const char *file, *func;
	int line;
	uint32_t id; /* 0: empty */
};

/* Sites are string literals (scope.h: "borrowed forever"), so a site is
 * its pointers and line: no string is hashed or compared. */
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;
static struct site_slot *table; /* open addressing; cap a power of two */
static size_t table_cap;
static struct sc_site *by_id; /* by_id[id - 1] */
static uint32_t nsites;

/* The thread's cache, allocated at its first site: a 2 KiB array in
 * initial-exec TLS would not fit the static TLS that glibc keeps for a
 * library loaded with dlopen(), a pointer does. */
static __thread struct site_slot *cache __attribute__((tls_model("initial-exec")));
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_ok;

/* At thread exit; a later event of that thread (from another destructor)
 * just makes a new cache, which the next destructor round frees. */
static void cache_free(void *p)
{
	if (cache == p)
		cache = NULL;
	free(p);
}

static void cache_key_make(void)
{
	cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* The calling thread's cache, or NULL (out of memory: every lookup then
 * takes the lock, and still gets the right number). */
static struct site_slot *my_cache(void)
{
	if (__builtin_expect(cache != NULL, 1))
		return cache;
	(void)pthread_once(&cache_once, cache_key_make);
	if (!cache_key_ok)
		return NULL;
	struct site_slot *c = calloc(CACHE_SLOTS, sizeof *c);
	if (c && pthread_setspecific(cache_key, c) != 0) {
		free(c);
		c = NULL;
	}
	cache = c;
	return c;
}

static size_t site_hash(const char *file, const char *func, int line)
{
	uint64_t h = (uint64_t)(uintptr_t)file * 0x9e3779b97f4a7c15u;
	h ^= (uint64_t)(uintptr_t)func * 0xc2b2ae3d27d4eb4fu;
	h ^= (uint64_t)(uint32_t)line * 0x165667b19e3779f9u;
	return (size_t)(h ^ (h >> 29));
}

static int same(const struct site_slot *e, const struct sc_site *s)
{
	return e->file == s->file && e->func == s->func && e->line == s->line;
}

/* The slot of s in table (its own, or the empty one where it would go). */
static struct site_slot *probe(const struct sc_site *s, size_t h)
{
	for (size_t i = h & (table_cap - 1);; i = (i + 1) & (table_cap - 1))
		if (!table[i].id || same(&table[i], s))
			return &table[i];
}

/* Room for one more site: the table at most half full, by_id a slot
 * more.  0, or -1 when out of memory (the site then goes unnumbered). */
static int table_fit(void)
{
	if ((nsites + 1) * 2 > table_cap) {
		size_t cap = table_cap ? table_cap * 2 : 256, old_cap = table_cap;
		struct site_slot *t = calloc(cap, sizeof *t), *old = table;
		if (!t)
			return -1;
		table = t;
		table_cap = cap;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].id) {
				struct sc_site s = {old[i].file, old[i].func, old[i].line};
				*probe(&s, site_hash(s.file, s.func, s.line)) = old[i];
			}
		free(old);
	}
	if (nsites % 64 == 0) {
		struct sc_site *b = realloc(by_id, (nsites + 64) * sizeof *b);
		if (!b)
			return -1;
		by_id = b;
	}
	return 0;
}

uint32_t sc_site_number(const struct sc_site *s,
			void (*define)(void *ctx, uint32_t id, const struct sc_site *s), void *ctx)
{
	if (!s->file && !s->func)
		return 0;
	size_t h = site_hash(s->file, s->func, s->line);
	struct site_slot *slots = my_cache(), *c = slots ? &slots[h & (CACHE_SLOTS - 1)] : NULL;
	if (c && c->id && same(c, s))
		return c->id;

	pthread_mutex_lock(&sites_lock);
	uint32_t id = 0;
	struct site_slot *e = table_cap ? probe(s, h) : NULL;
	if (e && e->id) {
		id = e->id;
	} else if (nsites < SITE_MAX && table_fit() == 0) {
		id = ++nsites;
		by_id[id - 1] = *s;
		/* Defined before the number is in the table: a thread that
		 * finds it there stamps its event after this frame is in a
		 * ring (and the agent merges by time). */
		define(ctx, id, s);
		*probe(s, h) = (struct site_slot){s->file, s->func, s->line, id};
	}
	pthread_mutex_unlock(&sites_lock);
	if (id && c)
		*c = (struct site_slot){s->file, s->func, s->line, id};
	return id;
}

void sc_sites_walk(void (*fn)(void *ctx, uint32_t id, const struct sc_site *s), void *ctx)
{
	pthread_mutex_lock(&sites_lock);
	for (uint32_t i = 0; i < nsites; i++)
		fn(ctx, i + 1, &by_id[i]);
	pthread_mutex_unlock(&sites_lock);
}

void sc_sites_after_fork(void)
{
	pthread_mutex_init(&sites_lock, NULL);
}
