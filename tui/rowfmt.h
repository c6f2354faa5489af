/* rowfmt.h - turns tree rows into text columns (state glyph, name, id, age,
 * joiner, deadline, fork site, worker, busy/sched/idle time), shared by the live view, --once and
 * the benchmark so all three show the same thing. */
#ifndef TUI_ROWFMT_H
#define TUI_ROWFMT_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"
#include "tree.h"

enum rf_col {
	RF_STATE,
	RF_NAME,
	RF_ID,
	RF_AGE,
	RF_JOINER,
	RF_DEADLINE,
	RF_SITE,
	RF_WORKER,
	RF_BUSY,  /* a subtask's time running, its joins left out (tokio-console's Busy) */
	RF_SCHED, /* forked to started, waiting for a thread (Sched) */
	RF_IDLE,  /* in the joins of the scopes its body opened (Idle) */
	RF_NCOLS
};

#define RF_LINE_MAX 2048

struct rf_layout {
	int n;		     /* visible columns, in order */
	int col[RF_NCOLS];   /* enum rf_col of each */
	int x[RF_NCOLS];     /* start column of each */
	int width[RF_NCOLS]; /* width of each */
	bool ascii;
};

/* Chooses the columns that fit in cols (dropping the least useful first);
 * the name column takes what is left. */
void rf_layout(struct rf_layout *l, int cols, bool ascii);

/* The same without the columns whose bit (1 << enum rf_col) is set in hide;
 * the state and name columns always show. */
void rf_layout_hide(struct rf_layout *l, int cols, bool ascii, unsigned hide);

/* The column titled name (any case; "deadline" for DEADLN), or -1; and the
 * title of column c. */
int rf_col_parse(const char *name);
const char *rf_col_title(int c);

/* The column titles, padded to the layout. */
void rf_header(const struct rf_layout *l, char *buf, size_t len);

/* The row as one line of text, padded to the layout's width.  now is model
 * time in ms. */
void rf_line(const struct rf_layout *l, const struct tm_model *m, const struct tr_row *r,
	     double now, char *buf, size_t len);

/* The text of one cell (enum rf_col) of a row, unpadded. */
void rf_cell(const struct tm_model *m, const struct tr_row *r, int col, double now, bool ascii,
	     char *out, size_t len);

/* The effective deadline of scope s: the earliest of it and every scope
 * enclosing it (0: none), as scope_deadline() computes it in the target. */
double rf_deadline(const struct tm_model *m, const struct tm_scope *s);

/* Where a subtask's time went, in ms, as far as the daemon's model tells:
 * queued (forked to started), ran (started to ended, or now), and of that
 * joining: waiting in the joins of scopes its body opened (each join from
 * its start to the scope's close, or now), the rest being busy.  Blocking
 * outside joins (sleeps, I/O) counts as busy: the runtime does not report
 * it.  Joins of scopes the daemon no longer retains are not counted. */
struct rf_times {
	double queued, ran, joining, busy;
	bool started;
};
void rf_task_times(const struct tm_model *m, const struct tm_task *t, double now,
		   struct rf_times *out);

/* The label of a row (name or function, ×N, warning badges). */
void rf_label(const struct tm_model *m, const struct tr_row *r, bool ascii, char *buf, size_t len);

/* State glyph (one column) for a display state. */
const char *rf_glyph(int state, bool ascii);

/* Badge text for warning bits ("straggler", "slow join", ...), joined. */
void rf_badges(unsigned warn, bool ascii, char *buf, size_t len);

#endif
