/* pool_admin.c - the parts of ThreadPoolExecutor's surface a program uses
 * to manage a pool after creating it: its state after shutdown, waiting for
 * termination, setters, and starting a core thread ahead of work. */
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "pool_int.h"

bool scope_pool_is_shutdown(const scope_pool_t *cp)
{
	scope_pool_t *p = (scope_pool_t *)cp;
	bool v;

	if (!p)
		return false;
	pthread_mutex_lock(&p->lock);
	v = p->shutdown;
	pthread_mutex_unlock(&p->lock);
	return v;
}

bool scope_pool_is_terminated(const scope_pool_t *cp)
{
	scope_pool_t *p = (scope_pool_t *)cp;
	bool v;

	if (!p)
		return false;
	pthread_mutex_lock(&p->lock);
	v = p->terminated;
	pthread_mutex_unlock(&p->lock);
	return v;
}

int scope_pool_await_termination(scope_pool_t *p, int64_t timeout_ns)
{
	int64_t until;
	int rc = 0;

	if (!p || timeout_ns < 0)
		return -EINVAL;
	until = sc_after(timeout_ns);
	pthread_mutex_lock(&p->lock);
	while (!p->terminated) {
		int64_t left = until - scope_now();
		struct timespec ts;

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		/* The pool's condition counts in CLOCK_REALTIME; a step of that
		 * clock only shortens or lengthens one round of this loop. */
		if (left > 100000000)
			left = 100000000;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += left / 1000000000;
		ts.tv_nsec += left % 1000000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		(void)pthread_cond_timedwait(&p->gone, &p->lock, &ts);
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int scope_pool_set_keep_alive(scope_pool_t *p, int64_t keep_alive_ns)
{
	if (!p || keep_alive_ns <= 0)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	p->cfg.keep_alive_ns = keep_alive_ns;
	/* Idle workers sleep for the old time: they look again now. */
	for (struct worker *w = p->idle; w; w = w->idle_next)
		if (w->t)
			sc_wake(w->t);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int scope_pool_set_core_timeout(scope_pool_t *p, bool allow)
{
	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	p->cfg.allow_core_timeout = allow;
	for (struct worker *w = p->idle; w; w = w->idle_next)
		if (w->t)
			sc_wake(w->t);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int scope_pool_set_policy(scope_pool_t *p, scope_policy_t policy)
{
	if (!p || (unsigned)policy > SCOPE_POLICY_BLOCK)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	p->cfg.policy = policy;
	/* Forkers blocked under BLOCK follow the new policy when they look. */
	for (struct blocked *b = p->blocked; b; b = b->next)
		sc_wake(b->t);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

int scope_pool_prestart_core(scope_pool_t *p)
{
	int rc = 0;

	if (!p)
		return -EINVAL;
	pthread_mutex_lock(&p->lock);
	if (p->shutdown) {
		rc = SCOPE_ESHUTDOWN;
	} else if (p->size - p->lent < p->cfg.core_size) {
		p->size++;
		rc = sc_pool_spawn_locked(p, NULL);
		if (rc)
			p->size--;
		else
			rc = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (rc == 1)
		sc_pool_stats_event(p, true);
	return rc;
}

void sc_pool_stop_check(struct sc_thread *t)
{
	scope_pool_t *p = t->pool;

	if (!p || !atomic_load(&p->stop_now))
		return;
	/* Every subtask of p this thread runs (the innermost first, a helped
	 * one inside the one it helps from): each is running here, so its
	 * scope is open while this looks at it. */
	for (scope_task_t *task = t->frame.task; task; task = task->run_saved.task)
		if (task->pool == p)
			sc_cancel(task->scope, SC_CANCEL_SHUTDOWN);
}

/* Wakes and interrupts a worker of the pool: a runtime wait it is in looks
 * at stop_now (sc_pool_stop_check), a system call outside gets EINTR. */
static void interrupt_worker(void *ctx, struct sc_thread *t)
{
	if (t->pool == ctx && t->role == SC_ROLE_WORKER) {
		sc_wake(t);
		(void)syscall(SYS_tgkill, getpid(), t->tid, SC_SIG_INTERRUPT);
	}
}

int scope_pool_shutdown_now(scope_pool_t *p)
{
	scope_task_t *queued, *next;
	size_t n;
	int rc;

	if (!p)
		return -EINVAL;
	rc = scope_pool_shutdown(p);
	if (rc)
		return rc;
	/* Before the wake-ups: a worker that reads its wake count before this
	 * store sees it changed, and looks again. */
	atomic_store(&p->stop_now, true);
	sc_interrupt_install();
	pthread_mutex_lock(&p->lock);
	n = sc_pool_drain_locked(p, &queued);
	pthread_mutex_unlock(&p->lock);
	/* As Thread.interrupt: a subtask blocked in a system call outside the
	 * runtime gets EINTR (the runtime's own waits retry).  The registry
	 * knows the workers' tids (a worker's record is set without the
	 * pool's lock). */
	sc_threads_walk(interrupt_worker, p);
	/* Queued, so their scopes are open until they end: end them. */
	for (; queued; queued = next) {
		next = queued->qnext;
		sc_task_finish(queued, SC_TASK_CANCELLED, -ECANCELED);
	}
	return n > INT32_MAX ? INT32_MAX : (int)n;
}
