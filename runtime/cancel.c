/* cancel.c - cancellation flowing down the scope tree, deadlines, and the
 * cancellable waits (sleep, fd wait, join) that fail with -ECANCELED. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

#define SPIN_WAIT_NS 5000 /* a joiner's wait for short subtasks, before sleeping */

static pthread_once_t interrupt_once = PTHREAD_ONCE_INIT;

static void on_interrupt(int sig)
{
	/* Nothing to do: the signal exists to make a blocking call return
	 * EINTR, which is why it is installed without SA_RESTART. */
	(void)sig;
}

static void interrupt_setup(void)
{
	struct sigaction sa = {.sa_handler = on_interrupt};

	sigemptyset(&sa.sa_mask);
	(void)sigaction(SC_SIG_INTERRUPT, &sa, NULL);
}

void sc_interrupt_install(void)
{
	pthread_once(&interrupt_once, interrupt_setup);
}

/* Whom to wake once the tree's locks are released: a woken task ends by
 * taking its scope's lock, so waking it under that lock only makes it wait
 * (and a woken thread often preempts the canceller on the spot). */
struct wakeup {
	struct sc_thread *t; /* a thread, or NULL for a scope's cancel word */
	_Atomic int *word;
	uint32_t tid; /* read under the lock: the record may serve another thread later */
	bool signal;
};

struct wakeups {
	struct wakeup *v;
	size_t n, cap;
	struct sc_handler *run; /* cancellation handlers to run, last */
	struct wakeup inline_v[64];
};

enum sc_handler_state { H_ARMED = 1, H_RUNNING, H_DONE, H_REMOVED };

static void wake_one(const struct wakeup *w)
{
	if (w->word) {
		/* The scope may have closed since its lock was dropped: a wake
		 * on its word then reaches nobody (memory is not unmapped). */
		sc_wake_word(w->word);
		return;
	}
	sc_wake(w->t);
	if (w->signal) {
		sc_interrupt_install();
		(void)syscall(SYS_tgkill, getpid(), w->tid, SC_SIG_INTERRUPT);
	}
}

static void wakeups_add(struct wakeups *wk, struct sc_thread *t, _Atomic int *word, bool signal)
{
	/* t may be a record its thread left as it ended, taken over since by
	 * a thread registering (thread.c): its tid read atomically.  At worst
	 * the new thread gets a wake or an interrupt it can ignore, as any
	 * thread must (EINTR). */
	struct wakeup w = {t, word, t ? __atomic_load_n(&t->tid, __ATOMIC_RELAXED) : 0, signal};

	if (wk->n == wk->cap) {
		struct wakeup *v = malloc(wk->cap * 2 * sizeof(*v));

		if (!v) {
			/* Out of memory: wake now, under the lock, rather than never. */
			wake_one(&w);
			return;
		}
		memcpy(v, wk->v, wk->n * sizeof(*v));
		if (wk->v != wk->inline_v)
			free(wk->v);
		wk->v = v;
		wk->cap *= 2;
	}
	wk->v[wk->n++] = w;
}

/* Decides how to reach t, as it waits now: read after the cancel flag was
 * set, so a thread that starts waiting later sees the flag itself. */
static void note_thread(struct wakeups *wk, struct sc_thread *t, bool signal)
{
	int how = atomic_load(&t->in_cancellable);

	/* Parked on its context's cancel word: that word's wake reaches it. */
	if (how == SC_CWAIT_WORD)
		return;
	/* In a runtime wait it returns -ECANCELED; the signal is only for
	 * system calls outside the runtime. */
	wakeups_add(wk, t, NULL, signal && how == SC_CWAIT_NONE);
}

/* Flags s and everything below it and notes whom to wake.  Locks go parent
 * before child, the one order every path uses. */
static void cancel_tree(scope_t *s, int reason, int cause, struct wakeups *wk)
{
	struct sc_thread *me = sc_self_peek();
	struct sc_ev ev;

	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->cancelled)) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	atomic_store(&s->cause, cause);
	atomic_store(&s->cancelled, reason);
	if (s->cancel_efd)
		(void)!eventfd_write(s->cancel_efd - 1, 1);
	/* Taken off the scope: each runs once, after the locks are dropped. */
	s->handlers_ran += s->nhandlers;
	s->nhandlers = 0;
	for (struct sc_handler *h = s->handlers, *n; h; h = n) {
		n = h->next;
		atomic_store(&h->state, H_RUNNING);
		h->run_next = wk->run;
		wk->run = h;
	}
	s->handlers = NULL;
	/* Every thread parked in this scope's context, in one system call. */
	if (atomic_load(&s->word_waiters))
		wakeups_add(wk, NULL, &s->cancelled, false);
	if (sc_observed()) {
		sc_ev_init(&ev, SC_EV_SCOPE_CANCEL);
		ev.a = s->id;
		ev.u = (uint32_t)reason;
		ev.b = (uint64_t)cause;
		sc_emit(&ev);
		if (s->handlers_ran)
			sc_emit_handlers(s, 0, NULL, NULL);
	}
	for (size_t i = 0; i < s->ntasks; i++) {
		struct sc_thread *w = atomic_load(&s->tasks[i]->worker);
		if (w && w != me)
			note_thread(wk, w, !(s->flags & SCOPE_F_NO_INTERRUPT));
	}
	for (size_t i = 0; i < s->nanon; i++) {
		struct sc_thread *w = atomic_load(&s->anon[i]->worker);
		if (w && w != me)
			note_thread(wk, w, !(s->flags & SCOPE_F_NO_INTERRUPT));
	}
	if (s->owner != me)
		note_thread(wk, s->owner, false);
	/* Held down the walk: a child closing meanwhile waits to unlink. */
	sc_spin_lock(&s->kids);
	for (scope_t *c = s->children; c; c = c->sib_next)
		if (!(c->flags & SCOPE_F_SHIELD))
			cancel_tree(c, SC_CANCEL_PARENT, cause, wk);
	sc_spin_unlock(&s->kids);
	pthread_mutex_unlock(&s->lock);
}

void sc_cancel(scope_t *s, int reason)
{
	struct wakeups wk;

	wk.v = wk.inline_v;
	wk.n = 0;
	wk.run = NULL;
	wk.cap = sizeof(wk.inline_v) / sizeof(wk.inline_v[0]);
	cancel_tree(s, reason, reason, &wk);
	/* Thread records are never freed, so a thread that moved on meanwhile
	 * gets at worst a spurious wake-up. */
	for (size_t i = 0; i < wk.n; i++)
		wake_one(&wk.v[i]);
	if (wk.v != wk.inline_v)
		free(wk.v);
	for (struct sc_handler *h = wk.run, *n; h; h = n) {
		n = h->run_next; /* h may be gone once it is DONE */
		h->fn(h->ctx);
		atomic_store_explicit(&h->state, H_DONE, memory_order_release);
	}
}

/* The deadline of s or an ancestor passed: cancel the outermost scope
 * whose own deadline passed, so the timeout reaches everything it covers. */
static void deadline_fire(scope_t *s, int64_t now)
{
	scope_t *hit = s;

	for (scope_t *x = s; x; x = x->parent) {
		if (x->deadline && x->deadline <= now)
			hit = x;
		if (x->flags & SCOPE_F_SHIELD)
			break; /* nothing above a shield covers what is below it */
	}
	sc_cancel(hit, SC_CANCEL_TIMEOUT);
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
	scope_pool_t *help_pool = w->help ? w->help->pool : NULL;

	if (!t)
		return -ENOMEM;
	if (w->ctx && w->ctx->eff_deadline && (!wake_at || w->ctx->eff_deadline < wake_at))
		wake_at = w->ctx->eff_deadline;
	for (;;) {
		uint32_t seen = atomic_load(&t->seq);
		bool woke;

		sc_pool_stop_due(t);
		if (w->done && w->done(w->arg))
			return 0;
		if (w->ctx && sc_check(w->ctx))
			return -ECANCELED;
		if (w->deadline && scope_now() >= w->deadline)
			return -ETIMEDOUT;
		if (help_pool && sc_pool_help(help_pool, w->help))
			continue;
		/* Published before the last check, so a canceller either sees
		 * this thread parked here or this thread sees the cancel. */
		if (w->ctx) {
			bool word = sc_park_word_supported();
			atomic_store(&t->in_cancellable, word ? SC_CWAIT_WORD : SC_CWAIT_WAKE);
			atomic_fetch_add(&w->ctx->word_waiters, 1);
			if (sc_check(w->ctx)) {
				atomic_fetch_sub(&w->ctx->word_waiters, 1);
				atomic_store(&t->in_cancellable, SC_CWAIT_NONE);
				return -ECANCELED;
			}
		}
		woke = w->spin && sc_spin(t, seen, SPIN_WAIT_NS);
		if (!woke) {
			/* A worker parked here lends its place to the pool. */
			bool lend = t->worker && (w->lend || sc_pool_lends_all(t->pool));
			if (lend)
				sc_pool_lend(t, true);
			if (!(w->ctx && sc_park_word(t, seen, &w->ctx->cancelled, wake_at)))
				(void)sc_park(t, seen, wake_at);
			if (lend)
				sc_pool_lend(t, false);
		}
		if (w->ctx) {
			atomic_fetch_sub(&w->ctx->word_waiters, 1);
			atomic_store(&t->in_cancellable, SC_CWAIT_NONE);
		}
	}
}

#define SAME_FLAG(N, v, str, public)                                                               \
	_Static_assert((unsigned)(public) == (v), "scope.h's flag differs from the wire's");
PROTO_SCOPE_FLAGS(SAME_FLAG)

void sc_emit_handlers(const scope_t *s, int snapshot, void (*emit)(void *, const struct sc_ev *),
		      void *ctx)
{
	struct sc_ev ev;

	sc_ev_init(&ev, SC_EV_SCOPE_HANDLERS);
	ev.snapshot = (uint16_t)snapshot;
	ev.a = s->id;
	ev.u = s->nhandlers;
	ev.b = s->handlers_ran;
	if (emit)
		emit(ctx, &ev);
	else
		sc_emit(&ev);
}

#define SAME_REASON(N, v, str)                                                                     \
	_Static_assert((int)SCOPE_CANCEL_##N == (int)SC_CANCEL_##N,                                \
		       "scope.h and the wire disagree");
PROTO_CANCEL_REASONS(SAME_REASON)

scope_cancel_reason_t scope_cancel_reason(const scope_t *cs, scope_cancel_reason_t *cause)
{
	scope_t *s = cs ? (scope_t *)cs : sc_context();
	int reason;

	if (cause)
		*cause = SCOPE_CANCEL_NONE;
	if (!s)
		return SCOPE_CANCEL_NONE;
	(void)sc_check(s); /* a passed deadline the timer has not reached yet */
	reason = atomic_load(&s->cancelled);
	if (reason && cause)
		*cause = (scope_cancel_reason_t)atomic_load(&s->cause);
	return (scope_cancel_reason_t)reason;
}

const char *scope_cancel_reason_name(scope_cancel_reason_t reason)
{
#define REASON_NAME(N, v, str)                                                                     \
	case SCOPE_CANCEL_##N:                                                                     \
		return str;
	switch (reason) {
	case SCOPE_CANCEL_NONE:
		return "none";
		PROTO_CANCEL_REASONS(REASON_NAME)
	}
	return "unknown";
}

_Static_assert(sizeof(struct sc_handler) <= sizeof(scope_cancel_handler_t),
	       "scope_cancel_handler_t is too small");

int scope_cancel_handler_add(scope_cancel_handler_t *ph, void (*fn)(void *ctx), void *ctx)
{
	struct sc_handler *h = (struct sc_handler *)ph;
	scope_t *s = sc_context();

	if (!h || !fn || !s)
		return -EINVAL;
	h->scope = s;
	h->fn = fn;
	h->ctx = ctx;
	(void)sc_check(s); /* a passed deadline cancels first */
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&s->cancelled)) {
		s->handlers_ran++;
		if (sc_observed())
			sc_emit_handlers(s, 0, NULL, NULL);
		pthread_mutex_unlock(&s->lock);
		atomic_store(&h->state, H_RUNNING);
		fn(ctx);
		atomic_store(&h->state, H_DONE);
		return 1;
	}
	atomic_store(&h->state, H_ARMED);
	h->prev = NULL;
	h->next = s->handlers;
	if (s->handlers)
		s->handlers->prev = h;
	s->handlers = h;
	s->nhandlers++;
	if (sc_observed())
		sc_emit_handlers(s, 0, NULL, NULL);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int scope_cancel_handler_remove(scope_cancel_handler_t *ph)
{
	struct sc_handler *h = (struct sc_handler *)ph;
	scope_t *s;

	if (!h || !h->scope)
		return -EINVAL;
	s = h->scope;
	pthread_mutex_lock(&s->lock);
	if (atomic_load(&h->state) == H_ARMED) {
		if (h->prev)
			h->prev->next = h->next;
		else
			s->handlers = h->next;
		if (h->next)
			h->next->prev = h->prev;
		atomic_store(&h->state, H_REMOVED);
		s->nhandlers--;
		if (sc_observed())
			sc_emit_handlers(s, 0, NULL, NULL);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	pthread_mutex_unlock(&s->lock);
	/* Started by a canceller: the caller may free what fn uses only
	 * once fn returned. */
	while (atomic_load_explicit(&h->state, memory_order_acquire) == H_RUNNING)
		sched_yield();
	return atomic_load(&h->state) == H_DONE ? 1 : 0;
}

int scope_cancel_fd(scope_t *s)
{
	int fd;

	if (!s)
		s = sc_context();
	if (!s)
		return -EINVAL;
	(void)sc_check(s);
	pthread_mutex_lock(&s->lock);
	if (!s->cancel_efd) {
		fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			pthread_mutex_unlock(&s->lock);
			return fd;
		}
		s->cancel_efd = fd + 1;
		if (atomic_load(&s->cancelled))
			(void)!eventfd_write(fd, 1);
	}
	fd = s->cancel_efd - 1;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

int scope_cancel(scope_t *s)
{
	if (!s)
		return -EINVAL;
	sc_cancel(s, SC_CANCEL_EXPLICIT);
	return 0;
}

int scope_cancelled(void)
{
	sc_pool_stop_due(sc_self_peek());
	return sc_check(sc_context());
}

int64_t scope_deadline(void)
{
	scope_t *s = sc_context();

	return s ? s->eff_deadline : 0;
}

int scope_sleep_until(int64_t deadline_ns)
{
	struct sc_wait w = {.ctx = sc_context(), .deadline = deadline_ns};
	int rc;

	if (deadline_ns < 0)
		return -EINVAL;
	if (deadline_ns == 0)
		return sc_check(w.ctx);
	rc = sc_wait(&w);
	return rc == -ETIMEDOUT ? 0 : rc;
}

int scope_sleep(int64_t ns)
{
	if (ns < 0)
		return -EINVAL;
	return scope_sleep_until(sc_after(ns));
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
		atomic_store(&t->in_cancellable, s ? SC_CWAIT_WAKE : SC_CWAIT_NONE);
		sc_pool_stop_due(t);
		if (sc_check(s)) {
			atomic_store(&t->polling, 0);
			atomic_store(&t->in_cancellable, SC_CWAIT_NONE);
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
		p[0] = (struct pollfd){.fd = fd, .events = events};
		p[1] = (struct pollfd){.fd = t->evfd, .events = POLLIN};
		bool lend = t->worker && sc_pool_lends_all(t->pool);
		if (lend)
			sc_pool_lend(t, true);
		r = ppoll(p, 2, tp, NULL);
		int err = errno;
		if (lend)
			sc_pool_lend(t, false);
		atomic_store(&t->polling, 0);
		atomic_store(&t->in_cancellable, SC_CWAIT_NONE);
		if (r < 0 && err != EINTR)
			return -err;
		if (r > 0 && p[1].revents)
			(void)!read(t->evfd, &drain, sizeof(drain));
		/* Not an fd (closed, never opened): an error, not "ready". */
		if (r > 0 && (p[0].revents & POLLNVAL))
			return -EBADF;
		if (r > 0 && p[0].revents)
			return p[0].revents;
		if (deadline_ns && scope_now() >= deadline_ns)
			return -ETIMEDOUT;
	}
}
