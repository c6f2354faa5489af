/* trace.h - scope trees as OpenTelemetry spans, for --otlp: each process's
 * trees are gathered as their scopes close and tasks end, and a whole tree is
 * kept or dropped when its root scope closes (tail-based sampling: failed,
 * cancelled, late or violating trees always, a sample of the rest), within a
 * budget of spans held. */
#ifndef DAEMON_TRACE_H
#define DAEMON_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct model;
struct m_scope;
struct m_task;
struct jbuf;

/* What the exporter was told (set once, before any process registers). */
struct trace_config {
	bool on;
	unsigned sample_permille; /* of the trees that went well, kept per 1000 */
	uint64_t max_spans;	  /* held at once, every process together */
	uint64_t max_spans_per_s; /* exported per second */
	uint64_t seed;		  /* the sample: which fine trees are kept */
};
void trace_configure(const struct trace_config *c);
bool trace_on(void);

/* Span outcomes counted for scoped_otlp_spans_total. */
enum trace_outcome {
	TRACE_EXPORTED,
	TRACE_SAMPLED_OUT, /* a tree that went well, not in the sample */
	TRACE_DROP_MEMORY, /* over --otlp-max-spans while the tree was open */
	TRACE_DROP_RATE,   /* over --otlp-max-rate */
	TRACE_DROP_QUEUE,  /* the sender's queue was full */
	TRACE_DROP_FAILED, /* the collector refused it or stayed away */
	TRACE_DROP_GONE,   /* its process went before the root closed */
	TRACE_OUTCOMES
};
extern const char *const trace_outcome_names[TRACE_OUTCOMES];
/* Counts n spans as outcome (any thread). */
void trace_count(enum trace_outcome o, uint64_t n);
uint64_t trace_counted(enum trace_outcome o);

struct trace_proc;

/* Model hooks (m->tally set; no-ops unless trace_on()). */
void trace_scope_closed(struct model *m, const struct m_scope *s);
void trace_scope_cancelled(struct model *m, const struct m_scope *s, uint32_t reason, int64_t ts);
void trace_task_ended(struct model *m, const struct m_task *t);
void trace_violation(struct model *m, uint64_t scope, uint32_t kind, int64_t ts);
/* Frees what a process holds; its open trees count as TRACE_DROP_GONE. */
void trace_proc_free(struct trace_proc *tp);

/* The process a batch is for: its resource attributes and clock. */
struct trace_resource {
	int pid;
	const char *name, *exe, *runtime_version;
	int64_t mono, real; /* the same instant on the agent's two clocks */
	uint64_t key;	    /* otelid_process_key(): the span ids' */
};

/* Encodes the trees of m that are ready (root closed, kept) into b as one
 * OTLP ExportTraceServiceRequest (protobuf), at most max_bytes of spans, and
 * forgets them.  Returns the spans written (0: nothing was ready). */
uint64_t trace_take(struct model *m, const struct trace_resource *r, struct jbuf *b,
		    size_t max_bytes);

#endif
