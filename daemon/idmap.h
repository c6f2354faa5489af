/* idmap.h - open-addressing map from a 64-bit id to an entity whose first field is that id. */
#ifndef DAEMON_IDMAP_H
#define DAEMON_IDMAP_H

#include <stddef.h>
#include <stdint.h>

/* Entities stored here must start with their uint64_t id.  The map
 * holds borrowed pointers: it never frees an entity. */
struct idmap_slot {
	uint64_t id; /* the entity's id, when e is not NULL */
	void *e;     /* NULL: an empty slot */
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t n;
	uint64_t key;	    /* 0: the plain hash; else the secret of the keyed one, taken
			     * when probe runs grow long (ids chosen to collide) */
	size_t rekeyed_cap; /* the size at which a key was last taken */
};

void *idmap_get(const struct idmap *m, uint64_t id);
/* Inserts ent (its id must not be present).  0 or -ENOMEM. */
int idmap_put(struct idmap *m, void *ent);
/* The entity with id, or NULL with *slot set to where it would go, for an
 * idmap_put_at of that id with no other change to the map in between: a
 * lookup and an insert for one walk of the probe run. */
void *idmap_get_slot(const struct idmap *m, uint64_t id, size_t *slot);
int idmap_put_at(struct idmap *m, void *ent, size_t slot);
/* Removes and returns the entity with id, or NULL. */
void *idmap_del(struct idmap *m, uint64_t id);
/* The same for the entity idmap_get_slot found at slot (no change to the
 * map in between). */
void *idmap_del_at(struct idmap *m, size_t slot);
void idmap_free(struct idmap *m);
/* The longest run of occupied slots (what a probe may walk at worst). */
size_t idmap_longest_run(const struct idmap *m);
/* Starts loading the slot where id would be, ahead of a lookup. */
void idmap_prefetch(const struct idmap *m, uint64_t id);

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (m->slots[i].e) ... */

#endif
