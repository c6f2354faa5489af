/* source.c - scopetop's side of the control socket: one subscription that
 * feeds the model (snapshot, then deltas), plus low-rate requests for the
 * process list, the selected thread's stack and dumps.  Everything is
 * asynchronous so the screen never waits on the daemon. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "../common/ctl.h"
#include "../dump/jdkdump.h"

#define LIST_EVERY_MS 1000
#define ADVICE_EVERY_MS 1000	  /* refresh of the pool advice while a pool is selected */
#define ADVICE_IDLE_EVERY_MS 3000 /* and otherwise, for the header's warnings */
#define STACK_EVERY_MS 1000	  /* refresh of the selected thread's stack */
#define GROUP_STACKS_EVERY_MS 2000
#define STACK_SETTLE_MS 120  /* wait for the cursor to rest before fetching */
#define DUMP_STATUS_MS 15000 /* how long the written dump's path stays shown */
#define RECONNECT_MS 2000
#define REQUEST_TIMEOUT_MS 5000
#define HELD_MAX 4096	 /* messages held during a pause before resync */
#define FIRST_ID 1000000 /* clear of ctl_request()'s own ids */

int src_connect(struct app *a)
{
	if (a->ctl)
		return 0;
	int rc = ctl_connect(&a->ctl, a->o.socket, a->conn_err, sizeof a->conn_err);
	if (rc) {
		a->ctl = NULL;
		a->reconnect_at = a->now_local + RECONNECT_MS;
		return rc;
	}
	a->conn_err[0] = 0;
	a->daemon_gone = false;
	memset(a->pending, 0, sizeof a->pending);
	if (!a->next_id)
		a->next_id = FIRST_ID;
	return 0;
}

void src_disconnect(struct app *a)
{
	if (a->ctl)
		ctl_close(a->ctl);
	a->ctl = NULL;
	a->subscribed = false;
	memset(a->pending, 0, sizeof a->pending);
	json_decref(a->held);
	a->held = NULL;
}

static int pending_of(struct app *a, int kind)
{
	for (int i = 0; i < APP_MAX_PENDING; i++)
		if (a->pending[i].kind == kind)
			return i;
	return -1;
}

/* Sends {"cmd":cmd, ...extra} with a fresh id and remembers its kind. */
static int send_req(struct app *a, int kind, json_t *req)
{
	int slot = pending_of(a, RQ_NONE);
	if (!a->ctl || slot < 0) {
		json_decref(req);
		return -EAGAIN;
	}
	int64_t id = a->next_id++;
	json_object_set_new(req, "id", json_integer(id));
	int rc = ctl_send(a->ctl, req);
	json_decref(req);
	if (rc) {
		snprintf(a->conn_err, sizeof a->conn_err, "sending to scoped failed: %s",
			 strerror(-rc));
		a->daemon_gone = true;
		return rc;
	}
	a->pending[slot].id = id;
	a->pending[slot].kind = kind;
	a->pending[slot].sent = a->now_local;
	return 0;
}

int src_subscribe(struct app *a, int64_t pid)
{
	int rc = src_connect(a);
	if (rc)
		return rc;
	a->subscribed = false;
	a->plain = false;
	return send_req(a, RQ_SUBSCRIBE,
			json_pack("{s:s, s:I, s:i}", "cmd", "subscribe", "pid", (json_int_t)pid,
				  "interval_ms", a->o.interval_ms));
}

void src_request_list(struct app *a)
{
	if (pending_of(a, RQ_LIST) < 0)
		send_req(a, RQ_LIST, json_pack("{s:s}", "cmd", "list"));
	a->list_next = a->now_local + LIST_EVERY_MS;
}

void src_request_stacks(struct app *a, int64_t tid)
{
	if (pending_of(a, RQ_STACKS) >= 0 || !a->pid || a->exited)
		return;
	if (a->plain)
		tid = 0; /* every thread: they are the whole model */
	json_t *req = json_pack("{s:s, s:I, s:i}", "cmd", "stacks", "pid", (json_int_t)a->pid,
				"max_frames", TM_MAX_FRAMES);
	if (tid > 0)
		json_object_set_new(req, "tids", json_pack("[I]", (json_int_t)tid));
	send_req(a, RQ_STACKS, req);
	a->stack_next =
	    a->now_local +
	    (a->tree.group || a->view == V_THREADS ? GROUP_STACKS_EVERY_MS : STACK_EVERY_MS);
}

/* The advice of the watched process's pools: every second while a pool row
 * is selected (its pane shows it), else every few (the header warns of
 * saturated, starved and stuck pools). */
static void request_advice(struct app *a)
{
	const struct tr_row *r = app_selected(a);
	bool pool = r && (r->kind == TR_POOL || r->kind == TR_POOLS);
	if (pool && a->advice_next > a->now_local + ADVICE_EVERY_MS)
		a->advice_next = a->now_local; /* just moved onto a pool */
	if (a->now_local < a->advice_next || pending_of(a, RQ_ADVISE) >= 0)
		return;
	send_req(a, RQ_ADVISE, json_pack("{s:s, s:I}", "cmd", "advise", "pid", (json_int_t)a->pid));
	a->advice_next = a->now_local + (pool ? ADVICE_EVERY_MS : ADVICE_IDLE_EVERY_MS);
}

void src_request_dump(struct app *a)
{
	if (!a->pid) {
		app_status(a, "no process open: choose one first");
		return;
	}
	if (pending_of(a, RQ_DUMP) >= 0) {
		app_status(a, "a dump is already being written");
		return;
	}
	if (send_req(a, RQ_DUMP, json_pack("{s:s, s:I}", "cmd", "dump", "pid", (json_int_t)a->pid)))
		app_status(a, "cannot ask scoped for a dump: %s",
			   a->conn_err[0] ? a->conn_err : "not connected");
	else
		app_status(a, "asking scoped for a dump of %lld...", (long long)a->pid);
}

static const char *error_text(json_t *reply)
{
	json_t *e = json_object_get(reply, "error");
	const char *m = json_string_value(json_object_get(e, "message"));
	return m ? m : json_string_value(json_object_get(e, "code"));
}

/* Writes the JDK-format dump next to where scopetop runs and says where. */
static void write_dump(struct app *a, json_t *reply)
{
	char err[256], path[512], stamp[32];
	json_t *dump = jdkdump_build(reply, err, sizeof err);
	if (!dump) {
		app_status(a, "dump failed: %s", err);
		return;
	}
	char *text = json_dumps(dump, JSON_INDENT(2));
	json_decref(dump);
	if (!text) {
		app_status(a, "dump failed: out of memory formatting it");
		return;
	}
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
	/* The path shown must be usable from anywhere, so make it absolute. */
	char cwd[256], dir[300];
	const char *d = a->o.dump_dir;
	if (!d || d[0] != '/') {
		if (!getcwd(cwd, sizeof cwd))
			snprintf(cwd, sizeof cwd, ".");
		snprintf(dir, sizeof dir, "%s%s%s", cwd, d ? "/" : "", d ? d : "");
	} else {
		snprintf(dir, sizeof dir, "%s", d);
	}
	int rc = -EEXIST;
	for (int n = 0; n < 100 && rc == -EEXIST; n++) {
		snprintf(path, sizeof path, "%s/scopetop-%lld-%s%s%.0d.json", dir,
			 (long long)a->pid, stamp, n ? "-" : "", n);
		rc = jdkdump_write_file(path, text, strlen(text), false, err, sizeof err);
	}
	free(text);
	if (rc) {
		app_status(a, "dump failed: %s", err);
	} else {
		app_status(a, "dump written to %s", path);
		a->status_until = a->now_local + DUMP_STATUS_MS; /* long enough to copy it */
	}
}

static bool error_is(json_t *reply, const char *code)
{
	const char *c = json_string_value(json_object_get(json_object_get(reply, "error"), "code"));
	return c && !strcmp(c, code);
}

/* A process without libscope: its threads, as the stacks reply lists them,
 * become the model (no scopes, tasks or pools), each with its stack. */
static void plain_load(struct app *a, json_t *stacks)
{
	char err[256];
	json_t *threads = json_array();
	const char *pname = NULL;
	size_t i;
	json_t *st;
	json_array_foreach(stacks, i, st)
	{
		json_t *tid = json_object_get(st, "tid");
		if (!json_is_integer(tid))
			continue;
		if (json_integer_value(tid) == a->pid)
			pname = json_string_value(json_object_get(st, "name"));
		json_array_append_new(
		    threads, json_pack("{s:O, s:O?, s:s, s:s}", "tid", tid, "name",
				       json_object_get(st, "name"), "role",
				       json_integer_value(tid) == a->pid ? "main" : "other",
				       "state", "running"));
	}
	json_t *model =
	    json_pack("{s:o, s:[], s:[], s:[]}", "threads", threads, "pools", "scopes", "tasks");
	json_t *proc = json_pack("{s:I, s:s?, s:s, s:b}", "pid", (json_int_t)a->pid, "name", pname,
				 "state", "live", "instrumented", 0);
	if (model && proc &&
	    tm_model_load(&a->model, model, proc, a->now_local, err, sizeof err) == 0)
		tm_model_set_stacks(&a->model, stacks, a->now_local);
	json_decref(model);
	json_decref(proc);
}

static void on_reply(struct app *a, int kind, json_t *msg)
{
	bool ok = json_is_true(json_object_get(msg, "ok"));
	switch (kind) {
	case RQ_LIST:
		if (ok) {
			json_decref(a->procs);
			a->procs = json_incref(json_object_get(msg, "processes"));
		}
		break;
	case RQ_STACKS:
		if (ok && a->plain)
			plain_load(a, json_object_get(msg, "stacks"));
		else if (ok)
			tm_model_set_stacks(&a->model, json_object_get(msg, "stacks"),
					    a->now_local);
		else if (a->plain) {
			snprintf(a->conn_err, sizeof a->conn_err,
				 "process %lld: %s; Esc for the "
				 "process list",
				 (long long)a->pid, error_text(msg));
			a->exited = true;
		}
		break;
	case RQ_ADVISE:
		if (ok) {
			json_decref(a->advice);
			a->advice = json_incref(json_object_get(msg, "advice"));
			a->advice_pid = a->pid;
			a->dirty = true;
		}
		break;
	case RQ_DUMP:
		if (ok)
			write_dump(a, msg);
		else
			app_status(a, "dump failed: %s", error_text(msg));
		break;
	case RQ_SUBSCRIBE:
		if (!ok && error_is(msg, "not_instrumented")) {
			/* A running process with no agent here: its threads. */
			a->plain = true;
			a->subscribed = true;
			a->view = V_THREADS;
			a->stack_next = 0;
			app_status(a, "process %lld has no libscope agent here: its threads only",
				   (long long)a->pid);
		} else if (!ok) {
			/* Kept on the status line (not a passing message): the view
			 * stays empty and should say why until the user moves on. */
			const char *why = error_text(msg);
			snprintf(a->conn_err, sizeof a->conn_err,
				 "cannot watch process %lld: %s; Esc for the process list",
				 (long long)a->pid, why ? why : "refused");
			a->exited = true;
		}
		break;
	}
	a->dirty = true;
}

static void apply(struct app *a, json_t *msg)
{
	const char *type = json_string_value(json_object_get(msg, "type"));
	char err[256];
	if (!type)
		return;
	if (!strcmp(type, "snapshot")) {
		if (tm_model_load(&a->model, json_object_get(msg, "model"),
				  json_object_get(msg, "process"), a->now_local, err, sizeof err))
			app_status(a, "bad snapshot from scoped: %s", err);
		a->subscribed = true;
		a->exited = a->model.proc.exited;
	} else if (!strcmp(type, "delta")) {
		if (tm_model_apply_delta(&a->model, msg, a->now_local, err, sizeof err))
			app_status(a, "bad delta from scoped: %s", err);
		a->exited = a->model.proc.exited; /* a re-registered agent comes back live */
	} else if (!strcmp(type, "exited")) {
		tm_model_set_process(&a->model, json_object_get(msg, "process"));
		a->model.proc.exited = true;
		tm_model_freeze(&a->model, a->now_local);
		if (!a->model.proc.state[0] || !strcmp(a->model.proc.state, "live"))
			snprintf(a->model.proc.state, sizeof a->model.proc.state, "exited");
		app_status(a, "process %lld %s; showing the last tree", (long long)a->pid,
			   a->model.proc.state);
		a->exited = true;
		tm_model_warnings(&a->model, tm_model_now(&a->model, a->now_local));
	}
	a->dirty = true;
}

static void dispatch(struct app *a, json_t *msg)
{
	json_t *id = json_object_get(msg, "id");
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (json_is_integer(id)) {
		for (int i = 0; i < APP_MAX_PENDING; i++) {
			if (a->pending[i].kind && a->pending[i].id == json_integer_value(id)) {
				int kind = a->pending[i].kind;
				a->pending[i].kind = RQ_NONE;
				on_reply(a, kind, msg);
				break;
			}
		}
	}
	if (!type)
		return;
	/* While paused, model changes wait (in order) so the view stands still. */
	if (a->paused && a->subscribed) {
		if (!a->held)
			a->held = json_array();
		if (json_array_size(a->held) >= HELD_MAX) {
			json_array_clear(a->held);
			a->resync = true;
		}
		if (!a->resync)
			json_array_append(a->held, msg);
		return;
	}
	apply(a, msg);
}

void src_resume(struct app *a)
{
	if (a->resync) {
		/* Too much changed while paused: start again from a snapshot. */
		a->resync = false;
		src_disconnect(a);
		if (a->pid)
			src_subscribe(a, a->pid);
		return;
	}
	size_t i;
	json_t *m;
	json_array_foreach(a->held, i, m) apply(a, m);
	json_array_clear(a->held);
}

void src_pump(struct app *a)
{
	/* Bounded per turn so a flood cannot starve the keyboard. */
	for (int n = 0; a->ctl && n < 10000; n++) {
		json_t *msg = NULL;
		int rc = ctl_read(a->ctl, &msg);
		if (rc == 0)
			break;
		if (rc == -EPROTO)
			continue;
		if (rc < 0) {
			snprintf(
			    a->conn_err, sizeof a->conn_err,
			    "lost the connection to scoped (%s); showing the last data, retrying",
			    rc == -ECONNRESET ? "it closed the socket" : strerror(-rc));
			a->daemon_gone = true;
			break;
		}
		dispatch(a, msg);
		json_decref(msg);
	}
	if (a->daemon_gone && a->ctl) {
		/* What we hold is a picture of the past: stop its clock so ages
		 * and time-based warnings do not run on without data. */
		if (a->pid)
			tm_model_freeze(&a->model, a->now_local);
		src_disconnect(a);
		a->reconnect_at = a->now_local + RECONNECT_MS;
		a->dirty = true;
	}
}

void src_tick(struct app *a)
{
	double now = a->now_local;
	if (!a->ctl && now >= a->reconnect_at) {
		if (src_connect(a) == 0 && a->pid && !a->exited)
			src_subscribe(a, a->pid);
		a->dirty = true;
	}
	if (!a->ctl)
		return;
	for (int i = 0; i < APP_MAX_PENDING; i++)
		if (a->pending[i].kind && a->pending[i].kind != RQ_SUBSCRIBE &&
		    now - a->pending[i].sent > REQUEST_TIMEOUT_MS)
			a->pending[i].kind = RQ_NONE; /* the reply is late; do not wait forever */
	if (a->view == V_PICKER && now >= a->list_next)
		src_request_list(a);
	if (!a->pid || a->exited || !a->subscribed)
		return;
	request_advice(a);
	if (a->paused) {
		/* Paused, the tree stands still, but the stack of what the
		 * cursor is on is still fetched, once: the pane would otherwise
		 * say "fetching..." until the user resumes. */
		int64_t tid = detail_tid(a);
		if (tid && !tm_stack_get(&a->model, tid) &&
		    now - a->sel_changed >= STACK_SETTLE_MS &&
		    (tid != a->stack_tid || now >= a->stack_next)) {
			a->stack_tid = tid;
			src_request_stacks(a, tid);
		}
		return;
	}
	if ((a->tree.group || a->view == V_THREADS) && now >= a->stack_next) {
		/* Grouping and the thread view need every thread's stack. */
		src_request_stacks(a, 0);
		return;
	}
	int64_t tid = detail_tid(a);
	if (!tid || now - a->sel_changed < STACK_SETTLE_MS)
		return;
	if (tid != a->stack_tid || now >= a->stack_next) {
		a->stack_tid = tid;
		src_request_stacks(a, tid);
	}
}
