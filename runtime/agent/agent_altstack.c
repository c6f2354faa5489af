/* agent_altstack.c - alternate signal stacks for the threads the runtime
 * knows, so that the fatal-signal handler (agent_exit.c) still runs, and
 * still reports the crash, when a thread has overflowed its own stack. */
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

/* The handler needs a few hundred bytes; libc, a dynamic-linker lookup on
 * its first call and a sanitizer's wrapper around it need far more. */
#define ALT_FLOOR (64u * 1024)

static _Atomic int enabled;
static size_t alt_size, guard_size; /* set once, before enabled */

/* The mapping (guard page first) this thread got from us, or NULL. */
static _Thread_local void *mine;

void sc_altstack_enable(void)
{
	long page = sysconf(_SC_PAGESIZE), want = ALT_FLOOR;
#ifdef _SC_SIGSTKSZ
	long sys = sysconf(_SC_SIGSTKSZ); /* what this CPU's signal frames need */
	if (sys > want)
		want = sys;
#endif
	if (page <= 0)
		page = 4096;
	if (!atomic_load(&enabled)) {
		guard_size = (size_t)page;
		alt_size = ((size_t)want + guard_size - 1) / guard_size * guard_size;
		atomic_store_explicit(&enabled, 1, memory_order_release);
		/* An agent started late (after threads registered): they
		 * were given none, so each takes one at its next runtime call. */
		sc_threads_want_altstack();
	}
	sc_altstack_thread_start();
}

void sc_altstack_thread_start(void)
{
	stack_t old, ss;

	if (mine || !atomic_load_explicit(&enabled, memory_order_acquire))
		return;
	/* A stack the application (or a sanitizer's runtime) installed is
	 * theirs, and their handlers may rely on it: keep it. */
	if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
		return;
	void *m = mmap(NULL, guard_size + alt_size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (m == MAP_FAILED)
		return; /* the thread runs on without one, as before */
	/* The lowest page stays inaccessible: a handler that overflows the
	 * alternate stack faults there rather than writing over whatever the
	 * kernel mapped below it. */
	if (mprotect(m, guard_size, PROT_NONE) != 0) {
		munmap(m, guard_size + alt_size);
		return;
	}
	ss.ss_sp = (char *)m + guard_size;
	ss.ss_size = alt_size;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) != 0) {
		munmap(m, guard_size + alt_size);
		return;
	}
	mine = m;
}

void sc_altstack_thread_end(void)
{
	stack_t cur, off = {.ss_flags = SS_DISABLE};

	if (!mine || sigaltstack(NULL, &cur) != 0)
		return;
	if (cur.ss_sp == (char *)mine + guard_size && !(cur.ss_flags & SS_DISABLE)) {
		/* Still installed: take it down first, unless a handler runs on it
		 * right now (then it stays, leaked, rather than pulled from under
		 * that handler). */
		if ((cur.ss_flags & SS_ONSTACK) || sigaltstack(&off, NULL) != 0)
			return;
	}
	/* Otherwise the application replaced it: ours is unused either way. */
	munmap(mine, guard_size + alt_size);
	mine = NULL;
}
