/* screen.h - scopetop's terminal: ncurses setup with colours (or none, for
 * NO_COLOR), a per-line cache so only lines whose content changed are
 * repainted, and restoring the terminal on every exit path, signals
 * included. */
#ifndef TUI_SCREEN_H
#define TUI_SCREEN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Colour roles; scr_attr() gives the attribute for each. */
enum scr_role {
	TA_NORMAL,
	TA_HEADER,   /* top line */
	TA_TITLE,    /* column titles, pane titles */
	TA_SELECTED, /* the cursor row */
	TA_DIM,	     /* ended, kept for the retention time */
	TA_WARN,     /* badges and the warning count */
	TA_GOOD,     /* running */
	TA_WAIT,     /* queued, blocked */
	TA_JOIN,     /* joining */
	TA_BAD,	     /* failed */
	TA_CANCEL,   /* cancelled */
	TA_MATCH,    /* filter matches */
	TA_COUNT
};

#define SCR_MAX_LINES 512

struct scr {
	bool color, open;
	int rows, cols;
	uint64_t line_hash[SCR_MAX_LINES]; /* what each screen line shows now */
	unsigned long repainted;	   /* lines written since start (for tests, bench) */
};

/* Set by SIGINT, SIGTERM, SIGHUP: the signal number; the main loop exits. */
extern volatile sig_atomic_t scr_stop;

/* Installs the signal handlers (before scr_open, so ncurses keeps ours):
 * stop signals set scr_stop; crash signals restore the tty and re-raise. */
void scr_signals(void);

/* Starts curses on out/in (NULL: stdout/stdin) with terminal type termtype
 * (NULL: $TERM).  color: use colours if the terminal has them.  0, or -1
 * with a sentence in err. */
int scr_open(struct scr *t, FILE *out, FILE *in, const char *termtype, bool color, char *err,
	     size_t errlen);
/* Restores the terminal.  Safe to call twice and at exit. */
void scr_close(struct scr *t);

/* Re-reads the size after a resize and forgets what is on screen. */
void scr_resize(struct scr *t);
/* Forgets what is on screen so the next frame repaints every line. */
void scr_invalidate(struct scr *t);

/* Writes text (already fitted to the width) on line y with role attr, and
 * colours span [hx, hx+hw) with role hattr (hw 0: none).  Does nothing when
 * the line already shows exactly that.  Returns whether it wrote. */
bool scr_line(struct scr *t, int y, const char *text, int attr, int hx, int hw, int hattr);

/* Attribute of a role. */
int scr_attr(const struct scr *t, int role);

/* Pushes the frame to the terminal (doupdate). */
void scr_flush(struct scr *t);

#endif
