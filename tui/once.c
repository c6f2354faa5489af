/* once.c - plain-text rendering of the tree for `scopetop --once`: the
 * same rows and columns as the live view, sized to the content instead of
 * a terminal, with no escape sequences. */
#include "once.h"

#include <errno.h>
#include <string.h>

#include "rowfmt.h"
#include "text.h"
#include "tree.h"

static void rtrim(char *s)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == ' ')
		s[--n] = 0;
}

static void expand_all(struct tr_tree *t, const struct tm_model *m)
{
	tr_set_expanded(t, TR_POOLS, 0, true);
	(void)m;
}

int once_tree(FILE *out, const struct tm_model *m, double now, bool ascii)
{
	struct tr_tree t;
	tr_init(&t);
	expand_all(&t, m);
	int rc = tr_build(&t, m);
	if (rc) {
		tr_free(&t);
		return rc;
	}
	/* The name column is as wide as its widest cell, capped for sanity. */
	char cell[1024], line[RF_LINE_MAX];
	int name_w = 22;
	for (size_t i = 0; i < t.n; i++) {
		rf_cell(m, &t.rows[i], RF_NAME, now, ascii, cell, sizeof cell);
		int w = ttx_width(cell, ascii);
		if (w > name_w)
			name_w = w < 160 ? w : 160;
	}
	struct rf_layout l;
	rf_layout(&l, 1000, ascii);
	int fixed = 0;
	for (int i = 0; i < l.n; i++)
		if (l.col[i] != RF_NAME)
			fixed += l.width[i] + 1;
	rf_layout(&l, fixed + name_w + 1, ascii); /* +1: the name's own separator */

	const struct tm_proc *p = &m->proc;
	fprintf(out,
		"process %lld %s %s  scopes %zu  tasks %zu  threads %zu  pools %zu  lost %lld%s\n",
		(long long)p->pid, p->name[0] ? p->name : "?", p->exited ? "exited" : "live",
		m->scopes.n, m->tasks.n, m->threads.n, m->pools.n, (long long)p->lost,
		p->complete ? "" : "  (incomplete)");
	fprintf(out, "warnings %u", m->warn_total);
	for (int b = 0; b < TM_W_KINDS; b++)
		if (m->warn_count[b])
			fprintf(out, "  %s %u", tm_warn_name(b), m->warn_count[b]);
	fputc('\n', out);
	rf_header(&l, line, sizeof line);
	rtrim(line);
	fprintf(out, "%s\n", line);
	for (size_t i = 0; i < t.n; i++) {
		rf_line(&l, m, &t.rows[i], now, line, sizeof line);
		rtrim(line);
		fprintf(out, "%s\n", line);
	}
	tr_free(&t);
	return ferror(out) ? -EIO : 0;
}

int once_list(FILE *out, json_t *procs, bool ascii)
{
	size_t i;
	json_t *p;
	fprintf(out, "%8s  %-20s %-9s %7s %7s %8s %6s\n", "PID", "NAME", "STATE", "SCOPES", "TASKS",
		"THREADS", "LOST");
	json_array_foreach(procs, i, p)
	{
		char name[64] = "";
		const char *n = json_string_value(json_object_get(p, "name"));
		int used = ttx_append(name, sizeof name, n ? n : "?", 20, ascii);
		ttx_pad(name, sizeof name, used, 20);
		const char *st = json_string_value(json_object_get(p, "state"));
		fprintf(out, "%8lld  %s %-9.9s %7lld %7lld %8lld %6lld\n",
			(long long)json_integer_value(json_object_get(p, "pid")), name,
			st ? st : "?", (long long)json_integer_value(json_object_get(p, "scopes")),
			(long long)json_integer_value(json_object_get(p, "tasks")),
			(long long)json_integer_value(json_object_get(p, "threads")),
			(long long)json_integer_value(json_object_get(p, "lost")));
	}
	return ferror(out) ? -EIO : 0;
}
