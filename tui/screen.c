/* screen.c - ncurses setup, colour roles, cached line drawing, and the tty
 * restore that runs on normal exit, on stop signals and on crashes. */
#include "screen.h"

#include <curses.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

#include "../common/termtext.h"

volatile sig_atomic_t scr_stop;

/* Kept for the crash handler, which may only use async-signal-safe calls. */
static struct termios saved_tio;
static bool have_tio;
static int tty_fd = -1;
static char restore_seq[128];
static size_t restore_len;
static struct scr *open_term;
static SCREEN *screen;

static void on_stop(int sig)
{
	scr_stop = sig;
}

static void on_crash(int sig)
{
	if (have_tio)
		tcsetattr(tty_fd, TCSAFLUSH, &saved_tio);
	if (restore_len && tty_fd >= 0) {
		ssize_t rc = write(tty_fd, restore_seq, restore_len);
		(void)rc;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

void scr_signals(void)
{
	struct sigaction sa = {0};
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop; /* no SA_RESTART: poll() must wake up */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_RESETHAND;
	static const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	for (size_t i = 0; i < sizeof crash / sizeof crash[0]; i++)
		sigaction(crash[i], &sa, NULL);
	signal(SIGPIPE, SIG_IGN); /* a daemon gone away is an error return, not a death */
}

static void add_cap(const char *name)
{
	char *s = tigetstr(name);
	if (!s || s == (char *)-1)
		return;
	size_t n = strlen(s);
	if (restore_len + n < sizeof restore_seq) {
		memcpy(restore_seq + restore_len, s, n);
		restore_len += n;
	}
}

/* Colour pairs per role: foreground, background, extra attributes. */
struct role_def {
	short fg, bg;
	int attr;      /* with colours */
	int mono_attr; /* without (NO_COLOR or a mono terminal) */
};

static const struct role_def roles[TA_COUNT] = {
    [TA_NORMAL] = {-1, -1, A_NORMAL, A_NORMAL},
    [TA_HEADER] = {COLOR_BLACK, COLOR_CYAN, A_NORMAL, A_REVERSE},
    [TA_TITLE] = {COLOR_BLACK, COLOR_GREEN, A_NORMAL, A_REVERSE},
    [TA_SELECTED] = {COLOR_BLACK, COLOR_WHITE, A_NORMAL, A_REVERSE},
    [TA_DIM] = {-1, -1, A_DIM, A_DIM},
    [TA_WARN] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [TA_GOOD] = {COLOR_GREEN, -1, A_NORMAL, A_NORMAL},
    [TA_WAIT] = {COLOR_YELLOW, -1, A_NORMAL, A_NORMAL},
    [TA_JOIN] = {COLOR_CYAN, -1, A_NORMAL, A_UNDERLINE},
    [TA_BAD] = {COLOR_RED, -1, A_BOLD, A_BOLD},
    [TA_CANCEL] = {COLOR_MAGENTA, -1, A_NORMAL, A_DIM},
    [TA_MATCH] = {COLOR_YELLOW, -1, A_BOLD, A_BOLD},
};

int scr_attr(const struct scr *t, int role)
{
	if (role < 0 || role >= TA_COUNT)
		role = TA_NORMAL;
	if (!t->color)
		return roles[role].mono_attr;
	if (roles[role].fg < 0 && roles[role].bg < 0)
		return roles[role].attr;
	return (int)COLOR_PAIR(role) | roles[role].attr;
}

static void close_at_exit(void)
{
	if (open_term)
		scr_close(open_term);
}

int scr_open(struct scr *t, FILE *out, FILE *in, const char *termtype, bool color, char *err,
	     size_t errlen)
{
	static bool registered;
	if (!registered) { /* an exit() from anywhere still gives the terminal back */
		registered = true;
		atexit(close_at_exit);
	}
	memset(t, 0, sizeof *t);
	out = out ? out : stdout;
	in = in ? in : stdin;
	tty_fd = fileno(out);
	have_tio = tcgetattr(fileno(in), &saved_tio) == 0;
	screen = newterm(termtype, out, in);
	if (!screen) {
		snprintf(err, errlen,
			 "cannot start the terminal (TERM=%s); set TERM to your terminal's type or "
			 "use --once",
			 termtype	  ? termtype
			 : getenv("TERM") ? getenv("TERM")
					  : "unset");
		return -1;
	}
	set_term(screen);
	restore_len = 0;
	add_cap("sgr0");
	add_cap("cnorm");
	add_cap("rmcup");
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25); /* Esc must feel instant, not wait for a sequence */
	curs_set(0);
	leaveok(stdscr, TRUE);
	if (color && has_colors()) {
		start_color();
		use_default_colors();
		for (int r = 1; r < TA_COUNT; r++)
			if (roles[r].fg >= 0 || roles[r].bg >= 0)
				init_pair((short)r, roles[r].fg, roles[r].bg);
		t->color = true;
	}
	t->open = true;
	open_term = t;
	scr_resize(t);
	return 0;
}

void scr_close(struct scr *t)
{
	if (!t->open)
		return;
	t->open = false;
	open_term = NULL;
	endwin();
	delscreen(screen);
	screen = NULL;
	restore_len = 0;
	have_tio = false;
}

void scr_invalidate(struct scr *t)
{
	memset(t->line_hash, 0, sizeof t->line_hash);
	erase();
}

void scr_resize(struct scr *t)
{
	getmaxyx(stdscr, t->rows, t->cols);
	if (t->rows > SCR_MAX_LINES)
		t->rows = SCR_MAX_LINES;
	scr_invalidate(t);
}

static uint64_t hash_line(const char *s, int attr, int hx, int hw, int hattr)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	uint64_t extra[] = {(uint64_t)attr, (uint64_t)hx, (uint64_t)hw, (uint64_t)hattr};
	for (size_t i = 0; i < 4; i++)
		h = (h ^ extra[i]) * 0x100000001b3ull;
	return h | 1; /* 0 means "unknown" */
}

bool scr_line(struct scr *t, int y, const char *text, int attr, int hx, int hw, int hattr)
{
	if (y < 0 || y >= t->rows || y >= SCR_MAX_LINES)
		return false;
	uint64_t h = hash_line(text, attr, hx, hw, hattr);
	if (t->line_hash[y] == h)
		return false;
	t->line_hash[y] = h;
	t->repainted++;
	/* Clear first: a line that fills the width leaves the cursor on the
	 * next line, where a later clrtoeol() would wipe the wrong line. */
	move(y, 0);
	clrtoeol();
	attrset(attr);
	/* The views clean what they take from the daemon; this is the last
	 * gate before the terminal all the same. */
	char safe[1024];
	if (!tt_clean(text)) {
		tt_escape(safe, sizeof safe, text, '?');
		text = safe;
	}
	mvaddnstr(y, 0, text, -1);
	if (hw > 0 && hx < t->cols)
		mvchgat(y, hx, hw, (attr_t)(hattr & ~A_COLOR), (short)PAIR_NUMBER(hattr), NULL);
	attrset(A_NORMAL);
	return true;
}

void scr_flush(struct scr *t)
{
	(void)t;
	wnoutrefresh(stdscr);
	doupdate();
}
