/* region.h - jansson's memory in scopecmd: one region, freed when the
 * process exits (see region.c). */
#ifndef DUMPER_REGION_H
#define DUMPER_REGION_H

/* Points jansson at the region.  Before any jansson value is made; a
 * no-op in sanitizer builds, which must see every block on its own. */
void region_install(void);

#endif
