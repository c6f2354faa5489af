/* cli.c - scopecmd's session with the daemon: connecting (and starting a
 * daemon when none answers), requests with specific errors, dump fetching,
 * and the command-line checks the commands share. */
#include "cli.h"
#include "jdkjson.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/jv.h"
#include "../common/termtext.h"
#include "jdkdump.h"
#include "sockpath.h"

#define START_WAIT_MS 2000    /* for a started daemon to answer */
#define REGISTER_WAIT_MS 2000 /* for programs to register with it */
#define START_IDLE_EXIT "600" /* seconds a started daemon lives on unused */

void cli_errorf(struct cli *cli, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* One line, whatever a name in it holds (termtext.h). */
	fputs("scopecmd: ", cli->err);
	tt_fputs(msg, cli->err);
	fputc('\n', cli->err);
}

const struct dcmd *dcmd_find(const char *name)
{
	for (size_t i = 0; dcmd_table[i]; i++)
		if (strcmp(dcmd_table[i]->name, name) == 0)
			return dcmd_table[i];
	return NULL;
}

unsigned cli_edit_distance(const char *a, const char *b)
{
	enum { MAXL = 64 };
	unsigned row[MAXL + 1];
	size_t la = strnlen(a, MAXL), lb = strnlen(b, MAXL);

	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j];
			unsigned cost =
			    tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			unsigned best = diag + cost;
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb] > 255 ? 255 : row[lb];
}

const struct dcmd *dcmd_closest(const char *name)
{
	const struct dcmd *best = NULL;
	unsigned bd = UINT_MAX;
	/* A start of a name ("Thread.dump") means that command, however far
	 * the rest of it is by edit distance. */
	for (size_t i = 0; *name && dcmd_table[i]; i++)
		if (strncasecmp(dcmd_table[i]->name, name, strlen(name)) == 0)
			return dcmd_table[i];
	for (size_t i = 0; dcmd_table[i]; i++) {
		unsigned d = cli_edit_distance(name, dcmd_table[i]->name);
		if (d < bd) {
			bd = d;
			best = dcmd_table[i];
		}
	}
	return best;
}

/* Whether o, an option name of a command's table, is a flag (no '='). */
static bool is_flag(const char *o)
{
	size_t n = strlen(o);
	return n && o[n - 1] != '=';
}

/* The value of a flag given as jcmd's <key>=<value>: 1 true, 0 false, -1
 * not a boolean (jcmd takes true and false, in any case). */
static int flag_value(const char *v)
{
	if (!strcasecmp(v, "true"))
		return 1;
	if (!strcasecmp(v, "false"))
		return 0;
	return -1;
}

/* The option of cmd that arg names (as "-l", "-l=true" or "-format=x"), or
 * NULL; *value points at what follows '=' for a flag given a value. */
static const char *option_of(const struct dcmd *cmd, const char *arg, const char **value)
{
	*value = NULL;
	for (size_t i = 0; cmd->options && cmd->options[i]; i++) {
		const char *o = cmd->options[i];
		size_t n = strlen(o);
		if (!is_flag(o)) {
			if (strncmp(arg, o, n) == 0)
				return o;
		} else if (strncmp(arg, o, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
			*value = arg[n] ? arg + n + 1 : NULL;
			return o;
		}
	}
	return NULL;
}

bool cli_options_valid(const struct dcmd *cmd, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *v;
		if (argv[i][0] != '-' || !argv[i][1])
			continue;
		if (!option_of(cmd, argv[i], &v) || (v && flag_value(v) < 0))
			return false;
	}
	return true;
}

int cli_check_options(struct cli *cli, const struct dcmd *cmd, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		const char *v, *o;
		if (argv[i][0] != '-' || !argv[i][1])
			continue;
		o = option_of(cmd, argv[i], &v);
		if (!o) {
			cli_errorf(cli, "%s: unknown option '%s'; usage: %s %s (see 'help %s')",
				   cmd->name, argv[i], cmd->name, cmd->usage, cmd->name);
			return CLI_USAGE;
		}
		if (v && flag_value(v) < 0) {
			cli_errorf(cli, "%s: option '%s' is true or false, not '%s'; usage: %s %s",
				   cmd->name, o, v, cmd->name, cmd->usage);
			return CLI_USAGE;
		}
	}
	return CLI_OK;
}

int cli_flags_normalize(const struct dcmd *cmd, int argc, char **argv)
{
	int n = 0;
	for (int i = 0; i < argc; i++) {
		const char *v, *o = NULL;
		if (argv[i][0] == '-' && argv[i][1])
			o = option_of(cmd, argv[i], &v);
		if (o && is_flag(o) && v) {
			if (flag_value(v) == 1)
				argv[n++] = (char *)o;
			continue;
		}
		argv[n++] = argv[i];
	}
	return n;
}

bool cli_wants_json(int argc, char **argv)
{
	bool json = false;
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "-format=", 8))
			json = !strcmp(argv[i] + 8, "json");
	return json;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The scoped binary beside our own executable (both live in build/bin or
 * in the same install prefix). */
static int daemon_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return -errno;
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if (snprintf(buf, len, "%s/scoped", self) >= (int)len)
		return -ENAMETOOLONG;
	return access(buf, X_OK) == 0 ? 0 : -errno;
}

/* Starts scoped on the resolved socket, detached from our terminal; it
 * daemonizes itself, and exits once nothing has used it for
 * START_IDLE_EXIT seconds.  Returns its launcher's pid or -errno. */
static pid_t start_daemon(struct cli *cli, const char *exe)
{
	pid_t pid = fork();
	if (pid > 0)
		fprintf(cli->err,
			"scopecmd: the started daemon exits after %s s with no program "
			"and no client connected\n",
			START_IDLE_EXIT);
	if (pid != 0)
		return pid < 0 ? -errno : pid;
	setsid();
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execl(exe, "scoped", "--socket", cli->agent_path, "--idle-exit", START_IDLE_EXIT,
	      (char *)NULL);
	_exit(127);
}

static bool links_libscope(pid_t pid);

static bool registered(struct cli *cli, pid_t want)
{
	char err[256];
	json_t *req = json_pack("{s:s}", "cmd", "list"), *reply = NULL;
	bool found = false;
	if (req && ctl_request(cli->ctl, req, &reply, 1000, err, sizeof err) == 0) {
		const json_t *ps = json_object_get(reply, "processes");
		for (size_t i = 0; i < json_array_size(ps); i++) {
			const json_t *p = json_object_get(json_array_get(ps, i), "pid");
			if (!want || (json_is_integer(p) && json_integer_value(p) == want))
				found = true;
		}
	}
	json_decref(req);
	json_decref(reply);
	return found;
}

int cli_connect(struct cli *cli, pid_t want_pid)
{
	char err[512], exe[PATH_MAX];
	if (scoped_socket_paths(cli->socket, NULL, 0, cli->agent_path, sizeof cli->agent_path, NULL,
				0) < 0) {
		cli_errorf(cli, "socket path too long; use a shorter --socket or SCOPED_SOCKET");
		return CLI_FAIL;
	}
	int rc = ctl_connect(&cli->ctl, cli->socket, err, sizeof err);
	if (rc == 0)
		return CLI_OK;
	if (rc == -EPERM) { /* another user's socket or daemon: starting ours cannot help */
		cli_errorf(cli, "%s", err);
		return CLI_FAIL;
	}
	if ((rc != -ENOENT && rc != -ECONNREFUSED) || cli->no_start) {
		cli_errorf(cli, "%s; start one with 'scoped --socket %s'", err, cli->agent_path);
		return CLI_FAIL;
	}
	if (daemon_path(exe, sizeof exe) < 0) {
		cli_errorf(cli,
			   "%s, and there is no scoped beside scopecmd to start; start one with "
			   "'scoped --socket %s'",
			   err, cli->agent_path);
		return CLI_FAIL;
	}
	fprintf(cli->err, "scopecmd: no daemon answered on %s; starting %s in the background\n",
		cli->agent_path, exe);
	pid_t launcher = start_daemon(cli, exe);
	if (launcher < 0) {
		cli_errorf(cli, "cannot start %s: %s", exe, strerror(-launcher));
		return CLI_FAIL;
	}
	int64_t until = now_ms() + START_WAIT_MS;
	while ((rc = ctl_connect(&cli->ctl, cli->socket, err, sizeof err)) < 0 &&
	       now_ms() < until) {
		waitpid(launcher, NULL, WNOHANG);
		nap_ms(20);
	}
	waitpid(launcher, NULL, WNOHANG);
	if (rc < 0) {
		cli_errorf(cli,
			   "started %s but it did not answer within %d ms: %s; run "
			   "'scoped --foreground --socket %s' to see why",
			   exe, START_WAIT_MS, err, cli->agent_path);
		return CLI_FAIL;
	}
	/* A target without libscope has no agent to wait for. */
	if (want_pid > 0 && !links_libscope(want_pid))
		return CLI_OK;
	/* Running programs' agents retry their connection on their own; give
	 * them a moment to find the new daemon and send their snapshots. */
	fprintf(cli->err, "scopecmd: waiting up to %d ms for programs to register\n",
		REGISTER_WAIT_MS);
	until = now_ms() + REGISTER_WAIT_MS;
	while (!registered(cli, want_pid) && now_ms() < until)
		nap_ms(50);
	return CLI_OK;
}

/* Whether pid maps libscope: then a daemon that does not know it means its
 * agent talks to another socket. */
static bool links_libscope(pid_t pid)
{
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	bool found = false;
	while (f && !found && fgets(line, sizeof line, f))
		found = strstr(line, "/libscope.so") != NULL;
	if (f)
		fclose(f);
	return found;
}

/* Says specifically why the daemon has nothing for pid, from what /proc
 * tells us: gone, another user's, not instrumented, or instrumented but
 * connected elsewhere.  msg: the daemon's own reason, or NULL. */
static void explain_absent(struct cli *cli, pid_t pid, const char *code, const char *msg)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	if (stat(path, &st) < 0) {
		cli_errorf(cli, "process %d does not exist", (int)pid);
	} else if (strcmp(code, "permission_denied") == 0 && msg) {
		cli_errorf(cli, "permission denied: %s", msg);
	} else if (strcmp(code, "permission_denied") == 0 ||
		   (geteuid() != 0 && st.st_uid != geteuid())) {
		cli_errorf(cli,
			   "permission denied: process %d belongs to uid %u and you are uid %u; "
			   "run scopecmd as that user or as root",
			   (int)pid, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (links_libscope(pid)) {
		cli_errorf(cli,
			   "process %d is not instrumented (no libscope agent connected to %s); "
			   "is SCOPED_SOCKET the same for both?",
			   (int)pid, cli->agent_path);
	} else {
		cli_errorf(cli,
			   "process %d does not use libscope, so it has no scopes or tasks; "
			   "Thread.print and Thread.dump_to_file show its threads",
			   (int)pid);
	}
}

/* Sends req (stolen).  Returns the reply, successful or not (new), or NULL
 * after printing why the daemon could not be asked. */
static json_t *request(struct cli *cli, json_t *req)
{
	char err[512];
	json_t *reply = NULL;
	if (!req) {
		cli_errorf(cli, "out of memory");
		return NULL;
	}
	int rc = ctl_request(cli->ctl, req, &reply, cli->timeout_ms, err, sizeof err);
	json_decref(req);
	if (rc < 0) {
		cli_errorf(cli, "%s", err);
		return NULL;
	}
	return reply;
}

static const char *error_code(const json_t *reply)
{
	const char *code =
	    json_string_value(json_object_get(json_object_get(reply, "error"), "code"));
	return code ? code : "internal";
}

/* Prints the specific error of a failed request cmd about pid. */
static void report(struct cli *cli, const char *code, const char *msg, const char *cmd, pid_t pid)
{
	if (pid && (!strcmp(code, "no_such_process") || !strcmp(code, "not_instrumented") ||
		    !strcmp(code, "permission_denied")))
		explain_absent(cli, pid, code, msg);
	else if (pid && !strcmp(code, "no_privileges"))
		cli_errorf(cli, "cannot read the stacks of process %d: %s", (int)pid,
			   msg ? msg : "the daemon lacks the privileges");
	else if (pid && !strcmp(code, "timeout"))
		cli_errorf(cli,
			   "process %d did not answer the stack request in time (%s); is it "
			   "stopped (SIGSTOP, a debugger) or overloaded?",
			   (int)pid, msg ? msg : "timeout");
	else
		cli_errorf(cli, "the daemon refused '%s'%s: %s (%s)", cmd,
			   pid ? " for that process" : "", msg ? msg : "no reason given", code);
}

json_t *cli_call(struct cli *cli, const char *cmd, pid_t pid)
{
	json_t *req = pid ? json_pack("{s:s,s:i}", "cmd", cmd, "pid", (json_int_t)pid)
			  : json_pack("{s:s}", "cmd", cmd);
	if (req && cli->list_all && !strcmp(cmd, "list"))
		json_object_set_new(req, "all", json_true());
	json_t *r = request(cli, req);
	if (r && !json_is_true(json_object_get(r, "ok"))) {
		report(cli, error_code(r),
		       json_string_value(json_object_get(json_object_get(r, "error"), "message")),
		       cmd, pid);
		json_decref(r);
		return NULL;
	}
	return r;
}

/* doc (stolen) when it is a successful reply, else NULL after saying why;
 * *exited (when not NULL) is set instead of saying so for an exited
 * process. */
static struct jv_doc *reply_ok(struct cli *cli, struct jv_doc *doc, const char *cmd, pid_t pid,
			       bool *exited)
{
	const jv *r = jv_root(doc);
	if (jv_is_true(jv_get(r, "ok")))
		return doc;
	const jv *e = jv_get(r, "error");
	const char *code = jv_string(jv_get(e, "code"));
	code = code ? code : "internal";
	if (exited && !strcmp(code, "exited"))
		*exited = true;
	else
		report(cli, code, jv_string(jv_get(e, "message")), cmd, pid);
	jv_free(doc);
	return NULL;
}

struct jv_doc *cli_call_doc(struct cli *cli, const char *cmd, pid_t pid, bool *exited)
{
	char err[512];
	struct jv_doc *doc = NULL;
	json_t *req = json_pack("{s:s,s:i}", "cmd", cmd, "pid", (json_int_t)pid);
	/* Alike threads' stacks once: a dump of many threads stays small. */
	if (req && !strcmp(cmd, "dump"))
		json_object_set_new(req, "share_stacks", json_true());
	int rc =
	    req ? ctl_request_doc(cli->ctl, req, &doc, cli->timeout_ms, err, sizeof err) : -ENOMEM;
	json_decref(req);
	if (exited)
		*exited = false;
	if (rc < 0) {
		cli_errorf(cli, "%s", req ? err : "out of memory");
		return NULL;
	}
	return reply_ok(cli, doc, cmd, pid, exited);
}

struct jv_doc *cli_fetch_dump_doc(struct cli *cli, pid_t pid)
{
	bool exited;
	/* An exited process has no stacks, but its last tree still shows
	 * where everything was: a post-mortem dump. */
	struct jv_doc *doc = cli_call_doc(cli, "dump", pid, &exited);
	if (!doc && exited)
		doc = cli_call_doc(cli, "tree", pid, NULL);
	return doc;
}

int cli_fetch_dump_json(struct cli *cli, pid_t pid, size_t *pending, char **text, size_t *len)
{
	char err[512];
	struct jv_doc *doc = NULL;
	bool exited = false;
	*text = NULL;
	*len = 0;
	/* The daemon renders the text itself: nothing to parse or build here,
	 * only bytes to copy to the file. */
	json_t *req = json_pack("{s:s,s:i,s:b,s:s}", "cmd", "dump", "pid", (json_int_t)pid,
				"share_stacks", 1, "render", "jdk_json");
	int rc =
	    req ? ctl_request_text(cli->ctl, req, &doc, pending, cli->timeout_ms, err, sizeof err)
		: -ENOMEM;
	json_decref(req);
	if (rc < 0) {
		cli_errorf(cli, "%s", req ? err : "out of memory");
		return CLI_FAIL;
	}
	if (*pending) {
		jv_free(doc);
		return CLI_OK;
	}
	/* A refusal, or a daemon that does not render: the text is built
	 * here, and an exited process gets its post-mortem dump. */
	doc = reply_ok(cli, doc, "dump", pid, &exited);
	if (!doc && exited)
		doc = cli_call_doc(cli, "tree", pid, NULL);
	if (!doc)
		return CLI_FAIL;
	*text = jdkdump_json_doc(jv_root(doc), len, err, sizeof err);
	jv_free(doc);
	if (!*text) {
		cli_errorf(cli, "%s", err);
		return CLI_FAIL;
	}
	return CLI_OK;
}

json_t *cli_fetch_dump(struct cli *cli, pid_t pid)
{
	char err[256];
	struct jv_doc *doc = cli_fetch_dump_doc(cli, pid);
	if (!doc)
		return NULL;
	json_t *dump = jdkdump_build_doc(jv_root(doc), err, sizeof err);
	jv_free(doc);
	if (!dump)
		cli_errorf(cli, "%s", err);
	return dump;
}

int cli_print_json(struct cli *cli, json_t *doc, const char *what)
{
	int rc = CLI_OK;
	if (!doc || jj_failed_take()) {
		cli_errorf(cli, "out of memory building %s", what);
		rc = CLI_FAIL;
	} else if (json_dumpf(doc, cli->out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0 ||
		   fputc('\n', cli->out) == EOF) {
		rc = CLI_FAIL; /* main reports the write error */
	}
	json_decref(doc);
	return rc;
}
