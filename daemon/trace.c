/* trace.c - scope trees gathered as spans while they run, kept or dropped
 * whole when the root scope closes, and written as OTLP protobuf. */
#include "trace.h"

#include "daemon.h"
#include "loop.h"
#include "model.h"
#include "otelid.h"
#include "pb.h"
#include "tally.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCOPED_SCOPE_NAME "scoped"
#define TREE_MAX_MARKS 64
#define SPAN_NAME 48

const char *const trace_outcome_names[TRACE_OUTCOMES] = {
    [TRACE_EXPORTED] = "exported",	    [TRACE_SAMPLED_OUT] = "sampled_out",
    [TRACE_DROP_MEMORY] = "dropped_memory", [TRACE_DROP_RATE] = "dropped_rate",
    [TRACE_DROP_QUEUE] = "dropped_queue",   [TRACE_DROP_FAILED] = "dropped_failed",
    [TRACE_DROP_GONE] = "dropped_gone",
};

static struct trace_config cfg;
static _Atomic uint64_t counted[TRACE_OUTCOMES];
static uint64_t held; /* spans in open or ready trees, every process */
static double tokens; /* rate budget: spans that may go out now */
static int64_t tokens_ns;

void trace_configure(const struct trace_config *c)
{
	cfg = *c;
	tokens = (double)cfg.max_spans_per_s;
}

bool trace_on(void)
{
	return cfg.on;
}

void trace_count(enum trace_outcome o, uint64_t n)
{
	atomic_fetch_add_explicit(&counted[o], n, memory_order_relaxed);
}

uint64_t trace_counted(enum trace_outcome o)
{
	return atomic_load_explicit(&counted[o], memory_order_relaxed);
}

enum { SPAN_SCOPE = OTELID_SCOPE, SPAN_TASK = OTELID_TASK };

struct span {
	uint64_t id, parent; /* model ids; parent's kind in parent_kind (0: none) */
	int64_t start, end, deadline, wait, error, join_result;
	const char *file, *func; /* interned in the model: they live as long as it */
	int32_t line;
	uint32_t worker;
	uint8_t kind, parent_kind, state, joiner, cancel_reason, joined;
	char name[SPAN_NAME];
};

/* A cancellation or a violation, attached to its scope's span when written. */
struct mark {
	uint64_t scope;
	int64_t ts;
	uint8_t violation; /* 0: a cancellation */
	uint8_t code;	   /* the reason or the kind */
};

struct tree {
	uint64_t id; /* the root scope's (idmap key) */
	struct tree *next;
	struct span *spans;
	uint32_t n, cap;
	struct mark marks[TREE_MAX_MARKS];
	uint32_t nmarks;
	bool keep;	/* failed, cancelled, late or violating: not sampled */
	bool truncated; /* spans were dropped for memory */
	bool joined;	/* trace id and parent from a traceparent value */
	uint8_t trace_id[16], parent_span[8];
};

struct trace_proc {
	struct idmap trees; /* open trees by root scope */
	struct tree *ready, **tail;
};

static struct trace_proc *proc_of(struct model *m)
{
	struct tally *t = m->tally;
	if (!t->trace) {
		t->trace = calloc(1, sizeof *t->trace);
		if (t->trace)
			t->trace->tail = &t->trace->ready;
	}
	return t->trace;
}

static void tree_free(struct tree *tr, enum trace_outcome o)
{
	trace_count(o, tr->n);
	held -= tr->n;
	free(tr->spans);
	free(tr);
}

void trace_proc_free(struct trace_proc *tp)
{
	if (!tp)
		return;
	for (size_t i = 0; i < tp->trees.cap; i++)
		if (tp->trees.slots[i].e)
			tree_free(tp->trees.slots[i].e, TRACE_DROP_GONE);
	idmap_free(&tp->trees);
	for (struct tree *tr = tp->ready, *next; tr; tr = next) {
		next = tr->next;
		tree_free(tr, TRACE_DROP_GONE);
	}
	free(tp);
}

/* The root of the tree that scope belongs to: up through enclosing scopes
 * and the tasks scopes were opened in, to the last one the model holds. */
static uint64_t root_of(const struct model *m, uint64_t scope)
{
	uint64_t last = scope;
	for (int depth = 0; depth < 4096 && scope; depth++) {
		const struct m_scope *s = idmap_get(&m->ents[ENT_SCOPE], scope);
		if (!s)
			break;
		last = scope;
		uint64_t up = s->parent;
		if (!up && s->parent_task) {
			const struct m_task *t = idmap_get(&m->ents[ENT_TASK], s->parent_task);
			up = t ? t->scope : 0;
		}
		scope = up;
	}
	return last;
}

static struct tree *tree_get(struct model *m, uint64_t root)
{
	struct trace_proc *tp = proc_of(m);
	if (!tp)
		return NULL;
	struct tree *tr = idmap_get(&tp->trees, root);
	if (tr)
		return tr;
	tr = calloc(1, sizeof *tr);
	if (!tr)
		return NULL;
	tr->id = root;
	if (idmap_put(&tp->trees, tr) < 0) {
		free(tr);
		return NULL;
	}
	return tr;
}

static struct span *span_add(struct tree *tr)
{
	if (held >= cfg.max_spans) {
		tr->truncated = true;
		trace_count(TRACE_DROP_MEMORY, 1);
		return NULL;
	}
	if (tr->n == tr->cap) {
		uint32_t cap = tr->cap ? tr->cap * 2 : 8;
		struct span *s = realloc(tr->spans, cap * sizeof *s);
		if (!s) {
			tr->truncated = true;
			trace_count(TRACE_DROP_MEMORY, 1);
			return NULL;
		}
		tr->spans = s;
		tr->cap = cap;
	}
	held++;
	struct span *s = &tr->spans[tr->n++];
	memset(s, 0, sizeof *s);
	return s;
}

void trace_scope_cancelled(struct model *m, const struct m_scope *s, uint32_t reason, int64_t ts)
{
	struct tree *tr = cfg.on ? tree_get(m, root_of(m, s->id)) : NULL;
	if (!tr)
		return;
	tr->keep = true;
	if (tr->nmarks < TREE_MAX_MARKS)
		tr->marks[tr->nmarks++] = (struct mark){s->id, ts, 0, (uint8_t)reason};
}

void trace_violation(struct model *m, uint64_t scope, uint32_t kind, int64_t ts)
{
	struct tree *tr = cfg.on && scope ? tree_get(m, root_of(m, scope)) : NULL;
	if (!tr)
		return;
	tr->keep = true;
	if (tr->nmarks < TREE_MAX_MARKS)
		tr->marks[tr->nmarks++] = (struct mark){scope, ts, 1, (uint8_t)kind};
}

void trace_task_ended(struct model *m, const struct m_task *t)
{
	if (!cfg.on || !t->scope)
		return;
	struct tree *tr = tree_get(m, root_of(m, t->scope));
	struct span *sp = tr ? span_add(tr) : NULL;
	if (!sp)
		return;
	if (t->state != PROTO_TASK_SUCCESS)
		tr->keep = true; /* failed, cancelled or never ran */
	sp->kind = SPAN_TASK;
	sp->id = t->id;
	sp->parent_kind = SPAN_SCOPE;
	sp->parent = t->scope;
	sp->start = t->started ? t->started : t->forked ? t->forked : t->ended;
	sp->end = t->ended;
	sp->wait = t->started && t->forked ? t->started - t->forked : -1;
	sp->error = t->error;
	sp->state = t->state;
	sp->worker = t->worker;
	sp->file = t->file;
	sp->func = t->func;
	sp->line = t->line;
	snprintf(sp->name, sizeof sp->name, "task");
}

/* Decides the tree whose root just closed: ready to go, or dropped. */
static void root_closed(struct model *m, struct tree *tr)
{
	struct trace_proc *tp = m->tally->trace;
	idmap_del(&tp->trees, tr->id);
	uint64_t h = tr->id * 0x9e3779b97f4a7c15ull ^ cfg.seed;
	h ^= h >> 29;
	if (!tr->keep && (h % 1000) >= cfg.sample_permille) {
		tree_free(tr, TRACE_SAMPLED_OUT);
		return;
	}
	tr->next = NULL;
	*tp->tail = tr;
	tp->tail = &tr->next;
}

void trace_scope_closed(struct model *m, const struct m_scope *s)
{
	if (!cfg.on)
		return;
	uint64_t root = root_of(m, s->id);
	struct tree *tr = tree_get(m, root);
	if (!tr)
		return;
	struct span *sp = span_add(tr);
	if (sp) {
		sp->kind = SPAN_SCOPE;
		sp->id = s->id;
		if (s->parent_task) {
			sp->parent_kind = SPAN_TASK;
			sp->parent = s->parent_task;
		} else if (s->parent) {
			sp->parent_kind = SPAN_SCOPE;
			sp->parent = s->parent;
		}
		sp->start = s->opened ? s->opened : s->closed;
		sp->end = s->closed;
		sp->deadline = s->deadline;
		sp->joiner = s->joiner;
		sp->cancel_reason = s->cancel_reason;
		sp->joined = (s->flags & EF_JOINED) != 0;
		sp->join_result = s->join_result;
		sp->file = s->file;
		sp->func = s->func;
		sp->line = s->line;
		snprintf(sp->name, sizeof sp->name, "%s", s->name ? s->name : "scope");
	}
	if (s->deadline && s->closed > s->deadline)
		tr->keep = true; /* late */
	for (size_t i = 0; i < s->nvalues && (!tr->joined || s->id == root); i++)
		if (strcmp(s->values[i].key, "traceparent") == 0 && s->values[i].value)
			tr->joined = otelid_traceparent(s->values[i].value, tr->trace_id,
							tr->parent_span, NULL);
	if (s->id == root)
		root_closed(m, tr);
}

/* ---- writing */

/* The span id of a scope or task: the one libscope writes into the thread
 * context of the task while it runs (common/otelid.h). */
static void span_id(uint8_t out[8], const struct trace_resource *r, uint8_t kind, uint64_t id)
{
	otelid_bytes(out, otelid_span(otelid_kind_key(r->key, kind), id));
}

static void attr_str(struct jbuf *b, unsigned field, const char *key, const char *v)
{
	if (!v)
		return;
	size_t kv = pb_begin(b);
	pb_str(b, 1, key);
	size_t any = pb_begin(b);
	pb_str(b, 1, v);
	pb_end(b, 2, any);
	pb_end(b, field, kv);
}

static void attr_int(struct jbuf *b, unsigned field, const char *key, int64_t v)
{
	size_t kv = pb_begin(b);
	pb_str(b, 1, key);
	size_t any = pb_begin(b);
	pb_uint(b, 3, (uint64_t)v);
	pb_end(b, 2, any);
	pb_end(b, field, kv);
}

static void attr_double(struct jbuf *b, unsigned field, const char *key, double v)
{
	size_t kv = pb_begin(b);
	pb_str(b, 1, key);
	size_t any = pb_begin(b);
	pb_double(b, 4, v);
	pb_end(b, 2, any);
	pb_end(b, field, kv);
}

static void attr_bool(struct jbuf *b, unsigned field, const char *key, bool v)
{
	size_t kv = pb_begin(b);
	pb_str(b, 1, key);
	size_t any = pb_begin(b);
	pb_uint(b, 2, v);
	pb_end(b, 2, any);
	pb_end(b, field, kv);
}

#define NAMED(NAME, value, json) [value] = json,
#define NAMED4(NAME, value, json, pub) [value] = json,
static const char *const task_states[] = {PROTO_TASK_STATES(NAMED)};
static const char *const reasons[] = {PROTO_CANCEL_REASONS(NAMED)};
static const char *const kinds[] = {PROTO_VIOLATIONS(NAMED)};
static const char *const joiners[] = {PROTO_JOINERS(NAMED4)};
#define NAME(tab, i) ((size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : NULL)

static void write_span(struct jbuf *b, const struct trace_resource *r, const struct tree *tr,
		       const uint8_t trace_id[16], const struct span *sp)
{
	uint8_t id[8], parent[8];
	int64_t off = r->real - r->mono;
	size_t at = pb_begin(b);
	pb_bytes(b, 1, trace_id, 16);
	span_id(id, r, sp->kind, sp->id);
	pb_bytes(b, 2, id, 8);
	if (sp->parent_kind) {
		span_id(parent, r, sp->parent_kind, sp->parent);
		pb_bytes(b, 4, parent, 8);
	} else if (tr->joined) {
		pb_bytes(b, 4, tr->parent_span, 8);
	}
	pb_str(b, 5, sp->name);
	pb_uint(b, 6, 1); /* SPAN_KIND_INTERNAL */
	pb_fixed64(b, 7, (uint64_t)(sp->start + off));
	pb_fixed64(b, 8, (uint64_t)((sp->end ? sp->end : sp->start) + off));
	attr_str(b, 9, "code.function.name", sp->func);
	attr_str(b, 9, "code.file.path", sp->file);
	if (sp->line)
		attr_int(b, 9, "code.line.number", sp->line);
	const char *status = NULL;
	char msg[64];
	if (sp->kind == SPAN_TASK) {
		attr_str(b, 9, "scoped.task.state", NAME(task_states, sp->state));
		if (sp->wait >= 0)
			attr_double(b, 9, "scoped.task.queue_wait_s", (double)sp->wait / 1e9);
		if (sp->worker)
			attr_int(b, 9, "thread.id", sp->worker);
		if (sp->state == PROTO_TASK_FAILED) {
			attr_int(b, 9, "scoped.task.error", sp->error);
			snprintf(msg, sizeof msg, "the task failed: error %lld",
				 (long long)sp->error);
			status = msg;
		}
	} else {
		attr_str(b, 9, "scoped.scope.joiner", NAME(joiners, sp->joiner));
		if (sp->deadline) {
			attr_int(b, 9, "scoped.scope.deadline_unix_nano", sp->deadline + off);
			attr_bool(b, 9, "scoped.scope.late", sp->end > sp->deadline);
		}
		attr_str(b, 9, "scoped.scope.cancel_reason", NAME(reasons, sp->cancel_reason));
		if (sp->joined)
			attr_int(b, 9, "scoped.scope.join_result", sp->join_result);
		if (!sp->parent_kind && tr->truncated)
			attr_bool(b, 9, "scoped.tree.truncated", true);
		for (uint32_t i = 0; i < tr->nmarks; i++) {
			const struct mark *mk = &tr->marks[i];
			if (mk->scope != sp->id)
				continue;
			size_t ev = pb_begin(b);
			pb_fixed64(b, 1, (uint64_t)(mk->ts + off));
			pb_str(b, 2, mk->violation ? "scoped.violation" : "scoped.cancel");
			if (mk->violation) {
				attr_str(b, 3, "scoped.violation.kind", NAME(kinds, mk->code));
				snprintf(msg, sizeof msg, "structure violation: %s",
					 NAME(kinds, mk->code) ? NAME(kinds, mk->code) : "?");
				status = msg;
			} else {
				attr_str(b, 3, "scoped.cancel.reason", NAME(reasons, mk->code));
			}
			pb_end(b, 11, ev);
		}
	}
	if (status) {
		size_t st = pb_begin(b);
		pb_str(b, 2, status);
		pb_uint(b, 3, 2); /* STATUS_CODE_ERROR */
		pb_end(b, 15, st);
	}
	pb_end(b, 2, at);
}

/* Takes n spans from the rate budget; false when it has not got them. */
static bool rate_take(uint64_t n)
{
	int64_t now = loop_now_ns();
	if (tokens_ns) {
		tokens += (double)(now - tokens_ns) / 1e9 * (double)cfg.max_spans_per_s;
		if (tokens > (double)cfg.max_spans_per_s)
			tokens = (double)cfg.max_spans_per_s;
	}
	tokens_ns = now;
	if ((double)n > tokens)
		return false;
	tokens -= (double)n;
	return true;
}

uint64_t trace_take(struct model *m, const struct trace_resource *r, struct jbuf *b,
		    size_t max_bytes)
{
	struct trace_proc *tp = m->tally ? m->tally->trace : NULL;
	if (!tp || !tp->ready)
		return 0;
	uint64_t spans = 0;
	size_t rs = pb_begin(b);
	size_t res = pb_begin(b);
	attr_str(b, 1, "service.name", r->name);
	attr_int(b, 1, "process.pid", r->pid);
	attr_str(b, 1, "process.executable.path", r->exe);
	attr_str(b, 1, "process.runtime.name", "libscope");
	attr_str(b, 1, "process.runtime.version", r->runtime_version);
	pb_end(b, 1, res);
	size_t ss = pb_begin(b);
	size_t sc = pb_begin(b);
	pb_str(b, 1, SCOPED_SCOPE_NAME);
	pb_str(b, 2, SCOPED_VERSION);
	pb_end(b, 1, sc);
	while (tp->ready && b->len < max_bytes && !b->oom) {
		struct tree *tr = tp->ready;
		tp->ready = tr->next;
		if (!tp->ready)
			tp->tail = &tp->ready;
		if (!rate_take(tr->n)) {
			tree_free(tr, TRACE_DROP_RATE);
			continue;
		}
		uint8_t trace_id[16];
		if (tr->joined) {
			memcpy(trace_id, tr->trace_id, 16);
		} else {
			otelid_trace(trace_id, r->key, tr->id);
		}
		for (uint32_t i = 0; i < tr->n; i++)
			write_span(b, r, tr, trace_id, &tr->spans[i]);
		spans += tr->n;
		held -= tr->n;
		free(tr->spans); /* counted as exported once sent */
		free(tr);
	}
	pb_end(b, 2, ss);
	pb_end(b, 1, rs);
	return spans;
}
