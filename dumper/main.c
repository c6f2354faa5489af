/* main.c - scopecmd: jcmd-style thread dumps of programs built on libscope,
 * read from the scoped daemon.  Options table, targets, dispatch. */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "../common/termtext.h"
#include "cli.h"
#include "jdkjson.h"
#include "region.h"
#include "scope.h"

#define DEFAULT_TIMEOUT_MS 10000

struct opts {
	bool help, version, list, json;
};

struct opt {
	const char *name; /* --name */
	char shortname;	  /* -c, or 0 */
	const char *arg;  /* value's name, or NULL for a flag */
	const char *help;
	int (*set)(struct cli *cli, struct opts *o, const char *val);
};

static int set_socket(struct cli *cli, struct opts *o, const char *val)
{
	(void)o;
	if (!*val) {
		cli_errorf(cli, "--socket needs a path");
		return -1;
	}
	cli->socket = val;
	return 0;
}

static int set_timeout(struct cli *cli, struct opts *o, const char *val)
{
	(void)o;
	char *end;
	errno = 0;
	long ms = strtol(val, &end, 10);
	if (errno || *end || end == val || ms < 100 || ms > 600000) {
		cli_errorf(cli, "--timeout takes milliseconds from 100 to 600000, not '%s'", val);
		return -1;
	}
	cli->timeout_ms = (int)ms;
	return 0;
}

static int set_no_start(struct cli *cli, struct opts *o, const char *val)
{
	(void)o, (void)val;
	cli->no_start = true;
	return 0;
}

static int set_list(struct cli *cli, struct opts *o, const char *val)
{
	(void)cli, (void)val;
	o->list = true;
	return 0;
}

static int set_all(struct cli *cli, struct opts *o, const char *val)
{
	(void)o, (void)val;
	cli->list_all = true;
	return 0;
}

static int set_json(struct cli *cli, struct opts *o, const char *val)
{
	(void)cli, (void)val;
	o->json = true;
	return 0;
}

static int set_help(struct cli *cli, struct opts *o, const char *val)
{
	(void)cli, (void)val;
	o->help = true;
	return 0;
}

static int set_version(struct cli *cli, struct opts *o, const char *val)
{
	(void)cli, (void)val;
	o->version = true;
	return 0;
}

static const struct opt options[] = {
    {"list", 'l', NULL, "list instrumented processes as '<pid> <name>' (also: no arguments)",
     set_list},
    {"all", 'a', NULL,
     "with -l, also every other process you may inspect, marked '(no libscope)'; a name "
     "target then matches those too (Thread.print and Thread.dump_to_file work on any pid)",
     set_all},
    {"socket", 0, "PATH",
     "the daemon's agent socket (control.sock sits beside it); default $SCOPED_SOCKET, else "
     "$XDG_RUNTIME_DIR/scoped/agent.sock, else /tmp/scoped-$UID/agent.sock",
     set_socket},
    {"timeout", 0, "MS", "how long to wait for each daemon reply (100..600000, default 10000)",
     set_timeout},
    {"no-start", 0, NULL, "fail instead of starting a daemon when none answers", set_no_start},
    {"json", 0, NULL,
     "list as JSON, {\"processes\":[...]} (schemas/process-list.schema.json); commands "
     "take -format=json",
     set_json},
    {"help", 'h', NULL, "print this help and exit", set_help},
    {"version", 'V', NULL, "print the version and exit", set_version},
};
#define NOPTIONS (sizeof options / sizeof *options)

static const struct opt *find_option(const char *a, const char **val)
{
	*val = NULL;
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct opt *o = &options[i];
		if (a[1] != '-') {
			if (o->shortname && a[1] == o->shortname && !a[2])
				return o;
			continue;
		}
		size_t n = strlen(o->name);
		if (strncmp(a + 2, o->name, n) == 0 && (a[2 + n] == '\0' || a[2 + n] == '=')) {
			if (a[2 + n] == '=')
				*val = a + 3 + n;
			return o;
		}
	}
	return NULL;
}

/* Prints text from column col onwards, wrapped before column 80. */
static void wrap(FILE *out, const char *text, int col)
{
	int at = col;
	while (*text) {
		size_t w = strcspn(text, " ");
		if (at > col && at + 1 + (int)w > 79) {
			fprintf(out, "\n%*s", col, "");
			at = col;
		}
		fprintf(out, " %.*s", (int)w, text);
		at += (int)w + 1;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', out);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: scopecmd [OPTION]... [-l]\n"
		"       scopecmd [OPTION]... <pid | name | 0> <command> [ARGUMENT]...\n"
		"       scopecmd [OPTION]... <pid | name | 0> help [-all] [<command>]\n"
		"       scopecmd [OPTION]... <pid | name | 0>   (the command list, as jcmd)\n\n"
		"Thread dumps of programs built on libscope, jcmd-style, following the scope\n"
		"hierarchy.  A target is a pid, a substring of a process name, or 0 for every\n"
		"instrumented process.  When no daemon answers, scopecmd starts one.\n\n");
	for (size_t i = 0; i < NOPTIONS; i++) {
		char left[48];
		const struct opt *o = &options[i];
		if (o->shortname)
			snprintf(left, sizeof left, "-%c, --%s", o->shortname, o->name);
		else
			snprintf(left, sizeof left, "    --%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		fprintf(out, "  %-20s", left);
		wrap(out, o->help, 22);
	}
	fprintf(out, "\nCommands:\n");
	for (size_t i = 0; dcmd_table[i]; i++)
		fprintf(out, "  %-22s %s\n", dcmd_table[i]->name, dcmd_table[i]->summary);
	fprintf(out, "\nA command's flags take jcmd's <key>=<value> form too (-l=true).\n"
		     "Exit status: 0 success, 1 a target or command failed (also a wrong command\n"
		     "or option for a target, as jcmd), 2 bad usage before any target.\n"
		     "See scopecmd(1) and docs/scopecmd.md.\n");
}

/* Parses the options before the target; returns the index of the first
 * argument that is not one, or -1 after an error. */
static int parse_options(struct cli *cli, struct opts *o, int argc, char **argv)
{
	int i = 1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
		if (!strcmp(argv[i], "--"))
			return i + 1;
		const char *val;
		const struct opt *op = find_option(argv[i], &val);
		if (!op) {
			cli_errorf(cli, "unknown option '%s'; see scopecmd --help", argv[i]);
			return -1;
		}
		if (op->arg && !val) {
			if (i + 1 >= argc) {
				cli_errorf(cli, "--%s needs a value (%s)", op->name, op->arg);
				return -1;
			}
			val = argv[++i];
		} else if (!op->arg && val) {
			cli_errorf(cli, "--%s takes no value", op->name);
			return -1;
		}
		if (op->set(cli, o, val ? val : "") < 0)
			return -1;
	}
	return i;
}

static int list_processes(struct cli *cli, bool json)
{
	if (cli_connect(cli, 0) != CLI_OK)
		return CLI_FAIL;
	json_t *r = cli_call(cli, "list", 0);
	if (!r)
		return CLI_FAIL;
	const json_t *ps = json_object_get(r, "processes");
	if (json) {
		/* The daemon's process summaries as they are: the control
		 * protocol's schema describes each. */
		json_t *doc = json_pack("{s:O}", "processes", json_is_array(ps) ? ps : json_null());
		int rc =
		    doc && json_dumpf(doc, cli->out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0 &&
			    fputc('\n', cli->out) != EOF
			? CLI_OK
			: CLI_FAIL;
		json_decref(doc);
		json_decref(r);
		return rc;
	}
	for (size_t i = 0; i < json_array_size(ps); i++) {
		const json_t *p = json_array_get(ps, i);
		const json_t *pid = json_object_get(p, "pid");
		if (!json_is_integer(pid))
			continue;
		char name[1024];
		fprintf(cli->out, "%lld %s%s%s\n", (long long)json_integer_value(pid),
			jt_str(p, "name") ? tt_safe(jt_str(p, "name"), name, sizeof name) : "?",
			jt_str_is(p, "state", "exited") ? " (exited)" : "",
			json_is_false(json_object_get(p, "instrumented")) ? " (no libscope)" : "");
	}
	json_decref(r);
	return CLI_OK;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* Turns the target into pids: a pid as given, 0 for every live process, a
 * name substring for the live processes whose name or executable has it. */
static int resolve(struct cli *cli, const char *target, pid_t **pids, size_t *n)
{
	*n = 0;
	*pids = NULL;
	if (all_digits(target) && strcmp(target, "0") != 0) {
		long v = strtol(target, NULL, 10);
		if (strlen(target) > 10 || v <= 0 || v > 4194304) {
			cli_errorf(cli, "process %s does not exist (pids go up to 4194304)",
				   target);
			return CLI_FAIL;
		}
		*pids = malloc(sizeof **pids);
		if (!*pids)
			return CLI_FAIL;
		(*pids)[(*n)++] = (pid_t)v;
		return CLI_OK;
	}
	json_t *r = cli_call(cli, "list", 0);
	if (!r)
		return CLI_FAIL;
	const json_t *ps = json_object_get(r, "processes");
	*pids = calloc(json_array_size(ps) + 1, sizeof **pids);
	bool all = strcmp(target, "0") == 0;
	const json_t *gone = NULL; /* the newest exited process that matches */
	for (size_t i = 0; *pids && i < json_array_size(ps); i++) {
		const json_t *p = json_array_get(ps, i);
		const json_t *pid = json_object_get(p, "pid");
		const char *name = jt_str(p, "name"), *exe = jt_str(p, "exe");
		if (!json_is_integer(pid))
			continue;
		if (!all && !(name && strstr(name, target)) && !(exe && strstr(exe, target)))
			continue;
		if (jt_str_is(p, "state", "exited"))
			gone = p;
		else
			(*pids)[(*n)++] = (pid_t)json_integer_value(pid);
	}
	if (!*n && gone && !all) {
		long long gp = (long long)json_integer_value(json_object_get(gone, "pid"));
		cli_errorf(
		    cli,
		    "'%s' matches no live process, only process %lld (%s), which exited; "
		    "the daemon keeps its last state: 'scopecmd %lld Thread.print' prints its "
		    "post-mortem dump",
		    target, gp, jt_str(gone, "name") ? jt_str(gone, "name") : "?", gp);
	} else if (!*n && all) {
		cli_errorf(cli, "no instrumented process is registered with the daemon on %s",
			   cli->agent_path);
	} else if (!*n) {
		cli_errorf(cli, "no instrumented process matches '%s'; 'scopecmd -l' lists them",
			   target);
	}
	json_decref(r);
	return *n ? CLI_OK : CLI_FAIL;
}

/* Whether target is no target but a command name: the pid was forgotten. */
static bool is_command_name(const char *target)
{
	if (dcmd_find(target))
		return true;
	const char *dot = strchr(target, '.');
	/* "Thread.prnt": a command-shaped word, one edit or two from a command. */
	return dot && dot != target && dot[1] &&
	       cli_edit_distance(target, dcmd_closest(target)->name) <= 2;
}

/* Reports, once, that standard output could not be written (a full disk, a
 * closed pipe): the dump is lost, so the exit status must say so. */
static int check_stdout(struct cli *cli, bool *reported)
{
	/* A buffer flushed while the output was being printed failed with an
	 * errno that a later fflush() no longer gives: keep what a write error
	 * left in errno then. */
	int e =
	    errno == ENOSPC || errno == EPIPE || errno == EIO || errno == EDQUOT || errno == EFBIG
		? errno
		: 0;
	if (fflush(stdout) == EOF && errno)
		e = errno;
	if (!e && !ferror(stdout))
		return CLI_OK;
	if (!*reported)
		cli_errorf(cli, "writing to standard output failed: %s; the output is incomplete",
			   e ? strerror(e) : "I/O error");
	*reported = true;
	return CLI_FAIL;
}

/* Whether the process exists at all (then a jcmd-style "<pid>:" answer for
 * it makes sense even when the command is wrong). */
static bool pid_exists(pid_t pid)
{
	char path[32];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	return access(path, F_OK) == 0;
}

/* Runs cmd (NULL: name was no command) for one target after its "<pid>:"
 * line, as jcmd does: a wrong command or option is that target's failure. */
static int run_one(struct cli *cli, const struct dcmd *cmd, const char *name, const char *target,
		   pid_t pid, int argc, char **argv)
{
	bool raw = cmd && cmd->raw_stdout && cmd->raw_stdout(argc, argv);
	fprintf(raw ? stderr : stdout, "%d:\n", (int)pid);
	fflush(stdout);
	if (!cmd) {
		cli_errorf(cli,
			   "unknown command '%s'; did you mean '%s'? ('scopecmd %s help' lists "
			   "the commands)",
			   name, dcmd_closest(name)->name, target);
		return CLI_FAIL;
	}
	if (cli_check_options(cli, cmd, argc, argv) != CLI_OK)
		return CLI_FAIL;
	argc = cli_flags_normalize(cmd, argc, argv);
	/* Once a target is reached, every error is that target's failure, as
	 * jcmd exits 1 for whatever the target refused. */
	return cmd->run(cli, pid, argc, argv) == CLI_OK ? CLI_OK : CLI_FAIL;
}

/* A dump of a large process reads a reply of megabytes and writes more:
 * the heap grows in 16 MiB steps rather than block by block (large blocks
 * stay in it instead of in mappings of their own), and that heap is offered
 * to transparent huge pages, so first touches fault once per 2 MiB rather
 * than once per 4 KiB (where faults are dear, as under a hypervisor's shadow
 * page tables, that was half of a 1,000-thread dump's CPU).  Only the pages
 * used are ever touched. */
static void heap_in_large_steps(void)
{
	const uintptr_t huge = 2u << 20;
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TOP_PAD, 16 << 20);
	/* Larger than the top the loader left: the heap grows, padded. */
	void *p = malloc(256 << 10);
	char *end = sbrk(0);
	uintptr_t start = ((uintptr_t)p + huge - 1) & ~(huge - 1);
	if (p && end != (void *)-1 && (uintptr_t)end > start)
		madvise((void *)start, (uintptr_t)end - start, MADV_HUGEPAGE);
	free(p);
}

/* jansson's hash seed from getrandom(2), one system call, before any
 * object is made: left to itself jansson opens, reads and closes
 * /dev/urandom for it. */
static void seed_json(void)
{
	size_t seed = 0;
	if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed && seed)
		json_object_seed(seed);
}

int main(int argc, char **argv)
{
	heap_in_large_steps();
	region_install();
	seed_json();
	struct cli cli = {.timeout_ms = DEFAULT_TIMEOUT_MS, .out = stdout, .err = stderr};
	struct opts o = {0};
	bool out_failed = false;
	int first = parse_options(&cli, &o, argc, argv);
	if (first < 0)
		return CLI_USAGE;
	if (o.help) {
		usage(stdout);
		return check_stdout(&cli, &out_failed);
	}
	if (o.version) {
		printf("scopecmd %s\n", SCOPE_VERSION_STRING);
		return check_stdout(&cli, &out_failed);
	}
	int rest = argc - first;
	char **args = argv + first;
	if (o.list || rest == 0) {
		if (rest) {
			cli_errorf(&cli, "-l takes no target ('%s' given)", args[0]);
			return CLI_USAGE;
		}
		int rc = list_processes(&cli, o.json);
		ctl_close(cli.ctl);
		return check_stdout(&cli, &out_failed) == CLI_OK ? rc : CLI_FAIL;
	}
	/* `scopecmd help [-all] [cmd]` needs no target. */
	const struct dcmd *help = dcmd_find("help");
	if (!strcmp(args[0], "help")) {
		if (cli_check_options(&cli, help, rest - 1, args + 1) != CLI_OK)
			return CLI_USAGE;
		int n = cli_flags_normalize(help, rest - 1, args + 1);
		int rc = help->run(&cli, 0, n, args + 1);
		return check_stdout(&cli, &out_failed) == CLI_OK ? rc : CLI_FAIL;
	}
	if (!all_digits(args[0]) && is_command_name(args[0])) {
		cli_errorf(&cli,
			   "'%s' is a command, not a target: give the process first, as in "
			   "'scopecmd <pid | name> %s'; 'scopecmd -l' lists the processes",
			   args[0], dcmd_find(args[0]) ? args[0] : dcmd_closest(args[0])->name);
		return CLI_USAGE;
	}
	/* No command: the command list, as jcmd prints for `jcmd <pid>`. */
	const char *name = rest >= 2 ? args[1] : "help";
	const struct dcmd *cmd = dcmd_find(name);
	int cargc = rest >= 2 ? rest - 2 : 0;
	char **cargv = args + (rest >= 2 ? 2 : 1);
	/* A wrong command or option is reported per target after its "<pid>:"
	 * line; it needs no daemon when the target is a pid. */
	bool local = !cmd || cmd->local || !cli_options_valid(cmd, cargc, cargv);

	pid_t *pids = NULL;
	size_t n = 0;
	int rc = CLI_OK;
	if (local && all_digits(args[0]) && strcmp(args[0], "0") != 0) {
		rc = resolve(&cli, args[0], &pids, &n);
		if (rc == CLI_OK && !pid_exists(pids[0])) {
			cli_errorf(&cli, "process %s does not exist", args[0]);
			rc = CLI_FAIL;
			n = 0;
		}
	} else {
		pid_t want = all_digits(args[0]) ? (pid_t)strtol(args[0], NULL, 10) : 0;
		rc = cli_connect(&cli, want);
		if (rc == CLI_OK)
			rc = resolve(&cli, args[0], &pids, &n);
	}
	for (size_t i = 0; i < n; i++) {
		int r = run_one(&cli, cmd, name, args[0], pids[i], cargc, cargv);
		if (r != CLI_OK)
			rc = r;
		if (check_stdout(&cli, &out_failed) != CLI_OK)
			rc = CLI_FAIL;
	}
	free(pids);
	ctl_close(cli.ctl);
	if (check_stdout(&cli, &out_failed) != CLI_OK)
		rc = CLI_FAIL;
	return rc;
}
