/* cancel.c - cancellation flowing down the scope tree, deadlines, and the
 * cancellable waits (sleep, fd wait, join) that fail with -ECANCELED. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

#define SPIN_WAIT_NS 10000 /* a joiner's wait for short subtasks, before sleeping */

static pthread_once_t interrupt_once = PTHREAD_ONCE_INIT;

static void on_interrupt(int sig)
{
	/* Nothing to do: the signal exists to make a blocking call return
	 * EINTR, which is why it is installed without SA_RESTART. */
	(void)sig;
}

static void interrupt_setup(void)
{
	struct sigaction sa = { .sa_handler = on_interrupt };

	sigemptyset(&sa.sa_mask);
	(void)sigaction(SC_SIG_INTERRUPT, &sa, NULL);
}

void sc_interrupt_install(void)
{
	pthread_once(&interrupt_once, interrupt_setup);
}

static void interrupt(struct sc_thread *w)
{
	sc_interrupt_install();
	(void)syscall(SYS_tgkill, getpid(), w->tid, SC_SIG_INTERRUPT);
}

/* Flags s and everything below it, waking whoever waits in them.  Locks go
 * parent before child, the one order every path uses. */
static void cancel_tree(scope_t *s, int reason)
{
	struct sc_thread *me = sc_self_peek();
	struct sc_ev ev;

	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->cancelled)) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	atomic_store(&s->cancelled, reason);
	if (sc_observed()) {
		sc_ev_init(&ev, SC_EV_SCOPE_CANCEL);
		ev.a = s->id;
		ev.u = (uint32_t)reason;
		sc_emit(&ev);
	}
	sc_wake(s->owner);
	for (size_t i = 0; i < s->ntasks; i++) {
		struct sc_thread *w = atomic_load(&s->tasks[i]->worker);
		if (!w)
			continue;
		sc_wake(w);
		if (w != me && !(s->flags & SCOPE_F_NO_INTERRUPT))
			interrupt(w);
	}
	for (scope_t *c = s->children; c; c = c->sib_next)
		cancel_tree(c, SC_CANCEL_PARENT);
	pthread_mutex_unlock(&s->lock);
}

void sc_cancel(scope_t *s, int reason)
{
	cancel_tree(s, reason);
}

/* The deadline of s or an ancestor passed: cancel the outermost scope
 * whose own deadline passed, so the timeout reaches everything it covers. */
static void deadline_fire(scope_t *s, int64_t now)
{
	scope_t *hit = s;

	for (scope_t *x = s; x; x = x->parent)
		if (x->deadline && x->deadline <= now)
			hit = x;
	cancel_tree(hit, SC_CANCEL_TIMEOUT);
}

int sc_check(scope_t *s)
{
	int64_t now;

	if (!s)
		return 0;
	if (atomic_load_explicit(&s->cancelled, memory_order_acquire))
		return -ECANCELED;
	if (!s->eff_deadline)
		return 0;
	now = scope_now();
	if (now < s->eff_deadline)
		return 0;
	deadline_fire(s, now);
	return -ECANCELED;
}

int sc_wait(const struct sc_wait *w)
{
	struct sc_thread *t = sc_self();
	int64_t wake_at = w->deadline;
	bool helper;

	if (!t)
		return -ENOMEM;
	if (w->ctx && w->ctx->eff_deadline && (!wake_at || w->ctx->eff_deadline < wake_at))
		wake_at = w->ctx->eff_deadline;
	helper = w->help && t->pool && t->pool == w->help->pool;
	for (;;) {
		uint32_t seen = atomic_load(&t->seq);

		if (w->done && w->done(w->arg))
			return 0;
		if (w->ctx && sc_check(w->ctx))
			return -ECANCELED;
		if (w->deadline && scope_now() >= w->deadline)
			return -ETIMEDOUT;
		if (helper && sc_pool_help(t->pool, w->help))
			continue;
		if (w->spin && sc_spin(t, seen, SPIN_WAIT_NS))
			continue;
		(void)sc_park(t, seen, wake_at);
	}
}

int scope_cancel(scope_t *s)
{
	if (!s)
		return -EINVAL;
	cancel_tree(s, SC_CANCEL_EXPLICIT);
	return 0;
}

int scope_cancelled(void)
{
	return sc_check(sc_context());
}

int64_t scope_deadline(void)
{
	scope_t *s = sc_context();

	return s ? s->eff_deadline : 0;
}

int scope_sleep_until(int64_t deadline_ns)
{
	struct sc_wait w = { .ctx = sc_context(), .deadline = deadline_ns };
	int rc;

	if (deadline_ns <= 0)
		return sc_check(w.ctx);
	rc = sc_wait(&w);
	return rc == -ETIMEDOUT ? 0 : rc;
}

int scope_sleep(int64_t ns)
{
	if (ns < 0)
		return -EINVAL;
	return scope_sleep_until(scope_now() + ns);
}

static int64_t min_deadline(int64_t a, int64_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

int scope_wait_fd(int fd, short events, int64_t deadline_ns)
{
	struct sc_thread *t = sc_self();
	scope_t *s = sc_context();
	struct pollfd p[2];
	int64_t until;

	if (!t)
		return -ENOMEM;
	if (fd < 0 || deadline_ns < 0)
		return -EINVAL;
	if (t->evfd < 0) {
		t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (t->evfd < 0)
			return -errno;
	}
	until = min_deadline(deadline_ns, s ? s->eff_deadline : 0);
	for (;;) {
		struct timespec ts, *tp = NULL;
		uint64_t drain;
		int r;

		/* Published before the check: a canceller that flags the scope
		 * after it sees polling set and kicks the eventfd. */
		atomic_store(&t->polling, 1);
		if (sc_check(s)) {
			atomic_store(&t->polling, 0);
			return -ECANCELED;
		}
		if (until) {
			int64_t left = until - scope_now();
			if (left < 0)
				left = 0;
			ts.tv_sec = left / 1000000000;
			ts.tv_nsec = left % 1000000000;
			tp = &ts;
		}
		p[0] = (struct pollfd){ .fd = fd, .events = events };
		p[1] = (struct pollfd){ .fd = t->evfd, .events = POLLIN };
		r = ppoll(p, 2, tp, NULL);
		atomic_store(&t->polling, 0);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r > 0 && p[1].revents)
			(void)!read(t->evfd, &drain, sizeof(drain));
		if (r > 0 && p[0].revents)
			return p[0].revents;
		if (deadline_ns && scope_now() >= deadline_ns)
			return -ETIMEDOUT;
	}
}
