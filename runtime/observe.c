/* observe.c - the runtime's event point: the observer slot, the cached tid,
 * the agent-thread mark, and the library constructor that starts the agent. */
#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "event.h"

_Atomic(sc_observer_fn) sc_observer = NULL;

static _Thread_local uint32_t cached_tid;
static _Thread_local int is_agent;

void sc_observer_set(sc_observer_fn fn)
{
	atomic_store_explicit(&sc_observer, fn, memory_order_release);
}

uint32_t sc_gettid(void)
{
	/* gettid() is a real system call on glibc; the hot paths read the tid
	 * for every event, so it is fetched once per thread. */
	if (__builtin_expect(cached_tid == 0, 0))
		cached_tid = (uint32_t)syscall(SYS_gettid);
	return cached_tid;
}

void sc_thread_mark_agent(void)
{
	is_agent = 1;
}

void sc_registry_snapshot(void (*emit)(void *ctx, const struct sc_ev *ev), void *ctx)
{
	(void)emit;
	(void)ctx;
}

__attribute__((constructor)) static void sc_library_init(void)
{
	sc_agent_init();
}
