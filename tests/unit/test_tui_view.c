/* test_tui_view.c - scopetop's views drawn into a curses screen on
 * /dev/null: only changed lines are repainted, keys from the table act on
 * the tree (expand, filter, sort, group, pause, help, back), the detail
 * pane shows the stack and chain, and --once prints the tree as text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tui/app.h"
#include "../../tui/once.h"

#define NOW 1764441605000.0

static const char *const model_json =
    "{\"now_ms\":1764441605000,"
    "\"threads\":[{\"tid\":100,\"name\":\"main\"},{\"tid\":101,\"name\":\"io-1\"},"
    "{\"tid\":102,\"name\":\"io-2\"},{\"tid\":103,\"name\":\"io-3\"}],"
    "\"pools\":[{\"id\":1,\"name\":\"io\",\"size\":4,\"max\":4}],"
    "\"scopes\":[{\"id\":1,\"name\":\"server\",\"owner\":100,\"joiner\":\"all_successful\","
    "\"state\":\"open\",\"opened_ms\":1764441600000,\"values\":{\"request_id\":\"r-17\"},"
    "\"site\":{\"file\":\"demo.c\",\"line\":30,\"func\":\"main\"}},"
    "{\"id\":2,\"name\":\"handle\",\"parent\":1,\"parent_task\":11,\"owner\":102,"
    "\"joiner\":\"await_all\",\"state\":\"joining\",\"opened_ms\":1764441603000,"
    "\"shielded_by\":2,\"shield_deadline_ms\":1764441665000,\"handlers\":1}],"
    "\"tasks\":[{\"id\":10,\"scope\":1,\"state\":\"running\",\"worker\":101,"
    "\"site\":{\"file\":\"demo.c\",\"line\":40,\"func\":\"main\"},\"started_ms\":1764441601000},"
    "{\"id\":11,\"scope\":1,\"state\":\"running\",\"worker\":102,"
    "\"site\":{\"file\":\"demo.c\",\"line\":41,\"func\":\"main\"},\"started_ms\":1764441601000},"
    "{\"id\":12,\"scope\":2,\"state\":\"running\",\"worker\":103,"
    "\"site\":{\"file\":\"demo.c\",\"line\":50,\"func\":\"handle\"},\"func\":\"poll_peer\","
    "\"started_ms\":1764441603000}]"
    "}";

static struct app a;
static FILE *out, *in;

static void key(int ch)
{
	const struct view *v = &app_views[a.view];
	if (!(v->key && v->key(&a, ch)))
		keys_dispatch(&a, ch);
	app_rebuild(&a);
}

static void draw(void)
{
	app_rebuild(&a);
	app_views[a.view].draw(&a);
	scr_flush(&a.scr);
}

/* The text of screen line y, trailing blanks cut. */
static const char *line(int y)
{
	static char buf[512];
	mvinnstr(y, 0, buf, sizeof buf - 1);
	size_t n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		buf[--n] = 0;
	return buf;
}

static bool screen_has(const char *s)
{
	for (int y = 0; y < a.scr.rows; y++)
		if (strstr(line(y), s))
			return true;
	return false;
}

static int setup(void **state)
{
	(void)state;
	char err[256];
	memset(&a, 0, sizeof a);
	out = fopen("/dev/null", "w");
	in = fopen("/dev/null", "r");
	a.o.ascii = true; /* mvinnstr reads bytes back; keep them one per cell */
	a.o.join_threshold_ms = 1000;
	tm_model_init(&a.model);
	tr_init(&a.tree);
	a.now_local = NOW;
	json_t *m = json_loads(model_json, 0, NULL);
	json_t *p = json_pack("{s:i, s:s, s:s}", "pid", 4242, "name", "demo", "state", "live");
	assert_int_equal(tm_model_load(&a.model, m, p, NOW, err, sizeof err), 0);
	json_decref(m);
	json_decref(p);
	if (scr_open(&a.scr, out, in, "xterm", false, err, sizeof err) &&
	    scr_open(&a.scr, out, in, "vt100", false, err, sizeof err))
		fail_msg("%s", err);
	resizeterm(24, 80);
	scr_resize(&a.scr);
	a.view = V_TREE;
	a.pid = 4242;
	a.subscribed = true;
	a.built_gen = (uint64_t)-1;
	draw();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	scr_close(&a.scr);
	tr_free(&a.tree);
	tm_model_free(&a.model);
	json_decref(a.held);
	a.held = NULL;
	fclose(out);
	fclose(in);
	return 0;
}

static void test_layout_80x24(void **state)
{
	(void)state;
	assert_non_null(strstr(line(0), "demo [4242] live"));
	assert_non_null(strstr(line(1), "STATE"));
	assert_non_null(strstr(line(2), "<root> demo [4242]"));
	assert_non_null(strstr(line(3), "server"));
	assert_non_null(strstr(line(5), "io-2"));
	assert_non_null(strstr(line(6), "handle"));
	assert_non_null(strstr(line(6), "J joining"));
	assert_non_null(strstr(line(23), "?:help"));
	/* The pane shows the root (selected first) below the tree. */
	assert_true(screen_has("process 4242 \"demo\"  live"));
	key('j'); /* the server scope: its subtasks by state */
	draw();
	assert_true(screen_has("subtasks: 2 (2 running)"));
}

/* The process pane's uptime runs on from the process's own start, though
 * the reply that brought it said an older uptime. */
static void test_uptime_runs(void **state)
{
	(void)state;
	json_t *p = json_pack("{s:i, s:s, s:s, s:f, s:i}", "pid", 4242, "name", "demo", "state",
			      "live", "start_time_ms", 1764441605000.0 - 23000, "uptime_ms", 6500);
	tm_model_set_process(&a.model, p);
	json_decref(p);
	draw();
	assert_true(screen_has("uptime 23.0s"));
	a.now_local += 5000;
	draw();
	assert_true(screen_has("uptime 28.0s"));
}

/* A crashed process: the pane names the signal, the thread, its task and
 * the frames it crashed in. */
static void test_crash_shown(void **state)
{
	(void)state;
	json_t *p =
	    json_loads("{\"pid\":4242,\"name\":\"demo\",\"state\":\"exited\",\"exit_signal\":11,"
		       "\"crash\":{\"tid\":103,\"signal\":11,\"task\":12,\"scope\":2,\"frames\":["
		       "{\"addr\":\"0x1\",\"func\":\"crash_here\",\"file\":\"c.c\",\"line\":5},"
		       "{\"addr\":\"0x2\",\"func\":\"poll_peer\",\"file\":\"c.c\",\"line\":9}]}}",
		       0, NULL);
	tm_model_set_process(&a.model, p);
	json_decref(p);
	draw();
	assert_true(screen_has("crashed: signal 11 on thread #103, running task 12"));
	assert_true(screen_has("at crash_here (c.c:5)"));
	assert_true(screen_has("at poll_peer (c.c:9)"));
}

static void test_only_changed_lines(void **state)
{
	(void)state;
	unsigned long before = a.scr.repainted;
	draw();
	assert_int_equal(a.scr.repainted - before, 0); /* nothing changed: nothing written */
	char err[256];
	json_t *d = json_loads("{\"gen\":2,\"upsert\":{\"tasks\":[{\"id\":12,\"scope\":2,"
			       "\"state\":\"failed\",\"worker\":103,\"error\":\"-5\","
			       "\"started_ms\":1764441603000,\"ended_ms\":1764441604000}]}}",
			       0, NULL);
	assert_int_equal(tm_model_apply_delta(&a.model, d, NOW, err, sizeof err), 0);
	json_decref(d);
	before = a.scr.repainted;
	draw();
	/* The task's row changed; its scope's and the tree's others did not. */
	assert_int_equal(a.scr.repainted - before, 1);
	assert_non_null(strstr(line(7), "x failed"));
	before = a.scr.repainted;
	resizeterm(30, 100);
	scr_resize(&a.scr);
	draw();
	assert_true(a.scr.repainted - before >= 10); /* a resize repaints everything */
	assert_non_null(strstr(line(1), "WORKER"));  /* room for every column now */
}

static void test_keys(void **state)
{
	(void)state;
	key('j'); /* server */
	assert_int_equal(a.sel, 1);
	key('\n'); /* collapse it */
	draw();
	assert_false(screen_has("io-1"));
	assert_true(screen_has("> server"));
	key(' '); /* and back */
	draw();
	assert_true(screen_has("io-1"));
	key('/');
	assert_true(a.filter_edit);
	for (const char *c = "demo.c:50"; *c; c++)
		key(*c);
	key('\n');
	assert_false(a.filter_edit);
	assert_string_equal(a.tree.filter, "demo.c:50");
	draw();
	assert_true(screen_has("poll_peer")); /* task 12, named by its body */
	assert_false(screen_has("io-3"));
	assert_false(screen_has("io-1"));
	assert_true(screen_has("[demo.c:50]"));
	key(27); /* Esc clears the filter */
	assert_string_equal(a.tree.filter, "");
	key('s');
	assert_int_equal(a.tree.sort, SORT_AGE);
	key('g');
	assert_true(a.tree.group);
	key('p');
	assert_true(a.paused);
	double frozen = tm_model_now(&a.model, a.now_local);
	assert_true(tm_model_now(&a.model, a.now_local + 5000) == frozen); /* time stands still */
	json_t *d = json_loads(
	    "{\"type\":\"delta\",\"gen\":9,\"upsert\":{\"tasks\":[{\"id\":77,\"scope\":1,"
	    "\"state\":\"running\"}]}}",
	    0, NULL);
	/* A delta that arrives while paused is held, not applied. */
	a.held = json_array();
	json_array_append_new(a.held, d);
	assert_null(tm_task_get(&a.model, 77));
	key('p');
	assert_false(a.paused);
	assert_non_null(tm_task_get(&a.model, 77)); /* applied on resume */
	assert_true(tm_model_now(&a.model, a.now_local + 5000) > frozen);
	key('?');
	assert_int_equal(a.view, V_HELP);
	draw();
	assert_true(screen_has("filter by name"));
	assert_true(screen_has("write a JSON thread dump"));
	key('x'); /* any key leaves help */
	assert_int_equal(a.view, V_TREE);
	key(KEY_END);
	assert_int_equal(a.sel, (long)a.tree.n - 1);
	key(KEY_HOME);
	assert_int_equal(a.sel, 0);
	key('q');
	assert_true(a.quit);
}

static void test_detail(void **state)
{
	(void)state;
	char err[256];
	json_t *st = json_loads(
	    "[{\"tid\":103,\"state\":\"WAITING\",\"frames\":[{\"func\":\"poll\","
	    "\"file\":\"poll.c\",\"line\":7},{\"func\":\"poll_peer\",\"file\":\"demo.c\","
	    "\"line\":77}]}]",
	    0, NULL);
	tm_model_set_stacks(&a.model, st, NOW);
	json_decref(st);
	(void)err;
	while (app_selected(&a) && app_selected(&a)->id != 12)
		key('j');
	assert_int_equal(detail_tid(&a), 103);
	key('\n'); /* a leaf: opens the detail view */
	assert_int_equal(a.view, V_DETAIL);
	draw();
	assert_true(screen_has("task 12 poll_peer()  "));
	assert_true(screen_has("worker 103 \"io-3\""));
	assert_true(screen_has("at poll (poll.c:7)"));
	assert_true(screen_has("at poll_peer (demo.c:77)"));
	assert_true(screen_has("parent chain: handle#2 < server#1 < <root>"));
	assert_true(screen_has("request_id=r-17 (from server)"));
	/* The shield over the scope, with its deadline, and its handler. */
	assert_true(screen_has("shielded by: scope #2, cleanup deadline 1m00s"));
	assert_true(screen_has("cancel handlers: 1 armed, 0 ran"));
	assert_true(screen_has("~ blocked") || screen_has("blocked (running)"));
	key(27);
	assert_int_equal(a.view, V_TREE);
}

static void test_exited(void **state)
{
	(void)state;
	json_t *p = json_pack("{s:i, s:s, s:s, s:i}", "pid", 4242, "name", "demo", "state",
			      "exited", "exit_code", 3);
	tm_model_set_process(&a.model, p);
	json_decref(p);
	tm_model_freeze(&a.model, NOW);
	a.exited = true;
	draw();
	assert_non_null(strstr(line(0), "EXITED (code 3), last tree kept"));
	assert_true(screen_has("io-1")); /* the last tree stays */
}

static void test_once(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(once_tree(f, &a.model, NOW, true), 0);
	fclose(f);
	assert_non_null(strstr(buf, "process 4242 demo live  scopes 2  tasks 3"));
	assert_non_null(strstr(buf, "J joining   |   `-v handle"));
	assert_non_null(strstr(buf, "`-v pools (1)"));
	assert_non_null(strstr(buf, "io size 4/4"));
	assert_non_null(strstr(buf, "poll_peer")); /* task 12's body names its row */
	assert_non_null(strstr(buf, "io-1"));	   /* task 10's is unknown: its thread */
	for (char *l = buf; *l;) {		   /* no padding at line ends */
		char *nl = strchr(l, '\n');
		assert_non_null(nl);
		assert_true(nl == l || nl[-1] != ' ');
		l = nl + 1;
	}
	free(buf);
}

/* Bytes of the screen that are controls (C0, DEL), or C1 in UTF-8. */
static bool screen_has_controls(void)
{
	for (int y = 0; y < a.scr.rows; y++)
		for (const unsigned char *p = (const unsigned char *)line(y); *p; p++)
			if (*p < 0x20 || *p == 0x7f ||
			    (p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0))
				return true;
	return false;
}

/* A hostile program: names and frames with terminal escapes, newlines, C1
 * and ill-formed UTF-8; ids past INT64_MAX (u64 on the wire; common/ctl.c
 * hands them over as jansson integers of the same bits).  Nothing reaches
 * the screen raw, and ids read as the program's. */
static void test_hostile(void **state)
{
	(void)state;
	char err[256];
	const json_int_t big_scope = (json_int_t)(UINT64_MAX - 1);
	const json_int_t big_task = (json_int_t)(((uint64_t)1 << 63) + 5);
	json_t *m = json_pack(
	    "{s:f, s:[{s:i, s:s}], s:[],"
	    " s:[{s:I, s:s, s:i, s:s, s:s, s:{s:s, s:i, s:s}}],"
	    " s:[{s:I, s:I, s:s, s:i, s:s}]}",
	    "now_ms", NOW, "threads", "tid", 100, "name", "m\x1b[2Jain\xc2\x9b", "pools", "scopes",
	    "id", big_scope, "name", "big\x1b]0;x\x07", "owner", 100, "joiner", "all_successful",
	    "state", "open", "site", "file", "s\n.c", "line", 3, "func", "f\xc2\x85", "tasks", "id",
	    big_task, "scope", big_scope, "state", "running", "worker", 100, "func", "body\r\n");
	json_t *p =
	    json_pack("{s:i, s:s, s:s}", "pid", 4242, "name", "d\x1b[31mx", "state", "live");
	assert_non_null(m);
	assert_int_equal(tm_model_load(&a.model, m, p, NOW, err, sizeof err), 0);
	json_decref(m);
	json_decref(p);
	json_t *st = json_loads("[{\"tid\":100,\"state\":\"WAITING\",\"frames\":[{\"func\":"
				"\"ev\\u001b[2Jil\\u009b\",\"file\":\"x\\n.c\",\"line\":7}]}]",
				0, NULL);
	tm_model_set_stacks(&a.model, st, NOW);
	json_decref(st);
	a.built_gen = (uint64_t)-1;
	draw();
	assert_false(screen_has_controls());
	assert_true(screen_has("big?]0;x?"));
	for (int i = 0; i < 10 && app_selected(&a) && app_selected(&a)->id != big_task; i++)
		key('j');
	assert_true(app_selected(&a) && app_selected(&a)->id == big_task);
	key('\n');
	draw();
	assert_false(screen_has_controls());
	assert_true(screen_has("task 9223372036854775813 body?"
			       "?()"));
	assert_true(screen_has("in scope 18446744073709551614 \"big?]0;x?\""));
	assert_true(screen_has("at ev?[2Jil? (x?.c:7)"));
	assert_false(screen_has("-9223372036854775803"));
	key(27);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(once_tree(f, &a.model, NOW, true), 0);
	fclose(f);
	for (const unsigned char *q = (const unsigned char *)buf; *q; q++)
		assert_true(*q >= 0x20 || *q == '\n');
	assert_non_null(strstr(buf, "process 4242 d?[31mx live"));
	assert_null(strstr(buf, "-9223372036854775803"));
	free(buf);
}

static void test_picker(void **state)
{
	(void)state;
	a.procs =
	    json_loads("[{\"pid\":11,\"name\":\"alpha\",\"state\":\"live\",\"uptime_ms\":65000,"
		       "\"scopes\":3,\"tasks\":12,\"threads\":5,\"lost\":0},"
		       "{\"pid\":22,\"name\":\"beta\\u001b[2J\",\"state\":\"exited\",\"scopes\":0,"
		       "\"tasks\":0}]",
		       0, NULL);
	a.view = V_PICKER;
	a.pid = 0;
	a.o.socket = "/nonexistent-scopetop-test/agent.sock";
	scr_invalidate(&a.scr);
	draw();
	assert_non_null(strstr(line(0), "instrumented processes: 2"));
	assert_non_null(strstr(line(2), "11  alpha"));
	assert_non_null(strstr(line(2), "1m05s"));
	assert_non_null(strstr(line(2), "12"));
	/* A peer's escape sequence is shown, never sent to the terminal. */
	assert_non_null(strstr(line(3), "beta?[2J"));
	key(KEY_DOWN);
	assert_int_equal(a.psel, 1);
	key('k');
	assert_int_equal(a.psel, 0);
	key('\n'); /* opens alpha; no daemon at that socket, so it says so */
	assert_int_equal(a.view, V_TREE);
	assert_int_equal(a.pid, 11);
	assert_non_null(strstr(a.status, "cannot watch 11"));
	json_decref(a.procs);
	a.procs = NULL;
}

static void test_tiny_terminal(void **state)
{
	(void)state;
	static const int sizes[][2] = {{1, 1}, {2, 10}, {3, 20}, {5, 40}, {15, 30}, {24, 80}};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		resizeterm(sizes[i][0], sizes[i][1]);
		scr_resize(&a.scr);
		for (int v = 0; v < V_COUNT; v++) {
			a.view = v;
			draw();
		}
		assert_int_equal(a.scr.rows, sizes[i][0]);
		key(KEY_NPAGE);
		key(KEY_END);
	}
	a.view = V_TREE;
	draw();
	assert_non_null(strstr(line(0), "scopetop"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_layout_80x24, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_only_changed_lines, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_uptime_runs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_shown, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_detail, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exited, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_picker, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tiny_terminal, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
