/* cmd_scope_tree.c - `Scope.tree [-format=text|json]`: the scope tree alone,
 * one line per scope and per task, each scope under the task whose body
 * opened it; or the same tree as JSON (schemas/scope-tree.schema.json). */
#include <string.h>

#include "../common/termtext.h"
#include "cli.h"
#include "jdkdump.h"
#include "jdkjson.h"

#define MAX_DEPTH 256 /* deeper scopes are summarised, not printed */

static const char *const opts[] = {"-format=", NULL};

struct tree {
	struct cli *cli;
	const json_t *containers; /* from jdkdump_build: pre-order, open scopes only */
	const jv *tasks;	  /* the model's */
};

static const char *s_or(const json_t *o, const char *k, const char *def)
{
	const char *s = jt_str(o, k);
	return s ? s : def;
}

static void scope_line(struct tree *t, const json_t *c, int depth)
{
	FILE *out = t->cli->out;
	const json_t *owner = json_object_get(c, "owner");
	if (!json_is_integer(owner))
		owner = json_object_get(c, "ownerTid");
	fprintf(out, "%*s%s  %s %s", depth * 2, "", s_or(c, "container", "?"),
		s_or(c, "joiner", "?"), s_or(c, "state", "?"));
	if (jt_str(c, "cancelReason"))
		fprintf(out, " (%s)", jt_str(c, "cancelReason"));
	if (json_is_integer(owner))
		fprintf(out, "  owner #%lld", (long long)json_integer_value(owner));
	if (jt_str(c, "deadline"))
		fprintf(out, "  deadline %s", jt_str(c, "deadline"));
	fputc('\n', out);
}

static void task_line(struct tree *t, const jv *task, int depth)
{
	const jv *id = jv_get(task, "id"), *w = jv_get(task, "worker");
	json_t *site = jj_site(jv_get(task, "site"));
	const char *fn = jj_str(task, "func");
	FILE *out = t->cli->out;
	if (jv_is_integer(id))
		fprintf(out, "%*stask %llu ", depth * 2, "",
			(unsigned long long)(uint64_t)jv_integer(id));
	else
		fprintf(out, "%*stask ? ", depth * 2, "");
	/* Names from the target reach the terminal escaped. */
	if (fn) {
		tt_fputs(fn, out);
		fputs("() ", out);
	}
	tt_fputs(jj_str(task, "state") ? jj_str(task, "state") : "?", out);
	if (jv_is_integer(w))
		fprintf(out, " on #%lld", (long long)jv_integer(w));
	if (json_is_string(site)) {
		fputs("  forked at ", out);
		tt_fputs(json_string_value(site), out);
	}
	fputc('\n', out);
	json_decref(site);
}

/* Whether a (an id from the model) and b (from the dump: an integer, or
 * the string of an id past INT64_MAX) are the same id. */
static bool int_eq(const jv *a, const json_t *b)
{
	uint64_t id;
	return jv_is_integer(a) && jt_id(b, &id) && (uint64_t)jv_integer(a) == id;
}

static void print_scope(struct tree *t, size_t ci, int depth);

/* Prints the child scopes of container ci opened by task (NULL: by no
 * task of ci, or by one we do not know). */
static void print_children(struct tree *t, size_t ci, const jv *task, int depth)
{
	const json_t *c = json_array_get(t->containers, ci);
	const char *name = jt_str(c, "container");
	for (size_t k = ci + 1; k < json_array_size(t->containers); k++) {
		const json_t *child = json_array_get(t->containers, k);
		if (!jt_str_is(child, "parent", name))
			continue;
		const json_t *pt = json_object_get(child, "parentTask");
		bool by_task = false;
		for (size_t i = 0; !by_task && i < jv_size(t->tasks); i++) {
			const jv *tk = jv_at(t->tasks, i);
			by_task = int_eq(jv_get(tk, "scope"), json_object_get(c, "scopeId")) &&
				  int_eq(jv_get(tk, "id"), pt);
		}
		if (task ? int_eq(jv_get(task, "id"), pt) : !by_task)
			print_scope(t, k, depth);
	}
}

static void print_scope(struct tree *t, size_t ci, int depth)
{
	const json_t *c = json_array_get(t->containers, ci);
	if (depth > MAX_DEPTH) {
		fprintf(t->cli->out, "%*s... (deeper scopes not shown)\n", depth * 2, "");
		return;
	}
	scope_line(t, c, depth);
	for (size_t i = 0; i < jv_size(t->tasks); i++) {
		const jv *task = jv_at(t->tasks, i);
		if (!int_eq(jv_get(task, "scope"), json_object_get(c, "scopeId")))
			continue;
		task_line(t, task, depth + 1);
		print_children(t, ci, task, depth + 2);
	}
	print_children(t, ci, NULL, depth + 1);
}

static json_t *scope_json(struct tree *t, size_t ci, int depth);

/* The child scopes of container ci opened by task (NULL: by no task of ci
 * or by one we do not know), as a new array. */
static json_t *children_json(struct tree *t, size_t ci, const jv *task, int depth)
{
	const json_t *c = json_array_get(t->containers, ci);
	const char *name = jt_str(c, "container");
	json_t *arr = json_array();
	for (size_t k = ci + 1; arr && k < json_array_size(t->containers); k++) {
		const json_t *child = json_array_get(t->containers, k);
		if (!jt_str_is(child, "parent", name))
			continue;
		const json_t *pt = json_object_get(child, "parentTask");
		bool by_task = false;
		for (size_t i = 0; !by_task && i < jv_size(t->tasks); i++) {
			const jv *tk = jv_at(t->tasks, i);
			by_task = int_eq(jv_get(tk, "scope"), json_object_get(c, "scopeId")) &&
				  int_eq(jv_get(tk, "id"), pt);
		}
		if (task ? int_eq(jv_get(task, "id"), pt) : !by_task)
			jj_append(arr, scope_json(t, k, depth));
	}
	return arr;
}

/* A member of the dump container c, or null. */
static json_t *member(const json_t *c, const char *key)
{
	json_t *v = json_object_get(c, key);
	return v ? json_incref(v) : json_null();
}

/* Scope ci with its tasks (each with the scopes its body opened) and the
 * scopes opened outside any task, as a new object. */
static json_t *scope_json(struct tree *t, size_t ci, int depth)
{
	const json_t *c = json_array_get(t->containers, ci);
	json_t *o = json_object();
	if (!o)
		return NULL;
	const json_t *owner = json_object_get(c, "owner");
	jj_set(o, "container", member(c, "container"));
	jj_set(o, "scopeId", member(c, "scopeId"));
	jj_set(o, "name", member(c, "name"));
	jj_set(o, "joiner", member(c, "joiner"));
	jj_set(o, "state", member(c, "state"));
	jj_set(o, "owner",
	       json_is_integer(owner) ? json_incref((json_t *)owner) : member(c, "ownerTid"));
	jj_set(o, "deadline", member(c, "deadline"));
	jj_set(o, "cancelReason", member(c, "cancelReason"));
	if (depth >= MAX_DEPTH) {
		/* As the text says "deeper scopes not shown". */
		jj_set(o, "truncated", json_true());
		return o;
	}
	json_t *tasks = json_array();
	for (size_t i = 0; tasks && i < jv_size(t->tasks); i++) {
		const jv *task = jv_at(t->tasks, i);
		if (!int_eq(jv_get(task, "scope"), json_object_get(c, "scopeId")))
			continue;
		json_t *tj = json_object();
		const jv *w = jv_get(task, "worker");
		jj_set(tj, "id", jj_id_or_null(task, "id"));
		jj_set(tj, "function", jj_str_or_null(task, "func"));
		jj_set(tj, "state", jj_str_or_null(task, "state"));
		jj_set(tj, "worker", jv_is_integer(w) ? json_integer(jv_integer(w)) : json_null());
		jj_set(tj, "forkSite", jj_site(jv_get(task, "site")));
		jj_set(tj, "scopes", children_json(t, ci, task, depth + 2));
		jj_append(tasks, tj);
	}
	jj_set(o, "tasks", tasks);
	jj_set(o, "scopes", children_json(t, ci, NULL, depth + 1));
	return o;
}

static int run_json(struct cli *cli, struct tree *t, pid_t pid)
{
	json_t *doc = json_object(), *roots = json_array();
	jj_set(doc, "processId", json_integer(pid));
	for (size_t k = 0; roots && k < json_array_size(t->containers); k++) {
		const json_t *c = json_array_get(t->containers, k);
		if (jt_str_is(c, "kind", "scope") && jt_str_is(c, "parent", "<root>"))
			jj_append(roots, scope_json(t, k, 0));
	}
	jj_set(doc, "scopes", roots);
	return cli_print_json(cli, doc, "the scope tree");
}

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	bool json = false;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-format=json") || !strcmp(argv[i], "-format=text")) {
			json = !strcmp(argv[i], "-format=json");
			continue;
		}
		cli_errorf(cli, "Scope.tree takes only -format=text or -format=json ('%s' given)",
			   argv[i]);
		return CLI_USAGE;
	}
	struct jv_doc *reply = cli_call_doc(cli, "tree", pid, NULL);
	if (!reply)
		return CLI_FAIL;
	char err[256];
	json_t *dump = jdkdump_build_doc(jv_root(reply), err, sizeof err);
	if (!dump) {
		cli_errorf(cli, "%s", err);
		jv_free(reply);
		return CLI_FAIL;
	}
	struct tree t = {
	    .cli = cli,
	    .containers = json_object_get(json_object_get(dump, "threadDump"), "threadContainers"),
	    .tasks = jj_array(jv_get(jv_root(reply), "model"), "tasks"),
	};
	if (json) {
		int rc = run_json(cli, &t, pid);
		json_decref(dump);
		jv_free(reply);
		return rc;
	}
	/* The containers' names reach the terminal escaped. */
	json_t *safe = jj_text_safe(dump);
	if (!safe) {
		cli_errorf(cli, "Scope.tree: out of memory");
		json_decref(dump);
		jv_free(reply);
		return CLI_FAIL;
	}
	json_decref(dump);
	dump = safe;
	t.containers = json_object_get(json_object_get(dump, "threadDump"), "threadContainers");
	size_t shown = 0;
	for (size_t k = 0; k < json_array_size(t.containers); k++) {
		const json_t *c = json_array_get(t.containers, k);
		if (jt_str_is(c, "kind", "scope") && jt_str_is(c, "parent", "<root>")) {
			print_scope(&t, k, 0);
			shown++;
		}
	}
	if (!shown)
		fprintf(cli->out, "(no open scopes)\n");
	json_decref(dump);
	jv_free(reply);
	return CLI_OK;
}

const struct dcmd dcmd_scope_tree = {
    .name = "Scope.tree",
    .usage = "[-format=text|json]",
    .summary = "Print the scope tree alone: one line per scope and per task.",
    .help = "Each scope shows its container name, joiner, state, owner thread and\n"
	    "deadline; under it its tasks with state, worker thread and fork site, and\n"
	    "under each task the scopes its body opened.  Ended tasks stay listed for\n"
	    "the daemon's retention time (scoped --retain).\n"
	    "Options:\n"
	    "  -format  text, or json: the same tree nested, scopes holding their\n"
	    "      tasks and each task the scopes its body opened\n"
	    "      (schemas/scope-tree.schema.json) (STRING, text)\n",
    .impact = "None: read from the daemon's model; the process is not touched",
    .options = opts,
    .run = run,
    .raw_stdout = cli_wants_json,
};
