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

#include "otelid.h"
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

#define SC_OTEL_SLOTS 64 /* records a thread keeps (a power of 2) */

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

_Static_assert(__builtin_offsetof(struct sc_site, func) ==
		   __builtin_offsetof(struct sc_site, file) + sizeof(const char *),
	       "a site's file and function are adjacent");

/* One of a thread's records and what it was filled for: a trace (the
 * scope's trace_src), a scope name (its name_key) and a fork site; not a
 * scope, since fork/join recursion opens a scope per call and its scopes
 * share all three.  Key and record pointer share one cache line, so that
 * a task switch reads one line of the thread's block and no record.  The
 * record (its own allocation, with room for cap bytes of attributes; a
 * refill with more allocates anew) keeps valid = 1 from its first fill
 * on: it is written only while otel_thread_ctx_v1 does not point at it. */
struct sc_otel_slot {
	uint64_t src; /* 0: empty (scope ids start at 1) */
	uint64_t name;
	const char *file, *func; /* as struct sc_site has them: compared as one */
	int line;
	uint16_t cap;
	struct sc_otel_rec *rec; /* NULL until the slot's first fill */
} __attribute__((aligned(64)));
_Static_assert(__builtin_offsetof(struct sc_otel_slot, file) % 16 == 0 &&
		   __builtin_offsetof(struct sc_otel_slot, func) ==
		       __builtin_offsetof(struct sc_otel_slot, file) + sizeof(const char *),
	       "a slot's file and function are one aligned pair");

/* A thread's records by sc_otel_index(), and where its otel_thread_ctx_v1
 * lives (OTEP 4947's pointer swap: the pointer says which record, or NULL
 * when no task runs; the valid flag is never flipped). */
struct sc_otel_thread {
	struct sc_otel_slot slot[SC_OTEL_SLOTS];
	struct sc_otel_rec **tls;
} __attribute__((aligned(64)));

extern _Atomic bool sc_otel_on SC_HIDDEN;
extern _Atomic uint64_t sc_otel_task_key SC_HIDDEN; /* otelid_kind_key(, OTELID_TASK) */
/* The kind keys OTELID_TRACE_HI and _LO of the process (otelid.h). */
extern _Atomic uint64_t sc_otel_trace_hi SC_HIDDEN, sc_otel_trace_lo SC_HIDDEN;
extern _Thread_local struct sc_otel_thread *sc_otel_mine SC_HIDDEN
    __attribute__((tls_model("initial-exec")));

/* The calling thread's records, made on its first task; NULL when thread
 * contexts are off or memory ran out. */
struct sc_otel_thread *sc_otel_thread_init(void) SC_HIDDEN;
/* Fills slot e of the calling thread for task's trace, scope name and
 * fork site, allocating its record when needed; the record, or NULL when
 * memory ran out.  The record is not published. */
struct sc_otel_rec *sc_otel_fill(struct sc_otel_slot *e, const scope_task_t *task) SC_HIDDEN;
/* Frees what s kept built (scope.c, when the scope goes). */
void sc_otel_scope_free(scope_t *s) SC_HIDDEN;
/* Turns thread contexts on or off for tasks that start from now on (on
 * unless SCOPE_OTEL_CONTEXT=0 at start; the benchmark compares both). */
void sc_otel_enable(bool on) SC_HIDDEN;

/* Compiler fences only: the record is read while its thread is stopped
 * (OTEP 4947's signal-handler semantics), so no CPU barrier is needed. */
#define SC_OTEL_FENCE() atomic_signal_fence(memory_order_seq_cst)

/* Two words as one vector, for the fork site's file and function (one
 * SSE2 compare on x86-64; scalar code where there is no such unit).  The
 * slot's pair is 16-aligned, the task's is not always. */
typedef uint64_t sc_otel_v2 __attribute__((vector_size(16), aligned(8), may_alias));
typedef uint64_t sc_otel_v2a __attribute__((vector_size(16), may_alias));

/* The slot of task's trace, scope name and fork site, by its scope's
 * otel_ix (from the scope's id, rt.h's sc_otel_ix_of, or its parent's
 * otel_ix when it has its parent's name: a recursion's scopes share a
 * slot) and the fork's line.
 * Root scopes opened one after another take consecutive slots, so up to
 * SC_OTEL_SLOTS trees in turn never evict each other (a hash of the key
 * would: 8 random keys share one of 64 slots with a chance of 37%, and two
 * keys sharing one refill it at every switch between them), and a new
 * tree finds the slot of the tree SC_OTEL_SLOTS before it, whose trace
 * alone it rewrites when name and site are the same (sc_otel_fill).  The
 * index only places a record: the slot's key says whether it is task's. */
static inline struct sc_otel_slot *sc_otel_index(struct sc_otel_thread *o, const scope_task_t *task)
{
	return &o->slot[(task->scope->otel_ix + (unsigned)task->site.line * 5) &
			(SC_OTEL_SLOTS - 1)];
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
 * already filled for task's trace, scope name and fork site has only its
 * span id rewritten, by one aligned 8-byte store: a reader, which sees the
 * thread only between two of its instructions, finds the record whole
 * before it and after it (it may be the record shown, of an outer task of
 * the same key).  A record filled anew is detached first.  The key is
 * compared as one word (an OR of XORs, the site's file and function as
 * one vector: one load fewer on each side, which measured 0.5 ns less per
 * switch) and one branch, taken on a miss only.  A record of the same
 * scope name and site in another tree without a traceparent (a new root
 * scope per request) is rewritten here, its trace id alone. */
static inline __attribute__((always_inline)) void sc_otel_write(struct sc_otel_thread *o,
								const scope_task_t *task)
{
	const scope_t *sc = task->scope;
	uint64_t src = atomic_load_explicit(&sc->trace_src, memory_order_relaxed), span, other;
	struct sc_otel_slot *e = sc_otel_index(o, task);
	struct sc_otel_rec *r = e->rec;
	sc_otel_v2 site = *(const sc_otel_v2 *)&task->site.file ^ *(const sc_otel_v2a *)&e->file;

	other = (e->name ^ sc->name_key) | (uint64_t)(unsigned)(e->line ^ task->site.line) |
		site[0] | site[1];
	if (__builtin_expect((other | (e->src ^ src)) != 0, 0)) {
		sc_otel_point(o->tls, NULL);
		/* A slot filled at all was filled in this process (a fork
		 * child empties its thread's), with this process's keys. */
		if (!other && e->src && !(src & SC_TRACE_SRC_BOUND)) {
			otelid_trace_keyed(
			    r->trace_id,
			    atomic_load_explicit(&sc_otel_trace_hi, memory_order_relaxed),
			    atomic_load_explicit(&sc_otel_trace_lo, memory_order_relaxed), src);
			r->trace_flags = 0;
			e->src = src;
		} else if (!(r = sc_otel_fill(e, task))) {
			return;
		}
	}
	/* otelid_span(), whose zero case the key's top bit rules out. */
	span = atomic_load_explicit(&sc_otel_task_key, memory_order_relaxed) ^ task->id;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	span = __builtin_bswap64(span); /* W3C byte order: most significant first */
#endif
	*(volatile sc_otel_u64 *)r->span_id = span;
	sc_otel_point(o->tls, r);
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
