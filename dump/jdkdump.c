/* jdkdump.c - builds the JDK JSON thread dump (format version 2) from the
 * daemon's dump reply: containers in pre-order, every thread exactly once. */
#include "jdkdump.h"
#include "../common/jtext.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dumplocks.h"
#include "jdkjson.h"
#include "jw.h"

#define ROOT_NAME "<root>"

/* One key -> array position entry; arrays of them are sorted for bsearch. */
struct ref {
	json_int_t id;
	size_t at;
	long rank; /* tie-break among equal ids (owner index: deeper first) */
};

struct scope_info {
	const jv *j;
	json_int_t id;
	bool included;	  /* not closed: becomes a container */
	long parent;	  /* effective parent in si[], or -1 for <root> */
	long first_child; /* child lists, youngest first */
	long next_sibling;
	long container; /* position in containers[], or -1 */
	long depth;
};

/* A thread placed in its container, with what rendering it needs. */
struct placed {
	size_t container;
	json_int_t tid;
	const jv *t;	   /* its model entry, or NULL */
	const jv *st;	   /* its stack entry (or the crash's), or NULL */
	const jv *task;	   /* the task it runs, or NULL */
	const jv *helping; /* the subtask it runs while joining its own scope */
	long joins;	   /* that scope (si[]), or -1 */
	long ctx;	   /* the scope whose values it sees (si[]), or -1 */
	bool crashed, gone;
	long sx; /* the entry of stacks[] whose frames it shows, or -1 */
};

/* A stack's text as written the first time (text writers): threads that
 * share a stack copy it, as it is a function of the entry alone.  The same
 * for the scoped values threads see in one scope. */
struct stack_text {
	size_t off, len; /* in the writer's text; len 0: not written yet */
	int depth;
};

/* The tids placed: open addressing, for "each thread once" and owners. */
struct tidset {
	json_int_t *k; /* -1: free */
	size_t cap, n;
};

struct builder {
	const jv *reply, *process, *model;
	const jv *threads, *pools, *scopes, *tasks, *stacks;
	const jv *crash;  /* process.crash, or NULL */
	const jv *advice; /* the pool advice, or NULL */
	const jv *last;	  /* last_stacks.stacks of a post-mortem reply, or NULL */
	struct ref *last_ref;
	size_t nlast_ref;
	char now_iso[40];
	bool complete;

	struct scope_info *si; /* ordered by scope id */
	size_t nsi;
	struct ref *scope_ref, *task_ref, *pool_ref, *stack_ref, *worker_ref, *owner_ref;
	size_t nscope_ref, ntask_ref, npool_ref, nstack_ref, nworker_ref, nowner_ref;
	long *pool_container; /* per pools[] entry */

	json_t **containers; /* output order; [0] is <root> */
	size_t ncont;
	struct placed *placed;
	size_t nplaced, capplaced;
	json_t *names;		     /* container names in use */
	struct tidset tids;	     /* tids placed */
	json_t *frames;		     /* frame strings by address */
	struct stack_text *stext;    /* per stacks[] entry; NULL: no sharing */
	struct stack_text *vtext;    /* per si[] entry; NULL: no sharing */
	struct jdkdump_marks *marks; /* text writers asked for them, else NULL */
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	if (x->id != y->id)
		return (x->id > y->id) - (x->id < y->id);
	return (x->rank < y->rank) - (x->rank > y->rank);
}

static int ref_key_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

/* Indexes arr's objects by their integer member key; of duplicate ids the
 * first occurrence wins, so one id names one object. */
static struct ref *index_by(const jv *arr, const char *key, size_t *n)
{
	size_t len = jv_size(arr), k = 0, out = 0;
	struct ref *r = calloc(len ? len : 1, sizeof *r);

	*n = 0;
	if (!r)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		const jv *id = jv_get(jv_at(arr, i), key);
		if (jv_is_integer(id))
			r[k++] = (struct ref){jv_integer(id), i, -(long)i};
	}
	if (k > 1)
		qsort(r, k, sizeof *r, ref_cmp);
	for (size_t i = 0; i < k; i++)
		if (!out || r[out - 1].id != r[i].id)
			r[out++] = r[i];
	*n = out;
	return r;
}

static long find(const struct ref *r, size_t n, json_int_t id)
{
	struct ref key = {.id = id};
	const struct ref *hit = bsearch(&key, r, n, sizeof *r, ref_key_cmp);
	/* bsearch may land on any of equal keys; the first has the best rank. */
	while (hit && hit > r && hit[-1].id == id)
		hit--;
	return hit ? (long)hit->at : -1;
}

static long lookup(const struct ref *r, size_t n, const jv *id)
{
	return jv_is_integer(id) ? find(r, n, jv_integer(id)) : -1;
}

char *jdkdump_iso_time(double ms, char *buf, size_t len)
{
	/* A dump's times fall in few seconds: the date and time of the last
	 * second formatted are kept (per thread, as builds are). */
	static _Thread_local time_t last_secs = -1;
	static _Thread_local char last[80];
	/* Years 1970..9999 keep the format fixed-width and valid ISO-8601. */
	if (!isfinite(ms) || ms < 0 || ms > 253402300799999.0)
		ms = 0;
	time_t secs = (time_t)(ms / 1000);
	int millis = (int)(ms - (double)secs * 1000);
	millis = millis < 0 ? 0 : millis > 999 ? 999 : millis;
	if (secs != last_secs) {
		struct tm tm;
		gmtime_r(&secs, &tm);
		snprintf(last, sizeof last, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		last_secs = secs;
	}
	snprintf(buf, len, "%s.%03dZ", last, millis);
	return buf;
}

static json_t *iso_or_null(const jv *ms)
{
	char buf[40];
	if (!jv_is_number(ms))
		return json_null();
	return json_string(jdkdump_iso_time(jv_number(ms), buf, sizeof buf));
}

/* A container name no other container has: a suffix ~2, ~3... only when a
 * chosen name collides (a scope literally named "pool:io", say). */
static json_t *unique_name(struct builder *b, const char *want)
{
	char buf[JDKDUMP_MAX_STR + 80];
	snprintf(buf, sizeof buf, "%s", want);
	for (unsigned n = 2; json_object_get(b->names, buf); n++)
		snprintf(buf, sizeof buf, "%s~%u", want, n);
	jj_set(b->names, buf, json_true());
	return json_string(buf);
}

static json_t *container_new(struct builder *b, const char *name, const char *parent,
			     const char *kind)
{
	return json_pack("{s:o,s:s?,s:n,s:[],s:i,s:s}", "container", unique_name(b, name), "parent",
			 parent, "owner", "threads", "threadCount", 0, "kind", kind);
}

/* Appends c (stolen); returns its position or -1. */
static long add_container(struct builder *b, json_t *c)
{
	json_t **nc = c ? realloc(b->containers, (b->ncont + 1) * sizeof *nc) : NULL;
	if (!nc) {
		json_decref(c);
		return -1;
	}
	b->containers = nc;
	b->containers[b->ncont] = c;
	return (long)b->ncont++;
}

static const char *cname(struct builder *b, long container)
{
	return json_string_value(json_object_get(b->containers[container], "container"));
}

/* The advice for the pool of id (a few pools: a scan does). */
static const jv *pool_advice(struct builder *b, const jv *id)
{
	const jv *pools = jj_array(b->advice, "pools");
	for (size_t i = 0; jv_is_integer(id) && i < jv_size(pools); i++) {
		const jv *a = jv_at(pools, i);
		const jv *aid = jv_get(a, "id");
		if (jv_is_object(a) && jv_is_integer(aid) && jv_integer(aid) == jv_integer(id))
			return a;
	}
	return NULL;
}

static int add_pools(struct builder *b)
{
	size_t n = jv_size(b->pools);
	b->pool_container = malloc((n ? n : 1) * sizeof *b->pool_container);
	if (!b->pool_container)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const jv *p = jv_at(b->pools, i);
		b->pool_container[i] = -1;
		if (lookup(b->pool_ref, b->npool_ref, jv_get(p, "id")) != (long)i)
			continue; /* no id, or a duplicate */
		char pname[JDKDUMP_MAX_STR + 1], name[JDKDUMP_MAX_STR + 40];
		jj_strcpy(pname, sizeof pname, jj_str(p, "name"), "pool");
		snprintf(name, sizeof name, "pool:%s@%llu", pname,
			 (unsigned long long)(uint64_t)jv_integer(jv_get(p, "id")));
		json_t *c = container_new(b, name, ROOT_NAME, "pool");
		if (c)
			jj_set(c, "pool", jj_pool_stats(p));
		const jv *adv = pool_advice(b, jv_get(p, "id"));
		if (c && adv)
			jj_set(c, "advice", jj_pool_advice(adv, b->advice));
		b->pool_container[i] = add_container(b, c);
		if (b->pool_container[i] < 0)
			return -1;
	}
	return 0;
}

/* What a scope's cancellation came from, what shields it and what waits
 * on it (extra members; null where an older daemon does not say). */
static void scope_cancel_members(json_t *c, const jv *s)
{
	static const char *const flag_names[] = {"no_interrupt", "shield", NULL};
	json_t *flags = json_array(), *shield = json_null(), *handlers = json_null();
	const jv *fl = jj_array(s, "flags");

	jj_set(c, "cancelCause", jj_enum_or_null(s, "cancel_cause", jj_cancel_reasons));
	jj_set(c, "cancelOrigin", jj_id_or_null(s, "cancel_origin"));
	for (size_t k = 0; flags && k < jv_size(fl); k++) {
		const char *f = jv_string(jv_at(fl, k));
		for (size_t j = 0; f && flag_names[j]; j++)
			if (!strcmp(f, flag_names[j]))
				jj_append(flags, json_string(flag_names[j]));
	}
	jj_set(c, "flags", flags);
	if (jv_is_integer(jv_get(s, "shielded_by")) && (shield = json_object()) != NULL) {
		jj_set(shield, "scopeId", jj_id_or_null(s, "shielded_by"));
		jj_set(shield, "deadline", iso_or_null(jv_get(s, "shield_deadline_ms")));
	}
	jj_set(c, "shield", shield);
	if (jv_is_integer(jv_get(s, "handlers")) && (handlers = json_object()) != NULL) {
		jj_set(handlers, "armed", jj_int_or_null(s, "handlers"));
		jj_set(handlers, "ran", jj_int_or_null(s, "handlers_ran"));
	}
	jj_set(c, "cancelHandlers", handlers);
}

static json_t *scope_container(struct builder *b, size_t i)
{
	const jv *s = b->si[i].j;
	char sname[JDKDUMP_MAX_STR + 1], name[JDKDUMP_MAX_STR + 40];
	jj_strcpy(sname, sizeof sname, jj_str(s, "name"), "scope");
	snprintf(name, sizeof name, "%s@%llu", sname, (unsigned long long)(uint64_t)b->si[i].id);
	long p = b->si[i].parent;
	json_t *c =
	    container_new(b, name, p < 0 ? ROOT_NAME : cname(b, b->si[p].container), "scope");
	if (!c)
		return NULL;
	jj_set(c, "scopeId", jj_id_new(b->si[i].id));
	jj_set(c, "name", jj_string_new(sname));
	jj_set(c, "joiner", jj_enum_or_null(s, "joiner", jj_joiners));
	jj_set(c, "state", jj_enum_or_null(s, "state", jj_scope_states));
	jj_set(c, "deadline", iso_or_null(jv_get(s, "deadline_ms")));
	jj_set(c, "openedAt", iso_or_null(jv_get(s, "opened_ms")));
	jj_set(c, "joinBeganAt", iso_or_null(jv_get(s, "join_began_ms")));
	jj_set(c, "openSite", jj_site(jv_get(s, "site")));
	jj_set(c, "cancelReason", jj_enum_or_null(s, "cancel_reason", jj_cancel_reasons));
	scope_cancel_members(c, s);
	jj_set(c, "parentTask", jj_id_or_null(s, "parent_task"));
	jj_set(c, "values", jj_values(jv_get(s, "values")));
	return c;
}

/* Effective parents of every scope: the nearest enclosing scope that is
 * itself a container, -1 (<root>) when there is none, it is unknown, or the
 * chain loops.  Memoized, so long chains of closed scopes stay linear. */
static int effective_parents(struct builder *b)
{
	enum { TODO, VISITING, DONE };
	size_t n = b->nsi;
	unsigned char *st = calloc(n ? n : 1, 1);
	long *eff = calloc(n ? n : 1, sizeof *eff), *path = calloc(n ? n : 1, sizeof *path);
	if (!st || !eff || !path) {
		free(st);
		free(eff);
		free(path);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		/* Walk up until a scope whose answer is known, then unwind. */
		size_t len = 0;
		long cur = (long)i, ans = -1;
		while (cur >= 0 && st[cur] == TODO) {
			st[cur] = VISITING;
			path[len++] = cur;
			long p =
			    lookup(b->scope_ref, b->nscope_ref, jv_get(b->si[cur].j, "parent"));
			if (p >= 0 && st[p] == VISITING) {
				ans = -1; /* a loop: cut here */
				cur = -1;
				break;
			}
			if (p >= 0 && b->si[p].included) {
				ans = p;
				cur = -1;
				break;
			}
			cur = p;
		}
		if (cur >= 0) /* reached a scope already done */
			ans = eff[cur];
		while (len--) {
			eff[path[len]] = ans;
			st[path[len]] = DONE;
		}
	}
	for (size_t i = 0; i < n; i++)
		b->si[i].parent = b->si[i].included && eff[i] != (long)i ? eff[i] : -1;
	free(st);
	free(eff);
	free(path);
	return 0;
}

/* Emits top (a top-level scope) and everything below it in pre-order, with
 * an explicit stack so that deep nesting cannot exhaust ours. */
static int emit_subtree(struct builder *b, long top, long *stack)
{
	size_t sp = 0;
	stack[sp++] = top;
	while (sp) {
		long i = stack[--sp];
		if (b->si[i].container >= 0)
			continue; /* reached again through a cut cycle */
		long p = i == top ? -1 : b->si[i].parent;
		if (i == top)
			b->si[i].parent = -1;
		b->si[i].depth = p < 0 ? 1 : b->si[p].depth + 1;
		b->si[i].container = add_container(b, scope_container(b, (size_t)i));
		if (b->si[i].container < 0)
			return -1;
		/* Child lists are youngest first, so the oldest pops first. */
		for (long c = b->si[i].first_child; c >= 0; c = b->si[c].next_sibling)
			if (b->si[c].container < 0)
				stack[sp++] = c;
	}
	return 0;
}

static int add_scopes(struct builder *b)
{
	size_t n = b->nscope_ref;
	b->si = calloc(n ? n : 1, sizeof *b->si);
	long *stack = calloc(2 * n + 1, sizeof *stack);
	if (!b->si || !stack) {
		free(stack);
		return -1;
	}
	for (size_t r = 0; r < n; r++) {
		struct scope_info *x = &b->si[r];
		x->j = jv_at(b->scopes, b->scope_ref[r].at);
		x->id = b->scope_ref[r].id;
		x->included = jv_is_object(x->j) && !jj_str_is(x->j, "state", "closed");
		x->container = x->first_child = x->next_sibling = -1;
		b->scope_ref[r].at = r; /* from here ids map to si[] */
	}
	b->nsi = n;
	if (effective_parents(b) < 0) {
		free(stack);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		long p = b->si[i].parent;
		if (b->si[i].included && p >= 0) {
			b->si[i].next_sibling = b->si[p].first_child;
			b->si[p].first_child = (long)i;
		}
	}
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (b->si[i].included && b->si[i].parent < 0)
			rc = emit_subtree(b, (long)i, stack);
	/* What the walk from <root> missed hangs in a parent cycle: each
	 * cycle is cut at its oldest scope, which becomes top-level. */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (b->si[i].included && b->si[i].container < 0) {
			b->complete = false;
			rc = emit_subtree(b, (long)i, stack);
		}
	}
	free(stack);
	return rc;
}

/* Depth of the container of the scope task t was forked into (-1: none). */
static long task_depth(struct builder *b, const jv *t)
{
	long s = t ? lookup(b->scope_ref, b->nscope_ref, jv_get(t, "scope")) : -1;
	return s >= 0 && b->si[s].container >= 0 ? b->si[s].depth : -1;
}

/* Indexes running tasks by worker tid and open scopes by owner tid (deepest
 * first), for placing threads without quadratic scans. */
static int index_people(struct builder *b)
{
	size_t nt = jv_size(b->tasks);
	b->worker_ref = calloc(nt ? nt : 1, sizeof *b->worker_ref);
	b->owner_ref = calloc(b->nsi ? b->nsi : 1, sizeof *b->owner_ref);
	if (!b->worker_ref || !b->owner_ref)
		return -1;
	for (size_t i = 0; i < nt; i++) {
		const jv *t = jv_at(b->tasks, i);
		const jv *w = jv_get(t, "worker");
		if (jj_str_is(t, "state", "running") && jv_is_integer(w))
			b->worker_ref[b->nworker_ref++] =
			    (struct ref){jv_integer(w), i, task_depth(b, t)};
	}
	if (b->nworker_ref > 1)
		qsort(b->worker_ref, b->nworker_ref, sizeof *b->worker_ref, ref_cmp);
	for (size_t i = 0; i < b->nsi; i++) {
		const jv *o = jv_get(b->si[i].j, "owner");
		if (b->si[i].container >= 0 && jv_is_integer(o))
			b->owner_ref[b->nowner_ref++] =
			    (struct ref){jv_integer(o), i, b->si[i].depth};
	}
	if (b->nowner_ref > 1)
		qsort(b->owner_ref, b->nowner_ref, sizeof *b->owner_ref, ref_cmp);
	return 0;
}

/* The scoped values visible in scope i: its own bindings over those of
 * every enclosing scope. */
static json_t *values_in(struct builder *b, long i)
{
	json_t *v = json_object();
	for (size_t steps = 0; i >= 0 && steps <= b->nsi; steps++, i = b->si[i].parent) {
		json_t *own = jj_values(jv_get(b->si[i].j, "values"));
		const char *k;
		json_t *val;
		json_object_foreach(own, k, val) if (!json_object_get(v, k))
		    jj_set(v, k, json_incref(val));
		json_decref(own);
	}
	return v;
}

/* The task a thread runs now: its `task` member, or a deeper running task
 * that names it as worker. */
static const jv *task_of(struct builder *b, const jv *t, json_int_t tid)
{
	long k = lookup(b->task_ref, b->ntask_ref, jv_get(t, "task"));
	const jv *named = k >= 0 ? jv_at(b->tasks, (size_t)k) : NULL;
	/* A worker joining a scope may run that scope's queued tasks itself,
	 * nested on its stack: the deepest running task it is the worker of is
	 * the one it executes now. */
	long w = find(b->worker_ref, b->nworker_ref, tid);
	const jv *deepest = w >= 0 ? jv_at(b->tasks, (size_t)w) : NULL;
	if (deepest && (!named || task_depth(b, deepest) > task_depth(b, named)))
		return deepest;
	return named;
}

static int place(struct builder *b, const struct placed *p)
{
	if (b->nplaced == b->capplaced) {
		size_t ncap = b->capplaced ? b->capplaced * 2 : 64;
		struct placed *np = realloc(b->placed, ncap * sizeof *np);
		if (!np)
			return -1;
		b->placed = np;
		b->capplaced = ncap;
	}
	b->placed[b->nplaced++] = *p;
	return 0;
}

static size_t tid_slot(const struct tidset *s, json_int_t tid)
{
	size_t i = (size_t)((uint64_t)tid * 0x9e3779b97f4a7c15u >> 20) & (s->cap - 1);
	while (s->k[i] != -1 && s->k[i] != tid)
		i = (i + 1) & (s->cap - 1);
	return i;
}

static bool tid_known(const struct tidset *s, json_int_t tid)
{
	return s->cap && s->k[tid_slot(s, tid)] == tid;
}

/* Whether tid was placed already; if not, remembers it (false also when
 * memory ran out: then the build fails through jj_failed_take()). */
static bool tid_seen(struct builder *b, json_int_t tid)
{
	struct tidset *s = &b->tids;
	if (tid_known(s, tid))
		return true;
	if (2 * (s->n + 1) > s->cap) {
		size_t ncap = s->cap ? 2 * s->cap : 1024;
		json_int_t *nk = malloc(ncap * sizeof *nk), *old = s->k;
		if (!nk) {
			jj_fail();
			return true;
		}
		memset(nk, 0xff, ncap * sizeof *nk);
		size_t ocap = s->cap;
		s->k = nk;
		s->cap = ncap;
		for (size_t i = 0; i < ocap; i++)
			if (old[i] != -1)
				s->k[tid_slot(s, old[i])] = old[i];
		free(old);
	}
	s->k[tid_slot(s, tid)] = tid;
	s->n++;
	return false;
}

/* Whether v is a thread id: an integer from 0 to INT64_MAX (a negative or
 * u64-sized one is a damaged reply's, and the schema refuses it). */
static bool is_tid(const jv *v)
{
	return jv_is_integer(v) && jv_integer(v) >= 0;
}

/* The tid of the thread that crashed the process, or -1. */
static json_int_t crash_tid(const struct builder *b)
{
	const jv *tid = jv_get(b->crash, "tid");
	return is_tid(tid) ? jv_integer(tid) : -1;
}

/* The entry of stacks[] whose frames stack k's are: k itself, or with
 * "same_stack_as" (the reply lists a stack once for alike threads) the one
 * it names. */
static long shared_stack(const struct builder *b, long k)
{
	const jv *st = jv_at(b->stacks, (size_t)k);
	const jv *same = jv_get(st, "same_stack_as");
	long o = jv_is_integer(same) ? find(b->stack_ref, b->nstack_ref, jv_integer(same)) : -1;
	if (o < 0 || jv_is_integer(jv_get(jv_at(b->stacks, (size_t)o), "same_stack_as")))
		return k;
	return o;
}

/* Builds one thread from its model entry t (NULL for a thread only the
 * stacks know) and puts it in the container of the task it runs, else its
 * pool's (an idle worker), else <root>. */
static int add_thread(struct builder *b, const jv *t, json_int_t tid)
{
	long k = find(b->stack_ref, b->nstack_ref, tid);
	const jv *st = k >= 0 ? jv_at(b->stacks, (size_t)k) : NULL;
	/* The thread that crashed the process: the stack its last moment left. */
	bool crashed = crash_tid(b) == tid;
	long sx = st ? shared_stack(b, k) : -1;
	if (!st && crashed)
		st = b->crash;
	const jv *task = t ? task_of(b, t, tid) : NULL;
	long ts = task ? lookup(b->scope_ref, b->nscope_ref, jv_get(task, "scope")) : -1;
	size_t container = 0;
	long ctx = -1;
	/* An owner that runs, while it joins, a subtask of its own scope is
	 * shown where its own work is (the container of the task whose body
	 * opened that scope, else where a thread without a task goes), with
	 * the subtask it runs for the join beside: inside its own container
	 * it would read as one of the scope's forked threads. */
	const jv *helping = NULL;
	long joins = -1;
	const jv *owner = ts >= 0 ? jv_get(b->si[ts].j, "owner") : NULL;
	if (jv_is_integer(owner) && jv_integer(owner) == tid && b->si[ts].container >= 0) {
		helping = task;
		joins = ts;
		long pt = lookup(b->task_ref, b->ntask_ref, jv_get(b->si[ts].j, "parent_task"));
		const jv *own = pt >= 0 ? jv_at(b->tasks, (size_t)pt) : NULL;
		const jv *w = jv_get(own, "worker");
		task = own && jj_str_is(own, "state", "running") && jv_is_integer(w) &&
			       jv_integer(w) == tid
			   ? own
			   : NULL;
		if (!task) { /* no parent task known: the task the thread names */
			long k2 = lookup(b->task_ref, b->ntask_ref, jv_get(t, "task"));
			const jv *named = k2 >= 0 ? jv_at(b->tasks, (size_t)k2) : NULL;
			task = named != helping ? named : NULL;
		}
		ts = task ? lookup(b->scope_ref, b->nscope_ref, jv_get(task, "scope")) : -1;
	}

	if (ts >= 0 && b->si[ts].container >= 0) {
		container = (size_t)b->si[ts].container;
		ctx = ts;
	} else {
		long p = lookup(b->pool_ref, b->npool_ref, jv_get(t, "pool"));
		if (p >= 0 && b->pool_container[p] >= 0)
			container = (size_t)b->pool_container[p];
	}
	/* An owner sees the bindings of the innermost scope it opened. */
	long owned = find(b->owner_ref, b->nowner_ref, tid);
	if (owned >= 0)
		ctx = owned;
	/* A thread gone with its process (post-mortem) or on its own has no
	 * stack, and the JDK has a state for it. */
	bool gone = (!st || crashed) &&
		    (jj_str_is(t, "state", "exited") || jj_str_is(b->process, "state", "exited"));
	if (helping)
		jj_set(b->containers[b->si[joins].container], "ownerRunsTask",
		       jj_id_or_null(helping, "id"));
	struct placed p = {container, tid, t, st, task, helping, joins, ctx, crashed, gone, sx};
	return place(b, &p);
}

/* Writes a placed thread's "stack" and "inlinedFrames": from its entry
 * the first time, then as a copy of that text. */
static void write_stack(struct builder *b, struct jw *w, const struct placed *p)
{
	struct stack_text *x = b->stext && p->sx >= 0 ? &b->stext[p->sx] : NULL;
	if (x && x->len && x->depth == w->depth && jw_copy_own(w, x->off, x->len))
		return;
	const jv *st = p->sx >= 0 ? jv_at(b->stacks, (size_t)p->sx) : p->st;
	size_t off = jw_offset(w);
	jj_write_stack(w, "stack", "inlinedFrames", st, JDKDUMP_MAX_FRAMES, b->frames);
	if (x && !w->failed)
		*x = (struct stack_text){off, jw_offset(w) - off, w->depth};
}

/* Remembers the value written since at as a mark of kind. */
static void mark_tid(struct builder *b, struct jw *w, size_t at, enum jdkdump_mark_kind kind,
		     int64_t tid)
{
	struct jdkdump_marks *m = b->marks;
	if (!m || w->tree)
		return;
	if (m->n == m->cap) {
		size_t ncap = m->cap ? 2 * m->cap : 1024;
		struct jdkdump_mark *nm = realloc(m->m, ncap * sizeof *nm);
		if (!nm) {
			m->failed = true;
			return;
		}
		m->m = nm;
		m->cap = ncap;
	}
	m->m[m->n++] = (struct jdkdump_mark){at, jw_offset(w) - at, kind, tid};
}

static void mark(struct builder *b, struct jw *w, size_t at, enum jdkdump_mark_kind kind)
{
	mark_tid(b, w, at, kind, 0);
}

/* "time": the dump's time, marked. */
static void write_time(struct builder *b, struct jw *w)
{
	jw_key(w, "time");
	size_t at = jw_offset(w);
	jw_str(w, b->now_iso);
	mark(b, w, at, JDKDUMP_MARK_TIME);
}

/* A thread's "blockedIn" value: its stack entry's blocked_in. */
static void write_blocked_in(struct jw *w, const jv *st)
{
	const char *s = jj_str(st, "blocked_in");
	if (s)
		jw_text_str(w, s);
	else
		jw_null(w);
}

/* Writes the scoped values a thread sees in scope ctx (si[], -1: none):
 * the first time from the scopes, then as a copy of that text. */
static void write_values(struct builder *b, struct jw *w, long ctx)
{
	if (ctx < 0) {
		jw_obj(w);
		jw_end(w);
		return;
	}
	struct stack_text *x = b->vtext ? &b->vtext[ctx] : NULL;
	if (x && x->len && x->depth == w->depth && jw_copy_own(w, x->off, x->len))
		return;
	size_t off = jw_offset(w);
	jw_json_new(w, values_in(b, ctx));
	if (x && !w->failed)
		*x = (struct stack_text){off, jw_offset(w) - off, w->depth};
}

/* Writes the JDK thread object of a placed thread. */
static void write_thread(struct builder *b, struct jw *w, const struct placed *p)
{
	const jv *t = p->t, *st = p->st;
	const char *name = jj_str(t, "name") ? jj_str(t, "name") : jj_str(st, "name");
	jw_obj(w);
	jw_kint(w, "tid", p->tid);
	write_time(b, w);
	jw_key(w, "name");
	jw_text_str(w, name);
	const char *state = p->gone ? "TERMINATED" : jj_thread_state(st);
	/* Its state and blockedIn are of its own stack entry's state and
	 * blocked_in alone (marked) unless it is gone, exited or crashed. */
	bool own = st && st != b->crash && !p->gone && !jv_is_true(jv_get(st, "exited"));
	/* Only JDK states: what we do not know goes beside, not into it. */
	jw_key(w, "state");
	size_t at = jw_offset(w);
	jw_str(w, state ? state : "RUNNABLE");
	if (own && state)
		mark_tid(b, w, at, JDKDUMP_MARK_STATE, p->tid);
	if (!state) {
		jw_key(w, "stateKnown");
		jw_bool(w, false);
	}
	if (jv_is_true(jv_get(st, "exited"))) {
		jw_key(w, "exitedDuringCapture");
		jw_bool(w, true);
	}
	/* Beside the JDK's strings: which frames are inlined into the next. */
	write_stack(b, w, p);
	jw_kenum_or_null(w, "role", t, "role", jj_roles);
	jw_key(w, "task");
	if (p->task)
		jj_write_task(w, p->task, p->crashed, NULL);
	else
		jw_null(w);
	if (p->crashed) {
		jw_key(w, "crashed");
		jw_bool(w, true);
	}
	/* Gone: its stack as the last capture before the end found it. */
	long lk = p->gone && !p->crashed ? find(b->last_ref, b->nlast_ref, p->tid) : -1;
	if (lk >= 0)
		jj_write_stack(w, "lastStack", NULL, jv_at(b->last, (size_t)lk), JDKDUMP_MAX_FRAMES,
			       b->frames);
	if (p->helping) {
		const char *jc = cname(b, b->si[p->joins].container);
		jw_kstr(w, "joins", jc);
		jw_key(w, "runsWhileJoining");
		jj_write_task(w, p->helping, false, jc);
	}
	jw_key(w, "scopedValues");
	write_values(b, w, p->ctx);
	jw_key(w, "blockedIn");
	at = jw_offset(w);
	write_blocked_in(w, st);
	if (own)
		mark_tid(b, w, at, JDKDUMP_MARK_BLOCKED_IN, p->tid);
	dumplocks_write(w, st);
	if (jv_is_true(jv_get(st, "approximate"))) {
		jw_key(w, "approximate");
		jw_bool(w, true);
		if (jj_str(st, "approximate_why"))
			jw_kstr_or_null(w, "approximateWhy", st, "approximate_why");
	}
	if (!st)
		jw_kstr(w, "stackError", p->gone ? "the thread has exited" : "no stack captured");
	else if (p->crashed && st == b->crash && !jv_size(jj_array(st, "frames")))
		jw_kstr(w, "stackError", "the crash handler could not unwind");
	else if (jj_str(st, "error"))
		jw_kstr_or_null(w, "stackError", st, "error");
	jw_end(w);
}

static int add_threads(struct builder *b)
{
	bool post_mortem = jj_str_is(b->process, "state", "exited");
	size_t n = jv_size(b->threads);

	for (size_t i = 0; i < n; i++) {
		const jv *t = jv_at(b->threads, i);
		const jv *tid = jv_get(t, "tid");
		/* Exited threads linger for the retention time; a live dump
		 * shows the living, a post-mortem one the last known. */
		if (!is_tid(tid) || (jj_str_is(t, "state", "exited") && !post_mortem))
			continue;
		if (!tid_seen(b, jv_integer(tid)) && add_thread(b, t, jv_integer(tid)) < 0)
			return -1;
	}
	n = jv_size(b->stacks);
	for (size_t i = 0; i < n; i++) {
		const jv *tid = jv_get(jv_at(b->stacks, i), "tid");
		if (is_tid(tid) && !tid_seen(b, jv_integer(tid)) &&
		    add_thread(b, NULL, jv_integer(tid)) < 0)
			return -1;
	}
	return 0;
}

static int placed_cmp(const void *a, const void *b)
{
	const struct placed *x = a, *y = b;
	if (x->container != y->container)
		return (x->container > y->container) - (x->container < y->container);
	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Orders the placed threads by container, then tid, counts them and
 * resolves the scopes' owners against the threads actually in the dump. */
static void fill_containers(struct builder *b)
{
	if (b->nplaced)
		qsort(b->placed, b->nplaced, sizeof *b->placed, placed_cmp);
	for (size_t c = 0, i = 0; c < b->ncont; c++) {
		size_t n = 0;
		for (; i < b->nplaced && b->placed[i].container == c; i++)
			n++;
		jj_set(b->containers[c], "threadCount", json_integer((json_int_t)n));
	}
	for (size_t i = 0; i < b->nsi; i++) {
		const jv *o = jv_get(b->si[i].j, "owner");
		if (b->si[i].container < 0 || !is_tid(o))
			continue;
		json_t *c = b->containers[b->si[i].container];
		/* An owner missing from the dump cannot be referenced: its tid
		 * goes beside the JDK member, which stays null. */
		jj_set(c, tid_known(&b->tids, jv_integer(o)) ? "owner" : "ownerTid",
		       json_integer(jv_integer(o)));
	}
}

/* Writes the containers in order, each with its threads. */
static void write_containers(struct builder *b, struct jw *w)
{
	size_t i = 0;
	jw_arr(w);
	for (size_t c = 0; c < b->ncont; c++) {
		const char *k;
		json_t *v;
		jw_obj(w);
		json_object_foreach(b->containers[c], k, v)
		{
			jw_key(w, k);
			if (strcmp(k, "threads") != 0) {
				jw_json(w, v);
				continue;
			}
			jw_arr(w);
			for (; i < b->nplaced && b->placed[i].container == c; i++)
				write_thread(b, w, &b->placed[i]);
			jw_end(w);
		}
		jw_end(w);
	}
	jw_end(w);
}

/* A duration the daemon reported, or null: a negative one is not a duration
 * (the schema says so), whatever a damaged reply claims. */
static json_t *duration_or_null(const jv *obj, const char *key)
{
	const jv *v = jv_get(obj, key);
	return jv_is_integer(v) && jv_integer(v) >= 0 ? json_integer(jv_integer(v)) : json_null();
}

/* Writes what crashed the process: the thread, the signal, the task it ran and
 * that task's scope (its container), the exit cause, and the stack. */
static void write_crash(struct builder *b, struct jw *w)
{
	jw_obj(w);
	const jv *sig = jv_get(b->crash, "signal");
	json_int_t tid = crash_tid(b);
	jw_kjson_new(w, "tid", tid >= 0 ? json_integer(tid) : json_null());
	jw_kjson_new(w, "signal", jv_is_integer(sig) ? json_integer(jv_integer(sig)) : json_null());
	jw_kjson_new(
	    w, "signalName",
	    jj_string_or_null(jv_is_integer(sig) ? jj_signal_name(jv_integer(sig)) : NULL));
	const jv *code = jv_get(b->crash, "si_code");
	if (jv_is_integer(code)) {
		jw_kjson_new(w, "siCode", json_integer(jv_integer(code)));
		jw_kjson_new(
		    w, "siCodeName",
		    jj_string_or_null(jv_is_integer(sig)
					  ? jj_si_code_name(jv_integer(sig), jv_integer(code))
					  : NULL));
	}
	const char *fa = jj_str(b->crash, "fault_addr");
	if (fa) {
		char hex[32];
		jj_strcpy(hex, sizeof hex, fa, "");
		/* Only what the schema's pattern allows. */
		bool ok = hex[0] == '0' && hex[1] == 'x' && hex[2] &&
			  strspn(hex + 2, "0123456789abcdef") == strlen(hex + 2);
		jw_kjson_new(w, "faultAddress", ok ? json_string(hex) : json_null());
	}
	jw_kstr_or_null(w, "exitCause", b->process, "exit_cause");
	jw_kid_or_null(w, "task", b->crash, "task");
	long s = lookup(b->scope_ref, b->nscope_ref, jv_get(b->crash, "scope"));
	jw_kjson_new(w, "container",
		     s >= 0 && b->si[s].container >= 0 ? json_string(cname(b, b->si[s].container))
						       : json_null());
	jj_write_stack(w, "stack", "inlinedFrames", b->crash, JDKDUMP_MAX_FRAMES, b->frames);
	jw_end(w);
}

/* Whether v reads as a version: numbers joined by dots, then optionally
 * "-" or "+" and letters, digits, dots, "-" or "+" ("0.1.0", "1.2.3-rc1"). */
static bool version_ok(const char *v)
{
	size_t i = 0;
	for (;;) {
		size_t d = strspn(v + i, "0123456789");
		if (!d)
			return false;
		i += d;
		if (v[i] != '.')
			break;
		i++;
	}
	if (v[i] == '-' || v[i] == '+') {
		const char *rest = v + i + 1;
		return *rest && strspn(rest, "0123456789abcdefghijklmnopqrstuvwxyz"
					     "ABCDEFGHIJKLMNOPQRSTUVWXYZ.-+") == strlen(rest);
	}
	return v[i] == '\0';
}

static void write_dump(struct builder *b, struct jw *w)
{
	const jv *pid = jv_get(b->process, "pid");
	const jv *lost = jv_get(b->process, "lost");
	char rv[JDKDUMP_MAX_STR + 1];
	jj_strcpy(rv, sizeof rv, jj_str(b->process, "runtime_version"), "");

	jw_obj(w);
	jw_key(w, "threadDump");
	jw_obj(w);
	jw_kint(w, "formatVersion", 2);
	jw_kint(w, "processId", jv_integer(pid) > 0 ? jv_integer(pid) : 0);
	write_time(b, w);
	/* A version where readers expect one; the runtime's name beside it. */
	jw_kstr(w, "runtimeVersion", version_ok(rv) ? rv : "0");
	jw_key(w, "threadContainers");
	write_containers(b, w);
	bool plain = jv_is_false(jv_get(b->process, "instrumented"));
	jw_kjson_new(w, "runtimeName", plain ? json_null() : json_string("libscope"));
	jw_kstr_or_null(w, "processName", b->process, "name");
	jw_kenum_or_null(w, "processState", b->process, "state", jj_proc_states);
	jw_kjson_new(w, "processStartTime", iso_or_null(jv_get(b->process, "start_time_ms")));
	jw_kjson_new(w, "complete", json_boolean(b->complete));
	if (b->crash) {
		jw_key(w, "crash");
		write_crash(b, w);
	}
	jw_kjson_new(
	    w, "eventsLost",
	    json_integer(jv_is_integer(lost) && jv_integer(lost) > 0 ? jv_integer(lost) : 0));
	jw_kenum_or_null(w, "stackSource", b->reply, "source", jj_sources);
	if (plain)
		jw_kjson_new(w, "instrumented", json_false());
	jw_key(w, "captureNs");
	size_t at = jw_offset(w);
	jw_json_new(w, duration_or_null(b->reply, "capture_ns"));
	mark(b, w, at, JDKDUMP_MARK_CAPTURE_NS);
	const jv *taken = jv_get(jv_get(b->reply, "last_stacks"), "taken_ms");
	if (b->last && jv_is_number(taken))
		jw_kjson_new(w, "lastStacksAt", iso_or_null(taken));
	/* Whether tree and stacks are of one moment; if not, by how much. */
	const jv *moved = jv_get(b->reply, "events_during_capture");
	if (jv_is_integer(moved) && jv_integer(moved) >= 0)
		jw_kjson_new(w, "eventsDuringCapture", json_integer(jv_integer(moved)));
	jw_key(w, "maxPauseNs");
	at = jw_offset(w);
	jw_json_new(w, duration_or_null(b->reply, "max_pause_ns"));
	mark(b, w, at, JDKDUMP_MARK_MAX_PAUSE_NS);
	jw_end(w);
	jw_end(w);
}

static void builder_free(struct builder *b)
{
	for (size_t i = 0; i < b->ncont; i++)
		json_decref(b->containers[i]);
	free(b->containers);
	free(b->placed);
	free(b->pool_container);
	free(b->si);
	free(b->scope_ref);
	free(b->task_ref);
	free(b->pool_ref);
	free(b->stack_ref);
	free(b->last_ref);
	free(b->worker_ref);
	free(b->owner_ref);
	json_decref(b->names);
	free(b->tids.k);
	json_decref(b->frames);
	free(b->stext);
	free(b->vtext);
}

/* Builds the dump of reply through w; false (with err) when reply is not
 * an object or memory ran out. */
static bool build(const jv *reply, struct jw *w, struct jdkdump_marks *marks, char *err,
		  size_t errlen)
{
	if (!jv_is_object(reply)) {
		snprintf(err, errlen, "the daemon's dump reply is not a JSON object");
		return false;
	}
	struct builder b = {.reply = reply, .marks = marks};
	(void)jj_failed_take();
	b.process = jv_get(reply, "process");
	b.model = jv_get(reply, "model");
	b.threads = jj_array(b.model, "threads");
	b.pools = jj_array(b.model, "pools");
	b.scopes = jj_array(b.model, "scopes");
	b.tasks = jj_array(b.model, "tasks");
	b.stacks = jj_array(reply, "stacks");
	b.crash = jv_is_object(jv_get(b.process, "crash")) ? jv_get(b.process, "crash") : NULL;
	b.last = jj_array(jv_get(reply, "last_stacks"), "stacks");
	b.advice = jv_is_object(jv_get(reply, "advice")) ? jv_get(reply, "advice") : NULL;

	const jv *now = jv_get(b.model, "now_ms");
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	jdkdump_iso_time(jv_is_number(now) ? jv_number(now)
					   : (double)ts.tv_sec * 1000 + ts.tv_nsec / 1e6,
			 b.now_iso, sizeof b.now_iso);
	/* Incomplete when the daemon says so or when whole parts are missing;
	 * a cut cycle clears it too. */
	b.complete = jv_is_object(b.process) && jv_is_object(b.model) &&
		     !jv_is_false(jv_get(b.process, "complete"));

	b.names = json_object();
	b.frames = json_object();
	b.scope_ref = index_by(b.scopes, "id", &b.nscope_ref);
	b.task_ref = index_by(b.tasks, "id", &b.ntask_ref);
	b.pool_ref = index_by(b.pools, "id", &b.npool_ref);
	b.stack_ref = index_by(b.stacks, "tid", &b.nstack_ref);
	b.last_ref = index_by(b.last, "tid", &b.nlast_ref);
	/* Without it every stack is written in full: the same text. */
	if (!w->tree) {
		b.stext = calloc(jv_size(b.stacks) + 1, sizeof *b.stext);
		b.vtext = calloc(b.nscope_ref + 1, sizeof *b.vtext); /* si[] is as long */
	}

	bool ok = false;
	if (b.names && b.frames && b.scope_ref && b.task_ref && b.pool_ref && b.stack_ref &&
	    b.last_ref && add_container(&b, container_new(&b, ROOT_NAME, NULL, "root")) == 0 &&
	    add_pools(&b) == 0 && add_scopes(&b) == 0 && index_people(&b) == 0 &&
	    add_threads(&b) == 0) {
		fill_containers(&b);
		write_dump(&b, w);
		ok = !w->failed;
	}
	if (jj_failed_take())
		ok = false;
	if (!ok)
		snprintf(err, errlen, "out of memory building the thread dump");
	builder_free(&b);
	return ok;
}

json_t *jdkdump_build_doc(const jv *reply, char *err, size_t errlen)
{
	struct jw w;
	jw_init(&w, true);
	json_t *out = build(reply, &w, NULL, err, errlen) ? jw_take(&w) : NULL;
	if (!out && !w.failed && jv_is_object(reply))
		snprintf(err, errlen, "out of memory building the thread dump");
	jw_fini(&w);
	return out;
}

void jdkdump_marks_free(struct jdkdump_marks *m)
{
	free(m->m);
	memset(m, 0, sizeof *m);
}

char *jdkdump_json_doc(const jv *reply, size_t *len, char *err, size_t errlen)
{
	return jdkdump_json_doc_marked(reply, len, NULL, err, errlen);
}

char *jdkdump_json_doc_marked(const jv *reply, size_t *len, struct jdkdump_marks *marks, char *err,
			      size_t errlen)
{
	if (marks) {
		marks->n = 0;
		marks->failed = false;
	}
	struct jw w;
	jw_init(&w, false);
	char *out = NULL;
	/* A thread takes about a kilobyte and a half of text: the buffer is
	 * sized once for all of them (and 64 KiB for the rest). */
	(void)jw_reserve(&w, jv_size(jv_get(reply, "stacks")) * 1536 + (64u << 10));
	if (build(reply, &w, marks, err, errlen) && jw_text(&w, len)) {
		out = w.buf; /* the text is handed over whole */
		w.buf = NULL;
	} else if (jv_is_object(reply)) {
		snprintf(err, errlen, "out of memory building the thread dump");
	}
	jw_fini(&w);
	return out;
}

/* The text a mark of kind stands for at now, written as the builder
 * writes it, into v (room for 40 bytes); returns its length. */
static size_t moment_value(const struct jdkdump_moment *now, enum jdkdump_mark_kind kind, char *v)
{
	char iso[40];
	int64_t ns = kind == JDKDUMP_MARK_CAPTURE_NS ? now->capture_ns : now->max_pause_ns;
	struct jw w;
	jw_init(&w, false);
	if (kind == JDKDUMP_MARK_TIME)
		jw_str(&w, jdkdump_iso_time(now->now_ms, iso, sizeof iso));
	else if (ns >= 0)
		jw_int(&w, ns);
	else
		jw_null(&w);
	size_t n = !w.failed && w.len < 40 ? w.len : 0;
	if (n)
		memcpy(v, w.buf, n);
	jw_fini(&w);
	return n;
}

/* The text of a moved thread's marked value, written as write_thread()
 * does from a stack entry whose state or blocked_in (m->kind) is m->raw,
 * into a new jw; false when it is not a value the mark can stand for. */
static bool moved_value(const struct jdkdump_moved *m, struct jw *w)
{
	static const char pre[2][16] = {"{\"state\":", "{\"blocked_in\":"};
	int k = m->kind == JDKDUMP_MARK_STATE ? 0 : 1;
	if ((m->kind != JDKDUMP_MARK_STATE && m->kind != JDKDUMP_MARK_BLOCKED_IN) || !m->raw ||
	    m->rawlen > (1u << 20))
		return false;
	size_t n = strlen(pre[k]);
	char *obj = malloc(n + m->rawlen + 2);
	if (!obj)
		return false;
	memcpy(obj, pre[k], n);
	memcpy(obj + n, m->raw, m->rawlen);
	memcpy(obj + n + m->rawlen, "}", 2);
	struct jv_doc *doc = NULL;
	char err[64];
	bool ok = jv_parse(obj, n + m->rawlen + 1, &doc, err, sizeof err) == 0;
	free(obj);
	if (ok) {
		const jv *st = jv_root(doc);
		const char *state = k == 0 ? jj_thread_state(st) : NULL;
		if (k == 0 && !state)
			ok = false; /* "stateKnown" would come (or go): not a mark's change */
		else if (k == 0)
			jw_str(w, state);
		else
			write_blocked_in(w, st);
	}
	jv_free(doc);
	return ok && !w->failed;
}

char *jdkdump_json_remark_moved(const char *text, size_t len, const struct jdkdump_marks *marks,
				const struct jdkdump_moment *now, const struct jdkdump_moved *moved,
				size_t nmoved, size_t *outlen, struct jdkdump_marks *out)
{
	char val[3][40];
	size_t vlen[3];
	for (int k = 0; k < 3; k++)
		if (!(vlen[k] = moment_value(now, (enum jdkdump_mark_kind)k, val[k])))
			return NULL;
	if (nmoved > JDKDUMP_MAX_MOVED)
		return NULL;
	/* The moved values' new text, each used once. */
	struct jw mv[JDKDUMP_MAX_MOVED];
	bool used[JDKDUMP_MAX_MOVED] = {false};
	size_t extra = 0, nmv = 0;
	char *o = NULL;
	for (; nmv < nmoved; nmv++) {
		jw_init(&mv[nmv], false);
		if (!moved_value(&moved[nmv], &mv[nmv])) {
			nmv++;
			goto out;
		}
		extra += mv[nmv].len;
	}
	out->n = 0;
	out->failed = false;
	if (out->cap < marks->n + 1) {
		struct jdkdump_mark *nm = realloc(out->m, (marks->n + 1) * sizeof *nm);
		if (!nm)
			goto out;
		out->m = nm;
		out->cap = marks->n + 1;
	}
	if (!(o = malloc(len + 40 * marks->n + extra + 1)))
		goto out;
	size_t from = 0, n = 0;
	for (size_t i = 0; i < marks->n; i++) {
		const struct jdkdump_mark *m = &marks->m[i];
		if (m->at < from || m->at > len || m->len > len - m->at ||
		    (unsigned)m->kind > JDKDUMP_MARK_BLOCKED_IN)
			goto fail; /* not marks of this text */
		memcpy(o + n, text + from, m->at - from);
		n += m->at - from;
		const char *v = text + m->at;
		size_t vl = m->len;
		if ((unsigned)m->kind <= JDKDUMP_MARK_MAX_PAUSE_NS) {
			v = val[m->kind];
			vl = vlen[m->kind];
		} else {
			for (size_t j = 0; j < nmoved; j++)
				if (moved[j].tid == m->tid && moved[j].kind == m->kind) {
					if (used[j] || v != text + m->at)
						goto fail; /* twice: not one value */
					used[j] = true;
					v = mv[j].buf;
					vl = mv[j].len;
				}
		}
		out->m[out->n++] = (struct jdkdump_mark){n, vl, m->kind, m->tid};
		memcpy(o + n, v, vl);
		n += vl;
		from = m->at + m->len;
	}
	for (size_t j = 0; j < nmoved; j++)
		if (!used[j])
			goto fail; /* a moved value the text has no mark for */
	memcpy(o + n, text + from, len - from);
	n += len - from;
	o[n] = '\0';
	*outlen = n;
	goto out;
fail:
	free(o);
	o = NULL;
out:
	for (size_t j = 0; j < nmv; j++)
		jw_fini(&mv[j]);
	return o;
}

char *jdkdump_json_remark(const char *text, size_t len, const struct jdkdump_marks *marks,
			  const struct jdkdump_moment *now, size_t *outlen,
			  struct jdkdump_marks *out)
{
	return jdkdump_json_remark_moved(text, len, marks, now, NULL, 0, outlen, out);
}

bool jdkdump_json_remark_inplace(char *text, size_t len, const struct jdkdump_marks *marks,
				 const struct jdkdump_moment *now)
{
	char val[3][40];
	size_t vlen[3];
	for (int k = 0; k < 3; k++)
		if (!(vlen[k] = moment_value(now, (enum jdkdump_mark_kind)k, val[k])))
			return false;
	size_t from = 0;
	for (size_t i = 0; i < marks->n; i++) {
		const struct jdkdump_mark *m = &marks->m[i];
		if (m->at < from || m->at > len || (unsigned)m->kind > JDKDUMP_MARK_BLOCKED_IN ||
		    m->len > len - m->at ||
		    ((unsigned)m->kind <= JDKDUMP_MARK_MAX_PAUSE_NS && m->len != vlen[m->kind]))
			return false;
		from = m->at + m->len;
	}
	for (size_t i = 0; i < marks->n; i++)
		if ((unsigned)marks->m[i].kind <= JDKDUMP_MARK_MAX_PAUSE_NS)
			memcpy(text + marks->m[i].at, val[marks->m[i].kind], marks->m[i].len);
	return true;
}

json_t *jdkdump_build(const json_t *reply, char *err, size_t errlen)
{
	if (!json_is_object(reply)) {
		snprintf(err, errlen, "the daemon's dump reply is not a JSON object");
		return NULL;
	}
	/* One reader for both paths: the text form of the reply goes through
	 * the same parser scopecmd uses on the wire. */
	size_t len;
	char *text = jtext_dump(reply, JSON_COMPACT, false, &len);
	struct jv_doc *doc = NULL;
	json_t *out = NULL;
	if (text && jv_parse(text, len, &doc, err, errlen) == 0)
		out = jdkdump_build_doc(jv_root(doc), err, errlen);
	else if (!text)
		snprintf(err, errlen, "out of memory building the thread dump");
	free(text);
	jv_free(doc);
	return out;
}
