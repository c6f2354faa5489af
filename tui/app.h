/* app.h - scopetop's state shared by the views, the key actions and the
 * data source: what is shown, what is selected, and the connection. */
#ifndef TUI_APP_H
#define TUI_APP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "screen.h"
#include "tree.h"

struct ctl;
struct app;

enum app_view { V_PICKER, V_TREE, V_DETAIL, V_HELP, V_THREADS, V_COUNT };

/* A view: draws itself (only what changed, through the screen's line
 * cache) and may take keys before the key table does. */
struct view {
	const char *name;
	void (*draw)(struct app *a);
	/* Returns true when it consumed the key. */
	bool (*key)(struct app *a, int ch);
};

struct app_opts {
	const char *socket; /* --socket, or NULL */
	bool ascii, color;
	int interval_ms; /* subscription interval */
	double join_threshold_ms;
	const char *dump_dir; /* where `d` writes */
	unsigned hide_cols;   /* columns not shown: bit 1 << enum rf_col */
};

/* Outstanding requests on the connection, matched to replies by id. */
enum req_kind { RQ_NONE, RQ_LIST, RQ_SUBSCRIBE, RQ_STACKS, RQ_DUMP, RQ_ADVISE };
#define APP_MAX_PENDING 8

struct app {
	struct app_opts o;
	struct scr scr;
	struct ctl *ctl;
	char conn_err[256];
	double reconnect_at; /* local ms of the next connection attempt */
	int64_t next_id;
	struct {
		int64_t id;
		int kind;
		double sent;
	} pending[APP_MAX_PENDING];

	/* the process being watched (pid 0: none, picker) */
	int64_t pid;
	bool subscribed, exited, daemon_gone;
	/* No libscope agent for pid: no tree, the thread view is built from
	 * the stacks replies alone. */
	bool plain;
	struct tm_model model;
	struct tr_tree tree;
	uint64_t built_gen; /* model gen the rows were built from */
	bool rows_stale;    /* tree options changed: rebuild */
	double last_build;

	/* selection in the tree */
	uint64_t sel_key;
	long sel, top;
	int tree_h; /* rows of the tree area in the last frame */

	/* picker */
	json_t *procs; /* last `list` reply's processes (owned) */
	long psel, ptop;

	/* thread view: the cursor and first row, in the model's thread order */
	long tsel, ttop;
	double list_next;

	/* the pools' advice (the "advise" reply's advice, owned; NULL: none),
	 * fetched while a pool is selected */
	json_t *advice;
	int64_t advice_pid;
	double advice_next;

	/* stacks of the selected thread, fetched at a low rate */
	int64_t stack_tid;
	double stack_next, sel_changed;

	/* pause: messages held back while paused */
	bool paused, resync;
	json_t *held;

	/* ui */
	int view, back_view;
	bool filter_edit;
	char status[512];
	double status_until;
	bool quit;
	bool dirty;	  /* something to draw */
	double now_local; /* local ms at the start of this loop turn */
};

extern const struct view app_views[V_COUNT];

/* Sets the status line for a few seconds. */
void app_status(struct app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The selected row, or NULL.  Rows borrow from the model: after the model
 * changes, app_rebuild() must run before a row's ent is read. */
const struct tr_row *app_selected(const struct app *a);

/* Rebuilds the rows if the model or the tree options changed, keeping the
 * selection on the same node. */
void app_rebuild(struct app *a);

/* Moves the tree cursor by delta rows (clamped). */
void app_move(struct app *a, long delta);

/* Key dispatch through the key table (keys.c).  Returns whether a key
 * action ran. */
bool keys_dispatch(struct app *a, int ch);
/* Lines of the help screen: label and text of each binding of view v, or
 * NULL past the end. */
const char *keys_help(int i, const char **label);

/* Data source (source.c). */
int src_connect(struct app *a);
void src_disconnect(struct app *a);
int src_subscribe(struct app *a, int64_t pid);
void src_request_list(struct app *a);
void src_request_stacks(struct app *a, int64_t tid);
void src_request_dump(struct app *a);
/* Reads and applies everything that arrived. */
void src_pump(struct app *a);
/* Periodic work: reconnects, list refresh, stack fetches. */
void src_tick(struct app *a);
/* Applies what was held back during a pause. */
void src_resume(struct app *a);

/* Detail pane (view_detail.c): draws rows y0..y0+h-1 for the selection. */
void detail_draw(struct app *a, int y0, int h);
/* The thread whose stack the detail pane wants, or 0. */
int64_t detail_tid(const struct app *a);

/* The views' draw and key functions (view_*.c), listed in app_views. */
void picker_draw(struct app *a);
void tree_draw(struct app *a);
bool tree_key(struct app *a, int ch);
void detail_view_draw(struct app *a);
void help_draw(struct app *a);
bool help_key(struct app *a, int ch);
void threads_draw(struct app *a);
/* Thread view (view_threads.c): move the cursor; Enter goes to the tree,
 * on the selected thread's task. */
void threads_move(struct app *a, long delta);
void threads_open(struct app *a);

/* Header and status lines shared by the views (view_tree.c). */
void draw_header(struct app *a);
void draw_status(struct app *a);
/* Line y of the screen: text fitted to the width and padded, in role's
 * attribute; draw_span also highlights columns hx..hx+hw in hrole. */
void draw_line(struct app *a, int y, const char *text, int role);
void draw_span(struct app *a, int y, const char *text, int role, int hx, int hw, int hrole);

#endif
