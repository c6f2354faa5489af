/* cmd_pool_advise.c - `Pool.advise [POOL] [-format=text|json]`: each pool's
 * measured wait/compute ratio, queue wait and utilization, the size the
 * formula N = Ncpu x U x (1 + W/C) gives, and what to do, with why. */
#include <string.h>

#include "cli.h"
#include "jdkjson.h"

static const char *const opts[] = {"-format=", NULL};

static double num(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : -1;
}

static const char *s_or(const json_t *o, const char *k, const char *def)
{
	const char *s = jt_str(o, k);
	return s ? s : def;
}

/* What each verdict tells the reader to do, in capitals so it stands out. */
static const struct {
	const char *verdict, *say;
} verdicts[] = {
    {"grow", "GROW"},
    {"shrink", "SHRINK"},
    {"leave", "LEAVE AS IS"},
    {"saturated", "DON'T GROW"},
    {"starvation", "STARVATION RISK"},
    {"collecting", "NOT YET"},
    {"idle", "NOTHING TO SAY"},
};

static const char *verdict_say(const char *v)
{
	for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++)
		if (v && !strcmp(verdicts[i].verdict, v))
			return verdicts[i].say;
	return v ? v : "?";
}

static void pool_text(FILE *out, const json_t *a, const json_t *p)
{
	const json_t *iv = json_object_get(p, "wait_compute_ratio_intervals");
	fprintf(out, "Pool %s (id %.0f)%s: %.0f threads (core %.0f, max %.0f), %.0f queued now\n",
		s_or(p, "name", "?"), num(p, "id"),
		json_is_false(json_object_get(p, "live")) ? ", destroyed" : "", num(p, "size"),
		num(p, "core"), num(p, "max"), num(p, "queued"));
	fprintf(out,
		"  Measured over the last %.1f s: %.0f tasks ended (%.1f/s), %.0f forked (%.1f/s), "
		"%.0f rejected\n",
		num(p, "span_s"), num(p, "tasks_ended"), num(p, "throughput_per_s"),
		num(p, "tasks_forked"), num(p, "arrival_per_s"), num(p, "rejected"));
	if (num(p, "run_ms") > 0)
		fprintf(
		    out,
		    "  A task runs %.3g ms: %.3g ms computing on a CPU, %.3g ms ready but waiting "
		    "for a CPU, %.3g ms waiting (I/O, sleep, locks, joins)\n",
		    num(p, "run_ms"), num(p, "cpu_ms"), num(p, "runnable_ms"), num(p, "wait_ms"));
	fprintf(out,
		"  Queue wait (fork to start): median %.3g ms, 99th percentile %.3g ms; %.1f "
		"tasks queued on average, %.0f at most\n",
		num(p, "queue_wait_p50_ms"), num(p, "queue_wait_p99_ms"), num(p, "queued_mean"),
		num(p, "queued_max"));
	if (num(p, "wait_compute_ratio") >= 0)
		fprintf(out,
			"  W/C (time waiting per unit of time computing): %.3g (per 100 ms "
			"interval: p10 %.3g, median %.3g, p90 %.3g)\n",
			num(p, "wait_compute_ratio"), num(iv, "p10"), num(iv, "p50"),
			num(iv, "p90"));
	else
		fprintf(out, "  W/C: not measured (no CPU time of the workers yet)\n");
	fprintf(out, "  Workers busy %.0f%% of the time; ", 100 * num(p, "worker_utilization"));
	if (num(p, "cpu_utilization") >= 0)
		fprintf(out, "the process used %.0f%% of its %.3g CPUs (%s)\n",
			100 * num(p, "cpu_utilization"), num(a, "ncpu"),
			s_or(a, "ncpu_source", "?"));
	else
		fprintf(out, "its CPU time is unknown; %.3g CPUs (%s)\n", num(a, "ncpu"),
			s_or(a, "ncpu_source", "?"));
	if (num(p, "join_blocked_share") > 0)
		fprintf(out,
			"  Up to %.0f%% of the workers were blocked in joins while tasks queued\n",
			100 * num(p, "join_blocked_share"));
	if (num(p, "n_formula") >= 0)
		fprintf(out,
			"  Formula: N = Ncpu x U x (1 + W/C) = %.3g x %.3g x (1 + %.3g) = %.1f\n",
			num(a, "ncpu"), num(a, "target_utilization"), num(p, "wait_compute_ratio"),
			num(p, "n_formula"));
	const json_t *res = json_object_get(p, "resource");
	if (json_is_object(res))
		fprintf(out,
			"  Resource ceiling (declared by the program): each task holds one of %.0f "
			"'%s', so no more than %.0f threads are advised%s\n",
			num(res, "limit"), s_or(res, "name", "?"), num(res, "limit"),
			json_is_true(json_object_get(p, "capped")) ? " (the formula wants more)"
								   : "");
	fprintf(out, "  Advice: %s", verdict_say(jt_str(p, "verdict")));
	if (json_is_integer(json_object_get(p, "recommended")) &&
	    (jt_str_is(p, "verdict", "grow") || jt_str_is(p, "verdict", "shrink")))
		fprintf(out, " to %.0f threads (maximum size)", num(p, "recommended"));
	fprintf(out, " (confidence %s)\n    %s\n", s_or(p, "confidence", "?"),
		s_or(p, "reason", ""));
}

/* Whether pool p is the one asked for (by name or decimal id). */
static bool wanted(const json_t *p, const char *want)
{
	if (!want)
		return true;
	const char *name = jt_str(p, "name");
	char id[32];
	snprintf(id, sizeof id, "%.0f", num(p, "id"));
	return (name && !strcmp(name, want)) || !strcmp(id, want);
}

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	bool json = false;
	const char *want = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-format=json") || !strcmp(argv[i], "-format=text")) {
			json = !strcmp(argv[i], "-format=json");
			continue;
		}
		if (argv[i][0] != '-' && !want) {
			want = argv[i];
			continue;
		}
		cli_errorf(cli,
			   "Pool.advise takes a pool's name or id and -format=text or -format=json "
			   "('%s' given)",
			   argv[i]);
		return CLI_USAGE;
	}
	json_t *r = cli_call(cli, "advise", pid);
	if (!r)
		return CLI_FAIL;
	json_t *a = json_object_get(r, "advice");
	json_t *pools = json_object_get(a, "pools");
	/* Only the pool asked for: filtered here, so that any daemon of this
	 * version answers. */
	for (size_t i = json_array_size(pools); i-- > 0;)
		if (!wanted(json_array_get(pools, i), want))
			json_array_remove(pools, i);
	if (want && !json_array_size(pools)) {
		cli_errorf(cli,
			   "process %d has no pool named '%s' that the daemon measured "
			   "(Runtime.info lists its pools)",
			   (int)pid, want);
		json_decref(r);
		return CLI_FAIL;
	}
	if (json) {
		json_t *doc =
		    json_pack("{s:O,s:O}", "process", json_object_get(r, "process"), "advice", a);
		json_decref(r);
		return cli_print_json(cli, doc, "Pool.advise");
	}
	FILE *out = cli->out;
	if (json_is_false(json_object_get(a, "enabled"))) {
		fprintf(out, "The daemon does not measure this process's pools (it ran out of "
			     "memory when the "
			     "process registered).\n");
		json_decref(r);
		return CLI_OK;
	}
	fprintf(out,
		"How big each pool should be, from what its tasks did (N = Ncpu x U x (1 + W/C):\n"
		"the threads that keep Ncpu CPUs busy at utilization U when each task waits W\n"
		"for every C it computes).\n");
	if (!json_array_size(pools))
		fprintf(out, "No pools measured yet.\n");
	for (size_t i = 0; i < json_array_size(pools); i++)
		pool_text(out, a, json_array_get(pools, i));
	json_decref(r);
	return CLI_OK;
}

const struct dcmd dcmd_pool_advise = {
    .name = "Pool.advise",
    .usage = "[POOL] [-format=text|json]",
    .summary = "Print how big each pool should be, from its measured wait/compute ratio.",
    .help = "For each pool (or only POOL, a name or id): tasks forked and ended, how a task's\n"
	    "run splits into computing, waiting for a CPU and waiting on anything else (CPU\n"
	    "time from the workers' /proc schedstat), queue wait, the wait/compute ratio W/C,\n"
	    "utilization, N = Ncpu x U x (1 + W/C), and the advice with its reason: grow, shrink,\n"
	    "leave, don't grow (CPU saturated) or starvation (workers blocked in joins on tasks\n"
	    "queued in the same pool).  Figures cover the last 5 to 10 seconds.\n"
	    "Options:\n"
	    "  -format  text, or json: {process, advice} as the daemon reports them\n"
	    "      (schemas/control-reply.schema.json, advice) (STRING, text)\n",
    .impact = "None: measured by the daemon from events and /proc; the process is not touched",
    .options = opts,
    .run = run,
    .raw_stdout = cli_wants_json,
};
