/* cmd_runtime_info.c - `Runtime.info [-format=text|json]`: the runtime
 * version, uptime, pools with their statistics, and events received and
 * lost; as JSON, the daemon's own records (schemas/runtime-info.schema.json). */
#include <string.h>

#include "cli.h"
#include "jdkjson.h"

static const char *const opts[] = {"-format=", NULL};

static long long num(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_number(v) ? (long long)json_number_value(v) : -1;
}

static const char *s_or(const json_t *o, const char *k, const char *def)
{
	const char *s = jt_str(o, k);
	return s ? s : def;
}

static void pool_line(FILE *out, const json_t *p)
{
	char id[24];
	fprintf(out,
		"  %s@%s: %lld threads (core %lld, max %lld, largest %lld), %lld active, "
		"%lld queued",
		s_or(p, "name", "?"), jt_id_text(json_object_get(p, "id"), id, sizeof id, "?"),
		num(p, "size"), num(p, "core"), num(p, "max"), num(p, "largest"), num(p, "active"),
		num(p, "queued"));
	if (jt_str_is(p, "queue", "bounded"))
		fprintf(out, " of %lld", num(p, "queue_capacity"));
	fprintf(out, "; %lld completed, %lld rejected; %s queue, %s policy, keep-alive %lld ms\n",
		num(p, "completed"), num(p, "rejected"), s_or(p, "queue", "?"),
		s_or(p, "policy", "?"), num(p, "keep_alive_ms"));
}

/* The advisor's line for pool p (Pool.advise says more), when it has one. */
static void advice_line(FILE *out, const json_t *advice, const json_t *p)
{
	const json_t *pools = json_object_get(json_object_get(advice, "advice"), "pools");
	for (size_t i = 0; i < json_array_size(pools); i++) {
		const json_t *a = json_array_get(pools, i);
		if (num(a, "id") != num(p, "id"))
			continue;
		fprintf(out, "    measured: W/C ");
		if (json_is_number(json_object_get(a, "wait_compute_ratio")))
			fprintf(out, "%.3g",
				json_number_value(json_object_get(a, "wait_compute_ratio")));
		else
			fprintf(out, "?");
		fprintf(out, ", queue wait p50 %.3g ms, workers busy %.0f%%; advice: %s",
			json_number_value(json_object_get(a, "queue_wait_p50_ms")),
			100 * json_number_value(json_object_get(a, "worker_utilization")),
			s_or(a, "verdict", "?"));
		if (json_is_integer(json_object_get(a, "recommended")) &&
		    (jt_str_is(a, "verdict", "grow") || jt_str_is(a, "verdict", "shrink")))
			fprintf(out, " to %lld threads", num(a, "recommended"));
		fprintf(out, " (Pool.advise tells why)\n");
	}
}

/* {"process":…, "pools":[…], "daemon":…}: the members of the daemon's tree
 * and status replies, as the control protocol's schema describes them. */
static int print_json(struct cli *cli, json_t *tree, json_t *status, json_t *advice)
{
	json_t *doc = json_object();
	json_t *daemon = json_deep_copy(status);
	json_object_del(daemon, "ok");
	json_object_del(daemon, "id");
	jj_set(doc, "process", json_incref(json_object_get(tree, "process")));
	jj_set(doc, "pools", json_incref(json_object_get(json_object_get(tree, "model"), "pools")));
	jj_set(doc, "daemon", daemon);
	if (advice)
		jj_set(doc, "advice", json_incref(json_object_get(advice, "advice")));
	return cli_print_json(cli, doc, "Runtime.info");
}

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	bool json = false;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-format=json") || !strcmp(argv[i], "-format=text")) {
			json = !strcmp(argv[i], "-format=json");
			continue;
		}
		cli_errorf(cli, "Runtime.info takes only -format=text or -format=json ('%s' given)",
			   argv[i]);
		return CLI_USAGE;
	}
	json_t *tree = cli_call(cli, "tree", pid);
	if (!tree)
		return CLI_FAIL;
	json_t *status = cli_call(cli, "status", 0);
	/* The pool advice, when the daemon has the command (an older one says
	 * unknown_command: Runtime.info goes on without it). */
	json_t *req = json_pack("{s:s,s:i}", "cmd", "advise", "pid", (json_int_t)pid),
	       *advice = NULL;
	char err[256];
	if (req && ctl_request(cli->ctl, req, &advice, cli->timeout_ms, err, sizeof err) == 0 &&
	    !json_is_true(json_object_get(advice, "ok"))) {
		json_decref(advice);
		advice = NULL;
	}
	json_decref(req);
	if (json) {
		int rc = status ? print_json(cli, tree, status, advice) : CLI_FAIL;
		json_decref(tree);
		json_decref(status);
		json_decref(advice);
		return rc;
	}
	/* Names from the target reach the terminal escaped. */
	json_t *safe_tree = jj_text_safe(tree), *safe_status = status ? jj_text_safe(status) : NULL;
	json_decref(tree);
	json_decref(status);
	if (!safe_tree || (status && !safe_status)) {
		json_decref(safe_tree);
		json_decref(safe_status);
		cli_errorf(cli, "Runtime.info: out of memory");
		return CLI_FAIL;
	}
	tree = safe_tree;
	status = safe_status;
	const json_t *p = json_object_get(tree, "process");
	const json_t *pools = jt_array(json_object_get(tree, "model"), "pools");
	FILE *out = cli->out;

	fprintf(out, "Runtime: libscope %s\n", s_or(p, "runtime_version", "unknown"));
	fprintf(out, "Process: %s (%s), %s", s_or(p, "name", "?"), s_or(p, "exe", "?"),
		s_or(p, "state", "?"));
	if (jt_str_is(p, "state", "exited")) {
		if (json_is_integer(json_object_get(p, "exit_signal")))
			fprintf(out, " (signal %lld)", num(p, "exit_signal"));
		else if (json_is_integer(json_object_get(p, "exit_code")))
			fprintf(out, " (code %lld)", num(p, "exit_code"));
	}
	fprintf(out, ", uid %lld, up %.3f s\n", num(p, "uid"),
		json_is_number(json_object_get(p, "uptime_ms"))
		    ? json_number_value(json_object_get(p, "uptime_ms")) / 1000.0
		    : 0.0);
	fprintf(out, "Model: %lld scopes, %lld tasks, %lld threads; %s%s\n", num(p, "scopes"),
		num(p, "tasks"), num(p, "threads"),
		json_is_false(json_object_get(p, "complete")) ? "incomplete" : "complete",
		json_is_true(json_object_get(p, "repaired")) ? ", repaired after a loss" : "");
	fprintf(out, "Events: %lld received, %lld lost\n", num(p, "events"), num(p, "lost"));
	fprintf(out, "Pools: %zu\n", json_array_size(pools));
	for (size_t i = 0; i < json_array_size(pools); i++) {
		pool_line(out, json_array_get(pools, i));
		advice_line(out, advice, json_array_get(pools, i));
	}
	if (status)
		fprintf(out,
			"Daemon: scoped %s (pid %lld), up %.1f s, stacks from %s, %lld processes, "
			"%lld events, %lld lost\n",
			s_or(status, "version", "?"), num(status, "pid"),
			num(status, "uptime_ms") / 1000.0, s_or(status, "stacks_source", "?"),
			num(status, "processes"), num(status, "events"), num(status, "lost"));
	json_decref(tree);
	json_decref(status);
	json_decref(advice);
	return status ? CLI_OK : CLI_FAIL;
}

const struct dcmd dcmd_runtime_info = {
    .name = "Runtime.info",
    .usage = "[-format=text|json]",
    .summary = "Print the runtime version, uptime, pools and event counts.",
    .help = "Pools show size, core and maximum sizes, largest size, active threads,\n"
	    "queued, completed and rejected tasks, queue kind and rejection policy.  Events\n"
	    "are those the agent sent and those it had to drop (lost); a model repaired\n"
	    "after a loss says so.\n"
	    "Options:\n"
	    "  -format  text, or json: {process, pools, daemon} as the daemon reports\n"
	    "      them (schemas/runtime-info.schema.json) (STRING, text)\n",
    .impact = "None: read from the daemon's model; the process is not touched",
    .options = opts,
    .run = run,
    .raw_stdout = cli_wants_json,
};
