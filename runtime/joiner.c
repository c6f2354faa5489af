/* joiner.c - the joiner policies: what a completed subtask means for its
 * scope, and what scope_join() returns, one table row per joiner kind. */
#include <errno.h>

#include "joiner.h"

struct joiner_kind {
	/* Returns true to stop waiting and cancel the scope. */
	bool (*complete)(scope_t *s, scope_task_t *task, int state);
	int (*result)(scope_t *s);
};

/* Remembers the first failure (every joiner reports it through
 * scope_failure()); returns true if this task is that first failure. */
static bool note_failure(scope_t *s, scope_task_t *task, int state)
{
	bool first = false;

	if (state != SC_TASK_FAILED)
		return false;
	pthread_mutex_lock(&s->lock);
	if (!s->failure) {
		s->failure = task;
		first = true;
	}
	pthread_mutex_unlock(&s->lock);
	return first;
}

static bool all_complete(scope_t *s, scope_task_t *task, int state)
{
	return note_failure(s, task, state);
}

/* Read once join is done: every task counted ended (the acquire of
 * pending) or the joiner stopped (after the failure was noted), so no end
 * writes failure or winner any more: no lock. */
static int all_result(scope_t *s)
{
	return s->failure ? SCOPE_EFAILED : 0;
}

static bool any_complete(scope_t *s, scope_task_t *task, int state)
{
	bool won = false;

	if (state != SC_TASK_SUCCESS) {
		(void)note_failure(s, task, state);
		return false;
	}
	pthread_mutex_lock(&s->lock);
	if (!s->winner) {
		s->winner = task;
		won = true;
	}
	pthread_mutex_unlock(&s->lock);
	return won;
}

static int any_result(scope_t *s)
{
	/* No winner and no failure: no fork reached the joiner (none was
	 * made, or the pool or on_fork refused every one).  Read once join is
	 * done, as all_result does: no lock. */
	return s->winner ? 0 : s->failure ? SCOPE_EFAILED : SCOPE_ENOFORKS;
}

static bool await_complete(scope_t *s, scope_task_t *task, int state)
{
	(void)note_failure(s, task, state);
	return false;
}

static int zero_result(scope_t *s)
{
	(void)s;
	return 0;
}

static bool until_complete(scope_t *s, scope_task_t *task, int state)
{
	(void)note_failure(s, task, state);
	return s->until(s->until_ctx, task);
}

static bool custom_complete(scope_t *s, scope_task_t *task, int state)
{
	(void)note_failure(s, task, state);
	return s->ops->on_complete && s->ops->on_complete(s->ops->ctx, task);
}

static int custom_result(scope_t *s)
{
	return s->ops->result ? s->ops->result(s->ops->ctx, s) : 0;
}

static const struct joiner_kind kinds[] = {
    [SCOPE_JOIN_ALL_SUCCESSFUL] = {all_complete, all_result},
    [SCOPE_JOIN_ANY_SUCCESSFUL] = {any_complete, any_result},
    [SCOPE_JOIN_AWAIT_ALL] = {await_complete, zero_result},
    [SCOPE_JOIN_UNTIL] = {until_complete, zero_result},
    [SCOPE_JOIN_CUSTOM] = {custom_complete, custom_result},
};

void sc_joiner_complete(scope_t *s, scope_task_t *task, int state)
{
	/* Completions after the joiner stopped change nothing it decided. */
	if (atomic_load(&s->stop))
		return;
	if (kinds[s->joiner].complete(s, task, state)) {
		atomic_store(&s->stop, 1);
		sc_cancel(s, SC_CANCEL_JOINER);
	}
}

int sc_joiner_result(scope_t *s)
{
	return kinds[s->joiner].result(s);
}

int sc_joiner_timeout(scope_t *s)
{
	return s->on_timeout ? s->on_timeout(s->on_timeout_ctx, s) : -ETIMEDOUT;
}
