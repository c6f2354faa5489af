/* bench_tui.c - scopetop frame cost on a tree of 10,000 live tasks,
 * rendered into a curses screen on /dev/null: a full rebuild and repaint,
 * a live tick (delta + rebuild + changed lines), scrolling, filtering, and
 * as the baseline the clear()-and-redraw-everything frame the line cache
 * avoids.  Prints median and p99 per case and the ratios. */
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "../tui/app.h"

#define SCOPES 100
#define TASKS_PER 100 /* one of them opened the nested scope */
#define ITER 200
#define TARGET_MS 10.0

struct stat2 {
	double p50, p99;
};

static struct stat2 stats(double *v, int n)
{
	bench_sort(v, (size_t)n);
	return (struct stat2){v[n / 2], v[(n * 99) / 100]};
}

/* The model: scope "server" with SCOPES subtasks, each of which opened a
 * scope "handle" holding TASKS_PER subtasks: 10,100 live tasks. */
static json_t *make_model(double t0)
{
	json_t *scopes = json_array(), *tasks = json_array(), *threads = json_array();
	json_array_append_new(scopes,
			      json_pack("{s:i, s:s, s:i, s:s, s:s, s:f, s:{s:s, s:i, s:s}}", "id",
					1, "name", "server", "owner", 1, "joiner", "all_successful",
					"state", "joining", "opened_ms", t0, "site", "file",
					"srv.c", "line", 10, "func", "main"));
	int64_t tid = 100, id = 10;
	for (int s = 0; s < SCOPES; s++) {
		int64_t opener = id++;
		json_array_append_new(
		    tasks, json_pack("{s:I, s:i, s:s, s:I, s:f, s:{s:s, s:i, s:s}}", "id",
				     (json_int_t)opener, "scope", 1, "state", "running", "worker",
				     (json_int_t)tid, "started_ms", t0, "site", "file", "srv.c",
				     "line", 20, "func", "handle_conn"));
		json_array_append_new(threads, json_pack("{s:I, s:s, s:s}", "tid", (json_int_t)tid,
							 "name", "io", "role", "worker"));
		json_array_append_new(
		    scopes,
		    json_pack("{s:i, s:s, s:i, s:I, s:I, s:s, s:s, s:f, s:f, s:{s:s, s:i, s:s}}",
			      "id", 1000 + s, "name", "handle", "parent", 1, "parent_task",
			      (json_int_t)opener, "owner", (json_int_t)tid, "joiner",
			      "any_successful", "state", "open", "opened_ms", t0 + s, "deadline_ms",
			      t0 + 60000, "site", "file", "srv.c", "line", 30, "func",
			      "handle_conn"));
		tid++;
		for (int k = 1; k < TASKS_PER; k++) {
			json_array_append_new(
			    tasks,
			    json_pack("{s:I, s:i, s:s, s:I, s:f, s:{s:s, s:i, s:s}}", "id",
				      (json_int_t)id++, "scope", 1000 + s, "state",
				      k % 7 ? "running" : "forked", "worker", (json_int_t)tid++,
				      "started_ms", t0 + k, "site", "file", "peer.c", "line",
				      40 + k % 5, "func", k % 2 ? "poll_peer" : "fetch_user"));
		}
	}
	return json_pack("{s:f, s:o, s:o, s:o, s:[], s:[]}", "now_ms", t0 + 5000, "threads",
			 threads, "scopes", scopes, "tasks", tasks, "pools", "violations");
}

/* A delta that flips the state of 100 tasks spread over the tree. */
static json_t *make_delta(int round, double t0)
{
	json_t *tasks = json_array();
	for (int i = 0; i < 100; i++) {
		int s = i % SCOPES, k = 1 + (i * 7 + round) % (TASKS_PER - 1);
		json_int_t id = 10 + (json_int_t)s * TASKS_PER + k;
		json_array_append_new(tasks, json_pack("{s:I, s:i, s:s, s:f, s:{s:s, s:i, s:s}}",
						       "id", id, "scope", 1000 + s, "state",
						       round % 2 ? "running" : "success",
						       "started_ms", t0, "site", "file", "peer.c",
						       "line", 40, "func", "poll_peer"));
	}
	return json_pack("{s:i, s:{s:o}}", "gen", round, "upsert", "tasks", tasks);
}

static void frame(struct app *a)
{
	app_rebuild(a);
	app_views[a->view].draw(a);
	scr_flush(&a->scr);
}

/* The frame the line cache replaces: wipe the screen, draw every line. */
static void naive_frame(struct app *a)
{
	clear();
	scr_invalidate(&a->scr);
	app_views[a->view].draw(a);
	refresh();
}

static void report(const char *name, double *v, struct stat2 *out)
{
	struct stat2 s = stats(v, ITER);
	printf("  %-44s median %7.3f ms   p99 %7.3f ms\n", name, s.p50, s.p99);
	if (out)
		*out = s;
}

int main(void)
{
	static struct app a;
	static double t[ITER];
	char err[256];
	FILE *out = fopen("/dev/null", "w"), *in = fopen("/dev/null", "r");
	if (!out || !in) {
		fprintf(stderr, "bench_tui: cannot open /dev/null\n");
		return 1;
	}
	a.o.interval_ms = 250;
	tm_model_init(&a.model);
	tr_init(&a.tree);
	double local = tm_local_ms(), t0 = local - 5000;
	a.now_local = local;
	json_t *model = make_model(t0);
	double l0 = bench_now_ms();
	if (tm_model_load(&a.model, model, NULL, local, err, sizeof err)) {
		fprintf(stderr, "bench_tui: %s\n", err);
		return 1;
	}
	double load_ms = bench_now_ms() - l0;
	json_decref(model);
	if (scr_open(&a.scr, out, in, "xterm", true, err, sizeof err) &&
	    scr_open(&a.scr, out, in, "vt100", false, err, sizeof err)) {
		fprintf(stderr, "bench_tui: %s\n", err);
		return 1;
	}
	resizeterm(50, 160);
	scr_resize(&a.scr);
	a.view = V_TREE;
	a.pid = 4242;
	a.subscribed = true;
	a.built_gen = (uint64_t)-1;
	frame(&a);
	printf("scopetop frame cost: %zu live tasks, %zu scopes, %zu rows, 160x50 screen, %d runs "
	       "each\n",
	       a.model.tasks.n, a.model.scopes.n, a.tree.n, ITER);
	printf("  %-44s %7.3f ms\n", "load snapshot (once)", load_ms);

	struct stat2 full, tick, naive, scroll, filt;
	for (int i = 0; i < ITER; i++) { /* everything: rebuild rows, repaint all lines */
		double s = bench_now_ms();
		a.rows_stale = true;
		scr_invalidate(&a.scr);
		frame(&a);
		t[i] = bench_now_ms() - s;
	}
	report("full frame (rebuild + repaint every line)", t, &full);

	unsigned long lines = 0;
	for (int i = 0; i < ITER; i++) { /* the 4/s case: delta, rebuild, changed lines */
		json_t *d = make_delta(i, t0);
		double s = bench_now_ms();
		tm_model_apply_delta(&a.model, d, local, err, sizeof err);
		unsigned long before = a.scr.repainted;
		frame(&a);
		t[i] = bench_now_ms() - s;
		lines += a.scr.repainted - before;
		json_decref(d);
	}
	report("live tick (delta of 100 tasks + frame)", t, &tick);
	double tick_lines = (double)lines / ITER;

	lines = 0;
	for (int i = 0; i < ITER; i++) {
		double s = bench_now_ms();
		unsigned long before = a.scr.repainted;
		app_move(&a, (i / 20) % 2 ? -1 : 1);
		frame(&a);
		t[i] = bench_now_ms() - s;
		lines += a.scr.repainted - before;
	}
	report("scroll one row", t, &scroll);
	double scroll_lines = (double)lines / ITER;
	for (int i = 0; i < ITER; i++) {
		double s = bench_now_ms();
		app_move(&a, i % 2 ? -a.tree_h : a.tree_h);
		frame(&a);
		t[i] = bench_now_ms() - s;
	}
	report("scroll one page", t, NULL);

	static const char *const filters[] = {"p",     "po",	    "pol",    "poll",
					      "poll_", "peer.c:41", "queued", ""};
	for (int i = 0; i < ITER; i++) {
		snprintf(a.tree.filter, sizeof a.tree.filter, "%s", filters[i % 8]);
		a.rows_stale = true;
		double s = bench_now_ms();
		frame(&a);
		t[i] = bench_now_ms() - s;
	}
	report("filter keystroke (rebuild filtered + frame)", t, &filt);
	a.tree.filter[0] = 0;
	a.tree.group = true;
	for (int i = 0; i < ITER; i++) {
		a.rows_stale = true;
		double s = bench_now_ms();
		frame(&a);
		t[i] = bench_now_ms() - s;
	}
	report("grouped (g) rebuild + frame", t, NULL);
	a.tree.group = false;
	a.rows_stale = true;
	frame(&a);

	for (int i = 0; i < ITER; i++) {
		double s = bench_now_ms();
		app_move(&a, (i / 20) % 2 ? -1 : 1);
		naive_frame(&a);
		t[i] = bench_now_ms() - s;
	}
	report("baseline: scroll with clear() + full redraw", t, &naive);

	printf("  lines written per frame: live tick %.1f, scroll %.1f (of %d)\n", tick_lines,
	       scroll_lines, a.scr.rows);
	printf("  ratio baseline/cached scroll frame: %.2fx\n", naive.p50 / scroll.p50);
	printf("  ratio full frame/target: %.2f (target < %.0f ms)\n", full.p50 / TARGET_MS,
	       TARGET_MS);
	scr_close(&a.scr);
	tr_free(&a.tree);
	tm_model_free(&a.model);
	bool ok = full.p50 < TARGET_MS && tick.p50 < TARGET_MS && filt.p50 < TARGET_MS;
	printf("  %s\n",
	       ok ? "PASS: every median under the target" : "FAIL: a median is over the target");
	return ok ? 0 : 1;
}
