/* pool_prio.c - the queue of a pool created with priority_queue
 * (ThreadPoolExecutor over a PriorityBlockingQueue): queued subtasks run
 * highest fork priority first, in fork order among equals.  A binary heap
 * under the pool's lock orders the pool; each scope's list of its queued
 * tasks keeps the same order, so a joiner that runs its own queued
 * subtasks takes them in that order too. */
#include <stdlib.h>

#include "pool_int.h"

/* Whether a runs before b. */
static bool before(const scope_task_t *a, const scope_task_t *b)
{
	return a->prio != b->prio ? a->prio > b->prio : a->pseq < b->pseq;
}

static void put(scope_pool_t *p, size_t i, scope_task_t *task)
{
	p->heap[i] = task;
	task->hslot = i;
}

static void sift_up(scope_pool_t *p, size_t i)
{
	scope_task_t *task = p->heap[i];

	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (!before(task, p->heap[up]))
			break;
		put(p, i, p->heap[up]);
		i = up;
	}
	put(p, i, task);
}

static void sift_down(scope_pool_t *p, size_t i)
{
	scope_task_t *task = p->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= p->nheap)
			break;
		if (c + 1 < p->nheap && before(p->heap[c + 1], p->heap[c]))
			c++;
		if (!before(p->heap[c], task))
			break;
		put(p, i, p->heap[c]);
		i = c;
	}
	put(p, i, task);
}

bool sc_prio_push_locked(scope_pool_t *p, scope_task_t *task)
{
	if (p->nheap == p->heap_cap) {
		size_t cap = p->heap_cap ? p->heap_cap * 2 : 64;
		scope_task_t **h = realloc(p->heap, cap * sizeof(*h));
		if (!h)
			return false;
		p->heap = h;
		p->heap_cap = cap;
	}
	/* Its place among equals is its first queueing's: a task put back
	 * (the monitor's, DISCARD_OLDEST's swap) keeps it. */
	if (!task->pseq)
		task->pseq = ++p->pseq;
	put(p, p->nheap++, task);
	sift_up(p, task->hslot);
	return true;
}

void sc_prio_remove_locked(scope_pool_t *p, scope_task_t *task)
{
	size_t i = task->hslot;
	scope_task_t *last = p->heap[--p->nheap];

	task->hslot = SC_PRIO_NONE;
	if (last == task)
		return;
	put(p, i, last);
	if (i > 0 && before(last, p->heap[(i - 1) / 2]))
		sift_up(p, i);
	else
		sift_down(p, i);
}

scope_task_t *sc_prio_victim_locked(scope_pool_t *p, scope_task_t *task)
{
	scope_task_t *v = NULL;

	/* Only when a bounded queue is full: a scan of its capacity. */
	for (size_t i = 0; i < p->nheap; i++) {
		scope_task_t *x = p->heap[i];
		if (!v || x->prio < v->prio || (x->prio == v->prio && x->pseq < v->pseq))
			v = x;
	}
	if (!v || task->prio < v->prio)
		return task;
	return v;
}

void sc_prio_scope_insert(scope_t *s, scope_task_t *task)
{
	scope_task_t *at = s->qtail; /* task goes after at (NULL: first) */

	/* From the tail: forks of equal or falling priority cost one look,
	 * and one that outranks all of them goes first at once. */
	if (s->qhead && before(task, s->qhead))
		at = NULL;
	else
		while (at && before(task, at))
			at = at->sprev;
	task->sprev = at;
	task->snext = at ? at->snext : s->qhead;
	if (task->snext)
		task->snext->sprev = task;
	else
		s->qtail = task;
	if (at)
		at->snext = task;
	else
		s->qhead = task;
}
