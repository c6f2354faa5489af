/* pool_prio.c - the queue of a pool created with priority_queue
 * (ThreadPoolExecutor over a PriorityBlockingQueue): queued subtasks run
 * highest fork priority first, in fork order among equals.  Binary heaps
 * under the pool's lock: one orders the pool's queued tasks, and one per
 * scope orders that scope's, so a joiner that runs its own queued subtasks
 * takes them in the same order without looking at other scopes' work. */
#include <stdlib.h>

#include "pool_int.h"

enum { IN_POOL = 0, IN_SCOPE = 1 }; /* which heap: task->hslot[which] */

/* Whether a runs before b. */
static bool before(const scope_task_t *a, const scope_task_t *b)
{
	return a->prio != b->prio ? a->prio > b->prio : a->pseq < b->pseq;
}

static void put(struct sc_theap *h, int which, size_t i, scope_task_t *task)
{
	h->v[i] = task;
	task->hslot[which] = i;
}

static void sift_up(struct sc_theap *h, int which, size_t i)
{
	scope_task_t *task = h->v[i];

	while (i > 0) {
		size_t up = (i - 1) / 2;
		if (!before(task, h->v[up]))
			break;
		put(h, which, i, h->v[up]);
		i = up;
	}
	put(h, which, i, task);
}

static void sift_down(struct sc_theap *h, int which, size_t i)
{
	scope_task_t *task = h->v[i];

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(h->v[c + 1], h->v[c]))
			c++;
		if (!before(h->v[c], task))
			break;
		put(h, which, i, h->v[c]);
		i = c;
	}
	put(h, which, i, task);
}

static bool heap_push(struct sc_theap *h, int which, scope_task_t *task)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		scope_task_t **v = realloc(h->v, cap * sizeof(*v));
		if (!v) {
			task->hslot[which] = SC_PRIO_NONE;
			return false;
		}
		h->v = v;
		h->cap = cap;
	}
	put(h, which, h->n++, task);
	sift_up(h, which, task->hslot[which]);
	return true;
}

static void heap_remove(struct sc_theap *h, int which, scope_task_t *task)
{
	size_t i = task->hslot[which];
	scope_task_t *last;

	if (i == SC_PRIO_NONE)
		return;
	task->hslot[which] = SC_PRIO_NONE;
	last = h->v[--h->n];
	if (last == task)
		return;
	put(h, which, i, last);
	if (i > 0 && before(last, h->v[(i - 1) / 2]))
		sift_up(h, which, i);
	else
		sift_down(h, which, i);
}

void sc_prio_push_locked(scope_pool_t *p, scope_task_t *task)
{
	/* Its place among equals is its first queueing's: a task put back
	 * (DISCARD_OLDEST's swap, a failed thread's first task) keeps it. */
	if (!task->pseq)
		task->pseq = ++p->pseq;
	(void)heap_push(&p->heap, IN_POOL, task);
	(void)heap_push(&task->scope->pq, IN_SCOPE, task);
}

void sc_prio_remove_locked(scope_pool_t *p, scope_task_t *task)
{
	heap_remove(&p->heap, IN_POOL, task);
	heap_remove(&task->scope->pq, IN_SCOPE, task);
}

scope_task_t *sc_prio_victim_locked(scope_pool_t *p, scope_task_t *task)
{
	scope_task_t *v = NULL;

	/* Only when a bounded queue is full: a scan of its capacity. */
	for (size_t i = 0; i < p->heap.n; i++) {
		scope_task_t *x = p->heap.v[i];
		if (!v || x->prio < v->prio || (x->prio == v->prio && x->pseq < v->pseq))
			v = x;
	}
	if (!v || task->prio < v->prio)
		return task;
	return v;
}
