/* model.h - scopetop's copy of one process's live model (schemas/control.md
 * "The model"): built from a snapshot, kept current by deltas, plus the
 * thread stacks fetched for the detail pane and the warnings derived from
 * both.  No drawing here: the views read it, the data source writes it. */
#ifndef TUI_MODEL_H
#define TUI_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "tmap.h"

/* Caps on what the daemon (a peer) can make us hold. */
#define TM_MAX_ITEMS 500000 /* per kind: threads, pools, scopes, tasks */
#define TM_MAX_STR 256	    /* bytes kept of any string */
#define TM_MAX_FRAMES 64    /* frames kept per stack */
#define TM_MAX_VIOLATIONS 256
#define TM_MAX_VALUES 32 /* scoped values kept per scope */

/* The wire's task states and roles (proto/wire.h), which the daemon names
 * in its JSON: TK_FAILED = PROTO_TASK_FAILED, RL_WORKER = PROTO_ROLE_WORKER. */
#define TM_TK(NAME, value, json) TK_##NAME = PROTO_TASK_##NAME,
#define TM_RL(NAME, value, json) RL_##NAME = PROTO_ROLE_##NAME,
enum tm_task_state { PROTO_TASK_STATES(TM_TK) };
enum tm_scope_state { SS_OPEN, SS_JOINING, SS_JOINED, SS_CANCELLED, SS_CLOSED };
/* JN_NONE: not known; then the wire's joiners, one up. */
enum tm_joiner {
	JN_NONE,
	JN_ALL = PROTO_JOINER_ALL_SUCCESSFUL + 1,
	JN_ANY = PROTO_JOINER_ANY_SUCCESSFUL + 1,
	JN_AWAIT = PROTO_JOINER_AWAIT_ALL + 1,
	JN_UNTIL = PROTO_JOINER_UNTIL + 1,
	JN_CUSTOM = PROTO_JOINER_CUSTOM + 1,
};
enum tm_role { PROTO_ROLES(TM_RL) };

/* Warning bits, on entities and counted in the header. */
enum {
	TM_W_STRAGGLER = 1u << 0, /* task still running after its scope was cancelled */
	TM_W_JOIN_SLOW = 1u << 1, /* a join has waited longer than the threshold */
	TM_W_DEADLINE = 1u << 2,  /* open scope past its deadline */
	TM_W_LOST = 1u << 3,	  /* the model had a gap (events lost) */
	TM_W_VIOLATION = 1u << 4, /* structure violation */
};
#define TM_W_KINDS 5

struct tm_site {
	char *file, *func; /* new, may be NULL */
	int line;
};

struct tm_kv {
	char *key, *value;
};

struct tm_thread {
	int64_t tid;
	char *name;
	int role;
	bool live;
	int64_t pool, task; /* 0: none */
	double started_ms;
};

struct tm_pool {
	int64_t id;
	char *name;
	int64_t core, max, size, active, largest, queued, completed, rejected, capacity;
	char queue[16], policy[16];
	uint64_t gen;
};

struct tm_scope {
	int64_t id;
	char *name;
	int64_t parent, parent_task, owner, pool; /* 0: none */
	int joiner, state;
	char *cancel_reason, *join_result;	  /* NULL: none */
	double deadline_ms, opened_ms, closed_ms; /* 0: none */
	double join_began_ms;			  /* the daemon's: when the join began (0: none) */
	double joining_since_ms; /* join_began_ms, else when we first saw it joining */
	struct tm_site site;
	struct tm_kv *values;
	int nvalues;
	unsigned warn;
	uint64_t gen; /* model gen of the last change */
	/* Where a cancellation began (NULL, 0: not said), the shield over the
	 * scope and its deadline (0: none), its cancellation handlers. */
	char *cancel_cause;
	int64_t cancel_origin, shielded_by, handlers, handlers_ran;
	double shield_deadline_ms;
};

struct tm_task {
	int64_t id, scope, worker;
	int state;
	char *error;
	char *func; /* the body the subtask runs, NULL when the daemon could not name it */
	struct tm_site site;
	double forked_ms, started_ms, ended_ms;
	unsigned warn;
	uint64_t gen;
};

struct tm_stack {
	int64_t tid;
	char *state, *blocked_in, *error;
	/* The mutex it waits to lock and the tid of the thread that owns it
	 * (the daemon's "waiting_to_lock"); NULL and 0 when none is known. */
	char *lock_addr, *lock_owner_name;
	int64_t lock_owner;
	char **frames; /* "func (file:line)" or "0xaddr module+off" */
	int nframes;
	uint64_t hash; /* of the frames, for grouping identical stacks */
	double fetched_ms;
};

struct tm_violation {
	int64_t scope, tid;
	char kind[32];
	int error;
};

struct tm_proc {
	int64_t pid, uid;
	char name[64], exe[TM_MAX_STR], version[32];
	char state[16], exit_cause[32]; /* "live", "exited", "detached"...; why it ended */
	bool exited, complete, repaired;
	bool has_exit_code, has_exit_signal;
	int exit_code, exit_signal;
	int64_t scopes, tasks, threads, events, lost;
	double start_ms, uptime_ms;
	/* What crashed it, when the daemon knows (crash_tid 0: nothing). */
	int64_t crash_tid, crash_signal, crash_task;
};

/* A set of entities by id: dense pointer array + id map. */
struct tm_table {
	void **v;
	size_t n, cap;
	struct tmap map;
};

struct tm_model {
	struct tm_proc proc;
	struct tm_table threads, pools, scopes, tasks, stacks;
	struct tm_stack *crash; /* the crashing thread's stack, or NULL */
	struct tm_violation viol[TM_MAX_VIOLATIONS];
	int nviol;
	double clock_offset_ms; /* model time = local realtime ms + offset */
	double frozen_ms;	/* nonzero once the process ended: time stops there */
	double join_threshold_ms;
	uint64_t gen;	   /* bumps on every change: views rebuild on it */
	int64_t delta_gen; /* the daemon's gen of the last message applied */
	bool have_snapshot;
	unsigned warn_count[TM_W_KINDS];
	unsigned warn_total;
};

void tm_model_init(struct tm_model *m);
void tm_model_free(struct tm_model *m);

/* Replaces everything with a snapshot: model and process are borrowed JSON
 * objects as in a `tree` reply or a subscribe snapshot.  local_ms is the
 * local realtime clock in ms (tm_local_ms()).  0, or -EPROTO/-ENOMEM with a
 * sentence in err.  Bad members are skipped, never trusted. */
int tm_model_load(struct tm_model *m, json_t *model, json_t *process, double local_ms, char *err,
		  size_t errlen);

/* Applies one `delta` message (borrowed).  0, or -EPROTO/-ENOMEM with err. */
int tm_model_apply_delta(struct tm_model *m, json_t *delta, double local_ms, char *err,
			 size_t errlen);

/* Updates the process summary (borrowed). */
void tm_model_set_process(struct tm_model *m, json_t *process);

/* Stores the `stacks` array of a stacks reply (borrowed). */
void tm_model_set_stacks(struct tm_model *m, json_t *stacks, double local_ms);

/* Recomputes every warning bit and the header counts at model time now_ms. */
void tm_model_warnings(struct tm_model *m, double now_ms);

/* Model time for a local realtime reading. */
double tm_model_now(const struct tm_model *m, double local_ms);

/* Stops the model's clock (the process ended): ages and deadlines keep the
 * values they had then.  A later live process summary restarts it. */
void tm_model_freeze(struct tm_model *m, double local_ms);

/* Local realtime clock in milliseconds. */
double tm_local_ms(void);

/* Lookups: borrowed until the next load/delta, NULL when absent. */
struct tm_thread *tm_thread_get(const struct tm_model *m, int64_t tid);
struct tm_pool *tm_pool_get(const struct tm_model *m, int64_t id);
struct tm_scope *tm_scope_get(const struct tm_model *m, int64_t id);
struct tm_task *tm_task_get(const struct tm_model *m, int64_t id);
struct tm_stack *tm_stack_get(const struct tm_model *m, int64_t tid);

/* Names of the enums, for display and filtering.  Static strings. */
const char *tm_task_state_name(int s);
const char *tm_scope_state_name(int s);
const char *tm_joiner_name(int j);
const char *tm_warn_name(int bit_index);

#endif
