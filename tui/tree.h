/* tree.h - the rows scopetop shows: the model flattened into a tree
 * (<root> -> scopes -> subtasks -> the scopes those subtasks opened, and a
 * pools branch), with expand/collapse, sibling sort, filter and grouping of
 * identical subtasks.  Rebuilt from the model when it changes; drawing code
 * only reads the rows. */
#ifndef TUI_TREE_H
#define TUI_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmap.h"
#include "model.h"

#define TR_MAX_DEPTH 48
#define TR_FILTER_MAX 128

enum tr_kind { TR_ROOT, TR_SCOPE, TR_TASK, TR_POOLS, TR_POOL };

/* What the state column shows (tr_state_name()). */
enum tr_state {
	DS_NONE,
	DS_QUEUED,
	DS_RUNNING,
	DS_BLOCKED,
	DS_JOINING,
	DS_DONE,
	DS_FAILED,
	DS_CANCELLED,
	DS_EXITED,
	DS_COUNT
};

enum tr_sort { SORT_ID, SORT_AGE, SORT_NAME, SORT_STATE, SORT_COUNT };

enum {
	TR_F_KIDS = 1u << 0,	 /* has children (expandable) */
	TR_F_EXPANDED = 1u << 1, /* children are shown */
	TR_F_LAST = 1u << 2,	 /* last of its siblings as shown */
	TR_F_DIM = 1u << 3,	 /* ended: kept only for the retention time */
	TR_F_MATCH = 1u << 4,	 /* matches the filter itself (not only a descendant) */
};

struct tr_row {
	void *ent; /* borrowed from the model: tm_scope, tm_task, tm_pool or NULL */
	int64_t id;
	uint64_t guides;  /* bit d: the ancestor at depth d has a later sibling */
	uint32_t group_n; /* > 1: this row stands for that many identical subtasks */
	uint8_t kind, depth, state, flags;
	unsigned warn;
};

struct tr_edge;

struct tr_tree {
	struct tr_row *rows;
	size_t n, cap;
	int sort;		    /* enum tr_sort */
	bool group;		    /* g: group identical subtasks */
	bool hide_ended;	    /* f: leave out ended subtasks and scopes */
	size_t hidden;		    /* rows left out by hide_ended in the last build */
	char filter[TR_FILTER_MAX]; /* "" for none */
	struct tmap toggled;	    /* node keys whose expansion differs from the default */
	/* scratch kept between builds to avoid reallocating */
	struct tr_edge *edges;
	size_t nedges, capedges;
	struct tmap first, scratch;
};

void tr_init(struct tr_tree *t);
void tr_free(struct tr_tree *t);

/* Rebuilds the rows from m (borrowed; the rows point into it until the
 * next change of m).  0 or -ENOMEM (rows then hold what fit). */
int tr_build(struct tr_tree *t, const struct tm_model *m);

uint64_t tr_key(int kind, int64_t id);
uint64_t tr_row_key(const struct tr_row *r);
bool tr_is_expanded(const struct tr_tree *t, int kind, int64_t id);
void tr_set_expanded(struct tr_tree *t, int kind, int64_t id, bool on);
/* Row index of the node with that key, or -1. */
long tr_find(const struct tr_tree *t, uint64_t key);

const char *tr_state_name(int s);
const char *tr_sort_name(int s);

/* A subtask's name: the function it runs when the daemon named it, else the
 * thread that runs (or ran) it, else "task".  Borrowed from m. */
const char *tr_task_name(const struct tm_model *m, const struct tm_task *t);

/* Display state of a task or scope, from the model. */
int tr_task_state(const struct tm_model *m, const struct tm_task *t, bool joining);
int tr_scope_state(const struct tm_scope *s);

#endif
