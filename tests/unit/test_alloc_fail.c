/* test_alloc_fail.c - allocation failure injected into the runtime, the fast
 * JSON reader, the dump builder, the control client and the daemon's model:
 * for N = 1, 2, ...
 * the Nth allocation fails until an operation runs without reaching N; each
 * attempt must report -ENOMEM (or cope) and neither crash nor leak (under
 * make test-asan, LeakSanitizer checks at exit). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "agent.h"
#include "scope.h"
#include "../../common/ctl.h"
#include "../../common/jv.h"
#include "../../daemon/jbuf.h"
#include "../../daemon/model.h"
#include "../../dump/jdkdump.h"
#include "../../dump/textdump.h"

/* ---------------------------------------------------------------------------
 * Injection.  mk/alloc.mk links this test with -Wl,--wrap=malloc,... so every
 * call from the statically linked product objects lands here; jansson is a
 * shared library, so it is pointed here with json_set_alloc_funcs().
 */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
char *__real_strdup(const char *s);
FILE *__real_open_memstream(char **buf, size_t *len);

/* Allocations left before the one that fails; 0: injection off.  Atomic
 * because pool workers allocate too. */
static atomic_long countdown;
static atomic_long injected;

static bool fail_now(void)
{
	long c = atomic_load(&countdown);
	while (c > 0) {
		if (atomic_compare_exchange_weak(&countdown, &c, c - 1)) {
			if (c != 1)
				return false;
			atomic_fetch_add(&injected, 1);
			errno = ENOMEM;
			return true;
		}
	}
	return false;
}

void *__wrap_malloc(size_t n)
{
	return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return fail_now() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
	return fail_now() ? NULL : __real_aligned_alloc(align, n);
}

char *__wrap_strdup(const char *s)
{
	return fail_now() ? NULL : __real_strdup(s);
}

/* The text dump's buffer: its growth happens inside libc, out of reach,
 * but not getting one at all can be injected. */
FILE *__wrap_open_memstream(char **buf, size_t *len)
{
	return fail_now() ? NULL : __real_open_memstream(buf, len);
}

static void *json_malloc(size_t n)
{
	return __wrap_malloc(n);
}

/* What one attempt of an operation saw. */
struct outcome {
	int enomem; /* calls that reported -ENOMEM */
};

typedef void (*op_fn)(void *arg, struct outcome *o);

/* Fails an operation that gave neither success nor -ENOMEM. */
static int expect(int rc, const char *what, struct outcome *o)
{
	if (getenv("ALLOC_TRACE"))
		fprintf(stderr, "  %s -> %d\n", what, rc);
	if (rc == -ENOMEM)
		o->enomem++;
	else if (rc != 0)
		fail_msg("%s returned %d (%s), want 0 or -ENOMEM", what, rc, strerror(-rc));
	return rc;
}

/* Runs op with its 1st, 2nd, ... allocation failing until a run allocates
 * fewer times than that, which must then succeed outright.  Asserts that
 * some injected failure was reported as -ENOMEM, so the sweep really tests
 * the failure paths. */
static void sweep(const char *name, op_fn op, void *arg)
{
	long reported = 0;
	for (long n = 1;; n++) {
		if (n > 100000)
			fail_msg("%s: still allocating after 100000 injected failures", name);
		struct outcome o = {0};
		atomic_store(&injected, 0);
		atomic_store(&countdown, n);
		if (getenv("ALLOC_TRACE"))
			fprintf(stderr, "%s: n=%ld\n", name, n);
		op(arg, &o);
		atomic_store(&countdown, 0);
		if (!atomic_load(&injected)) {
			if (o.enomem)
				fail_msg("%s: -ENOMEM with no failure injected", name);
			break;
		}
		reported += o.enomem > 0;
	}
	if (!reported)
		fail_msg("%s: no injected failure was reported as -ENOMEM", name);
}

/* ---------------------------------------------------------------------------
 * The runtime.
 */

static int body(void *arg, void **result)
{
	*result = arg;
	return scope_value_get("request") ? 0 : -ENOENT;
}

/* A scope on pool (NULL: default) with a bound value and three forks. */
static void op_scope(void *arg, struct outcome *o)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = "alloc";
	cfg.pool = arg;
	scope_t *s;
	if (expect(scope_open(&s, &cfg), "scope_open", o))
		return;
	bool bound = expect(scope_value_bind(s, "request", "r-1"), "scope_value_bind", o) == 0;
	int forked = 0;
	scope_task_t *t[3];
	bool ok[3];
	for (int i = 0; i < 3; i++) {
		ok[i] = expect(scope_fork(s, body, &t[i], &t[i]), "scope_fork", o) == 0;
		forked += ok[i];
	}
	int rc = scope_join(s);
	/* A subtask fails for want of memory (its worker found none) or
	 * because the value it reads could not be bound; nothing else. */
	if (rc == SCOPE_EFAILED) {
		int e = scope_task_error(scope_failure(s));
		if (e == -ENOMEM)
			o->enomem++;
		else if (!(e == -ENOENT && !bound))
			fail_msg("a subtask failed with %d, value %s", e,
				 bound ? "bound" : "unbound");
	} else if (rc != 0) {
		fail_msg("scope_join returned %d with %d forks", rc, forked);
	}
	for (int i = 0; i < 3; i++) {
		if (!ok[i])
			continue;
		scope_task_state_t st = scope_task_state(t[i]);
		/* Only a failed join cancels the rest. */
		bool right = st == SCOPE_TASK_SUCCESS  ? scope_task_result(t[i]) == &t[i]
			     : st == SCOPE_TASK_FAILED ? rc == SCOPE_EFAILED
						       : rc != 0;
		if (!right)
			fail_msg("task %d of %d: state %d error %d, result %p, join %d", i, forked,
				 (int)st, scope_task_error(t[i]), scope_task_result(t[i]), rc);
	}
	expect(scope_close(s), "scope_close", o);
}

static void test_scope_default_pool(void **state)
{
	(void)state;
	sweep("scope on the default pool", op_scope, NULL);
}

static void op_pool(void *arg, struct outcome *o)
{
	(void)arg;
	struct scope_pool_config cfg = SCOPE_POOL_CONFIG_INIT;
	cfg.name = "failing";
	cfg.core_size = 2;
	cfg.prestart = true;
	scope_pool_t *p;
	if (expect(scope_pool_create(&p, &cfg), "scope_pool_create", o))
		return;
	op_scope(p, o);
	assert_int_equal(scope_pool_destroy(p), 0);
}

static void test_pool(void **state)
{
	(void)state;
	sweep("own pool and a scope on it", op_pool, NULL);
}

/* Scopes inside a subtask: the worker allocates its own records. */
/* Scopes inside a subtask: the worker allocates its own records.  Returns
 * 0, or -ENOMEM however deep the failure was met. */
static int nested_body(void *arg, void **result)
{
	(void)arg, (void)result;
	scope_t *s;
	int rc = scope_open(&s, NULL);
	if (rc)
		return rc;
	scope_task_t *t;
	rc = scope_fork(s, body, NULL, &t);
	int jrc = scope_join(s);
	if (jrc == SCOPE_EFAILED)
		jrc = scope_task_error(scope_failure(s));
	int crc = scope_close(s);
	return rc ? rc : jrc ? jrc : crc;
}

static void op_nested(void *arg, struct outcome *o)
{
	(void)arg;
	scope_t *s;
	if (expect(scope_open(&s, NULL), "scope_open", o))
		return;
	if (expect(scope_value_bind(s, "request", "r-2"), "scope_value_bind", o)) {
		expect(scope_close(s), "scope_close", o);
		return;
	}
	scope_task_t *t;
	if (expect(scope_fork(s, nested_body, NULL, &t), "scope_fork", o) == 0) {
		int rc = scope_join(s);
		if (rc == SCOPE_EFAILED) /* the inner scope met the failure */
			expect(scope_task_error(t), "the nested subtask", o);
		else
			assert_int_equal(rc, 0);
	}
	expect(scope_close(s), "scope_close", o);
}

static void test_nested(void **state)
{
	(void)state;
	sweep("scope inside a subtask", op_nested, NULL);
}

/* ---------------------------------------------------------------------------
 * The dumper: the fast reader and the dump builder on a canned reply.
 */

/* Thread 7 owns batch@2 where worker 8 runs task 20 inside job@3; 9 idles
 * in the pool; 10 is known only from the stacks. */
static const char reply_text[] =
    "{\"ok\":true,\"id\":1,\"source\":\"signal\",\"capture_ns\":800,\"max_pause_ns\":300,"
    "\"process\":{\"pid\":777,\"name\":\"svc\",\"runtime_version\":\"0.1.0\",\"state\":\"live\","
    " \"complete\":false,\"lost\":1},"
    "\"model\":{\"now_ms\":1764441600000,"
    " \"threads\":["
    "  "
    "{\"tid\":7,\"name\":\"svc\",\"role\":\"main\",\"pool\":null,\"task\":null,\"state\":\"live\"},"
    "  {\"tid\":8,\"name\":\"w-1\",\"role\":\"worker\",\"pool\":4,\"task\":20,\"state\":\"live\"},"
    "  "
    "{\"tid\":9,\"name\":\"w-2\",\"role\":\"worker\",\"pool\":4,\"task\":null,\"state\":\"live\"}],"
    " \"pools\":[{\"id\":4,\"name\":\"w\",\"core\":2,\"max\":2,\"size\":2,\"active\":1,"
    "   \"largest\":2,\"queued\":0,\"completed\":3,\"rejected\":0,\"queue\":\"unbounded\","
    "   \"policy\":\"abort\"}],"
    " \"scopes\":["
    "  {\"id\":2,\"name\":\"batch\",\"parent\":null,\"owner\":7,\"joiner\":\"all_successful\","
    "   \"state\":\"joining\",\"opened_ms\":1764441599000,"
    "   \"site\":{\"file\":\"svc.c\",\"line\":9,\"func\":\"run\"},\"values\":{\"batch\":\"b-9\"}},"
    "  {\"id\":3,\"name\":\"job\",\"parent\":2,\"parent_task\":20,\"owner\":8,"
    "   \"joiner\":\"any_successful\",\"state\":\"open\"}],"
    " \"tasks\":["
    "  {\"id\":20,\"scope\":2,\"state\":\"running\",\"worker\":8,\"func\":\"job_run\","
    "   \"site\":{\"file\":\"svc.c\",\"line\":12,\"func\":\"run\"},\"forked_ms\":1764441599500}]},"
    "\"stacks\":["
    " {\"tid\":8,\"state\":\"WAITING\",\"frames\":["
    "   {\"addr\":\"0x10\",\"func\":\"job_run\",\"file\":\"svc.c\",\"line\":30},"
    "   {\"addr\":\"0x20\",\"module\":\"/lib/libc.so.6\",\"offset\":\"0x40\"}]},"
    " {\"tid\":10,\"name\":\"odd\",\"state\":\"RUNNABLE\",\"frames\":[{\"addr\":\"0x30\"}]}]}";

/* The dump built without injection: what every successful attempt must equal. */
static json_t *reference_dump;

/* A built dump must be the whole dump: failure may not leave parts out. */
static void check_dump(json_t *d, const char *err, struct outcome *o)
{
	if (!d) {
		if (!strstr(err, "memory"))
			fail_msg("dump build failed without saying memory ran out: %s", err);
		o->enomem++;
		return;
	}
	if (reference_dump && !json_equal(d, reference_dump)) {
		if (getenv("ALLOC_TRACE")) {
			json_dump_file(d, "/tmp/alloc_fail_got.json", JSON_INDENT(1));
			json_dump_file(reference_dump, "/tmp/alloc_fail_want.json", JSON_INDENT(1));
		}
		fail_msg("dump built under failure differs from the reference");
	}
	json_decref(d);
}

static void op_build(void *arg, struct outcome *o)
{
	char err[256] = "";
	json_t *d = jdkdump_build(arg, err, sizeof err);
	check_dump(d, err, o);
}

static void op_build_doc(void *arg, struct outcome *o)
{
	(void)arg;
	struct jv_doc *doc;
	char err[256] = "";
	if (expect(jv_parse(reply_text, sizeof reply_text - 1, &doc, err, sizeof err), "jv_parse",
		   o))
		return;
	assert_int_equal(jv_integer(jv_get(jv_get(jv_root(doc), "process"), "pid")), 777);
	json_t *d = jdkdump_build_doc(jv_root(doc), err, sizeof err);
	jv_free(doc);
	check_dump(d, err, o);
}

/* The text form of the reference dump, made without injection. */
static char *reference_text;

/* The JSON text written straight from the reply: all of it or nothing. */
static void op_json_doc(void *arg, struct outcome *o)
{
	(void)arg;
	struct jv_doc *doc;
	char err[256] = "";
	size_t len;
	if (expect(jv_parse(reply_text, sizeof reply_text - 1, &doc, err, sizeof err), "jv_parse",
		   o))
		return;
	char *s = jdkdump_json_doc(jv_root(doc), &len, err, sizeof err);
	jv_free(doc);
	if (!s) {
		if (!strstr(err, "out of memory"))
			fail_msg("jdkdump_json_doc failed without saying memory ran out: %s", err);
		o->enomem++;
		return;
	}
	/* Read back with no failure injected: jansson's reader does not
	 * report all of its own. */
	atomic_store(&countdown, 0);
	json_error_t e;
	json_t *d = json_loadb(s, len, 0, &e);
	free(s);
	if (!d)
		fail_msg("jdkdump_json_doc wrote JSON that does not parse: %s", e.text);
	check_dump(d, err, o);
}

static void op_textdump(void *arg, struct outcome *o)
{
	char *s = textdump_string(arg, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
	if (!s) {
		o->enomem++;
		return;
	}
	/* Failure may not leave parts out or indent them wrongly. */
	if (strcmp(s, reference_text))
		fail_msg("text dump made under failure differs from the reference:\n%s", s);
	free(s);
}

static void test_dump_builder(void **state)
{
	(void)state;
	json_error_t e;
	json_t *reply = json_loads(reply_text, 0, &e);
	if (!reply)
		fail_msg("canned reply broken at %d: %s", e.position, e.text);
	char err[256];
	reference_dump = jdkdump_build(reply, err, sizeof err);
	assert_non_null(reference_dump);
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(reference_dump, "threadDump"), "processId")),
			 777);
	sweep("jdkdump_build", op_build, reply);
	sweep("jv_parse + jdkdump_build_doc", op_build_doc, NULL);
	sweep("jv_parse + jdkdump_json_doc", op_json_doc, NULL);
	reference_text = textdump_string(reference_dump, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
	assert_non_null(reference_text);
	assert_non_null(strstr(reference_text, "\"odd\""));
	sweep("textdump_string", op_textdump, reference_dump);
	free(reference_text);
	reference_text = NULL;
	json_decref(reference_dump);
	reference_dump = NULL;
	json_decref(reply);
}

/* ---------------------------------------------------------------------------
 * The control client against a fake daemon that has its replies ready.
 */

struct fake {
	char dir[64], agent[96], ctl[96];
	int lfd;
	json_t *list, *dump; /* the requests, made before any injection */
};

static void op_ctl(void *arg, struct outcome *o)
{
	struct fake *f = arg;
	struct ctl *c;
	char err[256];
	int rc = expect(ctl_connect(&c, f->agent, err, sizeof err), "ctl_connect", o);
	int s = accept(f->lfd, NULL, NULL);
	if (rc) {
		/* Failed after connecting: the connection must be closed. */
		if (s >= 0) {
			char b;
			assert_int_equal(recv(s, &b, 1, 0), 0);
			close(s);
		}
		return;
	}
	assert_true(s >= 0);
	/* A subscription delta first: the client queues it for ctl_read(). */
	static const char lines[] = "{\"event\":\"delta\",\"pid\":1}\n"
				    "{\"id\":1,\"ok\":true,\"processes\":[]}\n";
	assert_int_equal(write(s, lines, sizeof lines - 1), (ssize_t)sizeof lines - 1);
	assert_int_equal(write(s, reply_text, sizeof reply_text - 1),
			 (ssize_t)sizeof reply_text - 1);
	assert_int_equal(write(s, "\n", 1), 1);

	json_t *reply = NULL;
	rc = expect(ctl_request(c, f->list, &reply, 2000, err, sizeof err), "ctl_request", o);
	if (rc == 0) {
		assert_non_null(reply);
		assert_true(json_is_array(json_object_get(reply, "processes")));
		json_decref(reply);
		/* The dump-sized line (id 1) is not the reply to request 2: the
		 * fast reader parses it, then it is queued, then id 2 matches. */
		struct jv_doc *doc = NULL;
		static const char dump_reply[] = "{\"id\":2,\"ok\":true,\"n\":5}\n";
		assert_int_equal(write(s, dump_reply, sizeof dump_reply - 1),
				 (ssize_t)sizeof dump_reply - 1);
		if (expect(ctl_request_doc(c, f->dump, &doc, 2000, err, sizeof err),
			   "ctl_request_doc", o) == 0) {
			assert_int_equal(jv_integer(jv_get(jv_root(doc), "n")), 5);
			jv_free(doc);
			json_t *m = NULL;
			int got = ctl_read(c, &m);
			if (got == 1) {
				json_decref(m);
			} else if (got != -ENOMEM && got != 0) {
				fail_msg("ctl_read returned %d", got);
			}
		}
	}
	ctl_close(c);
	close(s);
}

static void test_ctl(void **state)
{
	(void)state;
	struct fake f;
	snprintf(f.dir, sizeof f.dir, "/tmp/test_alloc_fail.XXXXXX");
	assert_non_null(mkdtemp(f.dir));
	snprintf(f.agent, sizeof f.agent, "%s/agent.sock", f.dir);
	snprintf(f.ctl, sizeof f.ctl, "%s/control.sock", f.dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", f.ctl);
	/* Non-blocking: a ctl_connect that failed before connecting leaves
	 * nothing to accept. */
	f.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(f.lfd >= 0);
	assert_int_equal(bind(f.lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f.lfd, 8), 0);
	f.list = json_pack("{s:s}", "cmd", "list");
	f.dump = json_pack("{s:s}", "cmd", "dump");
	assert_true(f.list && f.dump);
	sweep("control client", op_ctl, &f);
	json_decref(f.list);
	json_decref(f.dump);
	close(f.lfd);
	unlink(f.ctl);
	rmdir(f.dir);
}

/* ---------------------------------------------------------------------------
 * The daemon's model: a stream with every kind of message the model keeps
 * state for (sites, threads, a pool, scopes with values, tasks through their
 * lives, a snapshot after a loss), then the rendering of the tree.  Every
 * apply must succeed or say -ENOMEM, and the model must free what it holds.
 */

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static struct proto_msg
mev(uint16_t type, uint64_t a)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.ts = 1000 + (int64_t)a;
	m.tid = 100;
	m.scope = m.task = m.pool_id = a;
	return m;
}

static void op_model(void *arg, struct outcome *o)
{
	(void)arg;
	struct model m;
	struct model_limits lim = {.retain_ns = 1000000000, .max_retained = 8};
	model_init(&m, &lim);
	m.track_removals = true;
	struct proto_msg msgs[64];
	size_t n = 0;
	struct proto_msg site = mev(PROTO_SITE, 0);
	site.site = 1;
	site.file = S("demo.c");
	site.func = S("serve");
	site.line = 40;
	msgs[n++] = site;
	struct proto_msg th = mev(PROTO_EV_THREAD_START, 0);
	th.name = S("main");
	th.role = 1;
	msgs[n++] = th;
	struct proto_msg pool = mev(PROTO_EV_POOL_CREATE, 3);
	pool.name = S("io");
	msgs[n++] = pool;
	for (uint64_t sc = 1; sc <= 2; sc++) {
		struct proto_msg open = mev(PROTO_EV_SCOPE_OPEN, sc);
		open.parent = sc - 1;
		open.name = S(sc == 1 ? "root" : "child");
		open.site = 1;
		msgs[n++] = open;
		struct proto_msg bind = mev(PROTO_EV_VALUE_BIND, sc);
		bind.key = S("request_id");
		bind.value = S("r-17");
		msgs[n++] = bind;
	}
	for (uint64_t t = 10; t < 22; t++) {
		struct proto_msg f = mev(PROTO_EV_TASK_FORK, t);
		f.scope = 1 + t % 2;
		f.site = 1;
		msgs[n++] = f;
		struct proto_msg st = mev(PROTO_EV_TASK_START, t);
		st.scope = f.scope;
		msgs[n++] = st;
		if (t % 3) {
			struct proto_msg e = mev(PROTO_EV_TASK_END, t);
			e.scope = f.scope;
			e.state = 2;
			msgs[n++] = e;
		}
	}
	msgs[n++] = mev(PROTO_EV_JOIN_BEGIN, 2);
	struct proto_msg lost = mev(PROTO_LOST, 0);
	lost.total_lost = lost.lost_since = 5;
	msgs[n++] = lost;
	struct proto_msg sb = mev(PROTO_SNAPSHOT_BEGIN, 0);
	sb.seq = 1;
	msgs[n++] = sb;
	msgs[n++] = site;
	msgs[n++] = th;
	msgs[n - 1].flags = PROTO_F_SNAPSHOT;
	struct proto_msg root = mev(PROTO_EV_SCOPE_OPEN, 1);
	root.name = S("root");
	root.site = 1;
	root.flags = PROTO_F_SNAPSHOT;
	msgs[n++] = root;
	struct proto_msg se = mev(PROTO_SNAPSHOT_END, 0);
	se.seq = 1;
	msgs[n++] = se;
	assert_true(n <= sizeof msgs / sizeof msgs[0]);

	char what[64];
	for (size_t i = 0; i < n; i++) {
		snprintf(what, sizeof what, "model_apply #%zu (%s)", i,
			 proto_type_name(msgs[i].type));
		(void)expect(model_apply(&m, &msgs[i], 0), what, o);
	}
	struct jbuf b;
	jb_init(&b);
	struct clockref clk = {0, 0};
	model_render(&m, &clk, 0, &b);
	if (b.oom)
		o->enomem++;
	jb_free(&b);
	model_sweep(&m, 2000000000);
	model_free(&m);
}

static void test_model(void **state)
{
	(void)state;
	sweep("daemon model", op_model, NULL);
}

int main(void)
{
	/* A client that gave up closes its end before the fake daemon writes. */
	signal(SIGPIPE, SIG_IGN);
	/* The agent's own thread would allocate at times of its choosing and
	 * blur which call met the failure; the agent's buffers are the agent
	 * tests' part. */
	sc_agent_stop();
	json_set_alloc_funcs(json_malloc, free);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scope_default_pool),
	    cmocka_unit_test(test_pool),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_dump_builder),
	    cmocka_unit_test(test_ctl),
	    cmocka_unit_test(test_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
