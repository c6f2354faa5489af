/* otelctx.h - the OpenTelemetry thread context of the task a thread runs
 * (OTEP 4947), for profilers outside the process: what a task start and end
 * write, inline, since they run on every task switch.  otelctx.c has the
 * rest (the exported TLS pointer, the process context of OTEP 4719). */
#ifndef SC_OTELCTX_H
#define SC_OTELCTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "rt.h"

#define SC_OTEL_ATTRS_MAX 612 /* the record stays at the 640 bytes OTEP 4947 advises */

/* The Thread-Local Context Record of OTEP 4947, byte-packed as it says:
 * trace-id, span-id (W3C byte order), valid, trace-flags, attrs-data-size
 * (host order), attrs-data (key index, length, UTF-8 value; repeated). */
struct sc_otel_rec {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
	uint16_t attrs_data_size;
	uint8_t attrs_data[]; /* up to SC_OTEL_ATTRS_MAX bytes */
} __attribute__((packed, aligned(8)));

/* The span id's 8 bytes, at an 8-aligned offset of the record, as one
 * word. */
typedef uint64_t sc_otel_u64 __attribute__((may_alias, aligned(8)));
_Static_assert(__builtin_offsetof(struct sc_otel_rec, span_id) % 8 == 0, "span id aligned");

#define SC_OTEL_SLOTS 64 /* records a thread keeps, by (scope, fork site); a power of 2 */

/* A record's trace and attributes, built once per scope (hung off the
 * scope, freed with it) for the fork site of its first task, so that a
 * thread meeting the scope copies rather than builds. */
struct sc_otel_built {
	pid_t pid;    /* the process whose key made trace_id (a fork child rebuilds) */
	uint64_t src; /* the scope's trace_src it was built for */
	const char *file, *func;
	int line;
	uint8_t trace_id[16];
	uint8_t trace_flags;
	uint16_t attrs_data_size;
	uint8_t attrs_data[]; /* attrs_data_size bytes */
};

/* What a thread's slot was filled for: a trace (the scope's trace_src), a
 * scope name (its name_key) and a fork site; not a scope, since fork/join
 * recursion opens a scope per call and its scopes share all three. */
struct sc_otel_key {
	uint64_t src; /* 0: nothing (scope ids start at 1) */
	uint64_t name;
	const char *file, *func;
	int line;
};

/* One record of a thread, filled for one scope and fork site: tasks of
 * that pair rewrite only its span id.  The record follows the slot, with
 * room for cap bytes of attributes (a refill with more allocates anew).
 * Its valid is 1 from the first fill on: the record is written only while
 * otel_thread_ctx_v1 does not point at it. */
struct sc_otel_slot {
	uint16_t cap;
} __attribute__((aligned(8)));

static inline struct sc_otel_rec *sc_otel_slot_rec(struct sc_otel_slot *s)
{
	return (struct sc_otel_rec *)(s + 1);
}

/* A thread's records by sc_otel_index(), with their keys beside them so
 * that a task switch reads the key without following the slot's pointer
 * first, and where its otel_thread_ctx_v1 lives (OTEP 4947's pointer
 * swap: the pointer says which record, or NULL when no task runs; the
 * valid flag is never flipped). */
struct sc_otel_thread {
	struct sc_otel_key key[SC_OTEL_SLOTS];	  /* first: two to a cache line */
	struct sc_otel_slot *slot[SC_OTEL_SLOTS]; /* NULL where key[i] is empty */
	struct sc_otel_rec **tls;
} __attribute__((aligned(64)));

extern _Atomic bool sc_otel_on SC_HIDDEN;
extern _Atomic uint64_t sc_otel_task_key SC_HIDDEN; /* otelid_kind_key(, OTELID_TASK) */
extern _Thread_local struct sc_otel_thread *sc_otel_mine SC_HIDDEN
    __attribute__((tls_model("initial-exec")));

/* The calling thread's records, made on its first task; NULL when thread
 * contexts are off or memory ran out. */
struct sc_otel_thread *sc_otel_thread_init(void) SC_HIDDEN;
/* Fills slot i of o for task's scope and fork site, allocating it when
 * needed; NULL when memory ran out.  The slot is not published. */
struct sc_otel_slot *sc_otel_fill(struct sc_otel_thread *o, const scope_task_t *task,
				  unsigned i) SC_HIDDEN;
/* Frees what s kept built (scope.c, when the scope goes). */
void sc_otel_scope_free(scope_t *s) SC_HIDDEN;
/* Turns thread contexts on or off for tasks that start from now on (on
 * unless SCOPE_OTEL_CONTEXT=0 at start; the benchmark compares both). */
void sc_otel_enable(bool on) SC_HIDDEN;

/* Compiler fences only: the record is read while its thread is stopped
 * (OTEP 4947's signal-handler semantics), so no CPU barrier is needed. */
#define SC_OTEL_FENCE() atomic_signal_fence(memory_order_seq_cst)

static inline uint64_t sc_otel_src(const scope_task_t *task)
{
	return atomic_load_explicit(&task->scope->trace_src, memory_order_relaxed);
}

/* The slot of task's trace, scope name and fork site.  Consecutive root
 * scopes take consecutive slots, so up to SC_OTEL_SLOTS trees forking
 * from one site never evict each other, and a new tree finds the slot of
 * one SC_OTEL_SLOTS trees ago with the same name and site, whose trace
 * alone it rewrites (sc_otel_fill). */
static inline unsigned sc_otel_index(const scope_task_t *task)
{
	return (unsigned)(sc_otel_src(task) + task->scope->name_key +
			  (uint64_t)task->site.line * 5) &
	       (SC_OTEL_SLOTS - 1);
}

/* Whether k is task's trace, scope name and fork site: one branch. */
static inline bool sc_otel_holds(const struct sc_otel_key *k, const scope_task_t *task)
{
	return ((k->src ^ sc_otel_src(task)) | (k->name ^ task->scope->name_key) |
		(uint64_t)(unsigned)(k->line ^ task->site.line) |
		((uintptr_t)k->func ^ (uintptr_t)task->site.func) |
		((uintptr_t)k->file ^ (uintptr_t)task->site.file)) == 0;
}

/* Sets the thread's pointer (tls: o->tls), a volatile store between
 * compiler fences. */
static inline void sc_otel_point(struct sc_otel_rec **tls, struct sc_otel_rec *r)
{
	SC_OTEL_FENCE();
	*(struct sc_otel_rec *volatile *)tls = r;
	SC_OTEL_FENCE();
}

/* Points the thread's otel_thread_ctx_v1 at task's record.  A record
 * already filled for task's scope and fork site has only its span id
 * rewritten, by one aligned 8-byte store: a reader, which sees the thread
 * only between two of its instructions, finds the record whole before it
 * and after it (it may be the record shown, of an outer task of the same
 * scope and site).  A record filled anew is detached first. */
static inline void sc_otel_write(struct sc_otel_thread *o, const scope_task_t *task)
{
	struct sc_otel_rec **tls = o->tls;
	unsigned i = sc_otel_index(task);
	struct sc_otel_slot *s = o->slot[i];
	uint64_t span;

	if (__builtin_expect(!sc_otel_holds(&o->key[i], task), 0)) {
		sc_otel_point(tls, NULL);
		if (!(s = sc_otel_fill(o, task, i)))
			return;
	}
	/* otelid_span(), whose zero case the key's top bit rules out. */
	span = atomic_load_explicit(&sc_otel_task_key, memory_order_relaxed) ^ task->id;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	span = __builtin_bswap64(span); /* W3C byte order: most significant first */
#endif
	*(volatile sc_otel_u64 *)sc_otel_slot_rec(s)->span_id = span;
	sc_otel_point(tls, sc_otel_slot_rec(s));
}

/* The calling thread starts running task (inlined always: sc_task_run and
 * the benchmark run the same instructions). */
static inline __attribute__((always_inline)) void sc_otel_enter(const scope_task_t *task)
{
	struct sc_otel_thread *o = sc_otel_mine;

	if (!atomic_load_explicit(&sc_otel_on, memory_order_relaxed))
		return;
	if (__builtin_expect(!o, 0) && !(o = sc_otel_thread_init()))
		return;
	sc_otel_write(o, task);
}

/* The calling thread is done with a task and goes back to outer (the task
 * it interrupted to help a join; NULL: none). */
static inline __attribute__((always_inline)) void sc_otel_leave(const scope_task_t *outer)
{
	struct sc_otel_thread *o = sc_otel_mine;

	if (!o)
		return;
	if (outer && atomic_load_explicit(&sc_otel_on, memory_order_relaxed)) {
		sc_otel_write(o, outer);
		return;
	}
	sc_otel_point(o->tls, NULL);
}

#endif
