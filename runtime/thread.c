/* thread.c - the registry of threads the runtime knows, their names, and the
 * park/wake primitive every runtime wait is built on. */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_thread *threads;      /* live records */
static struct sc_thread *free_records; /* recycled records */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
/* Initial-exec: read by every structural call (see cached_tid in observe.c). */
_Thread_local struct sc_thread *sc_self_tls __attribute__((tls_model("initial-exec")));

static void thread_exit(void *arg);

bool sc_roots_asym;
static pthread_once_t roots_once = PTHREAD_ONCE_INIT;
static bool roots_registered; /* for MEMBARRIER_CMD_PRIVATE_EXPEDITED (threads_lock) */

/* Whether owners may change their roots lists without the lock: the
 * kernel has the barriers sc_threads_walk_roots needs (the expedited one,
 * registered at the first snapshot, and the global one should that fail).
 * Not under TSan, which would see the owner and the snapshot race. */
static void roots_probe(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	int need = MEMBARRIER_CMD_GLOBAL | MEMBARRIER_CMD_PRIVATE_EXPEDITED |
		   MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;

	sc_roots_asym =
	    !SC_TSAN && !getenv("SCOPE_NO_MEMBARRIER") && cmds > 0 && (cmds & need) == need;
}

/* Every thread of the process passes a full memory barrier (under
 * threads_lock).  The expedited barrier interrupts only the CPUs running
 * this process's threads; the global one waits for every CPU to pass a
 * scheduling point, and needs no registration. */
static void roots_barrier(void)
{
	for (int i = 0; i < 2; i++) {
		if (!roots_registered &&
		    syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
			roots_registered = true;
		if (roots_registered &&
		    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
			return;
		roots_registered = false; /* EPERM: a fork child, say, registers anew */
	}
	(void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
}

static void make_key(void)
{
	/* Failure leaves exit_key unusable; open scopes then are not closed at
	 * thread exit, which is reported nowhere but is the only fallback. */
	(void)pthread_key_create(&exit_key, thread_exit);
}

static struct sc_thread *record_get(void)
{
	struct sc_thread *t;

	pthread_mutex_lock(&threads_lock);
	t = free_records;
	if (t)
		free_records = t->free_next;
	pthread_mutex_unlock(&threads_lock);
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		t->evfd = -1;
	}
	return t;
}

/* Takes the record's fields as they are when called: for THREAD_EXIT the
 * record is already back on the free list and may be reused. */
static void emit_thread(int kind, uint32_t tid, const char *name, uint64_t pool_id, int role,
			int64_t ts)
{
	struct sc_ev ev;

	if (!sc_observed())
		return;
	sc_ev_init(&ev, kind);
	ev.ts = ts;
	ev.tid = tid;
	ev.s1 = name;
	ev.a = pool_id;
	ev.i = role;
	sc_emit(&ev);
}

struct sc_thread *sc_thread_register(int role, scope_pool_t *pool, const char *name)
{
	struct sc_thread *t = record_get();

	if (!t)
		return NULL;
	/* Atomic: a canceller may still read the tid of the thread that had
	 * this record before (cancel.c, wakeups_add: a task's worker loaded
	 * just before that thread ended), as records are reused, not freed. */
	__atomic_store_n(&t->tid, sc_gettid(), __ATOMIC_RELAXED);
	t->role = (role == SC_ROLE_OTHER && t->tid == (uint32_t)getpid()) ? SC_ROLE_MAIN : role;
	if (sc_thread_is_agent())
		t->role = SC_ROLE_AGENT;
	t->pool = pool;
	t->pool_id = pool ? sc_pool_id(pool) : 0;
	t->worker = NULL;
	t->dq = NULL;
	t->self = pthread_self();
	t->frame.top = NULL;
	t->frame.task = NULL;
	t->roots = NULL;
	t->free_next = NULL;
	atomic_store_explicit(&t->alt_want, false, memory_order_relaxed); /* (below) */
	if (name) {
		sc_thread_set_name(t, name);
	} else if (prctl(PR_GET_NAME, t->name) != 0) {
		t->name[0] = '\0';
	}
	t->name[SC_THREAD_NAME - 1] = '\0';
	pthread_once(&exit_key_once, make_key);
	pthread_once(&roots_once, roots_probe);
	pthread_setspecific(exit_key, t);
	atomic_store_explicit(&t->start_ts, 0, memory_order_relaxed);
	pthread_mutex_lock(&threads_lock);
	t->prev = NULL;
	t->next = threads;
	if (threads)
		threads->prev = t;
	threads = t;
	pthread_mutex_unlock(&threads_lock);
	/* Read after the registry shows it, as every event's time is after
	 * its change (the agent's discard skips an older event, trusting the
	 * snapshot to have seen it).  A snapshot in between sends 0: its now. */
	atomic_store_explicit(&t->start_ts, scope_now(), memory_order_relaxed);
	sc_self_tls = t;
	sc_altstack_thread_start();
	emit_thread(SC_EV_THREAD_START, t->tid, t->name, t->pool_id, t->role,
		    atomic_load_explicit(&t->start_ts, memory_order_relaxed));
	return t;
}

void sc_thread_unregister(void)
{
	struct sc_thread *t = sc_self_tls;
	char name[SC_THREAD_NAME];
	uint32_t tid;
	uint64_t pool_id;
	int role;

	if (!t)
		return;
	/* Scopes a thread leaves open would outlive their owner: close them,
	 * innermost first, and say so. */
	sc_scope_close_frame(t, SC_VIOL_THREAD_EXIT);
	sc_pool_dq_release(t);
	pthread_setspecific(exit_key, NULL);
	sc_self_tls = NULL;
	pthread_mutex_lock(&threads_lock);
	if (t->prev)
		t->prev->next = t->next;
	else
		threads = t->next;
	if (t->next)
		t->next->prev = t->prev;
	tid = t->tid;
	pool_id = t->pool_id;
	role = t->role;
	memcpy(name, t->name, sizeof(name));
	t->free_next = free_records;
	free_records = t;
	pthread_mutex_unlock(&threads_lock);
	sc_altstack_thread_end();
	/* Unlinked first: a snapshot racing with this event must not list a
	 * thread whose exit the daemon may already have applied. */
	emit_thread(SC_EV_THREAD_EXIT, tid, name, pool_id, role, 0);
}

static void thread_exit(void *arg)
{
	(void)arg;
	/* Left in the middle of a task (pthread_exit): the tasks end, and a
	 * worker's pool learns it lost a thread. */
	if (sc_self_tls && (sc_self_tls->frame.task || sc_self_tls->worker))
		sc_tasks_abandon(sc_self_tls);
	sc_thread_unregister();
}

void sc_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	/* The runtime's critical sections are a few loads and stores: under
	 * contention a short spin beats sleeping in the kernel. */
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

void sc_thread_set_role(int role)
{
	if (!sc_self_tls)
		return;
	pthread_mutex_lock(&threads_lock); /* the snapshot reads it */
	sc_self_tls->role = role;
	pthread_mutex_unlock(&threads_lock);
}

/* In a fork child: a record's eventfd (scope_wait_fd) is an open file the
 * parent still uses.  A wake-up written there in the child would wake the
 * parent's thread for nothing, and a read there could take the parent's
 * own wake-up away.  scope_wait_fd makes a new one when it needs it. */
static void drop_evfd(struct sc_thread *t)
{
	if (t->evfd >= 0)
		close(t->evfd);
	t->evfd = -1;
}

struct sc_thread *sc_threads_after_fork(void)
{
	/* Only the forking thread lives on in the child; the lock may have
	 * been held by a thread that did not come along. */
	pthread_mutex_init(&threads_lock, NULL);
	roots_registered = false; /* the registration was the parent's process's */
	for (struct sc_thread *t = free_records; t; t = t->free_next)
		drop_evfd(t);
	/* The other records stay off the free list: inherited scopes and tasks
	 * still point at them, and a new thread reusing one would pass for
	 * their owner.  A few hundred bytes each, once per fork. */
	for (struct sc_thread *t = threads; t; t = t->next) {
		drop_evfd(t);
		if (t == sc_self_tls)
			continue;
		t->left_behind = true;
		atomic_store(&t->lock.held, 0);	 /* a parent's thread may have held it */
		atomic_store(&t->roots_busy, 0); /* or been inside its roots */
	}
	threads = sc_self_tls;
	if (sc_self_tls) {
		sc_self_tls->next = sc_self_tls->prev = NULL;
		atomic_store(&sc_self_tls->lock.held, 0);
		atomic_store(&sc_self_tls->roots_busy, 0);
		/* The child's own tid (the caller reset the cached one): events,
		 * cancellation's signals and the daemon all need it. */
		sc_self_tls->tid = sc_gettid();
		/* Ids from here on come after every id the parent gave out
		 * (the snapshot tells inherited tasks by that). */
		sc_self_tls->ids_scope = sc_self_tls->ids_scope_end = 0;
		sc_self_tls->ids_task = sc_self_tls->ids_task_end = 0;
		/* Its pool's workers (and their deques) stayed behind: its forks
		 * go to the pool's queue, and it lends no place. */
		sc_self_tls->worker = NULL;
		if (sc_self_tls->role == SC_ROLE_OTHER && sc_self_tls->tid == (uint32_t)getpid())
			sc_self_tls->role = SC_ROLE_MAIN;
	}
	return sc_self_tls;
}

void sc_thread_altstack_late(struct sc_thread *t)
{
	atomic_store_explicit(&t->alt_want, false, memory_order_relaxed);
	sc_altstack_thread_start();
}

void sc_threads_want_altstack(void)
{
	/* A thread that links itself after this walk calls
	 * sc_altstack_thread_start() after its link, so after the caller
	 * turned them on: it sees them on.  One linked before is flagged. */
	pthread_mutex_lock(&threads_lock);
	for (struct sc_thread *t = threads; t; t = t->next)
		atomic_store_explicit(&t->alt_want, true, memory_order_release);
	pthread_mutex_unlock(&threads_lock);
}

struct sc_thread *sc_self_register(void)
{
	return sc_thread_register(SC_ROLE_OTHER, NULL, NULL);
}

void sc_thread_set_name(struct sc_thread *t, const char *name)
{
	size_t n = strnlen(name, SC_THREAD_NAME - 1);

	/* The snapshot reads names under the same lock. */
	pthread_mutex_lock(&threads_lock);
	memcpy(t->name, name, n);
	t->name[n] = '\0';
	pthread_mutex_unlock(&threads_lock);
	if (t->tid == sc_gettid())
		(void)prctl(PR_SET_NAME, t->name);
}

void sc_threads_walk(void (*fn)(void *ctx, struct sc_thread *t), void *ctx)
{
	pthread_mutex_lock(&threads_lock);
	for (struct sc_thread *t = threads; t; t = t->next)
		fn(ctx, t);
	pthread_mutex_unlock(&threads_lock);
}

/* The snapshot's side of sc_roots_enter: every lock first, then one
 * barrier for all, then each owner that was busy is waited for (a few
 * stores: it is out soon, unless descheduled). */
void sc_threads_walk_roots(void (*fn)(void *ctx, struct sc_thread *t), void *ctx)
{
	pthread_mutex_lock(&threads_lock);
	for (struct sc_thread *t = threads; t; t = t->next)
		sc_spin_lock(&t->lock);
	if (sc_roots_asym)
		roots_barrier();
	for (struct sc_thread *t = threads; t; t = t->next) {
		for (unsigned i = 1; atomic_load_explicit(&t->roots_busy, memory_order_acquire);
		     i++)
			if (i % 64 == 0)
				sched_yield();
			else
				sc_cpu_relax();
		fn(ctx, t);
		sc_spin_unlock(&t->lock);
	}
	pthread_mutex_unlock(&threads_lock);
}

int scope_thread_name(const char *name)
{
	struct sc_thread *t;
	struct sc_ev ev;

	if (!name)
		return -EINVAL;
	t = sc_self();
	if (!t)
		return -ENOMEM;
	sc_thread_set_name(t, name);
	if (sc_observed()) {
		sc_ev_init(&ev, SC_EV_THREAD_NAME);
		ev.s1 = t->name;
		sc_emit(&ev);
	}
	return 0;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

void sc_wake(struct sc_thread *t)
{
	uint64_t one = 1;

	atomic_fetch_add(&t->seq, 1);
	if (atomic_load(&t->sleeping))
		futex(&t->seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
	if (atomic_load(&t->polling) && t->evfd >= 0)
		(void)!write(t->evfd, &one, sizeof(one));
}

bool sc_spin(struct sc_thread *t, uint32_t seen, int64_t budget_ns)
{
	int64_t end = 0;

	/* Catching a wake-up here saves two system calls and a context switch;
	 * the budget keeps a shared core from burning for long.  No
	 * sched_yield in here: with other programs' threads runnable on the
	 * core, the kernel's fair scheduler (EEVDF) hands it to them for the
	 * rest of their slice, up to a scheduler tick, and the subtask this
	 * joiner waits for ends meanwhile.  That made fib(24) beside two busy
	 * loops 4-16 ms a call instead of 0.5-1; the park after the budget
	 * gives the core up anyway. */
	for (unsigned i = 1;; i++) {
		if (atomic_load_explicit(&t->seq, memory_order_acquire) != seen)
			return true;
		sc_cpu_relax();
		if ((i & 63) == 0) {
			int64_t now = scope_now();
			if (!end)
				end = now + budget_ns;
			else if (now >= end)
				return false;
		}
	}
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

static bool waitv_ok; /* futex_waitv exists (Linux >= 5.16) */
static pthread_once_t waitv_once = PTHREAD_ONCE_INIT;

/* Asks the kernel once, with a wait that cannot block (the value differs). */
static void waitv_probe(void)
{
	uint32_t word = 0;
	struct futex_waitv w = {
	    .val = 1, .uaddr = (uintptr_t)&word, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG};

	waitv_ok =
	    !(syscall(SYS_futex_waitv, &w, 1, 0, NULL, CLOCK_MONOTONIC) < 0 && errno == ENOSYS);
}

bool sc_park_word_supported(void)
{
	pthread_once(&waitv_once, waitv_probe);
	return waitv_ok;
}

bool sc_park_word(struct sc_thread *t, uint32_t seen, _Atomic int *word, int64_t deadline)
{
	struct futex_waitv w[2] = {
	    {.val = seen, .uaddr = (uintptr_t)&t->seq, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
	    {.val = 0, .uaddr = (uintptr_t)word, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG},
	};
	struct timespec ts, *tp = NULL;

	if (!sc_park_word_supported())
		return false;
	if (deadline > 0) {
		ts.tv_sec = deadline / 1000000000;
		ts.tv_nsec = deadline % 1000000000;
		tp = &ts;
	}
	atomic_store(&t->sleeping, 1);
	if (atomic_load(&t->seq) == seen)
		(void)syscall(SYS_futex_waitv, w, 2, 0, tp, CLOCK_MONOTONIC);
	atomic_store(&t->sleeping, 0);
	return true;
}

void sc_wake_word(_Atomic int *word)
{
	syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

bool sc_park(struct sc_thread *t, uint32_t seen, int64_t deadline)
{
	struct timespec ts, *tp = NULL;
	bool woke = true;

	if (deadline > 0) {
		ts.tv_sec = deadline / 1000000000;
		ts.tv_nsec = deadline % 1000000000;
		tp = &ts;
	}
	atomic_store(&t->sleeping, 1);
	if (atomic_load(&t->seq) == seen) {
		long r = futex(&t->seq, FUTEX_WAIT_BITSET_PRIVATE, seen, tp);
		if (r < 0 && errno == ETIMEDOUT)
			woke = false;
	}
	atomic_store(&t->sleeping, 0);
	return woke;
}

void sc_helper_sigset(sigset_t *set)
{
	/* No asynchronous signal for it (a process-directed one goes to a
	 * thread of the program), but the agent's stack request, which asks
	 * every thread of the process, and the faults, which must not be
	 * blocked where they happen. */
	sigfillset(set);
	sigdelset(set, SC_SIG_STACK);
	sigdelset(set, SIGSEGV);
	sigdelset(set, SIGBUS);
	sigdelset(set, SIGILL);
	sigdelset(set, SIGFPE);
	sigdelset(set, SIGABRT);
}
