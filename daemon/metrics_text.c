/* metrics_text.c - what scoped knows, in the Prometheus text exposition
 * format (0.0.4): one family at a time, every label value escaped. */
#include "metrics.h"

#include "advisor.h"
#include "loop.h"
#include "trace.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The wire's value lists (proto/wire.h), as value and name. */
struct named {
	unsigned value;
	const char *name;
};
#define NAMED(NAME, value, json) {value, json},
static const struct named task_states[] = {PROTO_TASK_STATES(NAMED)};
static const struct named cancel_reasons[] = {PROTO_CANCEL_REASONS(NAMED)};
static const struct named violations[] = {PROTO_VIOLATIONS(NAMED)};
#define FITS(v, bound) _Static_assert((v) < (bound), "a wire value has no tally slot");
#define FITS_STATE(NAME, value, json) FITS(value, TALLY_STATES)
#define FITS_REASON(NAME, value, json) FITS(value, TALLY_REASONS)
#define FITS_KIND(NAME, value, json) FITS(value, TALLY_KINDS)
PROTO_TASK_STATES(FITS_STATE)
PROTO_CANCEL_REASONS(FITS_REASON)
PROTO_VIOLATIONS(FITS_KIND)
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define LABELS 768	/* one sample's labels, escaped */
#define LABEL_VALUE 128 /* bytes of a peer's string kept in a label value */

static void out(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct jbuf *b, const char *fmt, ...)
{
	char small[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		jb_raw(b, small, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);
	if (!big) {
		b->oom = true;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	jb_raw(b, big, (size_t)n);
	free(big);
}

static void family(struct jbuf *b, const char *name, const char *type, const char *help)
{
	out(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80	     ? 1
		     : (s[0] & 0xe0) == 0xc0 ? 2
		     : (s[0] & 0xf0) == 0xe0 ? 3
		     : (s[0] & 0xf8) == 0xf0 ? 4
					     : 0;
	if (!len || len > n || (len == 2 && s[0] < 0xc2))
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

/* Appends key="value" to labels (after a comma when it is not empty), value
 * escaped as the format asks (\\, \", \n), cut to LABEL_VALUE bytes, with
 * every byte that is not valid UTF-8 or is a control character as '?'. */
static void label(char *labels, const char *key, const char *value)
{
	size_t at = strlen(labels);
	char v[LABEL_VALUE * 2 + 1];
	size_t o = 0;
	const unsigned char *s = (const unsigned char *)(value ? value : "");
	size_t n = strlen((const char *)s);
	if (n > LABEL_VALUE)
		n = LABEL_VALUE;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(s + i, n - i);
		if (len == 1 && (s[i] == '\\' || s[i] == '"' || s[i] == '\n')) {
			v[o++] = '\\';
			v[o++] = s[i] == '\n' ? 'n' : (char)s[i];
		} else if (len == 1 && s[i] < 0x20) {
			v[o++] = '?';
		} else if (!len) {
			v[o++] = '?';
			len = 1;
		} else {
			memcpy(v + o, s + i, len);
			o += len;
		}
		i += len;
	}
	v[o] = 0;
	snprintf(labels + at, LABELS - at, "%s%s=\"%s\"", at ? "," : "", key, v);
}

static void sample(struct jbuf *b, const char *name, const char *labels, uint64_t v)
{
	out(b, "%s%s%s%s %" PRIu64 "\n", name, *labels ? "{" : "", labels, *labels ? "}" : "", v);
}

/* Nanoseconds as seconds, exactly, without trailing zeros. */
static void seconds(char *buf, size_t len, int64_t ns)
{
	int64_t s = ns / 1000000000, f = ns % 1000000000;
	if (ns < 0) {
		snprintf(buf, len, "%.9f", (double)ns / 1e9);
		return;
	}
	int n = snprintf(buf, len, "%" PRId64 ".%09" PRId64, s, f);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = 0;
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = 0;
}

static void histogram(struct jbuf *b, const char *name, const char *labels,
		      const struct tally_hist *h)
{
	char l[LABELS], sec[48];
	uint64_t cum = 0;
	for (size_t i = 0; i <= TALLY_BUCKETS; i++) {
		cum += h->bucket[i];
		snprintf(l, sizeof l, "%s", labels);
		if (i < TALLY_BUCKETS)
			seconds(sec, sizeof sec, tally_bounds_ns[i]);
		label(l, "le", i < TALLY_BUCKETS ? sec : "+Inf");
		out(b, "%s_bucket{%s} %" PRIu64 "\n", name, l, cum);
	}
	seconds(sec, sizeof sec, h->sum_ns);
	out(b, "%s_sum%s%s%s %s\n", name, *labels ? "{" : "", labels, *labels ? "}" : "", sec);
	out(b, "%s_count%s%s%s %" PRIu64 "\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
	    h->count);
}

/* ---- processes */

/* The processes shown: a pid names one series, so of the entries that share
 * a pid (an exited process kept, a new one reusing its pid) only the one
 * proc_find() picks. */
static bool shown(struct daemon *d, struct proc *p)
{
	return proc_find(d, p->pid) == p;
}

#define EACH_PROC(d, p)                                                                            \
	for (struct proc *p = (d)->procs; p; p = p->next)                                          \
		if (shown(d, p))

static void pid_label(char *l, const struct proc *p)
{
	snprintf(l, LABELS, "pid=\"%d\"", (int)p->pid);
}

/* Is name given to another pool of m than id (a live one, or one tallied)? */
static bool name_taken(const struct model *m, uint64_t id, const char *name)
{
	const struct live_set *ls = &m->live[ENT_POOL];
	for (uint32_t i = 0; i < ls->n; i++) {
		const struct m_pool *o = ls->e[i];
		if (o->id != id && o->name && strcmp(o->name, name) == 0)
			return true;
	}
	const struct tally *t = m->tally;
	for (uint32_t i = 0; t && i < t->npools; i++)
		if (t->pool[i].id != id && strcmp(t->pool[i].name, name) == 0 &&
		    !idmap_get(&m->ents[ENT_POOL], t->pool[i].id))
			return true;
	return false;
}

/* The label value that names pool id of m: its name, with "#id" when
 * another pool of the process has the same name, so that series differ. */
static void pool_name(const struct model *m, uint64_t id, const char *kept, char *buf, size_t len)
{
	const struct m_pool *mp = id ? idmap_get(&m->ents[ENT_POOL], id) : NULL;
	const char *name = mp && mp->name ? mp->name : kept;
	if (!id)
		name = "_unknown";
	else if (!name || !*name)
		name = "_unnamed";
	if (id && id != UINT64_MAX && name_taken(m, id, name))
		snprintf(buf, len, "%s#%" PRIu64, name, id);
	else
		snprintf(buf, len, "%s", name);
}

/* Calls fn for each pool of p worth a series: live, created (not a
 * placeholder), at most TALLY_POOLS of them. */
static void each_pool(struct jbuf *b, const struct proc *p, const char *metric,
		      bool (*value)(const struct proto_pool *c, uint64_t *v))
{
	const struct live_set *ls = &p->model.live[ENT_POOL];
	char l[LABELS], name[TALLY_NAME + 24];
	for (uint32_t i = 0, n = 0; i < ls->n && n < TALLY_POOLS; i++) {
		const struct m_pool *mp = ls->e[i];
		uint64_t v;
		if ((mp->flags & EF_PLACEHOLDER) || !value(&mp->cfg, &v))
			continue;
		n++;
		pid_label(l, p);
		pool_name(&p->model, mp->id, NULL, name, sizeof name);
		label(l, "name", name);
		sample(b, metric, l, v);
	}
}

#define POOL_FIGURE(fn, expr)                                                                      \
	static bool fn(const struct proto_pool *c, uint64_t *v)                                    \
	{                                                                                          \
		*v = (expr);                                                                       \
		return true;                                                                       \
	}
POOL_FIGURE(pool_size, c->size)
POOL_FIGURE(pool_core, c->core)
POOL_FIGURE(pool_max, c->max)
POOL_FIGURE(pool_active, c->active)
POOL_FIGURE(pool_largest, c->largest)
POOL_FIGURE(pool_queued, c->queued)
POOL_FIGURE(pool_completed, c->completed)
POOL_FIGURE(pool_rejected, c->rejected)

/* Room left in a bounded queue (none for an unbounded one: no series). */
static bool pool_remaining(const struct proto_pool *c, uint64_t *v)
{
	if (c->queue_kind == 0)
		return false;
	*v = c->queue_capacity > c->queued ? c->queue_capacity - c->queued : 0;
	return true;
}

static const struct pool_metric {
	const char *name, *type, *help;
	bool (*value)(const struct proto_pool *c, uint64_t *v);
} pool_metrics[] = {
    {"executor_pool_size_threads", "gauge", "Threads the pool has now.", pool_size},
    {"executor_pool_core_threads", "gauge", "The pool's core size.", pool_core},
    {"executor_pool_max_threads", "gauge", "The pool's maximum size.", pool_max},
    {"executor_active_threads", "gauge", "Threads of the pool running a task.", pool_active},
    {"executor_queued_tasks", "gauge", "Tasks waiting in the pool's queue.", pool_queued},
    {"executor_queue_remaining_tasks", "gauge",
     "Room left in the pool's bounded queue (no series for an unbounded one).", pool_remaining},
    {"executor_completed_tasks_total", "counter",
     "Tasks the pool finished, as the pool counts them.", pool_completed},
    {"scoped_executor_pool_largest_threads", "gauge", "The most threads the pool ever had.",
     pool_largest},
    {"scoped_executor_rejected_tasks_total", "counter",
     "Tasks the pool refused or discarded (its saturation policy).", pool_rejected},
};

/* The tallied pools' histograms and ended-task counters. */
static void tallied(struct daemon *d, struct jbuf *b)
{
	char l[LABELS], name[TALLY_NAME + 24];
	family(b, "executor_idle_seconds", "histogram",
	       "Time tasks of the pool waited from fork to start (queue wait).");
	EACH_PROC(d, p)
	for (uint32_t i = 0; p->model.tally && i < p->model.tally->npools; i++) {
		const struct tally_pool *tp = &p->model.tally->pool[i];
		pid_label(l, p);
		pool_name(&p->model, tp->id, tp->name, name, sizeof name);
		label(l, "name", name);
		histogram(b, "executor_idle_seconds", l, &tp->wait);
	}
	family(b, "executor_seconds", "histogram", "Time tasks of the pool ran, start to end.");
	EACH_PROC(d, p)
	for (uint32_t i = 0; p->model.tally && i < p->model.tally->npools; i++) {
		const struct tally_pool *tp = &p->model.tally->pool[i];
		pid_label(l, p);
		pool_name(&p->model, tp->id, tp->name, name, sizeof name);
		label(l, "name", name);
		histogram(b, "executor_seconds", l, &tp->run);
	}
	family(b, "scoped_tasks_ended_total", "counter",
	       "Tasks that ended, by the pool their scope forks on and how they ended.");
	EACH_PROC(d, p)
	for (uint32_t i = 0; p->model.tally && i < p->model.tally->npools; i++) {
		const struct tally_pool *tp = &p->model.tally->pool[i];
		pool_name(&p->model, tp->id, tp->name, name, sizeof name);
		for (size_t s = 0; s < COUNT(task_states); s++) {
			if (task_states[s].value < PROTO_TASK_SUCCESS)
				continue; /* not an end */
			pid_label(l, p);
			label(l, "pool", name);
			label(l, "state", task_states[s].name);
			sample(b, "scoped_tasks_ended_total", l, tp->ended[task_states[s].value]);
		}
	}
}

static double adv_wc(const struct adv_result *r)
{
	return r->wc;
}
static double adv_n(const struct adv_result *r)
{
	return r->n_formula;
}
static double adv_rec(const struct adv_result *r)
{
	return r->recommended ? (double)r->recommended : -1;
}
static double adv_util(const struct adv_result *r)
{
	return r->worker_util;
}
static double adv_runnable(const struct adv_result *r)
{
	return r->runnable_share;
}
static double adv_qwait(const struct adv_result *r)
{
	return r->qwait_p99_ms / 1e3;
}
static double adv_blocked(const struct adv_result *r)
{
	return r->blocked_share;
}

/* The advisor's figures of each measured pool (advisor.h), over its last
 * one to two windows; no series while a figure is unknown. */
static const struct advice_metric {
	const char *name, *help;
	double (*value)(const struct adv_result *r);
} advice_metrics[] = {
    {"scoped_pool_wait_compute_ratio",
     "W/C: time the pool's tasks spent waiting (not on a CPU, not runnable) per unit of CPU "
     "time.",
     adv_wc},
    {"scoped_pool_formula_threads", "Ncpu x U x (1 + W/C): the threads the formula gives.", adv_n},
    {"scoped_pool_recommended_threads", "The maximum size the advisor recommends.", adv_rec},
    {"scoped_pool_worker_utilization", "Share of the workers' time spent in tasks.", adv_util},
    {"scoped_pool_runnable_share",
     "Share of the tasks' time spent runnable but waiting for a CPU (CPU saturation).",
     adv_runnable},
    {"scoped_pool_queue_wait_p99_seconds", "Fork to start, 99th percentile.", adv_qwait},
    {"scoped_pool_join_blocked_share",
     "Largest share of the workers blocked in joins while tasks queued.", adv_blocked},
};

static void advised(struct daemon *d, struct jbuf *b)
{
	char l[LABELS], name[TALLY_NAME + 24];
	size_t nm = sizeof advice_metrics / sizeof advice_metrics[0];
	/* One estimate per pool, reused by every family. */
	size_t npools = 0;
	EACH_PROC(d, p)
	npools += p->model.adv ? p->model.adv->npools : 0;
	struct adv_result *res = npools ? calloc(npools, sizeof *res) : NULL;
	if (npools && !res) {
		b->oom = true;
		return;
	}
	size_t k = 0;
	EACH_PROC(d, p)
	for (uint32_t i = 0; p->model.adv && i < p->model.adv->npools; i++)
		advisor_result(&p->model, &p->model.adv->pool[i], &res[k++]);
	for (size_t f = 0; f <= nm; f++) {
		const char *metric = f < nm ? advice_metrics[f].name : "scoped_pool_advice";
		family(b, metric, "gauge",
		       f < nm ? advice_metrics[f].help
			      : "1, with the advisor's verdict and confidence as labels.");
		k = 0;
		EACH_PROC(d, p)
		for (uint32_t i = 0; p->model.adv && i < p->model.adv->npools; i++, k++) {
			const struct adv_pool *ap = &p->model.adv->pool[i];
			pid_label(l, p);
			pool_name(&p->model, ap->id, ap->name, name, sizeof name);
			label(l, "name", name);
			if (f == nm) {
				label(l, "verdict", adv_verdict_name(res[k].verdict));
				label(l, "confidence", res[k].confidence);
				sample(b, metric, l, 1);
				continue;
			}
			double v = advice_metrics[f].value(&res[k]);
			if (v >= 0 && v < 1e15)
				out(b, "%s{%s} %.6g\n", metric, l, v);
		}
	}
	free(res);
}

static void pools(struct daemon *d, struct jbuf *b)
{
	for (size_t i = 0; i < sizeof pool_metrics / sizeof pool_metrics[0]; i++) {
		const struct pool_metric *pm = &pool_metrics[i];
		family(b, pm->name, pm->type, pm->help);
		EACH_PROC(d, p)
		each_pool(b, p, pm->name, pm->value);
	}
	tallied(d, b);
	advised(d, b);
}

static uint64_t p_live(const struct proc *p)
{
	return p->state == PROC_LIVE;
}
static uint64_t p_events(const struct proc *p)
{
	return p->model.events;
}
static uint64_t p_lost(const struct proc *p)
{
	return p->model.lost;
}
static uint64_t p_complete(const struct proc *p)
{
	return p->model.complete;
}
static uint64_t p_threads(const struct proc *p)
{
	return p->model.live[ENT_THREAD].n;
}
static uint64_t p_closed(const struct proc *p)
{
	return p->model.tally ? p->model.tally->scopes_closed : 0;
}
/* A per-process figure that needs nothing but the process. */
static const struct proc_metric {
	const char *name, *type, *help;
	uint64_t (*value)(const struct proc *p);
} proc_metrics[] = {
    {"scoped_process_live", "gauge",
     "1 while the process's agent is connected, 0 once it exited or detached.", p_live},
    {"scoped_events_total", "counter", "Events of the process the daemon applied.", p_events},
    {"scoped_lost_events_total", "counter",
     "Events the process's agent dropped (the daemon was slow or away).", p_lost},
    {"scoped_model_complete", "gauge",
     "1 when the daemon's model of the process is known to be whole.", p_complete},
    {"scoped_threads", "gauge", "Threads of the process alive now.", p_threads},
    {"scoped_scopes_closed_total", "counter", "Scopes the process closed.", p_closed},
};

static void processes(struct daemon *d, struct jbuf *b)
{
	char l[LABELS];
	family(b, "scoped_process_info", "gauge",
	       "1 for each process held; its program name and libscope version as labels.");
	EACH_PROC(d, p)
	{
		pid_label(l, p);
		label(l, "process", p->name);
		label(l, "runtime_version", p->runtime_version);
		sample(b, "scoped_process_info", l, 1);
	}
	family(b, "scoped_process_start_time_seconds", "gauge",
	       "When the process started, in seconds since the epoch.");
	EACH_PROC(d, p)
	{
		char sec[48];
		pid_label(l, p);
		seconds(sec, sizeof sec, p->start_realtime_ns);
		out(b, "scoped_process_start_time_seconds{%s} %s\n", l, sec);
	}
	for (size_t i = 0; i < sizeof proc_metrics / sizeof proc_metrics[0]; i++) {
		const struct proc_metric *pm = &proc_metrics[i];
		family(b, pm->name, pm->type, pm->help);
		EACH_PROC(d, p)
		{
			pid_label(l, p);
			sample(b, pm->name, l, pm->value(p));
		}
	}
	family(b, "scoped_structure_violations_total", "counter", "Structure violations, by kind.");
	EACH_PROC(d, p)
	for (size_t k = 0; p->model.tally && k < COUNT(violations); k++) {
		pid_label(l, p);
		label(l, "kind", violations[k].name);
		sample(b, "scoped_structure_violations_total", l,
		       p->model.tally->violations[violations[k].value]);
	}
	family(b, "scoped_scope_cancellations_total", "counter",
	       "Scopes cancelled, by the first reason given.");
	EACH_PROC(d, p)
	for (size_t r = 0; p->model.tally && r < COUNT(cancel_reasons); r++) {
		pid_label(l, p);
		label(l, "reason", cancel_reasons[r].name);
		sample(b, "scoped_scope_cancellations_total", l,
		       p->model.tally->cancels[cancel_reasons[r].value]);
	}
	static const char *const scope_states[] = {"open", "joining", "joined", "cancelled"};
	family(b, "scoped_scopes", "gauge", "Scopes not closed yet, by state.");
	EACH_PROC(d, p)
	{
		uint64_t n[4] = {0};
		const struct live_set *ls = &p->model.live[ENT_SCOPE];
		for (uint32_t i = 0; i < ls->n; i++) {
			const char *st = model_scope_state_name(ls->e[i]);
			for (size_t k = 0; k < 4; k++)
				n[k] += strcmp(st, scope_states[k]) == 0;
		}
		for (size_t k = 0; k < 4; k++) {
			pid_label(l, p);
			label(l, "state", scope_states[k]);
			sample(b, "scoped_scopes", l, n[k]);
		}
	}
	family(b, "scoped_tasks", "gauge", "Tasks not ended yet: forked (queued) or running.");
	EACH_PROC(d, p)
	{
		uint64_t n[2] = {0};
		const struct live_set *ls = &p->model.live[ENT_TASK];
		for (uint32_t i = 0; i < ls->n; i++)
			n[((const struct m_task *)ls->e[i])->state == PROTO_TASK_FORKED ? 0 : 1]++;
		static const unsigned live[] = {PROTO_TASK_FORKED, PROTO_TASK_RUNNING};
		for (size_t s = 0; s < 2; s++) {
			pid_label(l, p);
			label(l, "state", model_task_state_name(live[s]));
			sample(b, "scoped_tasks", l, n[s]);
		}
	}
	family(b, "scoped_ingest_lag_seconds", "histogram",
	       "Time from an event in the process to the daemon applying it.");
	EACH_PROC(d, p)
	if (p->model.tally) {
		pid_label(l, p);
		histogram(b, "scoped_ingest_lag_seconds", l, &p->model.tally->lag);
	}
}

/* ---- the daemon itself */

/* The fields of /proc/self/stat the process_* metrics use. */
struct self_stat {
	unsigned long long utime, stime, starttime, vsize;
	long rss;
};

static bool self_stat(struct self_stat *st)
{
	char buf[1024];
	FILE *f = fopen("/proc/self/stat", "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* After the command name, whatever it holds: field 3 on. */
	const char *s = strrchr(buf, ')');
	return s && sscanf(s + 2,
			   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
			   "%*d %*d %llu %llu %ld",
			   &st->utime, &st->stime, &st->starttime, &st->vsize, &st->rss) == 5;
}

static unsigned long long boot_time_s(void)
{
	unsigned long long bt = 0;
	char line[256];
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "btime %llu", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

static uint64_t open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	uint64_t n = 0;
	if (!dir)
		return 0;
	for (struct dirent *e; (e = readdir(dir));)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n > 0 ? n - 1 : 0; /* not the one reading the directory */
}

static void self(struct jbuf *b)
{
	struct self_stat st;
	if (!self_stat(&st))
		return;
	double tck = (double)sysconf(_SC_CLK_TCK);
	family(b, "process_cpu_seconds_total", "counter", "CPU time scoped used, user and system.");
	out(b, "process_cpu_seconds_total %.2f\n", (double)(st.utime + st.stime) / tck);
	family(b, "process_resident_memory_bytes", "gauge", "scoped's resident memory.");
	out(b, "process_resident_memory_bytes %llu\n",
	    (unsigned long long)st.rss * (unsigned long long)sysconf(_SC_PAGESIZE));
	family(b, "process_virtual_memory_bytes", "gauge", "scoped's virtual memory.");
	out(b, "process_virtual_memory_bytes %llu\n", st.vsize);
	family(b, "process_start_time_seconds", "gauge",
	       "When scoped started, in seconds since the epoch.");
	out(b, "process_start_time_seconds %.2f\n",
	    (double)boot_time_s() + (double)st.starttime / tck);
	family(b, "process_open_fds", "gauge", "File descriptors scoped has open.");
	sample(b, "process_open_fds", "", open_fds());
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		family(b, "process_max_fds", "gauge", "scoped's limit on open file descriptors.");
		sample(b, "process_max_fds", "", (uint64_t)rl.rlim_cur);
	}
}

static void daemon_figures(struct daemon *d, struct jbuf *b)
{
	char l[LABELS];
	family(b, "scoped_build_info", "gauge", "1; scoped's version and wire protocol as labels.");
	l[0] = 0;
	label(l, "version", SCOPED_VERSION);
	char proto[16];
	snprintf(proto, sizeof proto, "%d", PROTO_VERSION);
	label(l, "protocol", proto);
	sample(b, "scoped_build_info", l, 1);

	static const char *const states[] = {"live", "detached", "exited"};
	uint64_t n[3] = {0};
	for (struct proc *p = d->procs; p; p = p->next)
		n[p->state <= PROC_EXITED ? p->state : PROC_EXITED]++;
	family(b, "scoped_processes", "gauge", "Processes the daemon holds, by state.");
	for (size_t i = 0; i < 3; i++) {
		l[0] = 0;
		label(l, "state", states[i]);
		sample(b, "scoped_processes", l, n[i]);
	}
	family(b, "scoped_agent_connections", "gauge",
	       "Agent connections open (those that have not said HELLO included).");
	sample(b, "scoped_agent_connections", "", d->nconns);
	family(b, "scoped_clients", "gauge", "Control clients connected (scopecmd, scopetop).");
	sample(b, "scoped_clients", "", d->nclients);
	family(b, "scoped_daemon_events_total", "counter",
	       "Events the daemon ingested from every process, gone ones included.");
	sample(b, "scoped_daemon_events_total", "", d->events);
	family(b, "scoped_daemon_lost_events_total", "counter",
	       "Events agents reported lost, every process, gone ones included.");
	sample(b, "scoped_daemon_lost_events_total", "", d->lost);

	const struct metrics_stacks *ms = metrics_stack_stats(d);
	if (ms) {
		family(b, "scoped_stack_captures_total", "counter",
		       "Stack requests answered, by stack source and outcome.");
		for (size_t i = 0; i < METRICS_SOURCES; i++)
			for (int ok = 1; ok >= 0; ok--) {
				l[0] = 0;
				label(l, "source", ms[i].source);
				label(l, "outcome", ok ? "ok" : "failed");
				sample(b, "scoped_stack_captures_total", l,
				       ok ? ms[i].ok : ms[i].failed);
			}
		family(b, "scoped_stack_capture_duration_seconds", "histogram",
		       "Time from a stack request to its reply, by stack source.");
		for (size_t i = 0; i < METRICS_SOURCES; i++) {
			l[0] = 0;
			label(l, "source", ms[i].source);
			histogram(b, "scoped_stack_capture_duration_seconds", l, &ms[i].duration);
		}
	}
	if (trace_on()) {
		family(b, "scoped_otlp_spans_total", "counter",
		       "Spans of scope trees for --otlp, by what became of them.");
		for (int o = 0; o < TRACE_OUTCOMES; o++) {
			l[0] = 0;
			label(l, "outcome", trace_outcome_names[o]);
			sample(b, "scoped_otlp_spans_total", l, trace_counted(o));
		}
	}
	self(b);
}

void metrics_render(struct daemon *d, struct jbuf *b)
{
	daemon_figures(d, b);
	processes(d, b);
	pools(d, b);
}
