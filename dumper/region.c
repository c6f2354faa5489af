/* region.c - jansson's memory in scopecmd: allocations are carved from
 * large chunks and never freed one by one; the chunks go when the process
 * exits.  scopecmd runs one command and exits, and what jansson holds for
 * it is one dump's tree: a 1,000-thread dump is some hundred thousand small
 * blocks, and handing each back to malloc (json_decref's walk, then
 * malloc's consolidation of the freed heap) cost about a sixth of a
 * Thread.print's CPU.  What a freed block held stays allocated until exit:
 * a command's peak is the sum of what it ever allocated through jansson,
 * which for a dump is its tree (jansson copies nothing large while it is
 * read). */
#include "region.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define REGION_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define REGION_OFF 1
#endif
#endif

#ifndef REGION_OFF
#define CHUNK (1u << 20)  /* bytes carved from one malloc */
#define ALONE (CHUNK / 8) /* a block this large gets a chunk of its own */
#define ALIGN ((size_t)16)

struct chunk {
	struct chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

/* The chunk being carved first, then the full ones and those of large
 * blocks: all reachable from here until exit. */
static struct chunk *chunks;

static void *region_alloc(size_t n)
{
	n = (n + ALIGN - 1) & ~(ALIGN - 1);
	if (!n)
		n = ALIGN;
	if (n >= ALONE) {
		struct chunk *c = malloc(sizeof *c + n);
		if (!c)
			return NULL;
		c->used = c->cap = n;
		/* Behind the one being carved, which has room left. */
		if (chunks) {
			c->next = chunks->next;
			chunks->next = c;
		} else {
			c->next = NULL;
			chunks = c;
		}
		return c->data;
	}
	if (!chunks || chunks->cap - chunks->used < n) {
		struct chunk *c = malloc(sizeof *c + CHUNK);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = CHUNK;
		c->next = chunks;
		chunks = c;
	}
	void *p = chunks->data + chunks->used;
	chunks->used += n;
	return p;
}

static void region_free(void *p)
{
	(void)p; /* with the region, at exit */
}
#endif

void region_install(void)
{
#ifndef REGION_OFF
	json_set_alloc_funcs(region_alloc, region_free);
#endif
}
