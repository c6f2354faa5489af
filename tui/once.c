/* once.c - plain-text rendering of the tree for `scopetop --once`: the
 * same rows and columns as the live view, sized to the content instead of
 * a terminal, with no escape sequences; or the same rows as JSON. */
#include "once.h"

#include <errno.h>
#include <string.h>

#include "../dump/jdkjson.h"
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

/* Column keys of a JSON row's "cells", in enum rf_col order. */
static const char *const cell_keys[RF_NCOLS] = {
    [RF_STATE] = "state",   [RF_NAME] = "name",		[RF_ID] = "id",	    [RF_AGE] = "age",
    [RF_JOINER] = "joiner", [RF_DEADLINE] = "deadline", [RF_SITE] = "site", [RF_WORKER] = "worker",
    [RF_BUSY] = "busy",	    [RF_SCHED] = "sched",	[RF_IDLE] = "idle",
};

static const char *const kind_names[] = {
    [TR_ROOT] = "root",	  [TR_SCOPE] = "scope", [TR_TASK] = "task",
    [TR_POOLS] = "pools", [TR_POOL] = "pool",
};

static json_t *row_json(const struct tm_model *m, const struct tr_row *r, double now)
{
	char cell[1024];
	json_t *o = json_object(), *cells = json_object();
	if (!o || !cells) {
		json_decref(o);
		json_decref(cells);
		return NULL;
	}
	int bad = json_object_set_new(o, "depth", json_integer(r->depth));
	bad |= json_object_set_new(o, "kind",
				   json_string(r->kind < sizeof kind_names / sizeof *kind_names
						   ? kind_names[r->kind]
						   : "?"));
	bad |= json_object_set_new(o, "id", jj_id_new(r->id));
	bad |= json_object_set_new(o, "state", json_string(tr_state_name(r->state)));
	bad |= json_object_set_new(o, "ended", json_boolean(r->flags & TR_F_DIM));
	bad |= json_object_set_new(o, "count", json_integer(r->group_n > 1 ? r->group_n : 1));
	for (int c = 0; c < RF_NCOLS; c++) {
		rf_cell(m, r, c, now, false, cell, sizeof cell);
		bad |= json_object_set_new(cells, cell_keys[c], json_string(cell));
	}
	bad |= json_object_set_new(o, "cells", cells);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int once_tree_json(FILE *out, const struct tm_model *m, double now, json_t *process)
{
	struct tr_tree t;
	tr_init(&t);
	expand_all(&t, m);
	int rc = tr_build(&t, m);
	json_t *doc = json_object(), *rows = json_array();
	if (!rc && (!doc || !rows))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < t.n; i++)
		if (json_array_append_new(rows, row_json(m, &t.rows[i], now)) < 0)
			rc = -ENOMEM;
	if (!rc && (json_object_set(doc, "process", process ? process : json_null()) < 0 ||
		    json_object_set(doc, "rows", rows) < 0))
		rc = -ENOMEM;
	if (!rc && (json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
		    fputc('\n', out) == EOF || ferror(out)))
		rc = -EIO;
	json_decref(rows);
	json_decref(doc);
	tr_free(&t);
	return rc;
}
