/* view_help.c - the help screen, listing the key table (keys.c) and what
 * the states and warnings mean. */
#include <stdio.h>

#include "app.h"
#include "text.h"

static void put(struct app *a, int y, const char *text, int role)
{
	char line[1024];
	line[0] = 0;
	int used = ttx_append(line, sizeof line, text, a->scr.cols, a->o.ascii);
	ttx_pad(line, sizeof line, used, a->scr.cols);
	scr_line(&a->scr, y, line, scr_attr(&a->scr, role), 0, 0, 0);
}

void help_draw(struct app *a)
{
	put(a, 0, " scopetop keys (any key returns)", TA_HEADER);
	int y = 1;
	const char *label, *help;
	for (int i = 0; (help = keys_help(i, &label)) && y < a->scr.rows - 1; i++, y++) {
		char b[512];
		snprintf(b, sizeof b, "  %-10s %s", label, help);
		put(a, y, b, TA_NORMAL);
	}
	static const char *const legend[] = {
	    "",
	    "  states: running, queued, blocked, joining, done, failed, cancelled; dim rows ended",
	    "  and stay for the daemon's retention time.  Warnings: straggler (runs after its",
	    "  scope was cancelled), slow join, past deadline, events lost, violation.",
	};
	for (size_t i = 0; i < sizeof legend / sizeof legend[0] && y < a->scr.rows - 1; i++, y++)
		put(a, y, legend[i], i ? TA_DIM : TA_NORMAL);
	for (; y < a->scr.rows - 1; y++)
		put(a, y, "", TA_NORMAL);
	draw_status(a);
}

/* Any key leaves help, except q, which quits from anywhere. */
bool help_key(struct app *a, int ch)
{
	if (ch == 'q')
		return false;
	a->view = a->back_view;
	scr_invalidate(&a->scr);
	a->dirty = true;
	return true;
}
