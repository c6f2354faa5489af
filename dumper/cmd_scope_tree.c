/* cmd_scope_tree.c - `Scope.tree`: the scope tree alone, one line per scope
 * and per task, each scope under the task whose body opened it. */
#include <string.h>

#include "cli.h"
#include "jdkdump.h"
#include "jdkjson.h"

#define MAX_DEPTH 256 /* deeper scopes are summarised, not printed */

static const char *const opts[] = {NULL};

struct tree {
	struct cli *cli;
	const json_t *containers; /* from jdkdump_build: pre-order, open scopes only */
	const jv *tasks;          /* the model's */
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
	const char *state = jj_str(task, "state");
	const char *fn = jj_str(task, "func");
	fprintf(t->cli->out, "%*stask %lld ", depth * 2, "",
		jv_is_integer(id) ? (long long)jv_integer(id) : -1LL);
	if (fn)
		fprintf(t->cli->out, "%s() ", fn);
	fputs(state ? state : "?", t->cli->out);
	if (jv_is_integer(w))
		fprintf(t->cli->out, " on #%lld", (long long)jv_integer(w));
	if (json_is_string(site))
		fprintf(t->cli->out, "  forked at %s", json_string_value(site));
	fputc('\n', t->cli->out);
	json_decref(site);
}

/* Whether a (from the model) and b (from the dump) are the same integer. */
static bool int_eq(const jv *a, const json_t *b)
{
	return jv_is_integer(a) && json_is_integer(b) && jv_integer(a) == json_integer_value(b);
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

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	(void)argv;
	if (argc > 0) {
		cli_errorf(cli, "Scope.tree takes no arguments ('%s' given)", argv[0]);
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
	.usage = "",
	.summary = "Print the scope tree alone: one line per scope and per task.",
	.help = "Each scope shows its container name, joiner, state, owner thread and\n"
		"deadline; under it its tasks with state, worker thread and fork site, and\n"
		"under each task the scopes its body opened.  Ended tasks stay listed for\n"
		"the daemon's retention time (scoped --retain).\n",
	.impact = "None: read from the daemon's model; the process is not touched",
	.options = opts,
	.run = run,
};
