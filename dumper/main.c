/* main.c - scopecmd: jcmd-style thread dumps of programs built on libscope,
 * read from the scoped daemon.  Options table, targets, dispatch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "jdkjson.h"
#include "scope.h"

#define DEFAULT_TIMEOUT_MS 10000

struct opts {
	bool help, version, list;
};

struct opt {
	const char *name; /* --name */
	char shortname;   /* -c, or 0 */
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
	{"socket", 0, "PATH",
	 "the daemon's agent socket (control.sock sits beside it); default $SCOPED_SOCKET, else "
	 "$XDG_RUNTIME_DIR/scoped/agent.sock, else /tmp/scoped-$UID/agent.sock",
	 set_socket},
	{"timeout", 0, "MS", "how long to wait for each daemon reply (100..600000, default 10000)",
	 set_timeout},
	{"no-start", 0, NULL, "fail instead of starting a daemon when none answers", set_no_start},
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
		"       scopecmd [OPTION]... <pid | name | 0> help [<command>]\n\n"
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
	fprintf(out, "\nExit status: 0 success, 1 a target or command failed, 2 bad usage.\n"
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

static int list_processes(struct cli *cli)
{
	if (cli_connect(cli, 0) != CLI_OK)
		return CLI_FAIL;
	json_t *r = cli_call(cli, "list", 0);
	if (!r)
		return CLI_FAIL;
	const json_t *ps = json_object_get(r, "processes");
	for (size_t i = 0; i < json_array_size(ps); i++) {
		const json_t *p = json_array_get(ps, i);
		const json_t *pid = json_object_get(p, "pid");
		if (!json_is_integer(pid))
			continue;
		fprintf(cli->out, "%lld %s%s\n", (long long)json_integer_value(pid),
			jt_str(p, "name") ? jt_str(p, "name") : "?",
			jt_str_is(p, "state", "exited") ? " (exited)" : "");
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
			cli_errorf(cli, "process %s does not exist (pids go up to 4194304)", target);
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
	for (size_t i = 0; *pids && i < json_array_size(ps); i++) {
		const json_t *p = json_array_get(ps, i);
		const json_t *pid = json_object_get(p, "pid");
		const char *name = jt_str(p, "name"), *exe = jt_str(p, "exe");
		if (!json_is_integer(pid) || jt_str_is(p, "state", "exited"))
			continue;
		if (all || (name && strstr(name, target)) || (exe && strstr(exe, target)))
			(*pids)[(*n)++] = (pid_t)json_integer_value(pid);
	}
	json_decref(r);
	if (!*n) {
		if (all)
			cli_errorf(cli, "no instrumented process is registered with the daemon on %s",
				   cli->agent_path);
		else
			cli_errorf(cli, "no instrumented process matches '%s'; 'scopecmd -l' lists them",
				   target);
		return CLI_FAIL;
	}
	return CLI_OK;
}

int main(int argc, char **argv)
{
	struct cli cli = {.timeout_ms = DEFAULT_TIMEOUT_MS, .out = stdout, .err = stderr};
	struct opts o = {0};
	int first = parse_options(&cli, &o, argc, argv);
	if (first < 0)
		return CLI_USAGE;
	if (o.help) {
		usage(stdout);
		return CLI_OK;
	}
	if (o.version) {
		printf("scopecmd %s\n", SCOPE_VERSION_STRING);
		return CLI_OK;
	}
	int rest = argc - first;
	char **args = argv + first;
	if (o.list || rest == 0) {
		if (rest) {
			cli_errorf(&cli, "-l takes no target ('%s' given)", args[0]);
			return CLI_USAGE;
		}
		int rc = list_processes(&cli);
		ctl_close(cli.ctl);
		return rc;
	}
	/* `scopecmd help [cmd]` needs no target. */
	const struct dcmd *help = dcmd_find("help");
	if (!strcmp(args[0], "help"))
		return help->run(&cli, 0, rest - 1, args + 1);
	if (rest < 2) {
		cli_errorf(&cli, "no command given for '%s'; try 'scopecmd %s help'", args[0], args[0]);
		return CLI_USAGE;
	}
	const struct dcmd *cmd = dcmd_find(args[1]);
	if (!cmd) {
		cli_errorf(&cli, "unknown command '%s'; did you mean '%s'? ('scopecmd %s help' lists "
				 "the commands)", args[1], dcmd_closest(args[1])->name, args[0]);
		return CLI_USAGE;
	}
	if (cli_check_options(&cli, cmd, rest - 2, args + 2) != CLI_OK)
		return CLI_USAGE;

	pid_t *pids = NULL;
	size_t n = 0;
	int rc = CLI_OK;
	if (cmd->local && all_digits(args[0]) && strcmp(args[0], "0") != 0) {
		rc = resolve(&cli, args[0], &pids, &n);
	} else {
		pid_t want = all_digits(args[0]) ? (pid_t)strtol(args[0], NULL, 10) : 0;
		rc = cli_connect(&cli, want);
		if (rc == CLI_OK)
			rc = resolve(&cli, args[0], &pids, &n);
	}
	for (size_t i = 0; rc != CLI_USAGE && i < n; i++) {
		bool raw = cmd->raw_stdout && cmd->raw_stdout(rest - 2, args + 2);
		fprintf(raw ? stderr : stdout, "%d:\n", (int)pids[i]);
		fflush(stdout);
		int r = cmd->run(&cli, pids[i], rest - 2, args + 2);
		fflush(stdout);
		if (r != CLI_OK)
			rc = r;
	}
	free(pids);
	ctl_close(cli.ctl);
	return rc;
}
