/* view_picker.c - the process picker: scopetop without a pid lists the
 * instrumented processes that scoped knows. */
#include <stdio.h>
#include <string.h>

#include "app.h"
#include "text.h"

static long long num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? (long long)json_number_value(v) : 0;
}

/* One picker row: the process as `list` describes it (peer strings fitted). */
static void proc_line(struct app *a, json_t *p, char *buf, size_t len)
{
	char up[32], name[40] = "";
	ttx_duration(up, sizeof up, (double)num(p, "uptime_ms"));
	const char *n = json_string_value(json_object_get(p, "name"));
	int used = ttx_append(name, sizeof name, n ? n : "?", 20, a->o.ascii);
	ttx_pad(name, sizeof name, used, 20);
	const char *st = json_string_value(json_object_get(p, "state"));
	char state[12];
	snprintf(state, sizeof state, "%s", st ? st : "?");
	snprintf(buf, len, " %8lld  %s  %-7s %9s %7lld %7lld %8lld %6lld", num(p, "pid"), name,
		 state, up, num(p, "scopes"), num(p, "tasks"), num(p, "threads"), num(p, "lost"));
}

void picker_draw(struct app *a)
{
	size_t n = json_array_size(a->procs);
	char b[1024];
	snprintf(b, sizeof b, " scopetop  instrumented processes: %zu   (Enter opens, q quits)", n);
	draw_line(a, 0, b, TA_HEADER);
	draw_line(
	    a, 1,
	    "      PID  NAME                  STATE      UPTIME  SCOPES   TASKS  THREADS   LOST",
	    TA_TITLE);
	int h = a->scr.rows - 3;
	a->tree_h = h;
	if (a->psel >= (long)n)
		a->psel = n ? (long)n - 1 : 0;
	if (a->psel < a->ptop)
		a->ptop = a->psel;
	if (a->psel >= a->ptop + h)
		a->ptop = a->psel - h + 1;
	for (int i = 0; i < h; i++) {
		long at = a->ptop + i;
		if (at < (long)n) {
			proc_line(a, json_array_get(a->procs, (size_t)at), b, sizeof b);
			draw_line(a, 2 + i, b, at == a->psel ? TA_SELECTED : TA_NORMAL);
		} else if (i == 0 && !n) {
			draw_line(
			    a, 2 + i,
			    a->ctl ? " no instrumented process is connected to scoped yet; start a "
				     "program linked with libscope (same SCOPED_SOCKET)"
				   : " not connected to scoped",
			    TA_DIM);
		} else {
			draw_line(a, 2 + i, "", TA_NORMAL);
		}
	}
	draw_status(a);
}
