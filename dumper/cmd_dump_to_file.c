/* cmd_dump_to_file.c - `Thread.dump_to_file [-overwrite]
 * [-format=json|text|jstack] <file>`: writes the dump as the calling user
 * and says where. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/ctl.h"
#include "../common/jv.h"
#include "../common/writeall.h"
#include "cli.h"
#include "jdkdump.h"
#include "jstackdump.h"
#include "textdump.h"

static const char *const opts[] = {"-overwrite", "-format=", NULL};

enum format { FORMAT_TEXT, FORMAT_JSON, FORMAT_JSTACK };

struct args {
	bool overwrite;
	enum format format;
	const char *file;
};

static int parse(struct cli *cli, int argc, char **argv, struct args *a)
{
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (!strcmp(s, "-overwrite")) {
			a->overwrite = true;
		} else if (!strncmp(s, "-format=", 8)) {
			/* "plain" is the JDK's name for the text format. */
			if (!strcmp(s + 8, "json"))
				a->format = FORMAT_JSON;
			else if (!strcmp(s + 8, "text") || !strcmp(s + 8, "plain"))
				a->format = FORMAT_TEXT;
			else if (!strcmp(s + 8, "jstack") || !strcmp(s + 8, "hotspot"))
				a->format = FORMAT_JSTACK;
			else {
				cli_errorf(
				    cli,
				    "Thread.dump_to_file: -format takes json, text or jstack, "
				    "not '%s'",
				    s + 8);
				return CLI_USAGE;
			}
		} else if (!a->file) {
			a->file = s;
		} else {
			cli_errorf(cli, "Thread.dump_to_file: one file only ('%s' and '%s' given)",
				   a->file, s);
			return CLI_USAGE;
		}
	}
	if (!a->file) {
		cli_errorf(
		    cli,
		    "Thread.dump_to_file: no file given; usage: Thread.dump_to_file "
		    "[-overwrite] [-format=json|text|jstack] <file>  ('-' for standard output)");
		return CLI_USAGE;
	}
	return CLI_OK;
}

static char *render(const json_t *dump, enum format f)
{
	if (f == FORMAT_JSTACK)
		return jstackdump_string(dump, JSTACKDUMP_LOCKS);
	return textdump_string(dump, TEXTDUMP_LOCKS | TEXTDUMP_EXTENDED);
}

/* A dump to write: its text, or (pending > 0) the daemon's rendered text
 * still on the connection. */
struct dump_out {
	struct cli *cli;
	char *data;
	size_t len, pending;
	char err[512]; /* why the connection failed, when it did */
};

/* The dump in format f, or CLI_FAIL after saying why.  JSON comes rendered
 * from the daemon, with no tree built in between: for a large process that
 * is most of what a dump costs. */
static int fetch(struct cli *cli, pid_t pid, enum format f, struct dump_out *o)
{
	if (f == FORMAT_JSON)
		return cli_fetch_dump_json(cli, pid, &o->pending, &o->data, &o->len);
	json_t *dump = cli_fetch_dump(cli, pid);
	if (!dump)
		return CLI_FAIL;
	o->data = render(dump, f);
	json_decref(dump);
	if (!o->data) {
		cli_errorf(cli, "out of memory rendering the dump");
		return CLI_FAIL;
	}
	o->len = strlen(o->data);
	return CLI_OK;
}

/* Fills the dump file: the text, or the daemon's bytes copied in the
 * kernel. */
static int fill(int fd, void *arg)
{
	struct dump_out *o = arg;
	if (!o->pending)
		return write_all(fd, o->data, o->len, false);
	return ctl_text_copy(o->cli->ctl, o->pending, fd, o->cli->timeout_ms, o->err,
			     sizeof o->err);
}

static int to_file(struct cli *cli, const char *file, bool overwrite, struct dump_out *o)
{
	/* As the JDK, every message names the absolute path: the one a reader
	 * of the message can open from anywhere. */
	char err[2 * PATH_MAX + 128], abs[2 * PATH_MAX], cwd[PATH_MAX];
	if (file[0] == '/' || !getcwd(cwd, sizeof cwd))
		snprintf(abs, sizeof abs, "%s", file);
	else
		snprintf(abs, sizeof abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", file);
	struct jdkdump_fill f = {fill, o};
	if (jdkdump_write_file_with(abs, &f, overwrite, err, sizeof err) < 0) {
		cli_errorf(cli, "%s", o->err[0] ? o->err : err);
		return CLI_FAIL;
	}
	fprintf(cli->out, "Created %s\n", abs);
	return CLI_OK;
}

static int write_stdout(struct cli *cli, struct dump_out *o)
{
	/* The daemon's bytes go to a real descriptor in the kernel, as to a
	 * file (a megabyte read into fresh pages first cost twice the rest of
	 * the command here); a stream with no descriptor gets them through
	 * memory. */
	int fd = o->pending && fflush(cli->out) == 0 ? fileno(cli->out) : -1;
	if (fd >= 0) {
		o->err[0] = '\0';
		if (ctl_text_copy(cli->ctl, o->pending, fd, cli->timeout_ms, o->err,
				  sizeof o->err) < 0) {
			cli_errorf(cli, "%s",
				   o->err[0] ? o->err
					     : "writing the dump to standard output failed");
			return CLI_FAIL;
		}
		return CLI_OK;
	}
	if (o->pending) {
		if (ctl_text_read(cli->ctl, o->pending, &o->data, cli->timeout_ms, o->err,
				  sizeof o->err) < 0) {
			cli_errorf(cli, "%s", o->err);
			return CLI_FAIL;
		}
		o->len = o->pending;
	}
	if (fwrite(o->data, 1, o->len, cli->out) != o->len || fflush(cli->out) == EOF) {
		cli_errorf(cli, "writing the dump to standard output failed");
		return CLI_FAIL;
	}
	return CLI_OK;
}

static int run(struct cli *cli, pid_t pid, int argc, char **argv)
{
	struct args a = {0};
	int rc = parse(cli, argc, argv, &a);
	if (rc != CLI_OK)
		return rc;
	struct dump_out o = {.cli = cli};
	rc = fetch(cli, pid, a.format, &o);
	if (rc == CLI_OK && strcmp(a.file, "-") != 0) {
		rc = to_file(cli, a.file, a.overwrite, &o);
	} else if (rc == CLI_OK) {
		rc = write_stdout(cli, &o);
	}
	free(o.data);
	return rc;
}

static bool to_stdout(int argc, char **argv)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], "-"))
			return true;
	return false;
}

const struct dcmd dcmd_dump_to_file = {
    .name = "Thread.dump_to_file",
    .usage = "[-overwrite] [-format=json|text|jstack] <file>",
    .summary = "Write the thread dump, as JSON or text, to a file.",
    .help = "Arguments:\n"
	    "  file        where to write it, created as you; '-' for standard output\n"
	    "              (STRING, no default)\n"
	    "Options:\n"
	    "  -overwrite  replace an existing file (atomically: a temporary file beside it\n"
	    "              is renamed over it) (BOOLEAN, false)\n"
	    "  -format     json: the JDK's JSON thread dump, format version 2, with scoped's\n"
	    "              extra members (schemas/thread-dump.schema.json); text (or plain):\n"
	    "              what Thread.print -l -e prints; jstack (or hotspot): HotSpot's\n"
	    "              jstack layout, as Thread.print -format=jstack (STRING, text)\n"
	    "An existing file is refused without -overwrite (exit status 1); messages\n"
	    "name the absolute path.  Flags take jcmd's <key>=<value> form too:\n"
	    "-overwrite=true.\n",
    .impact = "Low: as Thread.print; the file is written by scopecmd, never by the daemon",
    .options = opts,
    .run = run,
    .raw_stdout = to_stdout,
};
