/* main.c - scopetop: options, the one-shot text mode, and the event loop
 * of the live view (input, daemon messages, drawing). */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/ctl.h"
#include "../common/termtext.h"
#include "app.h"
#include "once.h"
#include "rowfmt.h"
#include "scope.h"

#define TICK_MS 250	     /* the loop wakes at least this often */
#define REDRAW_EVERY_MS 1000 /* ages and deadlines move even when nothing else does */
#define ONCE_TIMEOUT_MS 5000

enum opt_id {
	O_SOCKET = 1,
	O_ONCE,
	O_ASCII,
	O_INTERVAL,
	O_THRESHOLD,
	O_DUMPDIR,
	O_HELP,
	O_VERSION,
	O_JSON,
	O_COLUMNS
};

struct optdef {
	const char *name;
	int id, has_arg;
	const char *arg, *help;
	long min, max; /* bounds of numeric arguments */
};

static const struct optdef opts[] = {
    {"socket", O_SOCKET, 1, "PATH",
     "scoped's agent socket (default $SCOPED_SOCKET, else $XDG_RUNTIME_DIR/scoped/agent.sock)", 0,
     0},
    {"once", O_ONCE, 0, NULL, "print the tree of PID (or the process list) as text and exit", 0, 0},
    {"json", O_JSON, 0, NULL,
     "with --once: JSON instead of text (schemas/scopetop-once.schema.json; the list as "
     "schemas/process-list.schema.json)",
     0, 0},
    {"ascii", O_ASCII, 0, NULL, "ASCII glyphs only (automatic when the locale is not UTF-8)", 0, 0},
    {"interval", O_INTERVAL, 1, "MS", "live update interval, 25..5000 (default 250)", 25, 5000},
    {"join-threshold", O_THRESHOLD, 1, "MS", "warn about joins waiting longer (default 1000)", 1,
     86400000},
    {"dump-dir", O_DUMPDIR, 1, "DIR", "where d writes dumps (default: the current directory)", 0,
     0},
    {"columns", O_COLUMNS, 1, "LIST",
     "the optional columns to show, comma-separated, of id,age,joiner,deadline,site,worker,"
     "busy,sched,idle (default all that fit; keys 1..9 toggle them)",
     0, 0},
    {"help", O_HELP, 0, NULL, "this help", 0, 0},
    {"version", O_VERSION, 0, NULL, "print the version", 0, 0},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void usage(FILE *out)
{
	fprintf(out, "usage: scopetop [options] [PID | NAME]\n"
		     "Live structured-concurrency task tree of programs linked with libscope.\n"
		     "NAME is a substring of a live process's name or executable, as scopecmd\n"
		     "takes it.  Without either, pick a process from the list.  Keys: press ?\n"
		     "inside.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		char left[40];
		snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
			 opts[i].arg ? opts[i].arg : "");
		fprintf(out, "  %-22s %s\n", left, opts[i].help);
	}
	fprintf(out, "\nNO_COLOR (non-empty) turns colours off.\n");
}

static int parse_num(const struct optdef *o, const char *s, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < o->min || v > o->max) {
		fprintf(stderr, "scopetop: --%s wants a number from %ld to %ld, not '%s'\n",
			o->name, o->min, o->max, s);
		return -1;
	}
	*out = v;
	return 0;
}

/* --columns id,site,...: every optional column not named is hidden. */
static int parse_columns(const char *list, unsigned *hide)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof buf, "%s", list);
	unsigned shown = (1u << RF_STATE) | (1u << RF_NAME);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int c = rf_col_parse(t);
		if (c < 0) {
			fprintf(stderr,
				"scopetop: --columns: no column '%s'; the columns are id, age, "
				"joiner, deadline, site, worker, busy, sched, idle\n",
				t);
			return -1;
		}
		shown |= 1u << c;
	}
	*hide = ~shown & ((1u << RF_NCOLS) - 1);
	return 0;
}

struct cli {
	struct app_opts o;
	bool once, json;
	int64_t pid;
	const char *name; /* a NAME target, resolved once connected */
};

/* Returns -1 on error, 1 when done (help/version), 0 to run. */
static int parse_args(int argc, char **argv, struct cli *c)
{
	struct option lo[NOPTS + 1];
	memset(lo, 0, sizeof lo);
	for (size_t i = 0; i < NOPTS; i++)
		lo[i] = (struct option){opts[i].name, opts[i].has_arg, NULL, opts[i].id};
	int ch;
	long v;
	while ((ch = getopt_long(argc, argv, "hV", lo, NULL)) != -1) {
		const struct optdef *o = NULL;
		for (size_t i = 0; i < NOPTS; i++)
			if (opts[i].id == ch)
				o = &opts[i];
		switch (ch) {
		case O_SOCKET:
			c->o.socket = optarg;
			break;
		case O_ONCE:
			c->once = true;
			break;
		case O_JSON:
			c->json = true;
			break;
		case O_COLUMNS:
			if (parse_columns(optarg, &c->o.hide_cols))
				return -1;
			break;
		case O_ASCII:
			c->o.ascii = true;
			break;
		case O_INTERVAL:
			if (parse_num(o, optarg, &v))
				return -1;
			c->o.interval_ms = (int)v;
			break;
		case O_THRESHOLD:
			if (parse_num(o, optarg, &v))
				return -1;
			c->o.join_threshold_ms = (double)v;
			break;
		case O_DUMPDIR:
			c->o.dump_dir = optarg;
			break;
		case 'h':
		case O_HELP:
			usage(stdout);
			return 1;
		case 'V':
		case O_VERSION:
			printf("scopetop %s\n", SCOPE_VERSION_STRING);
			return 1;
		default:
			fprintf(stderr, "scopetop: try --help\n");
			return -1;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr,
			"scopetop: one process only ('%s' and '%s' given); usage: scopetop "
			"[options] [PID | NAME]\n",
			argv[optind], argv[optind + 1]);
		return -1;
	}
	if (optind < argc) {
		char *end;
		long long pid = strtoll(argv[optind], &end, 10);
		if (!*argv[optind] || argv[optind][0] == '-') {
			fprintf(stderr,
				"scopetop: '%s' is neither a process id nor a name; usage: "
				"scopetop [options] [PID | NAME]\n",
				argv[optind]);
			return -1;
		}
		if (*end)
			c->name = argv[optind];
		else if (pid <= 0 || pid > 0x7fffffff) {
			fprintf(stderr, "scopetop: '%s' is not a process id (1..2147483647)\n",
				argv[optind]);
			return -1;
		} else
			c->pid = pid;
	}
	if (c->json && !c->once) {
		fprintf(stderr, "scopetop: --json goes with --once\n");
		return -1;
	}
	return 0;
}

/* One request answered synchronously (the --once path and the first tree). */
static int ask(struct ctl *ctl, json_t *req, json_t **reply)
{
	char err[256];
	int rc = ctl_request(ctl, req, reply, ONCE_TIMEOUT_MS, err, sizeof err);
	json_decref(req);
	if (rc) {
		fprintf(stderr, "scopetop: %s\n", err);
		return -1;
	}
	if (!json_is_true(json_object_get(*reply, "ok"))) {
		json_t *e = json_object_get(*reply, "error");
		const char *m = json_string_value(json_object_get(e, "message"));
		fprintf(stderr, "scopetop: scoped refused: %s\n", m ? m : "no reason given");
		json_decref(*reply);
		*reply = NULL;
		return -1;
	}
	return 0;
}

/* As ask(), silent; -2 when scoped says the process is not instrumented. */
static int ask_quiet(struct ctl *ctl, json_t *req, json_t **reply)
{
	char err[256];
	*reply = NULL;
	int rc = ctl_request(ctl, req, reply, ONCE_TIMEOUT_MS, err, sizeof err);
	json_decref(req);
	if (rc)
		return -1;
	if (json_is_true(json_object_get(*reply, "ok")))
		return 0;
	const char *code =
	    json_string_value(json_object_get(json_object_get(*reply, "error"), "code"));
	rc = code && !strcmp(code, "not_instrumented") ? -2 : -1;
	json_decref(*reply);
	*reply = NULL;
	return rc;
}

/* The live process whose name or executable contains c->name, as scopecmd
 * matches targets; more than one is an error that lists them.  Returns 0
 * with c->pid set, or -1 after saying why. */
static int resolve_name(struct ctl *ctl, struct cli *c)
{
	json_t *reply;
	if (ask(ctl, json_pack("{s:s}", "cmd", "list"), &reply))
		return -1;
	const json_t *ps = json_object_get(reply, "processes");
	size_t i, n = 0;
	json_t *p;
	json_array_foreach(ps, i, p)
	{
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *exe = json_string_value(json_object_get(p, "exe"));
		const char *st = json_string_value(json_object_get(p, "state"));
		if ((st && !strcmp(st, "exited")) ||
		    !((name && strstr(name, c->name)) || (exe && strstr(exe, c->name))))
			continue;
		if (n++ == 0)
			c->pid = json_integer_value(json_object_get(p, "pid"));
	}
	if (n > 1) {
		fprintf(stderr, "scopetop: '%s' matches %zu processes; name one by its pid:\n",
			c->name, n);
		json_array_foreach(ps, i, p)
		{
			const char *name = json_string_value(json_object_get(p, "name"));
			const char *exe = json_string_value(json_object_get(p, "exe"));
			char safe[512];
			if ((name && strstr(name, c->name)) || (exe && strstr(exe, c->name)))
				fprintf(stderr, "  %lld %s\n",
					(long long)json_integer_value(json_object_get(p, "pid")),
					name ? tt_safe(name, safe, sizeof safe) : "?");
		}
	} else if (!n) {
		fprintf(stderr,
			"scopetop: no live instrumented process matches '%s'; 'scopetop "
			"--once' lists them\n",
			c->name);
	}
	json_decref(reply);
	return n == 1 ? 0 : -1;
}

static int run_once(struct cli *c)
{
	struct ctl *ctl;
	char err[256];
	if (ctl_connect(&ctl, c->o.socket, err, sizeof err)) {
		fprintf(stderr, "scopetop: %s\n", err);
		return 1;
	}
	json_t *reply;
	int rc = 1;
	if (c->name && resolve_name(ctl, c)) {
		ctl_close(ctl);
		return 1;
	}
	if (!c->pid) {
		if (!ask(ctl, json_pack("{s:s}", "cmd", "list"), &reply)) {
			json_t *ps = json_object_get(reply, "processes");
			if (c->json) {
				json_t *doc =
				    json_pack("{s:O}", "processes", ps ? ps : json_null());
				rc = doc &&
					     !json_dumpf(doc, stdout,
							 JSON_INDENT(2) | JSON_PRESERVE_ORDER) &&
					     putchar('\n') != EOF
					 ? 0
					 : 1;
				json_decref(doc);
			} else {
				rc = once_list(stdout, ps, c->o.ascii) ? 1 : 0;
			}
			json_decref(reply);
		}
	} else if (!ask(ctl, json_pack("{s:s, s:I}", "cmd", "tree", "pid", (json_int_t)c->pid),
			&reply)) {
		struct tm_model m;
		tm_model_init(&m);
		m.join_threshold_ms = c->o.join_threshold_ms;
		double local = tm_local_ms();
		if (tm_model_load(&m, json_object_get(reply, "model"),
				  json_object_get(reply, "process"), local, err, sizeof err))
			fprintf(stderr, "scopetop: process %lld: %s\n", (long long)c->pid, err);
		else if (c->json)
			rc = once_tree_json(stdout, &m, tm_model_now(&m, local),
					    json_object_get(reply, "process"))
				 ? 1
				 : 0;
		else
			rc = once_tree(stdout, &m, tm_model_now(&m, local), c->o.ascii) ? 1 : 0;
		tm_model_free(&m);
		json_decref(reply);
	}
	ctl_close(ctl);
	/* Output that could not be written is a failure, not a silent loss. */
	if (fflush(stdout) == EOF || ferror(stdout)) {
		fprintf(stderr, "scopetop: writing to standard output failed: %s\n",
			strerror(errno));
		rc = 1;
	}
	return rc;
}

static void handle_key(struct app *a, int ch)
{
	if (ch == KEY_RESIZE) {
		scr_resize(&a->scr);
		a->dirty = true;
		return;
	}
	/* An Esc with "[" or "O" right behind it starts a key sequence curses
	 * did not know (an F-key of another terminal): ignore all of it, up to
	 * its final byte, rather than take it as Esc (which would clear the
	 * filter or leave the view) followed by stray characters. */
	if (ch == 27) {
		int next = getch();
		if (next == '[' || next == 'O') {
			int c = next == 'O' ? getch() : 0;
			/* CSI: parameter and intermediate bytes, then one final. */
			while (next == '[' && (c = getch()) != ERR && (c < 0x40 || c > 0x7e))
				;
			app_status(a, "ignored an unknown key sequence");
			return;
		}
		if (next != ERR)
			ungetch(next); /* Esc then a key: both count */
	}
	const struct view *v = &app_views[a->view];
	if (v->key && v->key(a, ch))
		return;
	keys_dispatch(a, ch);
}

static int loop(struct app *a)
{
	double last_draw = 0;
	while (!a->quit && !scr_stop) {
		a->now_local = tm_local_ms();
		src_pump(a);
		/* Rows borrow from the model: rebuild before anything reads them. */
		if (a->view != V_PICKER)
			app_rebuild(a);
		src_tick(a);
		int ch;
		while ((ch = getch()) != ERR && !a->quit)
			handle_key(a, ch);
		if (a->quit)
			break;
		bool live = a->pid && !a->exited && !a->paused;
		if (a->view != V_PICKER) {
			if (live && a->now_local - a->last_build >= REDRAW_EVERY_MS)
				a->rows_stale = true; /* time-based warnings */
			app_rebuild(a);
		}
		if (a->dirty || a->now_local - last_draw >= REDRAW_EVERY_MS) {
			app_views[a->view].draw(a);
			scr_flush(&a->scr);
			a->dirty = false;
			last_draw = a->now_local;
		}
		struct pollfd p[2] = {{.fd = 0, .events = POLLIN},
				      {.fd = a->ctl ? ctl_fd(a->ctl) : -1, .events = POLLIN}};
		if (poll(p, 2, TICK_MS) < 0 && errno != EINTR)
			break;
	}
	return scr_stop ? 128 + scr_stop : 0;
}

int main(int argc, char **argv)
{
	struct cli c = {.o = {.interval_ms = 250, .join_threshold_ms = 1000}};
	setlocale(LC_ALL, "");
	int rc = parse_args(argc, argv, &c);
	if (rc)
		return rc < 0 ? 2 : 0;
	if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
		c.o.ascii = true;
	const char *nc = getenv("NO_COLOR");
	c.o.color = !(nc && nc[0]);
	if (c.once)
		return run_once(&c);
	if (!isatty(0) || !isatty(1)) {
		fprintf(stderr, "scopetop: the live view needs a terminal; for scripts use "
				"'scopetop --once PID'\n");
		return 2;
	}

	static struct app a;
	a.o = c.o;
	a.now_local = tm_local_ms();
	tm_model_init(&a.model);
	a.model.join_threshold_ms = c.o.join_threshold_ms;
	tr_init(&a.tree);
	a.built_gen = (uint64_t)-1;
	if (src_connect(&a)) {
		fprintf(stderr, "scopetop: %s\n", a.conn_err);
		return 1;
	}
	if (c.name && resolve_name(a.ctl, &c))
		return 1;
	if (c.pid) {
		/* Fail early, before the screen is taken, if the pid is not watchable. */
		json_t *reply;
		/* A process without libscope has no tree; its threads are
		 * watchable when its stacks are readable. */
		if (ask_quiet(a.ctl,
			      json_pack("{s:s, s:I}", "cmd", "tree", "pid", (json_int_t)c.pid),
			      &reply) == -2 &&
		    ask(a.ctl,
			json_pack("{s:s, s:I, s:[I], s:i}", "cmd", "stacks", "pid",
				  (json_int_t)c.pid, "tids", (json_int_t)c.pid, "max_frames", 1),
			&reply))
			return 1;
		if (!reply &&
		    ask(a.ctl, json_pack("{s:s, s:I}", "cmd", "tree", "pid", (json_int_t)c.pid),
			&reply))
			return 1;
		json_decref(reply);
		a.pid = c.pid;
		a.view = V_TREE;
		src_subscribe(&a, a.pid);
	} else {
		a.view = V_PICKER;
	}
	a.back_view = a.view;
	char err[256];
	scr_signals();
	if (scr_open(&a.scr, NULL, NULL, NULL, c.o.color, err, sizeof err)) {
		fprintf(stderr, "scopetop: %s\n", err);
		return 1;
	}
	a.dirty = true;
	rc = loop(&a);
	scr_close(&a.scr);
	src_disconnect(&a);
	json_decref(a.procs);
	json_decref(a.advice);
	tr_free(&a.tree);
	tm_model_free(&a.model);
	return rc;
}
