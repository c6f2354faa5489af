/* test_tui_model.c - scopetop's model and tree from canned daemon JSON:
 * loading, delta application, tree shape, expand/collapse, sorting,
 * filtering, grouping, warnings, stacks, row text and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tui/tmap.h"
#include "../../tui/model.h"
#include "../../tui/rowfmt.h"
#include "../../tui/text.h"
#include "../../tui/tree.h"

#define NOW 1764441605000.0

static const char *const base_model =
    "{\"now_ms\":1764441605000,"
    "\"threads\":[{\"tid\":100,\"name\":\"main\",\"role\":\"main\",\"state\":\"live\"},"
    "{\"tid\":101,\"name\":\"io-1\",\"role\":\"worker\",\"pool\":1,\"task\":10,\"state\":\"live\"},"
    "{\"tid\":102,\"name\":\"io-2\",\"role\":\"worker\",\"pool\":1,\"task\":11,\"state\":\"live\"}]"
    ","
    "\"pools\":[{\"id\":1,\"name\":\"io\",\"core\":4,\"max\":8,\"size\":4,\"active\":2,"
    "\"queued\":0,\"rejected\":3}],"
    "\"scopes\":[{\"id\":1,\"name\":\"server\",\"parent\":null,\"parent_task\":null,\"owner\":100,"
    "\"pool\":1,\"joiner\":\"all_successful\",\"state\":\"open\",\"deadline_ms\":1764441610000,"
    "\"opened_ms\":1764441600000,\"site\":{\"file\":\"/src/demo.c\",\"line\":30,\"func\":\"main\"},"
    "\"values\":{\"request_id\":\"r-17\"}},"
    "{\"id\":2,\"name\":\"handle\",\"parent\":1,\"parent_task\":11,\"owner\":102,"
    "\"joiner\":\"any_successful\",\"state\":\"open\",\"opened_ms\":1764441603000,"
    "\"site\":{\"file\":\"demo.c\",\"line\":52,\"func\":\"handle\"}}],"
    "\"tasks\":[{\"id\":10,\"scope\":1,\"state\":\"running\",\"worker\":101,"
    "\"site\":{\"file\":\"demo.c\",\"line\":40,\"func\":\"fetch_user\"},\"forked_ms\":"
    "1764441601000,"
    "\"started_ms\":1764441601000},"
    "{\"id\":11,\"scope\":1,\"state\":\"running\",\"worker\":102,"
    "\"site\":{\"file\":\"demo.c\",\"line\":50,\"func\":\"handle\"},\"started_ms\":1764441602000},"
    "{\"id\":12,\"scope\":2,\"state\":\"forked\",\"site\":{\"file\":\"demo.c\",\"line\":60,"
    "\"func\":\"query\"},\"forked_ms\":1764441604000},"
    "{\"id\":13,\"scope\":1,\"state\":\"success\",\"worker\":101,\"site\":{\"file\":\"demo.c\","
    "\"line\":41,\"func\":\"audit\"},\"started_ms\":1764441600500,\"ended_ms\":1764441600900}],"
    "\"violations\":[]}";

static const char *const base_proc =
    "{\"pid\":4242,\"uid\":0,\"name\":\"demo\",\"state\":\"live\",\"lost\":0,\"complete\":true}";

struct fx {
	struct tm_model m;
	struct tr_tree t;
};

static json_t *parse(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_DECODE_ANY, &e);
	if (!j)
		fail_msg("bad canned JSON: %s at %d", e.text, e.position);
	return j;
}

static void load(struct fx *f, const char *model, const char *proc)
{
	char err[256];
	json_t *jm = parse(model), *jp = parse(proc);
	assert_int_equal(tm_model_load(&f->m, jm, jp, NOW, err, sizeof err), 0);
	json_decref(jm);
	json_decref(jp);
}

static void delta(struct fx *f, const char *d, double local)
{
	char err[256];
	json_t *j = parse(d);
	assert_int_equal(tm_model_apply_delta(&f->m, j, local, err, sizeof err), 0);
	json_decref(j);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	tm_model_init(&f->m);
	tr_init(&f->t);
	load(f, base_model, base_proc);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	tr_free(&f->t);
	tm_model_free(&f->m);
	free(f);
	return 0;
}

/* "k:id@depth" for each row, to compare whole trees at once. */
static const char *shape(struct fx *f)
{
	static char buf[4096];
	static const char kinds[] = {'R', 'S', 'T', 'P', 'p'};
	assert_int_equal(tr_build(&f->t, &f->m), 0);
	buf[0] = 0;
	for (size_t i = 0; i < f->t.n; i++) {
		const struct tr_row *r = &f->t.rows[i];
		size_t at = strlen(buf);
		snprintf(buf + at, sizeof buf - at, "%s%c%lld@%d", i ? " " : "", kinds[r->kind],
			 (long long)r->id, r->depth);
		if (r->group_n > 1) {
			at = strlen(buf);
			snprintf(buf + at, sizeof buf - at, "x%u", r->group_n);
		}
	}
	return buf;
}

static void test_tree_shape(void **state)
{
	struct fx *f = *state;
	/* The nested scope hangs under the subtask that opened it; pools last. */
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 P0@1");
	assert_int_equal(f->m.proc.pid, 4242);
	assert_string_equal(f->m.proc.name, "demo");
	const struct tr_row *r = &f->t.rows[6];
	assert_true(r->flags & TR_F_DIM); /* ended task */
	assert_true(r->flags & TR_F_LAST);
	assert_false(f->t.rows[2].flags & TR_F_LAST);
	assert_int_equal(f->t.rows[5].state, DS_QUEUED);
	/* T12 at depth 4: its ancestor T11 (depth 2) has a later sibling T13. */
	assert_true(f->t.rows[5].guides & (1u << 2));
	assert_false(f->t.rows[5].guides & (1u << 3));
}

/* f hides what ended (T13 succeeded) and says how many rows it left out;
 * the ellipsis marks a cut name. */
static void test_hide_ended(void **state)
{
	struct fx *f = *state;
	f->t.hide_ended = true;
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 P0@1");
	assert_int_equal(f->t.hidden, 1);
	f->t.hide_ended = false;
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 P0@1");
	assert_int_equal(f->t.hidden, 0);

	char buf[64] = "";
	assert_int_equal(ttx_append_cut(buf, sizeof buf, "fetch_user_profile", 8, false), 8);
	assert_string_equal(buf, "fetch_u\u2026");
	buf[0] = 0;
	assert_int_equal(ttx_append_cut(buf, sizeof buf, "fetch_user_profile", 8, true), 8);
	assert_string_equal(buf, "fetch_u~");
	buf[0] = 0;
	assert_int_equal(ttx_append_cut(buf, sizeof buf, "short", 8, false), 5);
	assert_string_equal(buf, "short");
}

/* Column choice: named columns parse, hidden ones leave the layout, the
 * state and the name stay whatever is asked. */
static void test_columns(void **state)
{
	(void)state;
	assert_int_equal(rf_col_parse("site"), RF_SITE);
	assert_int_equal(rf_col_parse("DEADLINE"), RF_DEADLINE);
	assert_int_equal(rf_col_parse("deadln"), RF_DEADLINE);
	assert_int_equal(rf_col_parse("bogus"), -1);
	struct rf_layout l;
	char hdr[512];
	rf_layout_hide(&l, 200, false, (1u << RF_SITE) | (1u << RF_ID) | (1u << RF_STATE));
	rf_header(&l, hdr, sizeof hdr);
	assert_non_null(strstr(hdr, "STATE"));
	assert_non_null(strstr(hdr, "NAME"));
	assert_non_null(strstr(hdr, "AGE"));
	assert_null(strstr(hdr, "SITE"));
	assert_null(strstr(hdr, " ID "));
	assert_int_equal(l.n, RF_NCOLS - 2);
}

/* Where a task's time went: queued, then ran = busy + joining (the joins
 * of the scopes its body opened, each until the scope closed or now). */
static void test_task_times(void **state)
{
	struct fx *f = *state;
	delta(f,
	      "{\"gen\":2,\"upsert\":{\"tasks\":[{\"id\":30,\"scope\":1,\"state\":\"running\","
	      "\"worker\":101,\"forked_ms\":1000,\"started_ms\":1500},"
	      "{\"id\":31,\"scope\":1,\"state\":\"forked\",\"forked_ms\":4000}],"
	      "\"scopes\":[{\"id\":8,\"parent_task\":30,\"state\":\"closed\",\"opened_ms\":1600,"
	      "\"join_began_ms\":1700,\"closed_ms\":1900},"
	      "{\"id\":9,\"parent_task\":30,\"state\":\"joining\",\"opened_ms\":2000,"
	      "\"join_began_ms\":2500}]}}",
	      NOW + 100);
	struct rf_times tt;
	rf_task_times(&f->m, tm_task_get(&f->m, 30), 4500, &tt);
	assert_true(tt.started);
	assert_true(tt.queued == 500);
	assert_true(tt.ran == 3000);
	assert_true(tt.joining == 200 + 2000);
	assert_true(tt.busy == 800);
	rf_task_times(&f->m, tm_task_get(&f->m, 31), 4500, &tt);
	assert_false(tt.started);
	assert_true(tt.queued == 500);
	assert_true(tt.ran == 0 && tt.busy == 0);

	/* The same as list columns (tokio-console's Busy, Sched, Idle). */
	struct tr_row r = {.kind = TR_TASK, .ent = tm_task_get(&f->m, 30), .group_n = 1};
	char cell[64], want[64];
	rf_cell(&f->m, &r, RF_BUSY, 4500, false, cell, sizeof cell);
	ttx_duration(want, sizeof want, 800);
	assert_string_equal(cell, want);
	rf_cell(&f->m, &r, RF_SCHED, 4500, false, cell, sizeof cell);
	ttx_duration(want, sizeof want, 500);
	assert_string_equal(cell, want);
	rf_cell(&f->m, &r, RF_IDLE, 4500, false, cell, sizeof cell);
	ttx_duration(want, sizeof want, 2200);
	assert_string_equal(cell, want);
	r.ent = tm_task_get(&f->m, 31); /* queued: no busy or idle time yet */
	rf_cell(&f->m, &r, RF_BUSY, 4500, false, cell, sizeof cell);
	assert_string_equal(cell, "");
	rf_cell(&f->m, &r, RF_SCHED, 4500, false, cell, sizeof cell);
	ttx_duration(want, sizeof want, 500);
	assert_string_equal(cell, want);
	r.group_n = 3; /* a group's row is no one task */
	rf_cell(&f->m, &r, RF_SCHED, 4500, false, cell, sizeof cell);
	assert_string_equal(cell, "");
	/* Wide enough, they show; at 80 columns they go first. */
	struct rf_layout l;
	char hdr[512];
	rf_layout(&l, 220, false);
	rf_header(&l, hdr, sizeof hdr);
	assert_non_null(strstr(hdr, "BUSY"));
	assert_non_null(strstr(hdr, "SCHED"));
	assert_non_null(strstr(hdr, "IDLE"));
	rf_layout(&l, 80, false);
	rf_header(&l, hdr, sizeof hdr);
	assert_null(strstr(hdr, "BUSY"));
	assert_non_null(strstr(hdr, "SITE"));
	assert_int_equal(rf_col_parse("busy"), RF_BUSY);
}

static void test_expand_collapse(void **state)
{
	struct fx *f = *state;
	tr_set_expanded(&f->t, TR_SCOPE, 1, false);
	assert_string_equal(shape(f), "R0@0 S1@1 P0@1");
	assert_false(f->t.rows[1].flags & TR_F_EXPANDED);
	assert_true(f->t.rows[1].flags & TR_F_KIDS);
	tr_set_expanded(&f->t, TR_SCOPE, 1, true);
	tr_set_expanded(&f->t, TR_POOLS, 0, true);
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 P0@1 p1@2");
	tr_set_expanded(&f->t, TR_TASK, 11, false);
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 T13@2 P0@1 p1@2");
	assert_int_equal(tr_find(&f->t, tr_key(TR_TASK, 13)), 4);
	assert_int_equal(tr_find(&f->t, tr_key(TR_TASK, 12)), -1);
}

static void test_sort(void **state)
{
	struct fx *f = *state;
	f->t.sort = SORT_NAME; /* by thread: io-1 (10, 13; ties by id) < io-2 (11) */
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T13@2 T11@2 S2@3 T12@4 P0@1");
	f->t.sort = SORT_AGE; /* started 600.5, 601, 602 */
	assert_string_equal(shape(f), "R0@0 S1@1 T13@2 T10@2 T11@2 S2@3 T12@4 P0@1");
	f->t.sort = SORT_STATE; /* running(10, 11) before done(13) */
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 P0@1");
	assert_string_equal(tr_sort_name(SORT_AGE), "age");
}

static void test_filter(void **state)
{
	struct fx *f = *state;
	snprintf(f->t.filter, sizeof f->t.filter, "FETCH");
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2");
	assert_true(f->t.rows[2].flags & TR_F_MATCH);
	assert_false(f->t.rows[1].flags & TR_F_MATCH);
	snprintf(f->t.filter, sizeof f->t.filter, "demo.c:60"); /* by site */
	assert_string_equal(shape(f), "R0@0 S1@1 T11@2 S2@3 T12@4");
	snprintf(f->t.filter, sizeof f->t.filter, "queued"); /* by display state */
	assert_string_equal(shape(f), "R0@0 S1@1 T11@2 S2@3 T12@4");
	snprintf(f->t.filter, sizeof f->t.filter, "success"); /* by raw state */
	assert_string_equal(shape(f), "R0@0 S1@1 T13@2");
	/* A filter reaches into collapsed subtrees. */
	tr_set_expanded(&f->t, TR_SCOPE, 1, false);
	snprintf(f->t.filter, sizeof f->t.filter, "query");
	assert_string_equal(shape(f), "R0@0 S1@1 T11@2 S2@3 T12@4");
	snprintf(f->t.filter, sizeof f->t.filter, "no-such-thing");
	assert_string_equal(shape(f), "R0@0");
}

/* A task the daemon named by its body shows and sorts by that name; the
 * filter finds it by the name and still by its worker thread's. */
static void test_task_function(void **state)
{
	struct fx *f = *state;
	delta(f,
	      "{\"gen\":2,\"upsert\":{\"tasks\":["
	      "{\"id\":10,\"scope\":1,\"state\":\"running\",\"worker\":101,\"func\":\"load_user\","
	      "\"site\":{\"file\":\"demo.c\",\"line\":40,\"func\":\"fetch_user\"},"
	      "\"started_ms\":1764441601000},"
	      "{\"id\":11,\"scope\":1,\"state\":\"running\",\"worker\":102,\"func\":null,"
	      "\"site\":{\"file\":\"demo.c\",\"line\":50,\"func\":\"handle\"},"
	      "\"started_ms\":1764441602000},"
	      "{\"id\":13,\"scope\":1,\"state\":\"success\",\"worker\":101,\"func\":7,"
	      "\"site\":{\"file\":\"demo.c\",\"line\":41,\"func\":\"audit\"},"
	      "\"started_ms\":1764441600500,\"ended_ms\":1764441600900}]}}",
	      NOW + 100);
	assert_string_equal(tm_task_get(&f->m, 10)->func, "load_user");
	assert_null(tm_task_get(&f->m, 11)->func);
	assert_null(tm_task_get(&f->m, 13)->func); /* not a string: not a name */
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 P0@1");
	char label[256];
	rf_label(&f->m, &f->t.rows[2], false, label, sizeof label);
	assert_string_equal(label, "load_user");
	rf_label(&f->m, &f->t.rows[3], false, label, sizeof label);
	assert_string_equal(label, "io-2"); /* unknown body: its thread, as before */
	struct rf_layout l;
	char line[512];
	rf_layout(&l, 120, false);
	rf_line(&l, &f->m, &f->t.rows[2], NOW + 1000, line, sizeof line);
	assert_non_null(strstr(line, "load_user"));
	assert_non_null(strstr(line, "demo.c:40")); /* the fork site stays */

	f->t.sort = SORT_NAME; /* io-1 (13) < io-2 (11) < load_user (10) */
	assert_string_equal(shape(f), "R0@0 S1@1 T13@2 T11@2 S2@3 T12@4 T10@2 P0@1");
	f->t.sort = SORT_ID;
	snprintf(f->t.filter, sizeof f->t.filter, "LOAD_U");
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2");
	snprintf(f->t.filter, sizeof f->t.filter, "io-1"); /* the worker still finds both */
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T13@2");
}

static void test_group(void **state)
{
	struct fx *f = *state;
	char d[4096] = "{\"gen\":2,\"upsert\":{\"tasks\":[";
	for (int i = 0; i < 5; i++) {
		size_t at = strlen(d);
		snprintf(d + at, sizeof d - at,
			 "%s{\"id\":%d,\"scope\":1,\"state\":\"running\",\"worker\":%d,\"func\":"
			 "\"leaf\","
			 "\"site\":{\"file\":\"demo.c\",\"line\":70,\"func\":\"poll_peer\"}}",
			 i ? "," : "", 20 + i, 200 + i);
	}
	strcat(d, "]}}");
	delta(f, d, NOW + 100);
	assert_string_equal(
	    shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 T20@2 T21@2 T22@2 T23@2 T24@2 P0@1");
	f->t.group = true;
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 T20@2x5 P0@1");
	char label[256];
	rf_label(&f->m, &f->t.rows[7], false, label, sizeof label);
	assert_string_equal(label, "leaf ×5"); /* the group's body, not "task" */
	rf_label(&f->m, &f->t.rows[2], false, label, sizeof label);
	assert_string_equal(label, "io-1"); /* a task is named by its thread */
	/* Different stacks split the group: 22 and 23 park elsewhere. */
	json_t *st = parse("[{\"tid\":202,\"state\":\"WAITING\",\"frames\":[{\"func\":\"read\"}]},"
			   "{\"tid\":203,\"state\":\"WAITING\",\"frames\":[{\"func\":\"read\"}]}]");
	tm_model_set_stacks(&f->m, st, NOW + 200);
	json_decref(st);
	assert_string_equal(shape(f),
			    "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T13@2 T20@2x3 T22@2x2 P0@1");
	assert_int_equal(f->t.rows[8].state, DS_BLOCKED);
	/* A subtask with a nested scope is never folded away. */
	assert_int_equal(f->t.rows[3].group_n, 1);
}

static void test_delta(void **state)
{
	struct fx *f = *state;
	uint64_t gen = f->m.gen;
	delta(f,
	      "{\"gen\":5,\"process\":{\"pid\":4242,\"name\":\"demo\",\"state\":\"live\","
	      "\"lost\":0},\"upsert\":{\"tasks\":[{\"id\":14,\"scope\":2,\"state\":\"running\","
	      "\"site\":{\"func\":\"cache\"}}],\"scopes\":[{\"id\":1,\"name\":\"server\","
	      "\"state\":\"cancelled\",\"cancel_reason\":\"explicit\",\"owner\":100}]},"
	      "\"remove\":{\"tasks\":[13,999],\"threads\":[101]}}",
	      NOW + 50);
	assert_true(f->m.gen > gen);
	assert_int_equal(f->m.delta_gen, 5);
	assert_null(tm_task_get(&f->m, 13));
	assert_null(tm_thread_get(&f->m, 101));
	assert_non_null(tm_thread_get(&f->m, 102));
	assert_string_equal(shape(f), "R0@0 S1@1 T10@2 T11@2 S2@3 T12@4 T14@4 P0@1");
	/* Two subtasks still run in the cancelled scope: both are stragglers. */
	assert_int_equal(f->m.warn_count[0], 2);
	assert_true(tm_task_get(&f->m, 10)->warn & TM_W_STRAGGLER);
	assert_false(tm_task_get(&f->m, 14)->warn & TM_W_STRAGGLER);
	assert_string_equal(tm_scope_get(&f->m, 1)->cancel_reason, "explicit");
	/* Removing the parent scope re-homes its subtasks at the root; S2 stays under T11. */
	delta(f, "{\"gen\":6,\"remove\":{\"scopes\":[1]}}", NOW + 60);
	assert_string_equal(shape(f), "R0@0 T10@1 T11@1 S2@2 T12@3 T14@3 P0@1");
}

/* A join the daemon says began before scopetop attached is slow from when
 * it began, not from when scopetop first saw it. */
static void test_join_began_from_daemon(void **state)
{
	struct fx *f = *state;
	delta(f,
	      "{\"gen\":3,\"upsert\":{\"scopes\":[{\"id\":2,\"name\":\"handle\",\"parent\":1,"
	      "\"parent_task\":11,\"state\":\"joining\",\"join_began_ms\":1764441600000}]}}",
	      NOW);
	assert_true(tm_scope_get(&f->m, 2)->joining_since_ms == 1764441600000.0);
	tm_model_warnings(&f->m, NOW + 1);
	assert_true(tm_scope_get(&f->m, 2)->warn & TM_W_JOIN_SLOW);
	/* Without it (an older daemon), the first sight counts. */
	delta(f,
	      "{\"gen\":4,\"upsert\":{\"scopes\":[{\"id\":3,\"name\":\"other\",\"parent\":1,"
	      "\"state\":\"joining\"}]}}",
	      NOW);
	assert_true(tm_scope_get(&f->m, 3)->joining_since_ms == NOW);
	tm_model_warnings(&f->m, NOW + 1);
	assert_false(tm_scope_get(&f->m, 3)->warn & TM_W_JOIN_SLOW);
}

static void test_warnings(void **state)
{
	struct fx *f = *state;
	delta(f,
	      "{\"gen\":3,\"upsert\":{\"scopes\":[{\"id\":2,\"name\":\"handle\",\"parent\":1,"
	      "\"parent_task\":11,\"state\":\"joining\",\"deadline_ms\":1764441605500}]}}",
	      NOW);
	assert_int_equal(f->m.warn_total, 0);
	tm_model_warnings(&f->m, NOW + 600); /* past the deadline, join not yet slow */
	assert_int_equal(f->m.warn_count[2], 1);
	assert_int_equal(f->m.warn_count[1], 0);
	/* A later delta keeps the time the join began. */
	delta(f,
	      "{\"gen\":4,\"upsert\":{\"scopes\":[{\"id\":2,\"name\":\"handle\",\"parent\":1,"
	      "\"parent_task\":11,\"state\":\"joining\"}]}}",
	      NOW + 900);
	tm_model_warnings(&f->m, NOW + 1500);
	assert_int_equal(f->m.warn_count[1], 1);
	assert_true(tm_scope_get(&f->m, 2)->warn & TM_W_JOIN_SLOW);
	assert_int_equal(shape(f)[0], 'R');
	assert_int_equal(f->t.rows[3].state, DS_JOINING); /* T11 joins S2 */
	delta(
	    f,
	    "{\"gen\":7,\"process\":{\"pid\":4242,\"lost\":12,\"complete\":false},"
	    "\"upsert\":{\"violations\":[{\"scope\":1,\"kind\":\"inner_open\",\"error\":-20005}]}}",
	    NOW + 1000);
	assert_int_equal(f->m.warn_count[3], 1);
	assert_int_equal(f->m.warn_count[4], 1);
	assert_true(tm_scope_get(&f->m, 1)->warn & TM_W_VIOLATION);
	/* A violation seen only through a delta: the scope's cancel reason. */
	delta(f,
	      "{\"gen\":8,\"upsert\":{\"scopes\":[{\"id\":2,\"name\":\"handle\",\"parent\":1,"
	      "\"parent_task\":11,\"state\":\"cancelled\",\"cancel_reason\":\"violation\"}]}}",
	      NOW + 1100);
	assert_true(tm_scope_get(&f->m, 2)->warn & TM_W_VIOLATION);
	assert_int_equal(f->m.warn_count[4], 2);
	char b[128];
	rf_badges(TM_W_STRAGGLER | TM_W_VIOLATION, true, b, sizeof b);
	assert_string_equal(b, " !straggler !violation");
}

static void test_stacks(void **state)
{
	struct fx *f = *state;
	json_t *st = parse(
	    "[{\"tid\":101,\"state\":\"RUNNABLE\",\"frames\":[{\"addr\":\"0x1\",\"func\":\"fetch_"
	    "user\","
	    "\"file\":\"server.c\",\"line\":42},{\"addr\":\"0x7f00\",\"module\":\"/lib/libc.so.6\","
	    "\"offset\":\"0x99\"},{\"addr\":\"0x5\"},{\"func\":\"start\"}]},{\"tid\":-3},7,"
	    "{\"tid\":102,\"state\":\"BLOCKED\",\"blocked_in\":\"mutex\",\"frames\":[],"
	    " \"waiting_to_lock\":{\"addr\":\"0x7f10\",\"class\":\"pthread_mutex_t\",\"owner\":101,"
	    " \"owner_name\":\"io-1\"}},"
	    "{\"tid\":103,\"waiting_to_lock\":{\"addr\":\"0x7f10\",\"owner\":-5}}]");
	tm_model_set_stacks(&f->m, st, NOW);
	json_decref(st);
	const struct tm_stack *s = tm_stack_get(&f->m, 101);
	assert_non_null(s);
	assert_int_equal(s->nframes, 4);
	assert_string_equal(s->frames[0], "fetch_user (server.c:42)");
	assert_string_equal(s->frames[1], "0x7f00 (libc.so.6+0x99)");
	assert_string_equal(s->frames[2], "0x5");
	assert_string_equal(s->frames[3], "start");
	assert_int_equal(s->lock_owner, 0);
	/* The mutex a thread waits for, with its owner; a bad owner is none. */
	s = tm_stack_get(&f->m, 102);
	assert_non_null(s);
	assert_int_equal(s->lock_owner, 101);
	assert_string_equal(s->lock_addr, "0x7f10");
	assert_string_equal(s->lock_owner_name, "io-1");
	s = tm_stack_get(&f->m, 103);
	assert_non_null(s);
	assert_int_equal(s->lock_owner, 0);
	assert_null(s->lock_addr);
	assert_int_equal(f->m.stacks.n, 3);
}

static void test_row_text(void **state)
{
	struct fx *f = *state;
	struct rf_layout l;
	char line[RF_LINE_MAX], hdr[RF_LINE_MAX];
	shape(f);
	for (int ascii = 0; ascii < 2; ascii++) {
		for (int w = 40; w <= 160; w += 40) {
			rf_layout(&l, w, ascii);
			rf_header(&l, hdr, sizeof hdr);
			assert_int_equal(ttx_width(hdr, ascii), l.x[l.n - 1] + l.width[l.n - 1]);
			for (size_t i = 0; i < f->t.n; i++) {
				rf_line(&l, &f->m, &f->t.rows[i], NOW + 1000, line, sizeof line);
				assert_true(ttx_width(line, ascii) <= w);
				for (const char *p = line; ascii && *p; p++)
					assert_true((unsigned char)*p < 0x80);
			}
		}
	}
	rf_layout(&l, 160, false);
	rf_line(&l, &f->m, &f->t.rows[2], NOW + 1000, line, sizeof line);
	assert_non_null(strstr(line, "● running"));
	assert_non_null(strstr(line, "io-1"));
	assert_non_null(strstr(line, "demo.c:40"));
	assert_non_null(strstr(line, "101"));
	assert_non_null(strstr(line, "5.0s")); /* started 5 s before NOW + 1000 */
	assert_non_null(strstr(line, "4.0s")); /* deadline of scope 1 from NOW + 1000 */
	rf_layout(&l, 80, true);
	rf_line(&l, &f->m, &f->t.rows[5], NOW, line, sizeof line);
	assert_non_null(strstr(line, "o queued"));
	assert_non_null(strstr(line, "`-")); /* last child of S2 */
	char d[32];
	ttx_duration(d, sizeof d, 125000);
	assert_string_equal(d, "2m05s");
	ttx_duration(d, sizeof d, -300);
	assert_string_equal(d, "-300ms");
}

static void test_bad_input(void **state)
{
	struct fx *f = *state;
	char err[256];
	json_t *j = parse("[1,2]");
	assert_int_equal(tm_model_load(&f->m, j, NULL, NOW, err, sizeof err), -EPROTO);
	assert_non_null(strstr(err, "not a JSON object"));
	json_decref(j);
	j = parse("{\"scopes\":5}");
	assert_int_equal(tm_model_load(&f->m, j, NULL, NOW, err, sizeof err), -EPROTO);
	assert_non_null(strstr(err, "scopes"));
	json_decref(j);
	/* Members of the wrong type, missing ids, self-parents, a parent cycle,
	 * escape sequences and oversized names: all survive, nothing trusted. */
	char big[2000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = 0;
	char doc[4096];
	snprintf(
	    doc, sizeof doc,
	    "{\"scopes\":[{\"name\":\"noid\"},{\"id\":5,\"parent\":5,\"name\":\"self\\u001b[31m\"},"
	    "{\"id\":6,\"parent_task\":7,\"name\":\"%s\"},{\"id\":8,\"parent_task\":9}],"
	    "\"tasks\":[{\"id\":7,\"scope\":8,\"site\":7},{\"id\":9,\"scope\":6,\"state\":42},"
	    "\"x\"],"
	    "\"threads\":{}}",
	    big);
	j = parse(doc);
	assert_int_equal(tm_model_load(&f->m, j, NULL, NOW, err, sizeof err), -EPROTO);
	json_decref(j);
	snprintf(
	    doc, sizeof doc,
	    "{\"scopes\":[{\"name\":\"noid\"},{\"id\":5,\"parent\":5,\"name\":\"self\\u001b[31m\"},"
	    "{\"id\":6,\"parent_task\":7,\"name\":\"%s\"},{\"id\":8,\"parent_task\":9}],"
	    "\"tasks\":[{\"id\":7,\"scope\":8,\"site\":7},{\"id\":9,\"scope\":6,\"state\":42},"
	    "\"x\"]}",
	    big);
	j = parse(doc);
	assert_int_equal(tm_model_load(&f->m, j, NULL, NOW, err, sizeof err), 0);
	json_decref(j);
	assert_int_equal(f->m.scopes.n, 3);
	assert_string_equal(tm_scope_get(&f->m, 5)->name, "self?[31m");
	assert_int_equal(strlen(tm_scope_get(&f->m, 6)->name), TM_MAX_STR - 1);
	/* 6 -> 7 -> 8 -> 9 -> 6 is a cycle: unreachable, but no hang or crash. */
	assert_string_equal(shape(f), "R0@0 S5@1");
	j = parse("{\"upsert\":{\"tasks\":{}}}");
	assert_int_equal(tm_model_apply_delta(&f->m, j, NOW, err, sizeof err), -EPROTO);
	json_decref(j);
	j = parse("\"delta\"");
	assert_int_equal(tm_model_apply_delta(&f->m, j, NOW, err, sizeof err), -EPROTO);
	json_decref(j);
}

/* Random member values: numbers, strings, nulls, objects, arrays. */
static json_t *rand_value(int depth)
{
	switch (rand() % (depth > 2 ? 5 : 7)) {
	case 0:
		return json_integer(rand() % 12 - 2);
	case 1:
		return json_real((rand() % 1000) / 3.0);
	case 2:
		return json_string(rand() % 2 ? "running" : "x\u00e9\x01y");
	case 3:
		return json_null();
	case 4:
		return json_true();
	case 5:
		return json_pack("{s:o, s:o}", "file", rand_value(depth + 1), "line",
				 rand_value(depth + 1));
	default:
		return json_pack("[o]", rand_value(depth + 1));
	}
}

static json_t *rand_entity(void)
{
	static const char *const keys[] = {
	    "id",	 "tid",	       "scope",	   "parent", "parent_task",  "worker",
	    "owner",	 "state",      "name",	   "site",   "values",	     "deadline_ms",
	    "opened_ms", "started_ms", "ended_ms", "joiner", "cancel_reason"};
	json_t *o = json_object();
	json_object_set_new(o, "id", json_integer(rand() % 10));
	json_object_set_new(o, "tid", json_integer(rand() % 10));
	for (int i = 0; i < 6; i++)
		json_object_set_new(o, keys[rand() % 17], rand_value(0));
	if (rand() % 3 == 0)
		json_object_set_new(o, "parent_task", json_integer(rand() % 10));
	return o;
}

/* Random models and deltas, well-formed or not: loading, applying and
 * drawing never crash, and the rows stay sane. */
static void test_random_models(void **state)
{
	struct fx *f = *state;
	static const char *const arrays[] = {"threads", "pools", "scopes", "tasks", "violations"};
	char err[256], line[RF_LINE_MAX];
	struct rf_layout l;
	rf_layout(&l, 100, false);
	srand(42);
	for (int round = 0; round < 400; round++) {
		json_t *m = json_object();
		for (int k = 0; k < 5; k++) {
			json_t *arr = rand() % 8 ? json_array() : rand_value(0);
			for (int i = 0; json_is_array(arr) && i < rand() % 12; i++)
				json_array_append_new(arr,
						      rand() % 10 ? rand_entity() : rand_value(0));
			json_object_set_new(m, arrays[k], arr);
		}
		if (round % 2)
			tm_model_load(&f->m, m, NULL, NOW, err, sizeof err);
		else {
			json_t *d = json_pack("{s:o, s:{s:[i, i]}}", "upsert", m, "remove", "tasks",
					      rand() % 10, rand() % 10);
			tm_model_apply_delta(&f->m, d, NOW, err, sizeof err);
			json_decref(d);
			m = NULL;
		}
		json_decref(m);
		f->t.group = round % 3 == 0;
		f->t.sort = round % SORT_COUNT;
		snprintf(f->t.filter, sizeof f->t.filter, "%s", round % 5 ? "" : "run");
		assert_int_equal(tr_build(&f->t, &f->m), 0);
		assert_true(f->t.n >= 1);
		assert_int_equal(f->t.rows[0].kind, TR_ROOT);
		for (size_t i = 0; i < f->t.n; i++) {
			const struct tr_row *r = &f->t.rows[i];
			assert_true(r->depth < TR_MAX_DEPTH);
			assert_true(i == 0 || r->depth >= 1);
			if (r->kind == TR_SCOPE || r->kind == TR_TASK || r->kind == TR_POOL)
				assert_non_null(r->ent);
			rf_line(&l, &f->m, r, NOW, line, sizeof line);
			assert_true(ttx_width(line, false) <= 100);
		}
	}
}

static void test_idmap(void **state)
{
	(void)state;
	struct tmap m = {0};
	enum { N = 5000 };
	static int present[N];
	memset(present, 0, sizeof present);
	srand(7);
	for (int i = 0; i < 40000; i++) {
		int k = rand() % N;
		if (rand() % 3) {
			assert_int_equal(tmap_put(&m, k * 4096 + 1, (uint32_t)k), 0);
			present[k] = 1;
		} else {
			tmap_del(&m, k * 4096 + 1);
			present[k] = 0;
		}
	}
	size_t count = 0;
	for (int k = 0; k < N; k++) {
		long v = tmap_get(&m, k * 4096 + 1);
		assert_int_equal(v, present[k] ? k : -1);
		count += (size_t)present[k];
	}
	assert_int_equal(m.n, count);
	tmap_free(&m);
}

static void test_text(void **state)
{
	(void)state;
	char b[64] = "";
	assert_int_equal(ttx_width("ab×c", false), 4);
	assert_int_equal(ttx_width("a\x1b[1m", false), 5); /* drawn as "a?[1m" */
	assert_int_equal(ttx_append(b, sizeof b, "ab×cdef", 4, false), 4);
	assert_string_equal(b, "ab×c");
	b[0] = 0;
	ttx_append(b, sizeof b, "ab×c\x1b", 10, true);
	assert_string_equal(b, "ab?c?");
	b[0] = 0;
	/* Invalid UTF-8 advances one byte at a time and never overruns. */
	ttx_append(b, 6, "\xff\xe2\x82zzzzzzzz", 50, false);
	assert_true(strlen(b) < 6);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tree_shape, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hide_ended, setup, teardown),
	    cmocka_unit_test(test_columns),
	    cmocka_unit_test_setup_teardown(test_task_times, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_expand_collapse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sort, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_filter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_group, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_task_function, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delta, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warnings, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_join_began_from_daemon, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stacks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_row_text, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random_models, setup, teardown),
	    cmocka_unit_test(test_idmap),
	    cmocka_unit_test(test_text),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
