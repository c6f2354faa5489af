/* model.c - builds and updates scopetop's model from the daemon's JSON:
 * every member is checked for type and size, unknown values degrade to
 * defaults, and a delta that names something unknown is applied as far as it
 * makes sense rather than dropped. */
#include "model_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- names ------------------------------------------------------------ */

/* The daemon's names of the wire's values, from the same lists. */
#define TM_NAME(NAME, value, json) [value] = json,
#define TM_NAME_UP(NAME, value, json, public) [(value) + 1] = json,
static const char *const task_states[] = {PROTO_TASK_STATES(TM_NAME)};
static const char *const scope_states[] = {
    [SS_OPEN] = "open",		  [SS_JOINING] = "joining", [SS_JOINED] = "joined",
    [SS_CANCELLED] = "cancelled", [SS_CLOSED] = "closed",
};
static const char *const joiners[] = {[JN_NONE] = "", PROTO_JOINERS(TM_NAME_UP)};
static const char *const roles[] = {PROTO_ROLES(TM_NAME)};
static const char *const warn_names[TM_W_KINDS] = {"straggler", "slow join", "past deadline",
						   "events lost", "violation"};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static int name_index(const char *const *names, size_t n, const char *s, int dflt)
{
	if (!s)
		return dflt;
	for (size_t i = 0; i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return (int)i;
	return dflt;
}

const char *tm_task_state_name(int s)
{
	return (s >= 0 && (size_t)s < NELEM(task_states)) ? task_states[s] : "?";
}
const char *tm_scope_state_name(int s)
{
	return (s >= 0 && (size_t)s < NELEM(scope_states)) ? scope_states[s] : "?";
}
const char *tm_joiner_name(int j)
{
	return (j >= 0 && (size_t)j < NELEM(joiners)) ? joiners[j] : "?";
}
const char *tm_warn_name(int i)
{
	return (i >= 0 && i < TM_W_KINDS) ? warn_names[i] : "?";
}

double tm_local_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double tm_model_now(const struct tm_model *m, double local_ms)
{
	return m->frozen_ms > 0 ? m->frozen_ms : local_ms + m->clock_offset_ms;
}

void tm_model_freeze(struct tm_model *m, double local_ms)
{
	if (m->frozen_ms <= 0)
		m->frozen_ms = local_ms + m->clock_offset_ms;
	m->gen++;
}

/* ---- entities ------------------------------------------------------------ */

static void thread_free(void *p)
{
	struct tm_thread *t = p;
	if (t)
		free(t->name);
	free(t);
}

static void pool_free(void *p)
{
	struct tm_pool *t = p;
	if (t)
		free(t->name);
	free(t);
}

static void scope_free(void *p)
{
	struct tm_scope *s = p;
	if (!s)
		return;
	free(s->name);
	free(s->cancel_reason);
	free(s->cancel_cause);
	free(s->join_result);
	tm_site_free(&s->site);
	for (int i = 0; i < s->nvalues; i++) {
		free(s->values[i].key);
		free(s->values[i].value);
	}
	free(s->values);
	free(s);
}

static void task_free(void *p)
{
	struct tm_task *t = p;
	if (t) {
		free(t->error);
		free(t->func);
		tm_site_free(&t->site);
	}
	free(t);
}

static void *thread_parse(json_t *o)
{
	struct tm_thread *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->tid = tm_jint(o, "tid");
	t->name = tm_jstr(o, "name");
	t->role = name_index(roles, NELEM(roles), tm_jraw(o, "role"), RL_OTHER);
	const char *st = tm_jraw(o, "state");
	t->live = !st || strcmp(st, "exited") != 0;
	t->pool = tm_jint(o, "pool");
	t->task = tm_jint(o, "task");
	t->started_ms = tm_jnum(o, "started_ms");
	return t;
}

static void *pool_parse(json_t *o)
{
	struct tm_pool *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->id = tm_jint(o, "id");
	p->name = tm_jstr(o, "name");
	p->core = tm_jint(o, "core");
	p->max = tm_jint(o, "max");
	p->size = tm_jint(o, "size");
	p->active = tm_jint(o, "active");
	p->largest = tm_jint(o, "largest");
	p->queued = tm_jint(o, "queued");
	p->completed = tm_jint(o, "completed");
	p->rejected = tm_jint(o, "rejected");
	p->capacity = tm_jint(o, "queue_capacity");
	tm_jstr_buf(o, "queue", p->queue, sizeof p->queue);
	tm_jstr_buf(o, "policy", p->policy, sizeof p->policy);
	return p;
}

static void values_read(struct tm_scope *s, json_t *o)
{
	json_t *vals = json_object_get(o, "values");
	if (!json_is_object(vals) || !json_object_size(vals))
		return;
	size_t n = json_object_size(vals);
	if (n > TM_MAX_VALUES)
		n = TM_MAX_VALUES;
	s->values = calloc(n, sizeof *s->values);
	if (!s->values)
		return;
	const char *k;
	json_t *v;
	json_object_foreach(vals, k, v)
	{
		if (s->nvalues >= (int)n)
			break;
		if (!json_is_string(v))
			continue;
		s->values[s->nvalues].key = tm_str_copy(k);
		s->values[s->nvalues].value = tm_str_copy(json_string_value(v));
		s->nvalues++;
	}
}

static void *scope_parse(json_t *o)
{
	struct tm_scope *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->id = tm_jint(o, "id");
	s->name = tm_jstr(o, "name");
	s->parent = tm_jint(o, "parent");
	s->parent_task = tm_jint(o, "parent_task");
	s->owner = tm_jint(o, "owner");
	s->pool = tm_jint(o, "pool");
	s->joiner = name_index(joiners, NELEM(joiners), tm_jraw(o, "joiner"), JN_NONE);
	s->state = name_index(scope_states, NELEM(scope_states), tm_jraw(o, "state"), SS_OPEN);
	s->cancel_reason = tm_jstr(o, "cancel_reason");
	s->cancel_cause = tm_jstr(o, "cancel_cause");
	s->cancel_origin = tm_jint(o, "cancel_origin");
	s->shielded_by = tm_jint(o, "shielded_by");
	s->shield_deadline_ms = tm_jnum(o, "shield_deadline_ms");
	s->handlers = tm_jint(o, "handlers");
	s->handlers_ran = tm_jint(o, "handlers_ran");
	s->join_result = tm_jtext(o, "join_result");
	s->deadline_ms = tm_jnum(o, "deadline_ms");
	s->opened_ms = tm_jnum(o, "opened_ms");
	s->join_began_ms = tm_jnum(o, "join_began_ms");
	s->closed_ms = tm_jnum(o, "closed_ms");
	tm_site_read(&s->site, o);
	values_read(s, o);
	return s;
}

static void *task_parse(json_t *o)
{
	struct tm_task *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->id = tm_jint(o, "id");
	t->scope = tm_jint(o, "scope");
	t->worker = tm_jint(o, "worker");
	t->state = name_index(task_states, NELEM(task_states), tm_jraw(o, "state"), TK_FORKED);
	t->error = tm_jtext(o, "error");
	t->func = tm_jstr(o, "func");
	tm_site_read(&t->site, o);
	t->forked_ms = tm_jnum(o, "forked_ms");
	t->started_ms = tm_jnum(o, "started_ms");
	t->ended_ms = tm_jnum(o, "ended_ms");
	return t;
}

/* One row per entity kind: where it lives and how it is read and freed. */
struct kind {
	const char *key;
	size_t table_off;
	void *(*parse)(json_t *o);
	void (*free)(void *p);
};

static const struct kind kinds[] = {
    {"threads", offsetof(struct tm_model, threads), thread_parse, thread_free},
    {"pools", offsetof(struct tm_model, pools), pool_parse, pool_free},
    {"scopes", offsetof(struct tm_model, scopes), scope_parse, scope_free},
    {"tasks", offsetof(struct tm_model, tasks), task_parse, task_free},
};

static struct tm_table *table_of(struct tm_model *m, const struct kind *k)
{
	return (struct tm_table *)((char *)m + k->table_off);
}

static void table_clear(struct tm_table *t, void (*fr)(void *))
{
	for (size_t i = 0; i < t->n; i++)
		fr(t->v[i]);
	t->n = 0;
	tmap_clear(&t->map);
}

static void table_free(struct tm_table *t, void (*fr)(void *))
{
	table_clear(t, fr);
	free(t->v);
	tmap_free(&t->map);
	memset(t, 0, sizeof *t);
}

/* Keeps what the model itself knows across an update of an entity. */
static void carry_over(struct tm_model *m, const struct kind *k, void *item, void *old, double now)
{
	if (k->parse == scope_parse) {
		struct tm_scope *s = item, *o = old;
		s->gen = m->gen;
		/* From the join's own start when the daemon knows it (older
		 * daemons do not say): a join that began before scopetop
		 * attached is slow from when it began. */
		if (s->state == SS_JOINING)
			s->joining_since_ms = s->join_began_ms > 0	      ? s->join_began_ms
					      : (o && o->state == SS_JOINING) ? o->joining_since_ms
									      : now;
	} else if (k->parse == task_parse) {
		((struct tm_task *)item)->gen = m->gen;
	} else if (k->parse == pool_parse) {
		((struct tm_pool *)item)->gen = m->gen;
	}
}

static int upsert_array(struct tm_model *m, const struct kind *k, json_t *arr, double now)
{
	if (!arr)
		return 0;
	if (!json_is_array(arr))
		return -EPROTO;
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		if (!json_is_object(o))
			continue;
		void *item = k->parse(o);
		if (!item)
			return -ENOMEM;
		if (*(int64_t *)item == 0) { /* no usable id: cannot be addressed */
			k->free(item);
			continue;
		}
		void *old;
		int rc = tm_table_put(table_of(m, k), item, &old);
		if (rc) {
			k->free(item);
			return rc;
		}
		carry_over(m, k, item, old, now);
		k->free(old);
	}
	return 0;
}

static void violations_read(struct tm_model *m, json_t *arr)
{
	size_t i;
	json_t *o;
	m->nviol = 0;
	json_array_foreach(arr, i, o)
	{
		if (m->nviol >= TM_MAX_VIOLATIONS)
			break;
		struct tm_violation *v = &m->viol[m->nviol++];
		v->scope = tm_jint(o, "scope");
		v->tid = tm_jint(o, "tid");
		v->error = (int)tm_jint(o, "error");
		tm_jstr_buf(o, "kind", v->kind, sizeof v->kind);
	}
}

/* ---- public ------------------------------------------------------------- */

void tm_model_init(struct tm_model *m)
{
	memset(m, 0, sizeof *m);
	m->join_threshold_ms = 1000;
	m->proc.complete = true;
}

void tm_model_free(struct tm_model *m)
{
	for (size_t i = 0; i < NELEM(kinds); i++)
		table_free(table_of(m, &kinds[i]), kinds[i].free);
	table_free(&m->stacks, tm_stack_free);
	tm_stack_free(m->crash);
	m->crash = NULL;
}

void tm_model_set_process(struct tm_model *m, json_t *p)
{
	if (!json_is_object(p))
		return;
	struct tm_proc *pr = &m->proc;
	pr->pid = tm_jint(p, "pid");
	pr->uid = tm_jint(p, "uid");
	tm_jstr_buf(p, "name", pr->name, sizeof pr->name);
	tm_jstr_buf(p, "exe", pr->exe, sizeof pr->exe);
	tm_jstr_buf(p, "runtime_version", pr->version, sizeof pr->version);
	tm_jstr_buf(p, "state", pr->state, sizeof pr->state);
	tm_jstr_buf(p, "exit_cause", pr->exit_cause, sizeof pr->exit_cause);
	/* Anything but live (exited, or an agent that went away) ends the view. */
	pr->exited = pr->state[0] && strcmp(pr->state, "live") != 0;
	if (!pr->exited)
		m->frozen_ms = 0;
	json_t *ec = json_object_get(p, "exit_code"), *es = json_object_get(p, "exit_signal");
	pr->has_exit_code = json_is_integer(ec);
	pr->exit_code = (int)tm_jint(p, "exit_code");
	pr->has_exit_signal = json_is_integer(es);
	pr->exit_signal = (int)tm_jint(p, "exit_signal");
	pr->scopes = tm_jint(p, "scopes");
	pr->tasks = tm_jint(p, "tasks");
	pr->threads = tm_jint(p, "threads");
	pr->events = tm_jint(p, "events");
	pr->lost = tm_jint(p, "lost");
	json_t *c = json_object_get(p, "complete");
	pr->complete = !json_is_false(c);
	pr->repaired = json_is_true(json_object_get(p, "repaired"));
	pr->start_ms = tm_jnum(p, "start_time_ms");
	pr->uptime_ms = tm_jnum(p, "uptime_ms");
	json_t *crash = json_object_get(p, "crash");
	pr->crash_tid = json_is_object(crash) ? tm_jint(crash, "tid") : 0;
	pr->crash_signal = tm_jint(crash, "signal");
	pr->crash_task = tm_jint(crash, "task");
	tm_stack_free(m->crash);
	m->crash = pr->crash_tid > 0 ? tm_stack_parse(crash, m->frozen_ms) : NULL;
	m->gen++;
}

int tm_model_load(struct tm_model *m, json_t *model, json_t *process, double local_ms, char *err,
		  size_t errlen)
{
	if (!json_is_object(model)) {
		snprintf(err, errlen, "the daemon sent a model that is not a JSON object");
		return -EPROTO;
	}
	for (size_t i = 0; i < NELEM(kinds); i++)
		table_clear(table_of(m, &kinds[i]), kinds[i].free);
	m->nviol = 0;
	json_t *now = json_object_get(model, "now_ms");
	m->clock_offset_ms = json_is_number(now) ? json_number_value(now) - local_ms : 0;
	m->gen++;
	m->frozen_ms = 0;
	tm_model_set_process(m, process);
	if (m->proc.exited) /* a snapshot of the dead: its clock stops at "now" */
		tm_model_freeze(m, local_ms);
	double t = tm_model_now(m, local_ms);
	for (size_t i = 0; i < NELEM(kinds); i++) {
		int rc = upsert_array(m, &kinds[i], json_object_get(model, kinds[i].key), t);
		if (rc) {
			snprintf(err, errlen, "cannot load the model's %s: %s", kinds[i].key,
				 rc == -EPROTO ? "not an array" : strerror(-rc));
			return rc;
		}
	}
	json_t *viol = json_object_get(model, "violations");
	if (json_is_array(viol))
		violations_read(m, viol);
	m->have_snapshot = true;
	tm_model_warnings(m, t);
	return 0;
}

int tm_model_apply_delta(struct tm_model *m, json_t *delta, double local_ms, char *err,
			 size_t errlen)
{
	if (!json_is_object(delta)) {
		snprintf(err, errlen, "the daemon sent a delta that is not a JSON object");
		return -EPROTO;
	}
	m->gen++;
	m->delta_gen = tm_jint(delta, "gen");
	tm_model_set_process(m, json_object_get(delta, "process"));
	double t = tm_model_now(m, local_ms);
	json_t *up = json_object_get(delta, "upsert"), *rm = json_object_get(delta, "remove");
	for (size_t i = 0; i < NELEM(kinds); i++) {
		int rc = upsert_array(m, &kinds[i], json_object_get(up, kinds[i].key), t);
		if (rc) {
			snprintf(err, errlen, "cannot apply the delta's %s: %s", kinds[i].key,
				 rc == -EPROTO ? "not an array" : strerror(-rc));
			return rc;
		}
		json_t *ids = json_object_get(rm, kinds[i].key);
		size_t j;
		json_t *id;
		json_array_foreach(ids, j, id)
		{
			if (json_is_integer(id))
				kinds[i].free(
				    tm_table_take(table_of(m, &kinds[i]), json_integer_value(id)));
		}
	}
	json_t *viol = json_object_get(up, "violations");
	if (json_is_array(viol))
		violations_read(m, viol);
	tm_model_warnings(m, t);
	return 0;
}

void tm_model_warnings(struct tm_model *m, double now)
{
	memset(m->warn_count, 0, sizeof m->warn_count);
	for (size_t i = 0; i < m->scopes.n; i++) {
		struct tm_scope *s = m->scopes.v[i];
		unsigned w = 0;
		bool live = s->state == SS_OPEN || s->state == SS_JOINING;
		if (s->state == SS_JOINING && s->joining_since_ms > 0 &&
		    now - s->joining_since_ms > m->join_threshold_ms)
			w |= TM_W_JOIN_SLOW;
		if (live && s->deadline_ms > 0 && now > s->deadline_ms)
			w |= TM_W_DEADLINE;
		/* Deltas carry no violation list, but the scope they cancel says so. */
		if (s->cancel_reason && !strcmp(s->cancel_reason, "violation"))
			w |= TM_W_VIOLATION;
		s->warn = w;
	}
	for (int i = 0; i < m->nviol; i++) {
		struct tm_scope *s = tm_scope_get(m, m->viol[i].scope);
		if (s)
			s->warn |= TM_W_VIOLATION;
		else
			m->warn_count[4]++; /* a violation whose scope is gone still counts */
	}
	for (size_t i = 0; i < m->tasks.n; i++) {
		struct tm_task *t = m->tasks.v[i];
		struct tm_scope *s = tm_scope_get(m, t->scope);
		bool cancelled = s && (s->state == SS_CANCELLED || s->cancel_reason);
		t->warn = (cancelled && t->state == TK_RUNNING) ? TM_W_STRAGGLER : 0;
		if (t->warn)
			m->warn_count[0]++;
	}
	for (size_t i = 0; i < m->scopes.n; i++) {
		struct tm_scope *s = m->scopes.v[i];
		for (int b = 0; b < TM_W_KINDS; b++)
			if (s->warn & (1u << b))
				m->warn_count[b]++;
	}
	if (m->proc.lost > 0 || !m->proc.complete)
		m->warn_count[3]++;
	m->warn_total = 0;
	for (int b = 0; b < TM_W_KINDS; b++)
		m->warn_total += m->warn_count[b];
}

struct tm_thread *tm_thread_get(const struct tm_model *m, int64_t tid)
{
	return tm_table_get(&m->threads, tid);
}
struct tm_pool *tm_pool_get(const struct tm_model *m, int64_t id)
{
	return tm_table_get(&m->pools, id);
}
struct tm_scope *tm_scope_get(const struct tm_model *m, int64_t id)
{
	return tm_table_get(&m->scopes, id);
}
struct tm_task *tm_task_get(const struct tm_model *m, int64_t id)
{
	return tm_table_get(&m->tasks, id);
}
