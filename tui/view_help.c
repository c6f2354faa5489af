/* view_help.c - the help screen, listing the key table (keys.c) and what
 * the states and warnings mean. */
#include <stdio.h>

#include "app.h"

void help_draw(struct app *a)
{
	draw_line(a, 0, " scopetop keys (any key returns)", TA_HEADER);
	int y = 1;
	const char *label, *help;
	for (int i = 0; (help = keys_help(i, &label)) && y < a->scr.rows - 1; i++, y++) {
		char b[512];
		snprintf(b, sizeof b, "  %-10s %s", label, help);
		draw_line(a, y, b, TA_NORMAL);
	}
	static const char *const legend[] = {
	    "",
	    "  states: running, queued, blocked, joining, done, failed, cancelled; dim rows ended",
	    "  and stay for the daemon's retention time.  Warnings: straggler (runs after its",
	    "  scope was cancelled), slow join, past deadline, events lost, violation.",
	};
	for (size_t i = 0; i < sizeof legend / sizeof legend[0] && y < a->scr.rows - 1; i++, y++)
		draw_line(a, y, legend[i], i ? TA_DIM : TA_NORMAL);
	for (; y < a->scr.rows - 1; y++)
		draw_line(a, y, "", TA_NORMAL);
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
