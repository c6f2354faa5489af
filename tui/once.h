/* once.h - `scopetop --once`: the tree (or the process list) as plain text
 * for scripts and tests. */
#ifndef TUI_ONCE_H
#define TUI_ONCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "model.h"

/* Prints m's whole tree, everything expanded, at model time now_ms.
 * Returns 0, or -EIO when writing failed, -ENOMEM. */
int once_tree(FILE *out, const struct tm_model *m, double now_ms, bool ascii);

/* Prints the processes of a `list` reply (borrowed). */
int once_list(FILE *out, json_t *processes, bool ascii);

/* `--once --json`: the same rows as once_tree() as one JSON document,
 * {"process": summary (borrowed, the daemon's), "rows": [...]}, described by
 * schemas/scopetop-once.schema.json.  Returns 0, -EIO or -ENOMEM. */
int once_tree_json(FILE *out, const struct tm_model *m, double now_ms, json_t *process);

#endif
