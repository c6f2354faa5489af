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
	uint8_t attrs_data[SC_OTEL_ATTRS_MAX];
} __attribute__((packed, aligned(8)));

#define SC_OTEL_CACHE 4 /* scope and fork site pairs a thread keeps built */

/* A record's trace and attributes, built for one scope and fork site. */
struct sc_otel_built {
	uint64_t scope_id; /* 0: empty */
	const char *file, *func;
	int line;
	uint8_t trace_id[16];
	uint8_t trace_flags;
	uint16_t attrs_data_size;
	uint8_t attrs_data[SC_OTEL_ATTRS_MAX];
};

/* A thread's record (otel_thread_ctx_v1 points at rec for the thread's
 * life: the valid flag, not the pointer, says whether a task runs) and
 * what it was last filled from, so that tasks of one scope and fork site
 * in a row rewrite only their span id; and the last few pairs built, so
 * that a worker going back and forth between scopes copies rather than
 * builds. */
struct sc_otel_thread {
	struct sc_otel_rec rec;
	uint64_t scope_id; /* 0: rec's trace and attributes are stale */
	const char *file, *func;
	int line;
	struct sc_otel_built cache[SC_OTEL_CACHE];
	unsigned next; /* the cache entry built next */
};

extern _Atomic bool sc_otel_on SC_HIDDEN;
extern _Atomic uint64_t sc_otel_task_key SC_HIDDEN; /* otelid_kind_key(, OTELID_TASK) */
extern _Thread_local struct sc_otel_thread *sc_otel_mine SC_HIDDEN
    __attribute__((tls_model("initial-exec")));

/* The calling thread's record, made and published on its first task; NULL
 * when thread contexts are off or memory ran out. */
struct sc_otel_thread *sc_otel_thread_init(void) SC_HIDDEN;
/* Writes task's trace id, trace flags and attributes into o->rec. */
void sc_otel_fill(struct sc_otel_thread *o, const scope_task_t *task) SC_HIDDEN;
/* Turns thread contexts on or off for tasks that start from now on (on
 * unless SCOPE_OTEL_CONTEXT=0 at start; the benchmark compares both). */
void sc_otel_enable(bool on) SC_HIDDEN;

/* Compiler fences only: the record is read while its thread is stopped
 * (OTEP 4947's signal-handler semantics), so no CPU barrier is needed. */
#define SC_OTEL_FENCE() atomic_signal_fence(memory_order_seq_cst)

static inline void sc_otel_write(struct sc_otel_thread *o, const scope_task_t *task)
{
	uint64_t span;

	o->rec.valid = 0;
	SC_OTEL_FENCE();
	if (__builtin_expect(o->scope_id != task->scope->id || o->func != task->site.func ||
				 o->line != task->site.line || o->file != task->site.file,
			     0))
		sc_otel_fill(o, task);
	span = atomic_load_explicit(&sc_otel_task_key, memory_order_relaxed) ^ task->id;
	span = span ? span : task->id; /* otelid_span() */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	span = __builtin_bswap64(span); /* W3C byte order: most significant first */
#endif
	memcpy(o->rec.span_id, &span, 8);
	SC_OTEL_FENCE();
	o->rec.valid = 1;
	SC_OTEL_FENCE();
}

/* The calling thread starts running task. */
static inline void sc_otel_enter(const scope_task_t *task)
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
static inline void sc_otel_leave(const scope_task_t *outer)
{
	struct sc_otel_thread *o = sc_otel_mine;

	if (!o)
		return;
	if (outer && atomic_load_explicit(&sc_otel_on, memory_order_relaxed)) {
		sc_otel_write(o, outer);
		return;
	}
	o->rec.valid = 0;
	SC_OTEL_FENCE();
}

#endif
