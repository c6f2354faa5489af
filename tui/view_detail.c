/* view_detail.c - the detail pane for the selected row: what it is, where
 * it sits (owner and parent chain), joiner, deadline, cancel reason, scoped
 * values, and the symbolized stack of its thread. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "rowfmt.h"
#include "text.h"

#define MAX_LINES 160
#define CHAIN_MAX 16

struct lines {
	char text[MAX_LINES][512];
	int role[MAX_LINES];
	int n;
	int stack_at; /* the first line of the stack section, 0: none */
};

static void add(struct lines *l, int role, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add(struct lines *l, int role, const char *fmt, ...)
{
	if (l->n >= MAX_LINES)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->text[l->n], sizeof l->text[l->n], fmt, ap);
	va_end(ap);
	l->role[l->n++] = role;
}

static const char *nz(const char *s)
{
	return s ? s : "-";
}

static const char *thread_name(const struct tm_model *m, int64_t tid)
{
	const struct tm_thread *t = tm_thread_get(m, tid);
	return t && t->name ? t->name : "?";
}

/* The scope that encloses scope s: through the subtask that opened it, or
 * the enclosing scope on the same thread. */
static const struct tm_scope *parent_scope(const struct tm_model *m, const struct tm_scope *s)
{
	const struct tm_task *t = s->parent_task ? tm_task_get(m, s->parent_task) : NULL;
	if (t)
		return tm_scope_get(m, t->scope);
	return s->parent && s->parent != s->id ? tm_scope_get(m, s->parent) : NULL;
}

static void chain(struct lines *l, const struct tm_model *m, const struct tm_scope *s)
{
	char b[512] = "";
	for (int i = 0; s && i < CHAIN_MAX; i++, s = parent_scope(m, s)) {
		size_t at = strlen(b);
		snprintf(b + at, sizeof b - at, "%s#%llu < ", s->name ? s->name : "scope",
			 (unsigned long long)(uint64_t)s->id);
	}
	add(l, TA_NORMAL, "  parent chain: %s<root>", b);
}

/* Scoped values visible from s: its own, then inherited ones not shadowed. */
static void values(struct lines *l, const struct tm_model *m, const struct tm_scope *s)
{
	const char *seen[TM_MAX_VALUES];
	int nseen = 0;
	char b[512] = "";
	for (int depth = 0; s && depth < CHAIN_MAX; depth++, s = parent_scope(m, s)) {
		for (int i = 0; i < s->nvalues && nseen < TM_MAX_VALUES; i++) {
			bool shadowed = false;
			for (int j = 0; j < nseen; j++)
				shadowed |= !strcmp(seen[j], s->values[i].key);
			if (shadowed)
				continue;
			seen[nseen++] = s->values[i].key;
			size_t at = strlen(b);
			snprintf(b + at, sizeof b - at, "%s=%s%s%s%s  ", s->values[i].key,
				 nz(s->values[i].value), depth ? " (from " : "",
				 depth ? (s->name ? s->name : "scope") : "", depth ? ")" : "");
		}
	}
	add(l, TA_NORMAL, "  scoped values: %s", nseen ? b : "none");
}

/* Where the scope's cancellation began, the shield over it, and its
 * cancellation handlers, when any of them is there to show. */
static void cancel_info(struct lines *l, const struct tm_scope *s, double now)
{
	char c[96] = "", sh[96] = "", h[64] = "", dur[32];
	if (!s)
		return;
	if (s->cancel_cause && s->cancel_origin && s->cancel_origin != s->id)
		snprintf(c, sizeof c, "  cancelled by: %s at scope #%lld", s->cancel_cause,
			 (long long)s->cancel_origin);
	if (s->shielded_by) {
		if (s->shield_deadline_ms > 0)
			ttx_duration(dur, sizeof dur, s->shield_deadline_ms - now);
		snprintf(sh, sizeof sh, "  shielded by: scope #%lld%s%s", (long long)s->shielded_by,
			 s->shield_deadline_ms > 0 ? ", cleanup deadline " : "",
			 s->shield_deadline_ms > 0 ? dur : "");
	}
	if (s->handlers || s->handlers_ran)
		snprintf(h, sizeof h, "  cancel handlers: %lld armed, %lld ran",
			 (long long)s->handlers, (long long)s->handlers_ran);
	if (c[0] || sh[0] || h[0])
		add(l, TA_NORMAL, "%s%s%s", c, sh, h);
}

static void deadline(struct lines *l, const struct tm_model *m, const struct tm_scope *s,
		     double now)
{
	char d[64] = "none", dur[32];
	if (s && s->deadline_ms > 0) {
		ttx_duration(dur, sizeof dur, s->deadline_ms - now);
		if (s->deadline_ms < now)
			snprintf(d, sizeof d, "passed %s ago", dur + 1);
		else
			snprintf(d, sizeof d, "in %s", dur);
	}
	(void)m;
	add(l, TA_NORMAL, "  deadline: %s   cancel reason: %s   joiner: %s", d,
	    s ? nz(s->cancel_reason) : "-", s && s->joiner ? tm_joiner_name(s->joiner) : "-");
	cancel_info(l, s, now);
}

static void stack(struct lines *l, const struct app *a, int64_t tid, const char *who)
{
	const struct tm_model *m = &a->model;
	if (!tid) {
		add(l, TA_DIM, "no thread runs it now, so there is no stack to show");
		return;
	}
	const struct tm_stack *st = tm_stack_get(m, tid);
	if (!st) {
		add(l, TA_DIM, "stack of %s %lld \"%s\": %s", who, (long long)tid,
		    thread_name(m, tid), a->exited ? "none (the process exited)" : "fetching...");
		return;
	}
	char age[32];
	ttx_duration(age, sizeof age, tm_model_now(m, a->now_local) - st->fetched_ms);
	add(l, TA_TITLE, "stack of %s %lld \"%s\" %s%s%s (%s ago)", who, (long long)tid,
	    thread_name(m, tid), nz(st->state), st->blocked_in ? " in " : "",
	    st->blocked_in ? st->blocked_in : "", age);
	if (st->lock_owner)
		add(l, TA_WARN, "  waiting to lock <%s> owned by tid %lld \"%s\"", st->lock_addr,
		    (long long)st->lock_owner,
		    st->lock_owner_name ? st->lock_owner_name : thread_name(m, st->lock_owner));
	if (st->error)
		add(l, TA_WARN, "  stack error: %s", st->error);
	for (int i = 0; i < st->nframes; i++)
		add(l, TA_NORMAL, "  at %s", st->frames[i]);
	if (!st->nframes && !st->error)
		add(l, TA_DIM, "  (no frames)");
}

static void task_lines(struct lines *l, const struct app *a, const struct tr_row *r, double now)
{
	const struct tm_model *m = &a->model;
	const struct tm_task *t = r->ent;
	const struct tm_scope *s = tm_scope_get(m, t->scope);
	char age[32] = "-", badges[128];
	double from = t->started_ms ? t->started_ms : t->forked_ms;
	if (from > 0)
		ttx_duration(age, sizeof age, (t->ended_ms > 0 ? t->ended_ms : now) - from);
	rf_badges(t->warn, a->o.ascii, badges, sizeof badges);
	add(l, TA_TITLE, "task %llu %s%s  %s (%s)", (unsigned long long)(uint64_t)t->id,
	    tr_task_name(m, t), t->func && t->func[0] ? "()" : "", tr_state_name(r->state),
	    tm_task_state_name(t->state));
	if (r->group_n > 1)
		add(l, TA_NORMAL, "  %u identical subtasks (same fork site, state and stack)",
		    r->group_n);
	add(l, TA_NORMAL, "  forked at %s:%d (in %s)   %s %s   worker %lld \"%s\"",
	    nz(t->site.file), t->site.line, nz(t->site.func), t->ended_ms > 0 ? "ran" : "age", age,
	    (long long)t->worker, t->worker ? thread_name(m, t->worker) : "-");
	struct rf_times tt;
	rf_task_times(m, t, now, &tt);
	if (tt.started) {
		char q[32], ran[32], busy[32], join[32];
		ttx_duration(q, sizeof q, tt.queued);
		ttx_duration(ran, sizeof ran, tt.ran);
		ttx_duration(busy, sizeof busy, tt.busy);
		ttx_duration(join, sizeof join, tt.joining);
		add(l, TA_NORMAL, "  time: queued %s, ran %s = busy %s + joining %s (%.0f%% busy)",
		    q, ran, busy, join, tt.ran > 0 ? 100.0 * tt.busy / tt.ran : 100.0);
	}
	if (t->error)
		add(l, TA_BAD, "  error: %s", t->error);
	if (badges[0])
		add(l, TA_WARN, "  warnings:%s", badges);
	if (s) {
		add(l, TA_NORMAL, "  in scope %llu \"%s\", owner %lld \"%s\"",
		    (unsigned long long)(uint64_t)s->id, nz(s->name), (long long)s->owner,
		    thread_name(m, s->owner));
		chain(l, m, s);
	}
	deadline(l, m, s, now);
	if (s)
		values(l, m, s);
	l->stack_at = l->n;
	stack(l, a, t->state == TK_RUNNING ? t->worker : 0, "worker");
}

/* How the scope's subtasks stand, by state: what a join is waiting for. */
static void subtasks(struct lines *l, const struct tm_model *m, const struct tm_scope *s)
{
	unsigned count[TK_UNAVAILABLE + 1] = {0}, total = 0;
	for (size_t i = 0; i < m->tasks.n; i++) {
		const struct tm_task *t = m->tasks.v[i];
		if (t->scope == s->id && t->state >= 0 && t->state <= TK_UNAVAILABLE) {
			count[t->state]++;
			total++;
		}
	}
	char b[256] = "";
	for (int st = 0; st <= TK_UNAVAILABLE; st++) {
		if (!count[st])
			continue;
		size_t at = strlen(b);
		snprintf(b + at, sizeof b - at, "%s%u %s", at ? ", " : "", count[st],
			 tm_task_state_name(st));
	}
	add(l, TA_NORMAL, "  subtasks: %u%s%s%s", total, total ? " (" : "", b, total ? ")" : "");
}

static void scope_lines(struct lines *l, const struct app *a, const struct tr_row *r, double now)
{
	const struct tm_model *m = &a->model;
	const struct tm_scope *s = r->ent;
	char age[32] = "-", badges[128];
	if (s->opened_ms > 0)
		ttx_duration(age, sizeof age,
			     (s->closed_ms > 0 ? s->closed_ms : now) - s->opened_ms);
	rf_badges(s->warn, a->o.ascii, badges, sizeof badges);
	add(l, TA_TITLE, "scope %llu \"%s\"  %s (%s)", (unsigned long long)(uint64_t)s->id,
	    nz(s->name), tr_state_name(r->state), tm_scope_state_name(s->state));
	add(l, TA_NORMAL, "  opened at %s:%d (in %s)   %s %s   owner %lld \"%s\"", nz(s->site.file),
	    s->site.line, nz(s->site.func), s->closed_ms > 0 ? "lived" : "open for", age,
	    (long long)s->owner, thread_name(m, s->owner));
	if (badges[0])
		add(l, TA_WARN, "  warnings:%s", badges);
	for (int i = 0; i < m->nviol; i++)
		if (m->viol[i].scope == s->id)
			add(l, TA_WARN, "  violation: %s (error %d) on thread %lld",
			    m->viol[i].kind, m->viol[i].error, (long long)m->viol[i].tid);
	if (s->join_result)
		add(l, TA_NORMAL, "  join result: %s", s->join_result);
	subtasks(l, m, s);
	chain(l, m, s);
	deadline(l, m, s, now);
	values(l, m, s);
	bool live = s->state == SS_OPEN || s->state == SS_JOINING;
	l->stack_at = l->n;
	stack(l, a, live ? s->owner : 0, "owner");
}

static void root_lines(struct lines *l, const struct app *a, double now)
{
	const struct tm_proc *p = &a->model.proc;
	char up[32];
	/* From the process's own start, on the clock that keeps running (and
	 * stops when the process ended), not the uptime of the first reply. */
	ttx_duration(up, sizeof up, p->start_ms > 0 ? now - p->start_ms : p->uptime_ms);
	add(l, TA_TITLE, "process %lld \"%s\"  %s", (long long)p->pid, p->name,
	    p->exited ? "exited" : "live");
	add(l, TA_NORMAL, "  exe %s", p->exe[0] ? p->exe : "?");
	add(l, TA_NORMAL, "  libscope %s   uptime %s   events %lld   lost %lld", p->version, up,
	    (long long)p->events, (long long)p->lost);
	add(l, p->complete ? TA_NORMAL : TA_WARN, "  model %s%s",
	    p->complete ? "complete" : "INCOMPLETE (events lost, waiting for a repair)",
	    p->repaired ? ", repaired after a loss" : "");
	if (p->exited && p->has_exit_code)
		add(l, TA_WARN, "  exit code %d", p->exit_code);
	if (p->exited && p->has_exit_signal)
		add(l, TA_WARN, "  killed by signal %d", p->exit_signal);
	/* A crash: the thread, the task it ran, and where it was. */
	if (p->crash_tid > 0) {
		add(l, TA_WARN, "  crashed: signal %lld on thread #%lld, running task %llu",
		    (long long)p->crash_signal, (long long)p->crash_tid,
		    (unsigned long long)(uint64_t)p->crash_task);
		for (int i = 0; a->model.crash && i < a->model.crash->nframes; i++)
			add(l, TA_NORMAL, "    at %s", a->model.crash->frames[i]);
	}
	for (unsigned b = 0; b < TM_W_KINDS; b++)
		if (a->model.warn_count[b])
			add(l, TA_WARN, "  %u %s", a->model.warn_count[b], tm_warn_name((int)b));
}

static double jnum(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : -1;
}

/* The last 30 values of a JSON array of numbers as a sparkline (block
 * characters, or ASCII), scaled to their largest. */
static void sparkline(char *buf, size_t len, const json_t *arr, bool ascii)
{
	static const char *const blocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
					     "\u2585", "\u2586", "\u2587", "\u2588"};
	static const char plain[] = "_.-:=+*#";
	size_t n = json_array_size(arr), from = n > 30 ? n - 30 : 0, o = 0;
	double top = 0;
	for (size_t i = from; i < n; i++)
		if (json_number_value(json_array_get(arr, i)) > top)
			top = json_number_value(json_array_get(arr, i));
	buf[0] = 0;
	for (size_t i = from; i < n && o + 4 < len; i++) {
		double v = json_number_value(json_array_get(arr, i));
		int k = top > 0 ? (int)(v / top * 7.999) : 0;
		k = k < 0 ? 0 : k > 7 ? 7 : k;
		o += (size_t)snprintf(buf + o, len - o, "%s",
				      ascii ? (char[]){plain[k], 0} : blocks[k]);
	}
}

/* The advisor's figures and advice for pool id, when the last "advise"
 * reply (of this process) has them. */
static void advice_lines(struct lines *l, const struct app *a, int64_t id)
{
	const json_t *pools = json_object_get(a->advice, "pools"), *p = NULL;
	for (size_t i = 0; a->advice_pid == a->pid && i < json_array_size(pools); i++)
		if (jnum(json_array_get(pools, i), "id") == (double)id)
			p = json_array_get(pools, i);
	if (!p) {
		add(l, TA_DIM, "  advice: fetching...");
		return;
	}
	const char *verdict = json_string_value(json_object_get(p, "verdict"));
	const char *conf = json_string_value(json_object_get(p, "confidence"));
	const char *reason = json_string_value(json_object_get(p, "reason"));
	add(l, TA_NORMAL, "  utilization %.0f%%, runnable %.0f%%, %.1f tasks/s in, %.1f out",
	    100 * jnum(p, "worker_utilization"), 100 * jnum(p, "runnable_share"),
	    jnum(p, "arrival_per_s"), jnum(p, "throughput_per_s"));
	if (jnum(p, "wait_compute_ratio") >= 0)
		add(l, TA_NORMAL,
		    "  W/C %.3g: a task computes %.3g ms, waits %.3g ms, runnable %.3g ms",
		    jnum(p, "wait_compute_ratio"), jnum(p, "cpu_ms"), jnum(p, "wait_ms"),
		    jnum(p, "runnable_ms"));
	char spark[256];
	sparkline(spark, sizeof spark, json_object_get(p, "queue_wait_us_per_s"), a->o.ascii);
	add(l, TA_NORMAL, "  queue wait p50 %.3g ms, p99 %.3g ms  %s", jnum(p, "queue_wait_p50_ms"),
	    jnum(p, "queue_wait_p99_ms"), spark);
	if (jnum(p, "n_formula") >= 0)
		add(l, TA_NORMAL, "  N = Ncpu x U x (1 + W/C) = %.1f", jnum(p, "n_formula"));
	bool warn = verdict && (!strcmp(verdict, "saturated") || !strcmp(verdict, "starvation") ||
				json_is_true(json_object_get(p, "queue_growing")));
	if (jnum(p, "recommended") > 0 && verdict &&
	    (!strcmp(verdict, "grow") || !strcmp(verdict, "shrink")))
		add(l, warn ? TA_WARN : TA_TITLE, "  advice: %s to %.0f threads (%s)", verdict,
		    jnum(p, "recommended"), nz(conf));
	else
		add(l, warn ? TA_WARN : TA_TITLE, "  advice: %s (%s)", nz(verdict), nz(conf));
	add(l, warn ? TA_WARN : TA_NORMAL, "    %s", nz(reason));
}

static void pool_lines(struct lines *l, const struct app *a, const struct tr_row *r)
{
	if (r->kind == TR_POOLS) {
		add(l, TA_TITLE, "%zu pools", a->model.pools.n);
		return;
	}
	const struct tm_pool *p = r->ent;
	add(l, TA_TITLE, "pool %llu \"%s\"", (unsigned long long)(uint64_t)p->id, nz(p->name));
	add(l, TA_NORMAL, "  threads %lld (core %lld, max %lld, largest %lld), active %lld",
	    (long long)p->size, (long long)p->core, (long long)p->max, (long long)p->largest,
	    (long long)p->active);
	add(l, TA_NORMAL, "  queue %s (capacity %lld), queued %lld, completed %lld, rejected %lld",
	    p->queue, (long long)p->capacity, (long long)p->queued, (long long)p->completed,
	    (long long)p->rejected);
	add(l, TA_NORMAL, "  policy %s", p->policy);
	advice_lines(l, a, p->id);
}

int64_t detail_tid(const struct app *a)
{
	const struct tr_row *r = app_selected(a);
	if (!r)
		return 0;
	if (r->kind == TR_TASK) {
		const struct tm_task *t = r->ent;
		return t->state == TK_RUNNING ? t->worker : 0;
	}
	if (r->kind == TR_SCOPE) {
		const struct tm_scope *s = r->ent;
		return (s->state == SS_OPEN || s->state == SS_JOINING) ? s->owner : 0;
	}
	return 0;
}

void detail_draw(struct app *a, int y0, int h)
{
	static struct lines l;
	const struct tr_row *r = app_selected(a);
	double now = tm_model_now(&a->model, a->now_local);
	l.n = l.stack_at = 0;
	if (!r)
		add(&l, TA_DIM, "nothing selected");
	else if (r->kind == TR_TASK)
		task_lines(&l, a, r, now);
	else if (r->kind == TR_SCOPE)
		scope_lines(&l, a, r, now);
	else if (r->kind == TR_ROOT)
		root_lines(&l, a, now);
	else
		pool_lines(&l, a, r);
	/* A pane too short for everything keeps the first two lines (what and
	 * where) and as much of the stack as fits, dropping the lines between
	 * them: at 80x24 the stack is what the pane is for. */
	int keep = l.n, skip = 0;
	if (l.n > h && l.stack_at > 1) {
		int want = h - (l.n - l.stack_at);
		keep = want < 2 ? 2 : want;
		if (keep > l.stack_at)
			keep = l.stack_at;
		skip = l.stack_at - keep;
	}
	for (int i = 0; i < h; i++) {
		int at = i < keep ? i : i + skip;
		const char *text = at < l.n ? l.text[at] : "";
		int role = at < l.n ? l.role[at] : TA_NORMAL;
		/* The first line is the rule between tree and pane; below it a title
		 * stands out as a match does. */
		if (i == 0)
			role = TA_TITLE;
		else if (role == TA_TITLE)
			role = TA_MATCH;
		draw_line(a, y0 + i, text, role);
	}
}
