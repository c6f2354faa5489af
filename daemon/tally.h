/* tally.h - running counts of one process that /metrics reports and the model
 * cannot recount later (ended entities expire): tasks ended per pool and
 * state, queue-wait and run-time histograms, cancellations, violations and
 * ingest lag.  The model keeps one only when the metrics endpoint is on. */
#ifndef DAEMON_TALLY_H
#define DAEMON_TALLY_H

#include "proto.h"

#include <stdint.h>

struct model;
struct m_scope;
struct m_task;
struct trace_proc;

/* Upper bounds of the histogram buckets in nanoseconds (+Inf follows). */
#define TALLY_BUCKETS 13
extern const int64_t tally_bounds_ns[TALLY_BUCKETS];

struct tally_hist {
	uint64_t bucket[TALLY_BUCKETS + 1]; /* not cumulative; the last is +Inf */
	uint64_t count;
	int64_t sum_ns;
};

/* Room for the values of proto/wire.h's lists (metrics_text.c checks that
 * every value fits; a larger one from a peer counts in slot 0 or the last). */
#define TALLY_STATES 8	/* PROTO_TASK_STATES */
#define TALLY_REASONS 8 /* PROTO_CANCEL_REASONS */
#define TALLY_KINDS 8	/* PROTO_VIOLATIONS */
/* Pools tallied apart per process; tasks of further pools share the last
 * slot, named TALLY_OTHER, so that a program creating pools without end
 * cannot grow the series without end. */
#define TALLY_POOLS 32
#define TALLY_OTHER "_other"
#define TALLY_NAME 48

struct tally_pool {
	uint64_t id;	       /* the pool's id in the model; 0: tasks of no known pool */
	char name[TALLY_NAME]; /* its name when first seen (the pool may be gone) */
	uint64_t ended[TALLY_STATES];
	struct tally_hist wait, run; /* fork to start, start to end */
};

struct tally {
	struct tally_pool pool[TALLY_POOLS];
	uint32_t npools, last; /* slots used; the slot found last (a hint) */
	uint64_t scopes_closed;
	uint64_t cancels[TALLY_REASONS];
	uint64_t violations[TALLY_KINDS];
	struct tally_hist lag;	  /* event's time to the daemon applying it */
	struct trace_proc *trace; /* --otlp's open trees (trace.c), or NULL */
};

/* A zeroed tally (new), or NULL when out of memory. */
struct tally *tally_new(void);
void tally_free(struct tally *t);

/* Called by the model when an event changed it, with m->tally set. */
void tally_task_ended(struct model *m, const struct m_task *t);
void tally_scope_closed(struct model *m, const struct m_scope *s);
void tally_scope_cancelled(struct model *m, const struct m_scope *s, uint32_t reason, int64_t ts);
void tally_violation(struct model *m, uint64_t scope, uint32_t kind, int64_t ts);
/* Every applied event: its lag behind the daemon's clock now_ns. */
void tally_event(struct model *m, const struct proto_msg *msg, int64_t now_ns);

/* Adds ns to h. */
void tally_hist_add(struct tally_hist *h, int64_t ns);

#endif
