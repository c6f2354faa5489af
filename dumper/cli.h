/* cli.h - what scopecmd's commands share: the session with the daemon, the
 * command table's entry type, and the helpers that fetch and explain. */
#ifndef DUMPER_CLI_H
#define DUMPER_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/ctl.h"
#include "../common/jv.h"

/* Exit statuses: 0 success, 1 a target or command failed, 2 bad usage. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

struct cli {
	const char *socket;    /* --socket, or NULL */
	char agent_path[4096]; /* the agent socket path resolved from it */
	int timeout_ms;	       /* per daemon request */
	bool no_start;	       /* --no-start: never start a daemon */
	bool list_all;	       /* --all: "list" asks for every process we may inspect */
	struct ctl *ctl;       /* NULL until cli_connect() */
	FILE *out, *err;
};

/* One scopecmd command (Thread.print...): one file each, listed in
 * dcmd_table (dumper/cmds.c). */
struct dcmd {
	const char *name;
	const char *usage;	    /* options part, e.g. "[-l] [-e]" */
	const char *summary;	    /* one line for `help` */
	const char *help;	    /* what it does, its options with defaults */
	const char *impact;	    /* what it costs the target, as jcmd says */
	const char *const *options; /* accepted option names ("-l", "-format=") */
	/* Runs for one target pid; argv holds the command's arguments after
	 * its name.  Returns CLI_OK, CLI_FAIL or CLI_USAGE; prints its own
	 * errors on cli->err. */
	int (*run)(struct cli *cli, pid_t pid, int argc, char **argv);
	bool local; /* needs no daemon (help) */
	/* Whether these arguments make the command write data meant for a
	 * program to standard output (then the "<pid>:" line goes to standard
	 * error, so that `... - | jq` works).  NULL: never. */
	bool (*raw_stdout)(int argc, char **argv);
};

extern const struct dcmd *const dcmd_table[];

/* The command called name, or NULL. */
const struct dcmd *dcmd_find(const char *name);

/* The command name starts with (case ignored), else the one closest to it
 * by edit distance, for "did you mean". */
const struct dcmd *dcmd_closest(const char *name);

/* Levenshtein distance of a and b, ignoring case; capped at 255. */
unsigned cli_edit_distance(const char *a, const char *b);

/* Checks argv against cmd's options: returns CLI_OK, or CLI_USAGE after
 * printing which option is bad and what the command takes. */
int cli_check_options(struct cli *cli, const struct dcmd *cmd, int argc, char **argv);

/* The same check, silent: whether cli_check_options() would accept argv.
 * A flag ("-l") may be given as jcmd's <key>=<value>, "-l=true" or
 * "-l=false" (any case). */
bool cli_options_valid(const struct dcmd *cmd, int argc, char **argv);

/* Rewrites checked arguments in place so that commands see flags in one
 * form: "-l=true" becomes "-l", "-l=false" is dropped.  Returns the new
 * argument count. */
int cli_flags_normalize(const struct dcmd *cmd, int argc, char **argv);

/* Whether argv asks for JSON (-format=json): the raw_stdout of commands
 * that print JSON to standard output. */
bool cli_wants_json(int argc, char **argv);

/* Connects to the daemon, starting one in the background when none answers
 * (unless --no-start) and waiting up to 2 s for want_pid (or, when 0, any
 * program) to register.  Returns CLI_OK or CLI_FAIL with the reason
 * printed. */
int cli_connect(struct cli *cli, pid_t want_pid);

/* Sends {"cmd":cmd,"pid":pid} (pid 0: none) and returns the success reply
 * (new) or NULL after printing a specific error for pid. */
json_t *cli_call(struct cli *cli, const char *cmd, pid_t pid);

/* Sends {"cmd":cmd,"pid":pid} and returns the success reply read with the
 * fast reader (new, jv_free()), or NULL after printing a specific error --
 * except that a process that exited sets *exited (when not NULL) instead. */
struct jv_doc *cli_call_doc(struct cli *cli, const char *cmd, pid_t pid, bool *exited);

/* The JDK JSON dump of pid (new), from the daemon's dump reply, or from its
 * tree alone when the process has exited; NULL after printing why. */
json_t *cli_fetch_dump(struct cli *cli, pid_t pid);
/* The same dump as the JDK's JSON text (jdkdump_json_doc()'s): rendered by
 * the daemon when it can, then *pending is its length and the bytes wait on
 * cli->ctl (ctl_text_copy(), ctl_text_read()); else built here into *text
 * (new) and *len.  CLI_OK, or CLI_FAIL after saying why. */
int cli_fetch_dump_json(struct cli *cli, pid_t pid, size_t *pending, char **text, size_t *len);
/* The reply that dump is built from (new, jv_free()): the daemon's dump
 * reply, or its tree reply when the process has exited; NULL after
 * printing why. */
struct jv_doc *cli_fetch_dump_doc(struct cli *cli, pid_t pid);

/* Writes doc (stolen, may be NULL) on cli->out, indented, with a newline;
 * CLI_FAIL after saying that building what failed ran out of memory, or on
 * a write error (main reports it). */
int cli_print_json(struct cli *cli, json_t *doc, const char *what);

/* Prints "scopecmd: " and the message on cli->err. */
void cli_errorf(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
