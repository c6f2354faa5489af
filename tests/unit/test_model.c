/* test_model.c - the process model: idempotence, out-of-order events,
 * snapshot repair, retention, caps, call sites, and its JSON (whole and
 * delta). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/model.h"
#include "../../daemon/symbolize.h"
#include "../../dump/jdkdump.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned long long proc_starttime(pid_t pid);

/* A task body of this binary for the symbolizer to name: not static, not
 * inlined, and long enough that addresses inside it can stand for distinct
 * bodies. */
__attribute__((noinline)) int model_body_fetch_user(int n)
{
	volatile int acc = 0;
	for (int i = 0; i < n; i++)
		acc += i * 7 + (acc >> 3);
	return acc;
}

#define SEC 1000000000ll

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static struct proto_msg
ev(uint16_t type)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.ts = 1000;
	return m;
}

static struct proto_msg thread_start(uint32_t tid, const char *name, uint32_t role)
{
	struct proto_msg m = ev(PROTO_EV_THREAD_START);
	m.tid = tid;
	m.name = S(name);
	m.role = role;
	return m;
}

/* The call sites the helpers' events name; init() defines them, as the
 * agent sends a site's SITE before the first event that names it. */
enum { SITE_HANDLE = 1, SITE_SERVE = 2 };

static struct proto_msg site_def(uint32_t site, const char *file, const char *func, int32_t line)
{
	struct proto_msg m = ev(PROTO_SITE);
	m.ts = 0;
	m.site = site;
	m.file = S(file);
	m.func = S(func);
	m.line = line;
	return m;
}

static struct proto_msg scope_open(uint64_t id, uint64_t parent, const char *name)
{
	struct proto_msg m = ev(PROTO_EV_SCOPE_OPEN);
	m.scope = id;
	m.parent = parent;
	m.tid = 100;
	m.name = S(name);
	m.site = SITE_HANDLE;
	m.joiner = 1;
	return m;
}

static struct proto_msg task(uint16_t type, uint64_t id, uint64_t scope, uint32_t state)
{
	struct proto_msg m = ev(type);
	m.task = id;
	m.scope = scope;
	m.state = state;
	m.tid = 101;
	if (type == PROTO_EV_TASK_FORK)
		m.site = SITE_SERVE;
	return m;
}

static struct proto_msg fork_fn(uint64_t id, uint64_t fn)
{
	struct proto_msg m = task(PROTO_EV_TASK_FORK, id, 1, PROTO_TASK_FORKED);
	m.fn = fn;
	return m;
}

static struct proto_msg scope_ev(uint16_t type, uint64_t id)
{
	struct proto_msg m = ev(type);
	m.scope = id;
	return m;
}

static struct proto_msg snap(uint16_t type, uint64_t seq)
{
	struct proto_msg m = ev(type);
	m.seq = seq;
	return m;
}

/* Applies one message that must apply cleanly. */
static void apply_ok(struct model *m, struct proto_msg msg, int64_t now)
{
	assert_int_equal(model_apply(m, &msg, now), 0);
}

/* A model with the helpers' two call sites defined. */
static void init(struct model *m, size_t max_entities)
{
	struct model_limits lim = {.max_entities = max_entities, .retain_ns = 5 * SEC};
	model_init(m, &lim);
	apply_ok(m, site_def(SITE_HANDLE, "demo.c", "handle", 42), 0);
	apply_ok(m, site_def(SITE_SERVE, "demo.c", "serve", 40), 0);
}

static void apply_all(struct model *m, const struct proto_msg *msgs, size_t n, int64_t now)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(model_apply(m, &msgs[i], now), 0);
}

static char *render(const struct model *m)
{
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 1764441600000000000ll};
	model_render(m, &clk, 1764441605000000000ll, &b);
	jb_raw(&b, "", 1);
	assert_false(b.oom);
	return b.p;
}

static json_t *render_json(const struct model *m)
{
	char *text = render(m);
	json_error_t err;
	json_t *j = json_loads(text, 0, &err);
	if (!j)
		fail_msg("model JSON does not parse: %s in %s", err.text, text);
	free(text);
	return j;
}

static json_t *find_id(json_t *arr, const char *key, uint64_t id)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		if ((uint64_t)json_integer_value(json_object_get(v, key)) == id)
			return v;
	}
	return NULL;
}

/* Entity id of the rendered model j's array kind ("threads" key on tid). */
static json_t *entity(json_t *j, const char *kind, uint64_t id)
{
	return find_id(json_object_get(j, kind), strcmp(kind, "threads") ? "id" : "tid", id);
}

/* Frees what a test rendered and the model it rendered. */
static void finish(struct model *m, json_t *j)
{
	json_decref(j);
	model_free(m);
}

static const char *str_at(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* The JDK dump (dump/jdkdump.h) of a reply whose model is m, rendered whole
 * or (live) as a dump needs it; *model_len: the model's bytes. */
static char *jdk_of(const struct model *m, bool live, size_t *model_len)
{
	static const char head[] = "{\"process\":{\"pid\":4242,\"state\":\"live\"},"
				   "\"stacks\":[],\"model\":";
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 1764441600000000000ll};
	jb_raw(&b, head, sizeof head - 1);
	if (live)
		model_render_live(m, &clk, 1764441605000000000ll, &b);
	else
		model_render(m, &clk, 1764441605000000000ll, &b);
	*model_len = b.len - (sizeof head - 1);
	jb_raw(&b, "}", 1);
	assert_false(b.oom);
	struct jv_doc *doc = NULL;
	char err[256];
	if (jv_parse(b.p, b.len, &doc, err, sizeof err) != 0)
		fail_msg("the reply does not parse: %s", err);
	size_t len;
	char *text = jdkdump_json_doc(jv_root(doc), &len, err, sizeof err);
	if (!text)
		fail_msg("no dump: %s", err);
	jv_free(doc);
	jb_free(&b);
	return text;
}

/* Whether a live render of m makes the same dump as a whole one; *smaller:
 * whether it left something out. */
static bool live_same_dump(const struct model *m, bool *smaller)
{
	size_t whole_len, live_len;
	char *whole = jdk_of(m, false, &whole_len), *live = jdk_of(m, true, &live_len);
	bool same = strcmp(whole, live) == 0;
	if (!same)
		print_message("whole:\n%s\nlive:\n%s\n", whole, live);
	*smaller = live_len < whole_len;
	free(whole);
	free(live);
	return same;
}

/* A small tree: main thread, worker, scope 1 with child scope 2 opened by task 10. */
static void build_tree(struct model *m)
{
	struct proto_msg msgs[] = {
	    thread_start(100, "main", PROTO_ROLE_MAIN),
	    thread_start(101, "io-1", PROTO_ROLE_WORKER),
	    scope_open(1, 0, "root"),
	    task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_START, 10, 1, 0),
	    scope_open(2, 1, "child"),
	    task(PROTO_EV_TASK_FORK, 11, 2, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_FORK, 12, 2, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_END, 12, 2, PROTO_TASK_FAILED),
	    scope_ev(PROTO_EV_JOIN_BEGIN, 1),
	};
	msgs[5].parent_task = 10;
	msgs[8].error = -5;
	apply_all(m, msgs, sizeof msgs / sizeof msgs[0], 0);
}

static void test_tree_and_json(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	build_tree(&m);
	assert_int_equal(model_count(&m, ENT_SCOPE), 2);
	assert_int_equal(model_count(&m, ENT_TASK), 3);
	assert_int_equal(model_count(&m, ENT_THREAD), 2);

	json_t *j = render_json(&m);
	json_t *scopes = json_object_get(j, "scopes"), *tasks = json_object_get(j, "tasks");
	json_t *s1 = find_id(scopes, "id", 1), *s2 = find_id(scopes, "id", 2);
	assert_non_null(s1);
	assert_non_null(s2);
	assert_string_equal(str_at(s1, "state"), "joining");
	assert_string_equal(str_at(s1, "joiner"), "any_successful");
	assert_true(json_is_null(json_object_get(s1, "parent")));
	assert_int_equal(json_integer_value(json_object_get(s2, "parent")), 1);
	assert_int_equal(json_integer_value(json_object_get(s2, "parent_task")), 10);
	assert_string_equal(str_at(json_object_get(s2, "site"), "file"), "demo.c");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(s2, "site"), "line")),
			 42);
	/* ts 1000 ns after the reference: 1764441600000 ms and a microsecond. */
	assert_true(json_real_value(json_object_get(s1, "opened_ms")) > 1764441599999.0 ||
		    json_integer_value(json_object_get(s1, "opened_ms")) == 1764441600000);
	json_t *t10 = find_id(tasks, "id", 10), *t12 = find_id(tasks, "id", 12);
	assert_string_equal(str_at(t10, "state"), "running");
	assert_int_equal(json_integer_value(json_object_get(t10, "worker")), 101);
	assert_string_equal(str_at(t12, "state"), "failed");
	assert_int_equal(json_integer_value(json_object_get(t12, "error")), -5);
	json_t *th = entity(j, "threads", 101);
	assert_string_equal(str_at(th, "role"), "worker");
	assert_int_equal(json_integer_value(json_object_get(th, "task")), 10);
	finish(&m, j);
}

static void test_idempotent(void **state)
{
	(void)state;
	struct model a, b;
	init(&a, 0);
	init(&b, 0);
	build_tree(&a);
	build_tree(&b);
	build_tree(&b); /* every event twice */
	char *ja = render(&a), *jb = render(&b);
	assert_string_equal(ja, jb);
	free(ja);
	free(jb);
	model_free(&a);
	model_free(&b);
}

static void test_out_of_order(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	/* End before fork and start; close before open. */
	struct proto_msg msgs[] = {
	    task(PROTO_EV_TASK_END, 7, 3, PROTO_TASK_SUCCESS),
	    task(PROTO_EV_TASK_START, 7, 3, 0),
	    task(PROTO_EV_TASK_FORK, 7, 3, PROTO_TASK_FORKED),
	    scope_ev(PROTO_EV_SCOPE_CLOSE, 3),
	    scope_ev(PROTO_EV_JOIN_END, 3),
	    scope_open(3, 0, "late"),
	};
	apply_all(&m, msgs, 6, 0);
	json_t *j = render_json(&m);
	json_t *t = entity(j, "tasks", 7);
	assert_string_equal(str_at(t, "state"), "success");
	assert_string_equal(str_at(json_object_get(t, "site"), "func"), "serve");
	json_t *s = entity(j, "scopes", 3);
	assert_string_equal(str_at(s, "state"), "closed");
	assert_string_equal(str_at(s, "name"), "late");
	finish(&m, j);
}

static void test_placeholder(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	apply_ok(&m, task(PROTO_EV_TASK_START, 5, 9, 0), 0);
	json_t *j = render_json(&m);
	json_t *t = entity(j, "tasks", 5);
	assert_string_equal(str_at(t, "state"), "running");
	assert_true(json_is_null(json_object_get(t, "site")));
	assert_int_equal(json_integer_value(json_object_get(t, "scope")), 9);
	finish(&m, j);
}

static void test_snapshot_repair(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	build_tree(&m);
	assert_false(m.complete);
	struct proto_msg lost = ev(PROTO_LOST);
	lost.total_lost = 17;
	lost.lost_since = 17;
	assert_int_equal(model_apply(&m, &lost, 0), 0);
	assert_false(m.complete);
	/* The fresh snapshot lists scope 1, task 10 and the main thread only. */
	struct proto_msg snapshot[] = {
	    snap(PROTO_SNAPSHOT_BEGIN, 2),
	    thread_start(100, "main", PROTO_ROLE_MAIN),
	    scope_open(1, 0, "root"),
	    task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_START, 10, 1, 0),
	    snap(PROTO_SNAPSHOT_END, 2),
	};
	for (int i = 1; i < 5; i++)
		snapshot[i].flags = PROTO_F_SNAPSHOT;
	apply_all(&m, snapshot, 6, 0);
	assert_true(m.complete);
	assert_true(m.repaired);
	assert_int_equal(m.lost, 17);
	assert_non_null(idmap_get(&m.ents[ENT_SCOPE], 1));
	assert_null(idmap_get(&m.ents[ENT_SCOPE], 2));	   /* live, not in the snapshot */
	assert_null(idmap_get(&m.ents[ENT_TASK], 11));	   /* live, not in the snapshot */
	assert_non_null(idmap_get(&m.ents[ENT_TASK], 12)); /* ended: kept for retention */
	assert_null(idmap_get(&m.ents[ENT_THREAD], 101));
	model_free(&m);
}

static void test_snapshot_wrong_seq_ignored(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	build_tree(&m);
	apply_ok(&m, snap(PROTO_SNAPSHOT_BEGIN, 5), 0);
	apply_ok(&m, snap(PROTO_SNAPSHOT_END, 4), 0);
	assert_false(m.complete);
	assert_int_equal(model_count(&m, ENT_SCOPE), 2);
	model_free(&m);
}

static void test_retention(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	m.track_removals = true;
	build_tree(&m); /* task 12 ended at now = 0 */
	apply_ok(&m, scope_ev(PROTO_EV_SCOPE_CLOSE, 2), 1 * SEC);
	model_sweep(&m, 5 * SEC - 1);
	assert_non_null(idmap_get(&m.ents[ENT_TASK], 12));
	model_sweep(&m, 5 * SEC);
	assert_null(idmap_get(&m.ents[ENT_TASK], 12));
	assert_non_null(idmap_get(&m.ents[ENT_SCOPE], 2));
	model_sweep(&m, 6 * SEC);
	assert_null(idmap_get(&m.ents[ENT_SCOPE], 2));
	assert_non_null(idmap_get(&m.ents[ENT_TASK], 10)); /* still running */
	assert_int_equal(m.nrm, 2);
	model_free(&m);
}

static void test_entity_cap(void **state)
{
	(void)state;
	struct model m;
	init(&m, 10);
	int rc = 0;
	uint64_t id;
	for (id = 1; id <= 20 && rc == 0; id++) {
		struct proto_msg f = task(PROTO_EV_TASK_FORK, id, 1, PROTO_TASK_FORKED);
		rc = model_apply(&m, &f, 0);
	}
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(id - 1, 11); /* the scope placeholder plus nine tasks fit */
	assert_int_equal(model_count(&m, ENT_TASK) + model_count(&m, ENT_SCOPE), 10);
	assert_non_null(strstr(m.err, "cap"));
	/* Events on what is held still apply. */
	apply_ok(&m, task(PROTO_EV_TASK_END, 1, 1, PROTO_TASK_SUCCESS), 0);
	model_free(&m);
}

/* Over the string cap a SITE is refused, not fatal: events naming it have
 * no site, and a refused redefinition forgets the old one rather than keep
 * a definition that is not the number's any more. */
static void test_string_and_value_caps(void **state)
{
	(void)state;
	struct model m;
	struct model_limits lim = {.max_string_bytes = 64, .max_values = 2};
	model_init(&m, &lim);
	char name[40];
	uint32_t site;
	for (site = 1; site <= 10 && !m.sites_refused; site++) {
		snprintf(name, sizeof name, "function_number_%u", site);
		apply_ok(&m, site_def(site, "a.c", name, 7), 0);
		struct proto_msg f = task(PROTO_EV_TASK_FORK, site, 1, 0);
		f.site = site;
		apply_ok(&m, f, 0);
	}
	site--; /* the one refused */
	assert_int_equal(m.sites_refused, 1);
	assert_true(site > 1 && site < 10);
	assert_non_null(strstr(m.err, "over 64 bytes of distinct file and function names, the cap; "
				      "refusing site"));
	assert_int_equal(m.sites.n, site - 1);
	const struct m_task *t = idmap_get(&m.ents[ENT_TASK], 1);
	assert_string_equal(t->func, "function_number_1");
	assert_int_equal(t->line, 7);
	t = idmap_get(&m.ents[ENT_TASK], site);
	assert_null(t->file);
	assert_null(t->func);
	assert_int_equal(t->line, 0);
	/* Site 1 redefined with names that do not fit: it is forgotten. */
	apply_ok(&m, site_def(1, "b.c", "a_function_name_that_is_new", 8), 0);
	assert_int_equal(m.sites_refused, 2);
	assert_null(idmap_get(&m.sites, 1));
	struct proto_msg f = task(PROTO_EV_TASK_FORK, 100, 1, 0);
	f.site = 1;
	apply_ok(&m, f, 0);
	assert_null(((const struct m_task *)idmap_get(&m.ents[ENT_TASK], 100))->func);
	/* Names already held still fit: a redefinition with them is taken. */
	apply_ok(&m, site_def(1, "a.c", "function_number_1", 9), 0);
	assert_int_equal(m.sites_refused, 2);
	assert_int_equal(((const struct m_site *)idmap_get(&m.sites, 1))->line, 9);

	struct proto_msg v = scope_ev(PROTO_EV_VALUE_BIND, 1);
	v.key = S("a");
	v.value = S("1");
	assert_int_equal(model_apply(&m, &v, 0), 0);
	v.value = S("2"); /* rebinding replaces */
	assert_int_equal(model_apply(&m, &v, 0), 0);
	v.key = S("b");
	assert_int_equal(model_apply(&m, &v, 0), 0);
	v.key = S("c");
	assert_int_equal(model_apply(&m, &v, 0), -ENOSPC);
	const struct m_scope *s = idmap_get(&m.ents[ENT_SCOPE], 1);
	assert_int_equal(s->nvalues, 2);
	assert_string_equal(s->values[0].value, "2");
	model_free(&m);
}

/* The rendered site of entity id of kind ("scopes", "tasks"): NULL when it
 * is null; file, func and line otherwise, as "file:func:line". */
static const char *site_of(json_t *j, const char *kind, uint64_t id, char *buf, size_t n)
{
	json_t *e = entity(j, kind, id);
	assert_non_null(e);
	json_t *site = json_object_get(e, "site");
	assert_non_null(site); /* the member is always there */
	if (json_is_null(site))
		return NULL;
	snprintf(buf, n, "%s:%s:%lld", str_at(site, "file"), str_at(site, "func"),
		 (long long)json_integer_value(json_object_get(site, "line")));
	return buf;
}

/* A SITE defines a number that later SCOPE_OPEN and TASK_FORK name; a new
 * definition replaces it for the events after it, and what was opened or
 * forked before keeps the site it had. */
static void test_site_define_and_redefine(void **state)
{
	(void)state;
	struct model m;
	struct model_limits lim = {.retain_ns = 5 * SEC};
	model_init(&m, &lim);
	char b[128];
	apply_ok(&m, site_def(7, "srv.c", "accept_loop", 120), 0);
	struct proto_msg o = scope_open(1, 0, "first");
	o.site = 7;
	apply_ok(&m, o, 0);
	struct proto_msg f = task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED);
	f.site = 7;
	apply_ok(&m, f, 0);
	apply_ok(&m, site_def(7, "srv2.c", "accept_loop_v2", 130), 0);
	assert_int_equal(m.sites.n, 1);
	o = scope_open(2, 1, "second");
	o.site = 7;
	apply_ok(&m, o, 0);
	f = task(PROTO_EV_TASK_FORK, 11, 2, PROTO_TASK_FORKED);
	f.site = 7;
	apply_ok(&m, f, 0);
	/* Empty strings are a site without that part, as in version 1. */
	apply_ok(&m, site_def(8, "", "", 5), 0);
	f = task(PROTO_EV_TASK_FORK, 12, 2, PROTO_TASK_FORKED);
	f.site = 8;
	apply_ok(&m, f, 0);

	json_t *j = render_json(&m);
	assert_string_equal(site_of(j, "scopes", 1, b, sizeof b), "srv.c:accept_loop:120");
	assert_string_equal(site_of(j, "tasks", 10, b, sizeof b), "srv.c:accept_loop:120");
	assert_string_equal(site_of(j, "scopes", 2, b, sizeof b), "srv2.c:accept_loop_v2:130");
	assert_string_equal(site_of(j, "tasks", 11, b, sizeof b), "srv2.c:accept_loop_v2:130");
	const struct m_task *t12 = idmap_get(&m.ents[ENT_TASK], 12);
	assert_null(t12->file);
	assert_null(t12->func);
	assert_int_equal(t12->line, 5);
	finish(&m, j);
}

/* An event naming a site the model does not know (0, never defined, or its
 * SITE lost) has no site and is otherwise applied in full; a SITE numbered
 * 0, which the decoder refuses, defines nothing. */
static void test_site_unknown(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	apply_ok(&m, site_def(0, "zero.c", "zero", 1), 0);
	assert_int_equal(m.sites.n, 2);
	static const uint32_t unknown[] = {0, 3, 0xffffffffu};
	for (size_t i = 0; i < 3; i++) {
		struct proto_msg o = scope_open(20 + i, 0, "nowhere");
		o.site = unknown[i];
		apply_ok(&m, o, 0);
		struct proto_msg f = task(PROTO_EV_TASK_FORK, 30 + i, 20 + i, PROTO_TASK_FORKED);
		f.site = unknown[i];
		apply_ok(&m, f, 0);
	}
	json_t *j = render_json(&m);
	char b[128];
	for (uint64_t i = 0; i < 3; i++) {
		assert_null(site_of(j, "scopes", 20 + i, b, sizeof b));
		assert_null(site_of(j, "tasks", 30 + i, b, sizeof b));
		json_t *s = entity(j, "scopes", 20 + i);
		assert_string_equal(str_at(s, "name"), "nowhere");
		assert_string_equal(str_at(s, "joiner"), "any_successful");
		assert_string_equal(str_at(entity(j, "tasks", 30 + i), "state"), "forked");
	}
	finish(&m, j);
}

/* A SITE that comes after the events naming it (the agent's snapshot can
 * send a task a thread forked during its walk, naming a site that thread
 * numbered then, whose SITE follows in its ring) names them when it comes;
 * one that already had a site keeps it, and a later redefinition changes
 * nothing that was named. */
static void test_site_late(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	char b[128];
	struct proto_msg o = scope_open(40, 0, "late");
	o.site = 9;
	apply_ok(&m, o, 0);
	struct proto_msg f = task(PROTO_EV_TASK_FORK, 41, 40, PROTO_TASK_FORKED);
	f.site = 9;
	apply_ok(&m, f, 0);
	f = task(PROTO_EV_TASK_FORK, 42, 40, PROTO_TASK_FORKED);
	f.site = 10;
	apply_ok(&m, f, 0);
	json_t *j = render_json(&m);
	assert_null(site_of(j, "scopes", 40, b, sizeof b));
	assert_null(site_of(j, "tasks", 41, b, sizeof b));
	json_decref(j);
	apply_ok(&m, site_def(9, "late.c", "open_fork_join", 68), 0);
	j = render_json(&m);
	assert_string_equal(site_of(j, "scopes", 40, b, sizeof b), "late.c:open_fork_join:68");
	assert_string_equal(site_of(j, "tasks", 41, b, sizeof b), "late.c:open_fork_join:68");
	assert_null(site_of(j, "tasks", 42, b, sizeof b)); /* site 10 is still unknown */
	json_decref(j);
	apply_ok(&m, site_def(9, "other.c", "elsewhere", 1), 0);
	apply_ok(&m, site_def(10, "ten.c", "ten", 10), 0);
	j = render_json(&m);
	assert_string_equal(site_of(j, "tasks", 41, b, sizeof b), "late.c:open_fork_join:68");
	assert_string_equal(site_of(j, "tasks", 42, b, sizeof b), "ten.c:ten:10");
	assert_int_equal(m.npend, 0);
	finish(&m, j);
}

/* Past max_sites a new number is refused (counted, m->err says so) and its
 * events have no site; numbers already held can still be redefined. */
static void test_site_cap(void **state)
{
	(void)state;
	struct model m;
	struct model_limits lim = {.max_sites = 4};
	model_init(&m, &lim);
	for (uint32_t site = 1; site <= 6; site++) {
		char func[16];
		snprintf(func, sizeof func, "f%u", site);
		apply_ok(&m, site_def(site * 100, "cap.c", func, (int32_t)site), 0);
	}
	assert_int_equal(m.sites.n, 4);
	assert_int_equal(m.sites_refused, 2);
	assert_non_null(strstr(m.err, "defined 4 call sites, the cap; refusing site 600"));
	assert_null(idmap_get(&m.sites, 500));
	apply_ok(&m, site_def(200, "cap.c", "f2_again", 22), 0);
	assert_int_equal(m.sites_refused, 2);
	struct proto_msg f = task(PROTO_EV_TASK_FORK, 1, 1, PROTO_TASK_FORKED);
	f.site = 600;
	apply_ok(&m, f, 0);
	f = task(PROTO_EV_TASK_FORK, 2, 1, PROTO_TASK_FORKED);
	f.site = 200;
	apply_ok(&m, f, 0);
	const struct m_task *t1 = idmap_get(&m.ents[ENT_TASK], 1);
	const struct m_task *t2 = idmap_get(&m.ents[ENT_TASK], 2);
	assert_null(t1->func);
	assert_string_equal(t2->func, "f2_again");
	assert_int_equal(t2->line, 22);
	model_free(&m);
	/* The daemon's own limit. */
	model_init(&m, &(struct model_limits){0});
	assert_int_equal(m.lim.max_sites, MODEL_MAX_SITES);
	assert_int_equal(MODEL_MAX_SITES, 65536);
	model_free(&m);
}

/* Sites are the process's for its lifetime: a snapshot neither clears them
 * nor needs them again, and one that follows a loss gives a site to what
 * was opened or forked while its SITE was lost (the snapshot resends it). */
static void test_site_snapshot(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	build_tree(&m);
	/* SITE 9 was lost with the events around it; scope 3 and task 40 name it. */
	struct proto_msg o = scope_open(3, 0, "late");
	o.site = 9;
	apply_ok(&m, o, 0);
	struct proto_msg f = task(PROTO_EV_TASK_FORK, 40, 3, PROTO_TASK_FORKED);
	f.site = 9;
	apply_ok(&m, f, 0);
	assert_null(((const struct m_scope *)idmap_get(&m.ents[ENT_SCOPE], 3))->func);
	struct proto_msg lost = ev(PROTO_LOST);
	lost.total_lost = 4;
	lost.lost_since = 4;
	apply_ok(&m, lost, 0);
	/* The snapshot: SITE 9 again (not 1 and 2, to show they were kept), then
	 * the live entities, a repeat of scope 1 naming another site. */
	struct proto_msg snapshot[] = {
	    snap(PROTO_SNAPSHOT_BEGIN, 3),
	    site_def(9, "late.c", "late_open", 99),
	    thread_start(100, "main", PROTO_ROLE_MAIN),
	    scope_open(1, 0, "root"),
	    task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_START, 10, 1, 0),
	    scope_open(3, 0, "late"),
	    task(PROTO_EV_TASK_FORK, 40, 3, PROTO_TASK_FORKED),
	    snap(PROTO_SNAPSHOT_END, 3),
	};
	snapshot[3].site = 9;
	snapshot[6].site = 9;
	snapshot[7].site = 9;
	for (int i = 1; i < 8; i++)
		snapshot[i].flags = PROTO_F_SNAPSHOT;
	apply_all(&m, snapshot, sizeof snapshot / sizeof snapshot[0], 0);
	assert_true(m.complete && m.repaired);
	assert_int_equal(m.sites.n, 3);
	json_t *j = render_json(&m);
	char b[128];
	assert_string_equal(site_of(j, "scopes", 1, b, sizeof b), "demo.c:handle:42");
	assert_string_equal(site_of(j, "tasks", 10, b, sizeof b), "demo.c:serve:40");
	assert_string_equal(site_of(j, "scopes", 3, b, sizeof b), "late.c:late_open:99");
	assert_string_equal(site_of(j, "tasks", 40, b, sizeof b), "late.c:late_open:99");
	json_decref(j);
	/* A second snapshot without any SITE: the table still names new events. */
	apply_ok(&m, snap(PROTO_SNAPSHOT_BEGIN, 4), 0);
	apply_ok(&m, snap(PROTO_SNAPSHOT_END, 4), 0);
	o = scope_open(5, 0, "after");
	apply_ok(&m, o, 0);
	j = render_json(&m);
	assert_string_equal(site_of(j, "scopes", 5, b, sizeof b), "demo.c:handle:42");
	finish(&m, j);
}

static void test_delta(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	m.track_removals = true;
	build_tree(&m);
	uint64_t g = m.gen;
	struct proto_msg msgs[] = {
	    task(PROTO_EV_TASK_START, 11, 2, 0),
	    ev(PROTO_EV_POOL_CREATE),
	};
	msgs[1].pool_id = 3;
	msgs[1].name = S("io");
	apply_all(&m, msgs, 2, 0);
	model_sweep(&m, 10 * SEC); /* task 12 expires */
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 0};
	jb_obj(&b);
	model_render_delta(&m, &clk, g, &b);
	jb_obj_end(&b);
	jb_raw(&b, "", 1);
	json_t *j = json_loads(b.p, 0, NULL);
	assert_non_null(j);
	json_t *up = json_object_get(j, "upsert"), *rm = json_object_get(j, "remove");
	assert_int_equal(json_array_size(json_object_get(up, "tasks")), 1);
	assert_int_equal(json_integer_value(json_object_get(
			     json_array_get(json_object_get(up, "tasks"), 0), "id")),
			 11);
	assert_int_equal(json_array_size(json_object_get(up, "pools")), 1);
	assert_int_equal(json_array_size(json_object_get(up, "scopes")), 0);
	assert_int_equal(json_array_size(json_object_get(rm, "tasks")), 1);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(rm, "tasks"), 0)), 12);
	json_decref(j);
	jb_free(&b);
	model_trim_removals(&m, m.gen);
	assert_int_equal(m.nrm, 0);
	assert_true(m.rm_floor >= g);
	model_free(&m);
}

static void test_thread_reuse_and_exit(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	struct proto_msg a = thread_start(50, "old", PROTO_ROLE_WORKER),
			 x = ev(PROTO_EV_THREAD_EXIT);
	x.tid = 50;
	assert_int_equal(model_apply(&m, &a, 0), 0);
	assert_int_equal(model_apply(&m, &x, 0), 0);
	const struct m_thread *t = idmap_get(&m.ents[ENT_THREAD], 50);
	assert_true(t->flags & EF_ENDED);
	apply_ok(&m, thread_start(50, "new", PROTO_ROLE_OTHER), 0);
	assert_false(t->flags & EF_ENDED);
	assert_string_equal(t->name, "new");
	model_sweep(&m, 100 * SEC); /* the stale expiry must not remove the new thread */
	assert_non_null(idmap_get(&m.ents[ENT_THREAD], 50));
	model_free(&m);
}

/* A worker that registered after the snapshot's walk of the threads, and
 * started a task before its walk of the scopes: the snapshot's TASK_START
 * names a thread the daemon has not heard of, whose THREAD_START and a
 * repeat of the START follow the snapshot.  The thread keeps its task
 * (a crash in it names the task by it). */
static void test_task_before_its_thread(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	struct proto_msg start = task(PROTO_EV_TASK_START, 10, 1, 0);
	start.tid = 300;
	struct proto_msg snapshot[] = {
	    snap(PROTO_SNAPSHOT_BEGIN, 1),
	    thread_start(100, "main", PROTO_ROLE_MAIN),
	    scope_open(1, 0, "root"),
	    task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED),
	    start,
	    snap(PROTO_SNAPSHOT_END, 1),
	};
	for (int i = 1; i < 5; i++)
		snapshot[i].flags = PROTO_F_SNAPSHOT;
	apply_all(&m, snapshot, 6, 0);
	apply_ok(&m, thread_start(300, "worker-1", PROTO_ROLE_WORKER), 0);
	apply_ok(&m, start, 0);
	const struct m_thread *t = idmap_get(&m.ents[ENT_THREAD], 300);
	assert_non_null(t);
	assert_false(t->flags & (EF_PLACEHOLDER | EF_ENDED));
	assert_string_equal(t->name, "worker-1");
	assert_int_equal(t->task, 10);
	/* Its end clears it. */
	struct proto_msg end = task(PROTO_EV_TASK_END, 10, 1, PROTO_TASK_SUCCESS);
	end.tid = 300;
	apply_ok(&m, end, 0);
	assert_int_equal(t->task, 0);
	model_free(&m);
}

/* The end of a snapshot removes exactly the live entities it did not
 * mention, looking at the live ones only: ended ones stay for their
 * retention however many there are, a thread revived by tid reuse counts
 * as live again, and the live set stays in step through removals. */
static void test_snapshot_end_live_only(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	m.lim.max_retained = 10000; /* all 4995 ended tasks stay */
	apply_ok(&m, thread_start(101, "worker", PROTO_ROLE_WORKER), 0);
	apply_ok(&m, scope_open(1, 0, "root"), 0);
	for (uint64_t id = 1000; id < 6000; id++) {
		apply_ok(&m, task(PROTO_EV_TASK_FORK, id, 1, PROTO_TASK_FORKED), 0);
		if (id % 1000)
			apply_ok(&m, task(PROTO_EV_TASK_END, id, 1, PROTO_TASK_SUCCESS), 0);
	}
	assert_int_equal(m.live[ENT_TASK].n, 5); /* 1000, 2000, ... 5000 */
	struct proto_msg a = thread_start(50, "old", PROTO_ROLE_WORKER),
			 x = ev(PROTO_EV_THREAD_EXIT);
	x.tid = 50;
	apply_ok(&m, a, 0);
	apply_ok(&m, x, 0);
	apply_ok(&m, thread_start(50, "new", PROTO_ROLE_OTHER), 0); /* revived */

	struct proto_msg snapshot[] = {
	    snap(PROTO_SNAPSHOT_BEGIN, 3), thread_start(101, "worker", PROTO_ROLE_WORKER),
	    scope_open(1, 0, "root"),	   task(PROTO_EV_TASK_FORK, 3000, 1, PROTO_TASK_FORKED),
	    snap(PROTO_SNAPSHOT_END, 3),
	};
	for (int i = 1; i < 4; i++)
		snapshot[i].flags = PROTO_F_SNAPSHOT;
	apply_all(&m, snapshot, 5, 0);
	assert_null(idmap_get(&m.ents[ENT_THREAD], 50)); /* revived, then not mentioned */
	assert_non_null(idmap_get(&m.ents[ENT_THREAD], 101));
	assert_non_null(idmap_get(&m.ents[ENT_TASK], 3000));
	for (uint64_t id = 1000; id <= 5000; id += 1000)
		if (id != 3000)
			assert_null(idmap_get(&m.ents[ENT_TASK], id));
	assert_int_equal(model_count(&m, ENT_TASK), 1 + 4995); /* the ended ones stay */
	assert_int_equal(m.live[ENT_TASK].n, 1);
	assert_int_equal(m.live[ENT_THREAD].n, 1);
	assert_int_equal(m.live[ENT_SCOPE].n, 1);
	/* The set still tracks: ending the survivor empties it. */
	apply_ok(&m, task(PROTO_EV_TASK_END, 3000, 1, PROTO_TASK_SUCCESS), 0);
	assert_int_equal(m.live[ENT_TASK].n, 0);
	model_free(&m);
}

/* A scope keeps when its join began: the first JOIN_BEGIN's ts, which a
 * snapshot's repeat (stamped with the same instant by the agent, or later
 * by an older one) does not move. */
static void test_join_began(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	apply_ok(&m, scope_open(1, 0, "root"), 0);
	const struct m_scope *s = idmap_get(&m.ents[ENT_SCOPE], 1);
	assert_int_equal(s->join_began, 0);
	struct proto_msg jb = scope_ev(PROTO_EV_JOIN_BEGIN, 1);
	jb.ts = 5000;
	apply_ok(&m, jb, 0);
	assert_int_equal(s->join_began, 5000);
	jb.ts = 9000;
	jb.flags = PROTO_F_SNAPSHOT;
	apply_ok(&m, jb, 0);
	assert_int_equal(s->join_began, 5000);
	model_free(&m);
}

/* At most max_retained ended entities stay, the newest; live ones are never
 * touched; so a stream of short tasks never reaches the entity cap. */
static void test_max_retained(void **state)
{
	(void)state;
	struct model m;
	struct model_limits lim = {.max_entities = 100, .retain_ns = 5 * SEC, .max_retained = 10};
	model_init(&m, &lim);
	apply_ok(&m, site_def(SITE_SERVE, "demo.c", "serve", 40), 0);
	apply_ok(&m, scope_open(1, 0, "root"), 0);
	apply_ok(&m, task(PROTO_EV_TASK_FORK, 5, 1, PROTO_TASK_FORKED), 0); /* stays live */
	for (uint64_t id = 100; id < 1100; id++) {
		apply_ok(&m, task(PROTO_EV_TASK_FORK, id, 1, PROTO_TASK_FORKED), 0);
		apply_ok(&m, task(PROTO_EV_TASK_END, id, 1, PROTO_TASK_SUCCESS), 0);
	}
	assert_int_equal(model_count(&m, ENT_TASK), 1 + 10);
	assert_non_null(idmap_get(&m.ents[ENT_TASK], 5));
	assert_null(idmap_get(&m.ents[ENT_TASK], 1089));
	for (uint64_t id = 1090; id < 1100; id++)
		assert_non_null(idmap_get(&m.ents[ENT_TASK], id));
	model_free(&m);
}

/* An expired entity's memory is reused for the next new one (model.c keeps
 * freed entities as spares): the newcomer starts from nothing, with none of
 * the old task's worker, times, error, body or site. */
static void test_entity_reuse(void **state)
{
	(void)state;
	struct model m;
	struct model_limits lim = {.max_entities = 100, .retain_ns = 5 * SEC, .max_retained = 1};
	model_init(&m, &lim);
	apply_ok(&m, site_def(SITE_SERVE, "demo.c", "serve", 40), 0);
	apply_ok(&m, scope_open(1, 0, "root"), 0);
	struct proto_msg f = fork_fn(100, 0x401136);
	f.ts = 10;
	apply_ok(&m, f, 0);
	struct proto_msg st = task(PROTO_EV_TASK_START, 100, 1, PROTO_TASK_RUNNING);
	st.tid = 77;
	st.ts = 20;
	apply_ok(&m, st, 0);
	struct proto_msg end = task(PROTO_EV_TASK_END, 100, 1, PROTO_TASK_FAILED);
	end.error = -5;
	end.ts = 30;
	apply_ok(&m, end, 0);
	const struct m_task *old = idmap_get(&m.ents[ENT_TASK], 100);
	assert_non_null(old);
	assert_int_equal(old->worker, 77);
	/* 101 ends too: with one ended task retained, 100 goes. */
	apply_ok(&m, task(PROTO_EV_TASK_FORK, 101, 1, PROTO_TASK_FORKED), 0);
	apply_ok(&m, task(PROTO_EV_TASK_END, 101, 1, PROTO_TASK_SUCCESS), 0);
	assert_null(idmap_get(&m.ents[ENT_TASK], 100));
	/* A task the model learns of from its START alone: no fork site. */
	struct proto_msg st2 = task(PROTO_EV_TASK_START, 102, 1, PROTO_TASK_RUNNING);
	st2.ts = 40;
	apply_ok(&m, st2, 0);
	const struct m_task *t = idmap_get(&m.ents[ENT_TASK], 102);
	assert_ptr_equal(t, old); /* the spare was taken */
	assert_int_equal(t->id, 102);
	assert_int_equal(t->fn, 0);
	assert_int_equal(t->forked, 0);
	assert_int_equal(t->ended, 0);
	assert_int_equal(t->error, 0);
	assert_null(t->file);
	assert_null(t->func);
	assert_int_equal(t->line, 0);
	assert_int_equal(t->worker, 101);
	assert_int_equal(t->started, 40);
	assert_int_equal(t->state, PROTO_TASK_RUNNING);
	assert_int_equal(model_count(&m, ENT_TASK), 2); /* 101 (retained) and 102 */
	model_free(&m);
}

/* Encoded frames through the real decoder give the same model; the decoder
 * refuses a SITE numbered 0 or with a string that is not terminated. */
static void test_wire_round_trip(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	uint8_t buf[4096];
	size_t used;
	struct proto_msg def = site_def(3, "wire.c", "wired_open", 31), out;
	int n = proto_encode(buf, sizeof buf, &def, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_OK);
	assert_int_equal(model_apply(&m, &out, 0), 0);
	struct proto_msg in = scope_open(4, 0, "wired");
	in.site = 3;
	n = proto_encode(buf, sizeof buf, &in, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_OK);
	assert_int_equal(model_apply(&m, &out, 0), 0);
	struct proto_msg ex = ev(PROTO_EV_PROCESS_EXIT);
	ex.how = 2;
	ex.code = 6;
	n = proto_encode(buf, sizeof buf, &ex, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_OK);
	assert_int_equal(model_apply(&m, &out, 0), 0);
	assert_int_equal(m.exit_how, 2);
	assert_int_equal(m.exit_code, 6);
	const struct m_scope *s = idmap_get(&m.ents[ENT_SCOPE], 4);
	assert_string_equal(s->name, "wired");
	assert_string_equal(s->file, "wire.c");
	assert_string_equal(s->func, "wired_open");
	assert_int_equal(s->line, 31);
	struct proto_msg fk = fork_fn(9, 0x401136);
	n = proto_encode(buf, sizeof buf, &fk, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_OK);
	assert_int_equal(model_apply(&m, &out, 0), 0);
	const struct m_task *t = idmap_get(&m.ents[ENT_TASK], 9);
	assert_true(t->fn == 0x401136);
	assert_string_equal(t->func, "serve");

	/* SITE 0: the frame is well formed, the value is not. */
	def.site = 0;
	n = proto_encode(buf, sizeof buf, &def, NULL, NULL);
	assert_true(n > 0);
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_EVALUE);
	assert_non_null(strstr(proto_strerror(PROTO_EVALUE), "value"));
	/* A string whose NUL is missing. */
	def.site = 5;
	n = proto_encode(buf, sizeof buf, &def, NULL, NULL);
	assert_true(n > 0 && buf[n - 1] == '\0');
	buf[n - 1] = 'x';
	assert_int_equal(proto_decode(buf, (size_t)n, &out, &used), PROTO_ESTR);
	model_free(&m);
}

/* tasks[].func names the body through the symbolizer, null when the address
 * is 0, names nothing, or no symbolizer is set; the agent thread's role. */
/* TASK_RAN leaves a task, its thread and the live set as its TASK_START
 * followed by its TASK_END would: also when the thread was said to run
 * another task (whose end was lost), and when the task was already known
 * to run, on another thread (the general way). */
static void test_task_ran(void **state)
{
	(void)state;
	struct model a, b;
	init(&a, 0);
	init(&b, 0);
	struct model *ms[2] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		apply_ok(ms[i], thread_start(101, "worker", PROTO_ROLE_WORKER), 0);
		apply_ok(ms[i], scope_open(1, 0, "root"), 0);
		apply_ok(ms[i], task(PROTO_EV_TASK_FORK, 5, 1, PROTO_TASK_FORKED), 0);
		apply_ok(ms[i], task(PROTO_EV_TASK_FORK, 6, 1, PROTO_TASK_FORKED), 0);
		/* Thread 101 runs task 6; its end will never come. */
		apply_ok(ms[i], task(PROTO_EV_TASK_START, 6, 1, PROTO_TASK_RUNNING), 0);
	}
	assert_int_equal(((const struct m_thread *)idmap_get(&b.ents[ENT_THREAD], 101))->task, 6);
	struct proto_msg s = task(PROTO_EV_TASK_START, 5, 1, PROTO_TASK_RUNNING);
	struct proto_msg e = task(PROTO_EV_TASK_END, 5, 1, PROTO_TASK_FAILED);
	s.ts = 2000;
	e.ts = 3000;
	e.error = -5;
	apply_ok(&a, s, 0);
	apply_ok(&a, e, 0);
	struct proto_msg r = task(PROTO_EV_TASK_RAN, 5, 1, PROTO_TASK_FAILED);
	r.ts = 2000;
	r.end_ts = 3000;
	r.error = -5;
	apply_ok(&b, r, 0);
	const struct m_task *ta = idmap_get(&a.ents[ENT_TASK], 5);
	const struct m_task *tb = idmap_get(&b.ents[ENT_TASK], 5);
	assert_non_null(tb);
	assert_int_equal(tb->state, PROTO_TASK_FAILED);
	assert_int_equal(tb->started, 2000);
	assert_int_equal(tb->ended, 3000);
	assert_int_equal(tb->error, -5);
	assert_int_equal(tb->worker, 101);
	assert_int_equal(ta->state, tb->state);
	assert_int_equal(ta->started, tb->started);
	assert_int_equal(ta->ended, tb->ended);
	assert_int_equal(ta->error, tb->error);
	assert_int_equal(ta->worker, tb->worker);
	assert_int_equal(ta->flags, tb->flags);
	const struct m_thread *wa = idmap_get(&a.ents[ENT_THREAD], 101);
	const struct m_thread *wb = idmap_get(&b.ents[ENT_THREAD], 101);
	assert_int_equal(wb->task, 0);
	assert_int_equal(wa->task, wb->task);
	assert_int_equal(a.live[ENT_TASK].n, 1); /* task 6 */
	assert_int_equal(b.live[ENT_TASK].n, 1);
	/* A repeat changes nothing: the task ended once. */
	r.end_ts = 9000;
	apply_ok(&b, r, 0);
	assert_int_equal(tb->ended, 3000);

	/* Task 7 known to run on thread 102 (a snapshot said so): its TASK_RAN
	 * ends it there, as a TASK_END would, and leaves thread 101 alone. */
	for (int i = 0; i < 2; i++) {
		apply_ok(ms[i], thread_start(102, "worker-2", PROTO_ROLE_WORKER), 0);
		apply_ok(ms[i], task(PROTO_EV_TASK_FORK, 7, 1, PROTO_TASK_FORKED), 0);
		struct proto_msg st = task(PROTO_EV_TASK_START, 7, 1, PROTO_TASK_RUNNING);
		st.tid = 102;
		apply_ok(ms[i], st, 0);
		apply_ok(ms[i], task(PROTO_EV_TASK_START, 8, 1, PROTO_TASK_RUNNING),
			 0); /* on 101 */
	}
	e = task(PROTO_EV_TASK_END, 7, 1, PROTO_TASK_SUCCESS);
	e.ts = 5000;
	apply_ok(&a, e, 0);
	r = task(PROTO_EV_TASK_RAN, 7, 1, PROTO_TASK_SUCCESS);
	r.ts = 4000;
	r.end_ts = 5000;
	apply_ok(&b, r, 0);
	ta = idmap_get(&a.ents[ENT_TASK], 7);
	tb = idmap_get(&b.ents[ENT_TASK], 7);
	assert_int_equal(tb->state, PROTO_TASK_SUCCESS);
	assert_int_equal(tb->worker, 102);
	assert_int_equal(ta->started, tb->started);
	assert_int_equal(ta->ended, tb->ended);
	assert_int_equal(ta->worker, tb->worker);
	for (uint32_t tid = 101; tid <= 102; tid++) {
		wa = idmap_get(&a.ents[ENT_THREAD], tid);
		wb = idmap_get(&b.ents[ENT_THREAD], tid);
		assert_int_equal(wa->task, wb->task);
	}
	assert_int_equal(wb->task, 0); /* 102 */
	assert_int_equal(((const struct m_thread *)idmap_get(&b.ents[ENT_THREAD], 101))->task, 8);
	model_free(&a);
	model_free(&b);
}

/* Checks that two models hold task id alike, and its worker thread alike. */
static void same_task(const struct model *a, const struct model *b, uint64_t id)
{
	const struct m_task *ta = idmap_get(&a->ents[ENT_TASK], id);
	const struct m_task *tb = idmap_get(&b->ents[ENT_TASK], id);
	assert_non_null(ta);
	assert_non_null(tb);
	assert_int_equal(ta->scope, tb->scope);
	assert_int_equal(ta->fn, tb->fn);
	assert_int_equal(ta->state, tb->state);
	assert_int_equal(ta->forked, tb->forked);
	assert_int_equal(ta->started, tb->started);
	assert_int_equal(ta->ended, tb->ended);
	assert_int_equal(ta->error, tb->error);
	assert_int_equal(ta->worker, tb->worker);
	assert_int_equal(ta->flags, tb->flags);
	assert_string_equal(ta->file ? ta->file : "(none)", tb->file ? tb->file : "(none)");
	assert_string_equal(ta->func ? ta->func : "(none)", tb->func ? tb->func : "(none)");
	assert_int_equal(ta->line, tb->line);
	const struct m_thread *wa = idmap_get(&a->ents[ENT_THREAD], ta->worker);
	const struct m_thread *wb = idmap_get(&b->ents[ENT_THREAD], tb->worker);
	assert_int_equal(wa != NULL, wb != NULL);
	if (wa)
		assert_int_equal(wa->task, wb->task);
}

/* TASK_DONE leaves a task, its worker and the live set as its TASK_FORK,
 * TASK_START and TASK_END would: for a task the model has not seen (the
 * storm's case, which keeps it out of the live set), for one a snapshot
 * already showed forked, and for one already known to run on another
 * thread; a repeat changes nothing; it expires as an ended task does. */
static void test_task_done(void **state)
{
	(void)state;
	struct model a, b;
	init(&a, 0);
	init(&b, 0);
	struct model *ms[2] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		apply_ok(ms[i], thread_start(100, "main", PROTO_ROLE_MAIN), 0);
		apply_ok(ms[i], thread_start(101, "worker", PROTO_ROLE_WORKER), 0);
		apply_ok(ms[i], thread_start(102, "worker-2", PROTO_ROLE_WORKER), 0);
		apply_ok(ms[i], scope_open(1, 0, "root"), 0);
		/* Task 6 forked before (a snapshot, say); task 7 runs on 102. */
		apply_ok(ms[i], fork_fn(6, 0x6000), 0);
		apply_ok(ms[i], fork_fn(7, 0x7000), 0);
		struct proto_msg st = task(PROTO_EV_TASK_START, 7, 1, PROTO_TASK_RUNNING);
		st.tid = 102;
		st.ts = 700;
		apply_ok(ms[i], st, 0);
	}
	for (uint64_t id = 5; id <= 7; id++) {
		struct proto_msg f = fork_fn(id, 0x1000 * id);
		f.ts = (int64_t)id * 100;
		f.tid = 100;
		struct proto_msg s = task(PROTO_EV_TASK_START, id, 1, PROTO_TASK_RUNNING);
		s.ts = (int64_t)id * 100 + 10;
		struct proto_msg e = task(PROTO_EV_TASK_END, id, 1,
					  id == 5 ? PROTO_TASK_FAILED : PROTO_TASK_SUCCESS);
		e.ts = (int64_t)id * 100 + 20;
		e.error = id == 5 ? -5 : 0;
		struct proto_msg d = task(PROTO_EV_TASK_DONE, id, 1, e.state);
		d.ts = f.ts;
		d.tid = 100;
		d.fn = f.fn;
		d.site = SITE_SERVE;
		d.worker = 101;
		d.start_ts = s.ts;
		d.end_ts = e.ts;
		d.error = e.error;
		if (id != 7)
			apply_ok(&a, f, 0);
		if (id != 7)
			apply_ok(&a, s, 0);
		apply_ok(&a, e, 0);
		apply_ok(&b, d, 0);
		same_task(&a, &b, id);
	}
	const struct m_task *t5 = idmap_get(&b.ents[ENT_TASK], 5);
	assert_int_equal(t5->state, PROTO_TASK_FAILED);
	assert_int_equal(t5->forked, 500);
	assert_int_equal(t5->started, 510);
	assert_int_equal(t5->ended, 520);
	assert_int_equal(t5->error, -5);
	assert_int_equal(t5->worker, 101);
	assert_int_equal(t5->fn, 0x5000);
	assert_string_equal(t5->func, "serve");
	assert_true(t5->flags & EF_ENDED);
	assert_false(t5->flags & EF_PLACEHOLDER);
	assert_int_equal(((const struct m_task *)idmap_get(&b.ents[ENT_TASK], 7))->worker, 102);
	assert_int_equal(a.live[ENT_TASK].n, 0);
	assert_int_equal(b.live[ENT_TASK].n, 0);
	/* A repeat changes nothing: the task ended once. */
	struct proto_msg again = task(PROTO_EV_TASK_DONE, 5, 1, PROTO_TASK_SUCCESS);
	again.end_ts = 9000;
	again.start_ts = 8000;
	again.worker = 102;
	apply_ok(&b, again, 0);
	same_task(&a, &b, 5);
	/* Ended tasks expire after the retention time, these too. */
	model_sweep(&b, 6 * SEC);
	assert_null(idmap_get(&b.ents[ENT_TASK], 5));
	assert_int_equal(model_count(&b, ENT_TASK), 0);
	model_free(&a);
	model_free(&b);
}

static void test_task_function(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	m.track_removals = true;
	uint64_t body = (uint64_t)(uintptr_t)&model_body_fetch_user;
	struct proto_msg msgs[] = {
	    thread_start(99, "scoped-agent", PROTO_ROLE_AGENT),
	    scope_open(1, 0, "root"),
	    fork_fn(20, body),
	    fork_fn(21, 0),
	    fork_fn(22, 16),
	    fork_fn(20, body + 5), /* a repeat (snapshot) keeps the first address */
	};
	apply_all(&m, msgs, sizeof msgs / sizeof msgs[0], 0);
	const struct m_task *t20 = idmap_get(&m.ents[ENT_TASK], 20);
	assert_true(t20->fn == body);

	json_t *j = render_json(&m);
	json_t *tasks = json_object_get(j, "tasks");
	for (uint64_t id = 20; id <= 22; id++) {
		json_t *f = json_object_get(find_id(tasks, "id", id), "func");
		assert_non_null(f); /* the member is always there */
		assert_true(json_is_null(f));
	}
	assert_string_equal(str_at(entity(j, "threads", 99), "role"), "agent");
	json_decref(j);

	struct symbolizer *sym = sym_new(0);
	assert_non_null(sym);
	model_set_symbolizer(&m, sym, getpid(), proc_starttime(getpid()));
	uint64_t g = m.gen;
	/* More distinct addresses than one render remembers, all inside the body. */
	for (uint64_t i = 0; i < 20; i++) {
		struct proto_msg f = fork_fn(30 + i, body + i);
		assert_int_equal(model_apply(&m, &f, 0), 0);
	}
	j = render_json(&m);
	tasks = json_object_get(j, "tasks");
	assert_string_equal(str_at(find_id(tasks, "id", 20), "func"), "model_body_fetch_user");
	assert_true(json_is_null(json_object_get(find_id(tasks, "id", 21), "func")));
	assert_true(json_is_null(json_object_get(find_id(tasks, "id", 22), "func")));
	for (uint64_t i = 0; i < 20; i++)
		assert_string_equal(str_at(find_id(tasks, "id", 30 + i), "func"),
				    "model_body_fetch_user");
	/* The fork site stays the forker's, beside the body's name. */
	assert_string_equal(str_at(json_object_get(find_id(tasks, "id", 20), "site"), "func"),
			    "serve");
	json_decref(j);

	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 0};
	jb_obj(&b);
	model_render_delta(&m, &clk, g, &b);
	jb_obj_end(&b);
	jb_raw(&b, "", 1);
	j = json_loads(b.p, 0, NULL);
	assert_non_null(j);
	json_t *up = json_object_get(json_object_get(j, "upsert"), "tasks");
	assert_int_equal(json_array_size(up), 20);
	assert_string_equal(str_at(json_array_get(up, 19), "func"), "model_body_fetch_user");
	json_decref(j);
	jb_free(&b);

	/* A process the symbolizer cannot read: a few failed lookups, then the
	 * render stops asking; every func is null and the JSON still whole. */
	model_set_symbolizer(&m, sym, 999999999, 1);
	j = render_json(&m);
	tasks = json_object_get(j, "tasks");
	assert_int_equal(json_array_size(tasks), 23);
	for (size_t i = 0; i < json_array_size(tasks); i++)
		assert_true(json_is_null(json_object_get(json_array_get(tasks, i), "func")));
	json_decref(j);
	model_set_symbolizer(&m, NULL, 0, 0);
	sym_free(sym);
	model_free(&m);
}

/* Random events in random order with small ids (so they collide) never break
 * the model: the cap holds, sweeps work, and the JSON always parses. */
/* A dump's model leaves out the ended tasks and closed scopes nothing live
 * names, and keeps those that place what is live: the dump is the same. */
static void test_render_live(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	build_tree(&m); /* 1 open, 2 open in it by task 10; 12 failed */
	struct proto_msg msgs[] = {
	    scope_open(3, 2, "done"), /* closed, with its task: left out */
	    task(PROTO_EV_TASK_FORK, 13, 3, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_END, 13, 3, PROTO_TASK_SUCCESS),
	    scope_ev(PROTO_EV_SCOPE_CLOSE, 3),
	    scope_open(4, 2, "gone"), /* closed under an open 5: kept */
	    scope_open(5, 4, "inner"),
	    scope_ev(PROTO_EV_SCOPE_CLOSE, 4),
	    task(PROTO_EV_TASK_END, 10, 1, PROTO_TASK_SUCCESS), /* 2's parent task */
	    thread_start(102, "io-2", PROTO_ROLE_WORKER),
	    task(PROTO_EV_TASK_FORK, 14, 2, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_START, 14, 2, 0),
	    /* A fork that says the task ended ends it and leaves its thread
	     * naming it: kept. */
	    task(PROTO_EV_TASK_FORK, 14, 2, PROTO_TASK_CANCELLED),
	};
	msgs[10].tid = msgs[11].tid = 102;
	apply_all(&m, msgs, sizeof msgs / sizeof msgs[0], 0);
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 1764441600000000000ll};
	model_render_live(&m, &clk, 1764441605000000000ll, &b);
	jb_raw(&b, "", 1);
	assert_false(b.oom);
	json_t *j = json_loads(b.p, 0, NULL);
	jb_free(&b);
	assert_non_null(j);
	assert_null(entity(j, "scopes", 3));
	assert_null(entity(j, "tasks", 13));
	assert_null(entity(j, "tasks", 12));
	assert_string_equal(str_at(entity(j, "scopes", 4), "state"), "closed");
	assert_non_null(entity(j, "scopes", 5));
	assert_string_equal(str_at(entity(j, "tasks", 10), "state"), "success");
	assert_non_null(entity(j, "tasks", 11));
	assert_int_equal(json_integer_value(json_object_get(entity(j, "threads", 102), "task")),
			 14);
	assert_string_equal(str_at(entity(j, "tasks", 14), "state"), "cancelled");
	bool smaller;
	assert_true(live_same_dump(&m, &smaller));
	assert_true(smaller);
	finish(&m, j);
}

/* names_gen moves when a thread comes, is named or goes, and with nothing
 * else: a busy process's dumps keep their thread entries while tasks come
 * and go.  Two models never share a value. */
static void test_names_gen(void **state)
{
	(void)state;
	struct model m, other;
	init(&m, 0);
	init(&other, 0);
	assert_int_not_equal(m.names_gen, other.names_gen);
	model_free(&other);
	uint64_t g = m.names_gen;
	apply_ok(&m, thread_start(101, "io-1", PROTO_ROLE_WORKER), 0);
	assert_int_not_equal(m.names_gen, g);
	g = m.names_gen;
	struct proto_msg quiet[] = {
	    scope_open(1, 0, "root"),
	    task(PROTO_EV_TASK_FORK, 10, 1, PROTO_TASK_FORKED),
	    task(PROTO_EV_TASK_START, 10, 1, 0),
	    task(PROTO_EV_TASK_END, 10, 1, PROTO_TASK_SUCCESS),
	    scope_ev(PROTO_EV_JOIN_BEGIN, 1),
	    scope_ev(PROTO_EV_SCOPE_CLOSE, 1),
	};
	apply_all(&m, quiet, sizeof quiet / sizeof quiet[0], 0);
	model_sweep(&m, 6 * SEC); /* the scope and task expire: no thread */
	assert_int_equal(m.names_gen, g);
	struct proto_msg named = ev(PROTO_EV_THREAD_NAME);
	named.tid = 101;
	named.name = S("io-renamed");
	apply_ok(&m, named, 6 * SEC);
	assert_int_not_equal(m.names_gen, g);
	g = m.names_gen;
	struct proto_msg exit = ev(PROTO_EV_THREAD_EXIT);
	exit.tid = 101;
	apply_ok(&m, exit, 6 * SEC);
	assert_int_equal(m.names_gen, g); /* exited, still named in the model */
	model_sweep(&m, 12 * SEC);
	assert_null(idmap_get(&m.ents[ENT_THREAD], 101));
	assert_int_not_equal(m.names_gen, g);
	model_free(&m);
}

static void test_random_streams(void **state)
{
	(void)state;
	static const uint16_t types[] = {
	    PROTO_SNAPSHOT_BEGIN,
	    PROTO_SNAPSHOT_END,
	    PROTO_LOST,
	    PROTO_EV_THREAD_START,
	    PROTO_EV_THREAD_EXIT,
	    PROTO_EV_THREAD_NAME,
	    PROTO_EV_PROCESS_EXIT,
	    PROTO_EV_SCOPE_OPEN,
	    PROTO_EV_JOIN_BEGIN,
	    PROTO_EV_JOIN_END,
	    PROTO_EV_SCOPE_CANCEL,
	    PROTO_EV_SCOPE_CLOSE,
	    PROTO_EV_TASK_FORK,
	    PROTO_EV_TASK_START,
	    PROTO_EV_TASK_END,
	    PROTO_EV_VIOLATION,
	    PROTO_EV_VALUE_BIND,
	    PROTO_EV_POOL_CREATE,
	    PROTO_EV_POOL_STATS,
	    PROTO_EV_POOL_DESTROY,
	    0x01ff,
	    PROTO_SITE,
	    PROTO_SITE,
	};
	static const char *const strs[] = {"", "a", "x\"y\\z\n", "\x01\x7f", "name"};
	srand(12345);
	int left_out = 0; /* rounds whose dump's model left something out */
	for (int round = 0; round < 20; round++) {
		struct model m;
		init(&m, 200);
		m.track_removals = round % 2;
		m.lim.max_sites = 4; /* so that the cap is met too */
		for (int i = 0; i < 5000; i++) {
			struct proto_msg msg =
			    ev(types[rand() % (int)(sizeof types / sizeof types[0])]);
			msg.flags = (uint16_t)(rand() % 2);
			msg.tid = (uint32_t)(rand() % 8);
			msg.scope = (uint64_t)(rand() % 40);
			msg.task = (uint64_t)(rand() % 300);
			msg.pool_id = (uint64_t)(rand() % 4);
			msg.parent = (uint64_t)(rand() % 40);
			msg.state = (uint32_t)(rand() % 9);
			msg.reason = (uint32_t)(rand() % 9);
			msg.joiner = (uint32_t)(rand() % 9);
			msg.kind = (uint32_t)(rand() % 9);
			msg.role = (uint32_t)(rand() % 9);
			msg.pool.queue_kind = (uint32_t)(rand() % 5);
			msg.pool.policy = (uint32_t)(rand() % 7);
			msg.seq = (uint64_t)(rand() % 3);
			msg.site = (uint32_t)(rand() % 7);
			msg.line = rand() % 3 - 1;
			msg.ts = rand();
			msg.name = S(strs[rand() % 5]);
			msg.file = S(strs[rand() % 5]);
			msg.func = S(strs[rand() % 5]);
			msg.key = S(strs[rand() % 5]);
			msg.value = S(strs[rand() % 5]);
			int rc = model_apply(&m, &msg, (int64_t)i * 1000000);
			assert_true(rc == 0 || rc == -ENOSPC);
			size_t held = 0;
			for (int k = 0; k < ENT_KINDS; k++)
				held += model_count(&m, k);
			assert_true(held <= 200);
			assert_true(m.sites.n <= 4);
			if (i % 500 == 0)
				model_sweep(&m, (int64_t)i * 1000000);
		}
		json_t *j = render_json(&m); /* fails the test if it does not parse */
		json_decref(j);
		bool smaller;
		assert_true(live_same_dump(&m, &smaller));
		left_out += smaller;
		struct jbuf b;
		jb_init(&b);
		struct clockref clk = {0, 0};
		jb_obj(&b);
		model_render_delta(&m, &clk, m.gen / 2, &b);
		jb_obj_end(&b);
		jb_raw(&b, "", 1);
		j = json_loads(b.p, 0, NULL);
		assert_non_null(j);
		json_decref(j);
		jb_free(&b);
		model_free(&m);
	}
	assert_true(left_out > 0);
}

/* The cancel's cause and origin, shields and handlers: with the cause on
 * the wire, and from an agent older than it (cause 0), where the origin's
 * reason stands in; a shield covers what is below it; handler counts
 * follow the latest SCOPE_HANDLERS. */
static void test_cancel_facts(void **state)
{
	(void)state;
	struct model m;
	init(&m, 0);
	struct proto_msg msgs[] = {
	    scope_open(1, 0, "outer"),
	    scope_open(2, 1, "cleanup"),
	    scope_open(3, 2, "mid"),
	    scope_open(4, 3, "inner"),
	    scope_open(5, 3, "old"),
	    scope_ev(PROTO_EV_SCOPE_FLAGS, 2),
	    scope_ev(PROTO_EV_SCOPE_CANCEL, 3),
	    scope_ev(PROTO_EV_SCOPE_CANCEL, 4),
	    scope_ev(PROTO_EV_SCOPE_CANCEL, 5),
	    scope_ev(PROTO_EV_SCOPE_HANDLERS, 4),
	    scope_ev(PROTO_EV_SCOPE_HANDLERS, 2),
	};
	msgs[1].deadline = 7000000000ll; /* the shield's cleanup deadline */
	msgs[5].scope_flags = PROTO_SCOPE_SHIELD;
	msgs[6].reason = msgs[6].cause = PROTO_CANCEL_TIMEOUT;
	msgs[7].reason = PROTO_CANCEL_PARENT;
	msgs[7].cause = PROTO_CANCEL_TIMEOUT;
	msgs[8].reason = PROTO_CANCEL_PARENT; /* an older agent: no cause */
	msgs[9].ran = 1;
	msgs[10].armed = 2;
	apply_all(&m, msgs, sizeof msgs / sizeof msgs[0], 0);
	json_t *j = render_json(&m);
	json_t *outer = entity(j, "scopes", 1), *cleanup = entity(j, "scopes", 2);
	json_t *mid = entity(j, "scopes", 3), *inner = entity(j, "scopes", 4);
	json_t *old = entity(j, "scopes", 5);
	assert_string_equal(str_at(inner, "cancel_reason"), "parent");
	assert_string_equal(str_at(inner, "cancel_cause"), "timeout");
	assert_int_equal(json_integer_value(json_object_get(inner, "cancel_origin")), 3);
	assert_string_equal(str_at(old, "cancel_cause"), "timeout");
	assert_int_equal(json_integer_value(json_object_get(old, "cancel_origin")), 3);
	assert_string_equal(str_at(mid, "cancel_cause"), "timeout");
	assert_int_equal(json_integer_value(json_object_get(mid, "cancel_origin")), 3);
	assert_true(json_is_null(json_object_get(outer, "cancel_cause")));
	assert_true(json_is_null(json_object_get(outer, "cancel_origin")));
	assert_true(json_is_null(json_object_get(outer, "shielded_by")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(cleanup, "flags"), 0)),
			    "shield");
	assert_int_equal(json_array_size(json_object_get(inner, "flags")), 0);
	assert_int_equal(json_integer_value(json_object_get(inner, "shielded_by")), 2);
	assert_int_equal(json_integer_value(json_object_get(cleanup, "shielded_by")), 2);
	assert_true(json_is_number(json_object_get(inner, "shield_deadline_ms")));
	assert_int_equal(json_integer_value(json_object_get(inner, "handlers")), 0);
	assert_int_equal(json_integer_value(json_object_get(inner, "handlers_ran")), 1);
	assert_int_equal(json_integer_value(json_object_get(cleanup, "handlers")), 2);
	finish(&m, j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tree_and_json),
	    cmocka_unit_test(test_render_live),
	    cmocka_unit_test(test_names_gen),
	    cmocka_unit_test(test_snapshot_end_live_only),
	    cmocka_unit_test(test_task_before_its_thread),
	    cmocka_unit_test(test_max_retained),
	    cmocka_unit_test(test_entity_reuse),
	    cmocka_unit_test(test_join_began),
	    cmocka_unit_test(test_cancel_facts),
	    cmocka_unit_test(test_idempotent),
	    cmocka_unit_test(test_out_of_order),
	    cmocka_unit_test(test_placeholder),
	    cmocka_unit_test(test_snapshot_repair),
	    cmocka_unit_test(test_snapshot_wrong_seq_ignored),
	    cmocka_unit_test(test_retention),
	    cmocka_unit_test(test_entity_cap),
	    cmocka_unit_test(test_string_and_value_caps),
	    cmocka_unit_test(test_site_define_and_redefine),
	    cmocka_unit_test(test_site_unknown),
	    cmocka_unit_test(test_site_late),
	    cmocka_unit_test(test_site_cap),
	    cmocka_unit_test(test_site_snapshot),
	    cmocka_unit_test(test_delta),
	    cmocka_unit_test(test_thread_reuse_and_exit),
	    cmocka_unit_test(test_wire_round_trip),
	    cmocka_unit_test(test_random_streams),
	    cmocka_unit_test(test_task_function),
	    cmocka_unit_test(test_task_ran),
	    cmocka_unit_test(test_task_done),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
