/* model.h - the live model of one instrumented process: scopes, tasks, threads,
 * pools, built by applying decoded wire events idempotently. */
#ifndef DAEMON_MODEL_H
#define DAEMON_MODEL_H

#include "idmap.h"
#include "jbuf.h"
#include "proto.h"
#include "strtab.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct advisor;
struct symbolizer;
struct tally;

enum ent_kind { ENT_THREAD = 0, ENT_POOL, ENT_SCOPE, ENT_TASK, ENT_KINDS };

/* Entity flags. */
#define EF_PLACEHOLDER 0x01u /* created by a reference before its own event */
#define EF_ENDED 0x02u	     /* task ended, scope closed, thread exited */
#define EF_JOINING 0x04u
#define EF_JOINED 0x08u
#define EF_CANCELLED 0x10u

/* Every entity starts with id and gen (idmap keys on id; gen is the model
 * generation of its last change, which subscriptions diff on). */
struct m_thread {
	uint64_t id, gen; /* id = tid */
	uint64_t pool, task;
	int64_t started, exited;
	char *name;
	uint32_t role, seen;
	uint32_t live_at; /* in model.live: index + 1, 0 when ended */
	uint8_t flags;
};

struct m_pool {
	uint64_t id, gen;
	char *name;
	struct proto_pool cfg;
	const char *resource; /* interned; POOL_LIMIT's, NULL: none declared */
	uint64_t resource_limit;
	uint32_t seen;
	uint32_t live_at;
	uint8_t flags;
};

struct m_value {
	char *key, *value;
};

struct m_scope {
	uint64_t id, gen;
	uint64_t parent, parent_task, pool;
	int64_t deadline, opened, closed, join_result;
	int64_t join_began; /* the first JOIN_BEGIN's ts (0: none) */
	char *name;
	const char *file, *func; /* interned */
	struct m_value *values;
	int32_t line;
	uint32_t owner, seen;
	uint32_t live_at;
	uint16_t nvalues;
	uint8_t joiner, cancel_reason, flags;
	/* SCOPE_CANCEL's cause (0: not sent, an older agent), SCOPE_FLAGS'
	 * bits, SCOPE_HANDLERS' counts. */
	uint8_t cancel_cause, scope_flags;
	uint32_t handlers, handlers_ran;
};

struct m_task {
	uint64_t id, gen;
	uint64_t scope;
	uint64_t fn; /* the body's address in the target, 0 unknown */
	int64_t forked, started, ended, error;
	const char *file, *func; /* interned */
	int32_t line;
	uint32_t worker, seen;
	uint32_t live_at;
	uint8_t state, flags;
};

/* A call site a SITE message defined, which SCOPE_OPEN and TASK_FORK name by
 * number.  file and func are interned (NULL when the peer sent them empty). */
struct m_site {
	uint64_t id; /* the site number, >= 1 (idmap keys on it) */
	const char *file, *func;
	int32_t line;
};

struct m_violation {
	uint64_t scope;
	int64_t error, ts;
	uint32_t kind, tid;
};

/* A WARNING: subject past limit by amount (proto/wire.h, PROTO_WARNINGS). */
struct m_warning {
	uint64_t subject, limit;
	int64_t amount, ts;
	uint32_t kind, tid;
};

struct m_removal {
	uint64_t gen, id;
	uint8_t kind;
};

struct m_expiry {
	int64_t when;
	uint64_t id;
	/* The entity when it was queued: a hint to prefetch, never
	 * dereferenced (it may have been freed since; the id decides). */
	const void *hint;
	uint8_t kind;
};

struct model_limits {
	size_t max_entities;	 /* scopes + tasks + threads + pools held */
	size_t max_string_bytes; /* interned site strings */
	size_t max_values;	 /* scoped values per scope */
	size_t max_owned_bytes;	 /* names, value keys and values held, in bytes */
	size_t max_sites;	 /* call sites defined (0: MODEL_MAX_SITES) */
	int64_t retain_ns;	 /* ended entities stay this long */
	size_t max_retained;	 /* and at most this many (0: MODEL_MAX_RETAINED) */
	bool tally;		 /* keep running counts for /metrics (tally.h) */
};

#define MODEL_MAX_OWNED_BYTES (64u << 20) /* names and values of one process */
#define MODEL_VIOLATIONS 64
#define MODEL_WARNINGS 64
/* Ended entities kept for the retention time, at most: a fork storm ends
 * hundreds of thousands of tasks a second, and keeping them all for 5 s made
 * the task map millions strong (every lookup a cache miss) and pressed the
 * entity cap.  Past it the oldest go first.  Not more: in a fork storm the
 * expiry of an entity that many ends ago is a cache miss on it and its map
 * slot (docs/perf-notes.md). */
#define MODEL_MAX_RETAINED 4096u
/* Call sites one process may define: far more than a program's source has
 * scope_open and scope_fork calls, few enough to bound the table (about
 * 4 MiB at most). */
#define MODEL_MAX_SITES 65536u

struct model {
	struct model_limits lim;
	struct idmap ents[ENT_KINDS];
	/* The entities of each kind that have not ended, so that the end of a
	 * snapshot looks at those only: the maps also hold every ended entity
	 * of the retention time, millions in a fork storm. */
	struct live_set {
		void **e;
		uint32_t n, cap;
	} live[ENT_KINDS];
	/* Freed entities kept for reuse (model.c, ent_alloc). */
	struct {
		void *head;
		uint32_t n;
	} spare[ENT_KINDS];
	struct strtab strings;
	/* Call sites by number.  The process's for its lifetime: snapshots
	 * neither clear nor need to repeat them (the agent does resend them). */
	struct idmap sites;
	uint64_t sites_refused; /* SITEs past max_sites or the string cap */
	size_t owned_bytes;	/* names, value keys and values held (max_owned_bytes) */
	uint64_t gen;
	/* Moves when a thread comes, goes or is named (what a dump's thread
	 * entries take from the model); unique across models, so that a new
	 * model never takes an old one's value. */
	uint64_t names_gen;
	uint64_t events, lost;
	bool complete, repaired, had_loss, in_snapshot;
	uint64_t snap_seq;
	uint32_t epoch;
	uint32_t exit_how; /* from PROCESS_EXIT: 1 exit, 2 signal, 0 unknown */
	int32_t exit_code;
	struct m_violation viol[MODEL_VIOLATIONS];
	uint64_t nviol; /* total seen; the last MODEL_VIOLATIONS are kept */
	struct m_warning warn[MODEL_WARNINGS];
	uint64_t nwarn; /* total seen; the last MODEL_WARNINGS are kept */
	/* Removals, for subscribers' deltas; entries at or below rm_floor are gone. */
	bool track_removals;
	struct m_removal *rm;
	size_t nrm, rmcap;
	uint64_t rm_floor;
	/* Ended entities in the order they ended, to expire after retain_ns. */
	struct m_expiry *exp;
	size_t exp_head, exp_n, exp_cap;
	char err[192]; /* why model_apply failed, or why the last SITE was refused */
	/* Names task bodies when rendering (NULL: every func is null). */
	struct symbolizer *sym;
	pid_t sym_pid;
	unsigned long long sym_starttime;
	/* The last thread and call site looked up by the task events (NULL:
	 * none): a fork storm names the same few of each, event after event.
	 * Unset when that thread or site leaves its map. */
	struct m_thread *thread_hint;
	const struct m_site *site_hint;
	/* Scopes and tasks whose SCOPE_OPEN or TASK_FORK named a call site
	 * not defined yet, named when its SITE comes (MODEL_PENDING_SITES at
	 * most; past it one is forgotten, each in turn by pend_turn): the
	 * agent's snapshot can name a site
	 * that a thread numbered during its walk, whose SITE then follows in
	 * that thread's ring. */
	struct m_pending_site {
		uint64_t id;
		uint32_t site;
		uint8_t kind;
	} * pend;
	size_t npend, pend_turn;
	struct tally *tally; /* NULL: no counts kept (--metrics off, or no memory) */
	struct advisor *adv; /* pool measurement (advisor.h); NULL: none, freed with the model */
};

void model_init(struct model *m, const struct model_limits *lim);
void model_free(struct model *m);

/* Applies one decoded message (snapshot markers, LOST, SITE, lifecycle
 * events; others are ignored).  now_ns is the daemon's monotonic clock, used
 * for retention.  Returns 0, or -ENOSPC (entity or value cap), -ENOMEM, with
 * m->err saying what; the model keeps everything it held.  A SITE that the
 * site or string cap leaves no room for is refused but is not an error: it
 * counts in m->sites_refused, m->err says why, and events naming it have no
 * site. */
int model_apply(struct model *m, const struct proto_msg *msg, int64_t now_ns);

/* Removes ended entities whose retention has passed. */
void model_sweep(struct model *m, int64_t now_ns);

/* Entities of a kind held now. */
static inline size_t model_count(const struct model *m, enum ent_kind k)
{
	return m->ents[k].n;
}

/* Forgets removal records up to gen (every subscriber has seen them). */
void model_trim_removals(struct model *m, uint64_t gen);

/* The agent's clock reference: ref_mono_ns and ref_realtime_ns are the same
 * instant, so a monotonic ts maps to realtime_ns = ts - mono + real. */
struct clockref {
	int64_t mono, real;
};

/* Lets rendering name each task's body (tasks[].func) through sym, the
 * symbolizer of process pid/starttime (borrowed: it must outlive the model or
 * be unset with NULL first). */
void model_set_symbolizer(struct model *m, struct symbolizer *sym, pid_t pid,
			  unsigned long long starttime);

/* Writes the model object of schemas/control.md.  since = 0: everything.
 * With since > 0 writes the delta members "upsert" and "remove" (into the
 * object the caller opened) of what changed after generation since. */
void model_render(const struct model *m, const struct clockref *clk, int64_t now_real_ns,
		  struct jbuf *b);
void model_render_delta(const struct model *m, const struct clockref *clk, uint64_t since,
			struct jbuf *b);
/* The model as a thread dump needs it: model_render's object without the
 * ended tasks and closed scopes kept for the retention time, but for those
 * something live names (a thread's task, an open scope's parent task, a
 * closed scope between an open one and its nearest open ancestor), so that
 * what is live is placed exactly as with all of them. */
void model_render_live(const struct model *m, const struct clockref *clk, int64_t now_real_ns,
		       struct jbuf *b);

/* Names used in the JSON (NULL when out of range). */
const char *model_task_state_name(unsigned state);
const char *model_scope_state_name(const struct m_scope *s);

#endif
