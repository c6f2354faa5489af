/* test_metrics.c - the tally and the /metrics text: counts per pool and state,
 * histogram buckets, label escaping of hostile names, pools that share a
 * name, the pool cap, a pid held twice, address parsing, and (when promtool
 * is installed) the rendered text as Prometheus checks it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/metrics.h"
#include "../../daemon/model.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MS 1000000ll

static struct proto_str S(const char *s) {
	return (struct proto_str){s, (uint16_t)strlen(s)};
}

static struct proto_msg
ev(uint16_t type, int64_t ts)
{
	struct proto_msg m;
	memset(&m, 0, sizeof m);
	m.type = type;
	m.ts = ts;
	m.tid = 100;
	return m;
}

static void apply(struct proc *p, struct proto_msg m)
{
	assert_int_equal(model_apply(&p->model, &m, m.ts + MS), 0);
}

static void pool_create(struct proc *p, uint64_t id, const char *name)
{
	struct proto_msg m = ev(PROTO_EV_POOL_CREATE, 10);
	m.pool_id = id;
	m.name = S(name);
	m.pool = (struct proto_pool){.core = 2,
				     .max = 4,
				     .size = 2,
				     .active = 1,
				     .largest = 3,
				     .queue_kind = 1,
				     .queue_capacity = 64,
				     .queued = 5,
				     .completed = 77,
				     .rejected = 2};
	apply(p, m);
}

static void scope_open(struct proc *p, uint64_t id, uint64_t pool)
{
	struct proto_msg m = ev(PROTO_EV_SCOPE_OPEN, 20);
	m.scope = id;
	m.pool_id = pool;
	m.name = S("s");
	apply(p, m);
}

/* A task of scope forked at 100 ms, started wait later, ended run after. */
static void task(struct proc *p, uint64_t id, uint64_t scope, int64_t wait, int64_t run,
		 uint32_t state)
{
	struct proto_msg m = ev(PROTO_EV_TASK_FORK, 100 * MS);
	m.task = id;
	m.scope = scope;
	apply(p, m);
	m = ev(PROTO_EV_TASK_START, 100 * MS + wait);
	m.task = id;
	m.scope = scope;
	apply(p, m);
	m = ev(PROTO_EV_TASK_END, 100 * MS + wait + run);
	m.task = id;
	m.scope = scope;
	m.state = state;
	apply(p, m);
}

static struct daemon *daemon_with(pid_t pid)
{
	struct daemon *d = calloc(1, sizeof *d);
	assert_non_null(d);
	d->opt.metrics = "0";
	d->opt.max_entities = 100000;
	d->opt.max_retained = 4096;
	d->opt.max_processes = 16;
	assert_non_null(proc_new(d, pid, 0));
	return d;
}

static void daemon_free(struct daemon *d)
{
	while (d->procs)
		proc_free(d, d->procs);
	free(d);
}

static char *render(struct daemon *d)
{
	struct jbuf b;
	jb_init(&b);
	metrics_render(d, &b);
	assert_false(b.oom);
	jb_raw(&b, "", 1);
	return b.p;
}

static void has(const char *text, const char *line)
{
	if (!strstr(text, line))
		fail_msg("no line '%s' in:\n%s", line, text);
}

/* Runs promtool check metrics on text, when it is installed. */
static void promtool_accepts(const char *text)
{
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		print_message("promtool is not installed (make deps): text not linted\n");
		return;
	}
	char path[] = "/tmp/test_metrics.XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
	FILE *f = popen(cmd, "r");
	char out[4096] = "";
	size_t n = fread(out, 1, sizeof out - 1, f);
	out[n] = 0;
	int rc = pclose(f);
	unlink(path);
	if (rc != 0 || n)
		fail_msg("promtool check metrics: %s", out);
}

static void test_counts_and_histograms(void **state)
{
	(void)state;
	struct daemon *d = daemon_with(4242);
	struct proc *p = d->procs;
	assert_non_null(p->model.tally);
	pool_create(p, 1, "io");
	scope_open(p, 10, 1);
	task(p, 1, 10, 2 * MS, 3 * MS, PROTO_TASK_SUCCESS);
	task(p, 2, 10, 20 * MS, 200 * MS, PROTO_TASK_FAILED);
	task(p, 3, 10, 0, 70 * 1000 * MS, PROTO_TASK_CANCELLED); /* past the last bound */
	struct proto_msg m = ev(PROTO_EV_SCOPE_CANCEL, 300 * MS);
	m.scope = 10;
	m.reason = PROTO_CANCEL_TIMEOUT;
	apply(p, m);
	m.reason = PROTO_CANCEL_EXPLICIT; /* the first reason counts, once */
	apply(p, m);
	m = ev(PROTO_EV_VIOLATION, 310 * MS);
	m.scope = 10;
	m.kind = PROTO_VIOL_DOUBLE_JOIN;
	apply(p, m);
	m = ev(PROTO_EV_SCOPE_CLOSE, 320 * MS);
	m.scope = 10;
	apply(p, m);
	apply(p, m); /* a repeat closes nothing more */

	char *t = render(d);
	has(t, "scoped_tasks_ended_total{pid=\"4242\",pool=\"io\",state=\"success\"} 1\n");
	/* The advisor's families; its figures wait for a sample of /proc. */
	has(t, "# TYPE scoped_pool_wait_compute_ratio gauge\n");
	has(t, "# TYPE scoped_pool_recommended_threads gauge\n");
	has(t, "scoped_pool_advice{pid=\"4242\",name=\"io\",verdict=\"collecting\",confidence="
	       "\"none\"} 1\n");
	has(t, "scoped_tasks_ended_total{pid=\"4242\",pool=\"io\",state=\"failed\"} 1\n");
	has(t, "scoped_tasks_ended_total{pid=\"4242\",pool=\"io\",state=\"cancelled\"} 1\n");
	has(t, "scoped_scope_cancellations_total{pid=\"4242\",reason=\"timeout\"} 1\n");
	has(t, "scoped_scope_cancellations_total{pid=\"4242\",reason=\"explicit\"} 0\n");
	has(t, "scoped_structure_violations_total{pid=\"4242\",kind=\"double_join\"} 1\n");
	has(t, "scoped_scopes_closed_total{pid=\"4242\"} 1\n");
	/* Run times 3 ms, 200 ms, 70 s: buckets are cumulative, +Inf holds all. */
	has(t, "executor_seconds_bucket{pid=\"4242\",name=\"io\",le=\"0.001\"} 0\n");
	has(t, "executor_seconds_bucket{pid=\"4242\",name=\"io\",le=\"0.005\"} 1\n");
	has(t, "executor_seconds_bucket{pid=\"4242\",name=\"io\",le=\"0.25\"} 2\n");
	has(t, "executor_seconds_bucket{pid=\"4242\",name=\"io\",le=\"60\"} 2\n");
	has(t, "executor_seconds_bucket{pid=\"4242\",name=\"io\",le=\"+Inf\"} 3\n");
	has(t, "executor_seconds_sum{pid=\"4242\",name=\"io\"} 70.203\n");
	has(t, "executor_seconds_count{pid=\"4242\",name=\"io\"} 3\n");
	has(t, "executor_idle_seconds_sum{pid=\"4242\",name=\"io\"} 0.022\n");
	has(t, "executor_idle_seconds_bucket{pid=\"4242\",name=\"io\",le=\"0.00001\"} 1\n");
	/* The pool's own figures, under Micrometer's names. */
	has(t, "executor_pool_size_threads{pid=\"4242\",name=\"io\"} 2\n");
	has(t, "executor_pool_core_threads{pid=\"4242\",name=\"io\"} 2\n");
	has(t, "executor_pool_max_threads{pid=\"4242\",name=\"io\"} 4\n");
	has(t, "executor_active_threads{pid=\"4242\",name=\"io\"} 1\n");
	has(t, "executor_queued_tasks{pid=\"4242\",name=\"io\"} 5\n");
	has(t, "executor_queue_remaining_tasks{pid=\"4242\",name=\"io\"} 59\n");
	has(t, "executor_completed_tasks_total{pid=\"4242\",name=\"io\"} 77\n");
	has(t, "scoped_executor_rejected_tasks_total{pid=\"4242\",name=\"io\"} 2\n");
	has(t, "scoped_executor_pool_largest_threads{pid=\"4242\",name=\"io\"} 3\n");
	has(t, "scoped_process_live{pid=\"4242\"} 1\n");
	promtool_accepts(t);
	free(t);
	daemon_free(d);
}

/* Names from the peer are label values: escaped, cut, made valid UTF-8. */
static void test_hostile_names(void **state)
{
	(void)state;
	struct daemon *d = daemon_with(7);
	struct proc *p = d->procs;
	p->name = strdup("a\"b\\c\nd\x01\xff\xc3\xa9");
	pool_create(p, 1, "same");
	pool_create(p, 2, "same");
	pool_create(p, 3, "q\"uote");
	char *t = render(d);
	has(t, "process=\"a\\\"b\\\\c\\nd??\xc3\xa9\"");
	/* Two pools of one name would be one series twice: told apart by id. */
	has(t, "executor_pool_size_threads{pid=\"7\",name=\"same#1\"} 2\n");
	has(t, "executor_pool_size_threads{pid=\"7\",name=\"same#2\"} 2\n");
	has(t, "executor_pool_size_threads{pid=\"7\",name=\"q\\\"uote\"} 2\n");
	promtool_accepts(t);
	free(t);
	daemon_free(d);
}

/* A program that creates pools without end: the series stop at the cap and
 * the tasks of further pools are tallied together. */
static void test_pool_cap(void **state)
{
	(void)state;
	struct daemon *d = daemon_with(9);
	struct proc *p = d->procs;
	char name[32];
	for (uint64_t i = 1; i <= 3 * TALLY_POOLS; i++) {
		snprintf(name, sizeof name, "p%llu", (unsigned long long)i);
		pool_create(p, i, name);
		scope_open(p, 1000 + i, i);
		task(p, i, 1000 + i, MS, MS, PROTO_TASK_SUCCESS);
	}
	char *t = render(d);
	size_t series = 0;
	for (const char *s = t; (s = strstr(s, "\nexecutor_pool_size_threads{")); s++)
		series++;
	assert_int_equal(series, TALLY_POOLS);
	has(t,
	    "scoped_tasks_ended_total{pid=\"9\",pool=\"" TALLY_OTHER "\",state=\"success\"} 65\n");
	promtool_accepts(t);
	free(t);
	daemon_free(d);
}

/* An exited process kept beside a new one with its pid: one set of series. */
static void test_pid_reused(void **state)
{
	(void)state;
	struct daemon *d = daemon_with(11);
	d->procs->state = PROC_EXITED;
	d->procs->registered_ns = 1;
	struct proc *old = d->procs;
	struct proc *now = proc_new(d, 11, 0);
	assert_non_null(now);
	assert_ptr_not_equal(old, now);
	char *t = render(d);
	assert_non_null(strstr(t, "scoped_process_live{pid=\"11\"} 1\n"));
	assert_null(strstr(t, "scoped_process_live{pid=\"11\"} 0\n"));
	has(t, "scoped_processes{state=\"exited\"} 1\n");
	promtool_accepts(t);
	free(t);
	daemon_free(d);
}

static void test_parse_addr(void **state)
{
	(void)state;
	struct sockaddr_storage sa;
	socklen_t len;
	char err[256];
	assert_int_equal(metrics_parse_addr("9464", &sa, &len, err, sizeof err), 0);
	struct sockaddr_in *s4 = (struct sockaddr_in *)&sa;
	assert_int_equal(sa.ss_family, AF_INET);
	assert_int_equal(ntohs(s4->sin_port), 9464);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(metrics_parse_addr(":80", &sa, &len, err, sizeof err), 0);
	assert_int_equal(ntohl(s4->sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(metrics_parse_addr("0.0.0.0:0", &sa, &len, err, sizeof err), 0);
	assert_int_equal(s4->sin_addr.s_addr, 0);
	assert_int_equal(metrics_parse_addr("[::1]:9", &sa, &len, err, sizeof err), 0);
	assert_int_equal(sa.ss_family, AF_INET6);
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), 9);
	static const char *const bad[] = {"",	      ":",     "x",	     "-1",    "65536",
					  "1.2.3.4:", "::1:9", "1.2.3.4:9x", "[::1]9"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		if (metrics_parse_addr(bad[i], &sa, &len, err, sizeof err) == 0)
			fail_msg("'%s' was accepted", bad[i]);
		assert_non_null(strstr(err, "--metrics"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts_and_histograms),
	    cmocka_unit_test(test_hostile_names),
	    cmocka_unit_test(test_pool_cap),
	    cmocka_unit_test(test_pid_reused),
	    cmocka_unit_test(test_parse_addr),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
