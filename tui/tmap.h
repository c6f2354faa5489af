/* tmap.h - an open-addressing hash from 64-bit ids to dense array indexes,
 * so the model finds an entity by id in O(1) while keeping entities in
 * arrays that are cheap to walk. */
#ifndef TUI_TMAP_H
#define TUI_TMAP_H

#include <stddef.h>
#include <stdint.h>

struct tmap {
	int64_t *keys;
	uint32_t *vals;
	uint8_t *used;
	size_t cap; /* power of two, or 0 */
	size_t n;
};

/* Index stored for key, or -1 when absent. */
long tmap_get(const struct tmap *m, int64_t key);
/* Sets key to val (inserting or replacing).  0, or -ENOMEM. */
int tmap_put(struct tmap *m, int64_t key, uint32_t val);
/* Removes key; nothing when absent. */
void tmap_del(struct tmap *m, int64_t key);
void tmap_clear(struct tmap *m);
void tmap_free(struct tmap *m);

#endif
