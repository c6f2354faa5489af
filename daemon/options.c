/* options.c - the table of scoped's options: parsing, bounds, defaults and --help. */
#include "options.h"

#include "log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum opt_kind { OPT_FLAG, OPT_LONG, OPT_STR, OPT_CHOICE };

static const char *const log_levels[] = {"error", "warn", "info", "debug", NULL};
static const char *const stack_modes[] = {"auto", "bpf", "signal", "proc", NULL};
static const char *const otlp_protocols[] = {"http/protobuf", "http/json", NULL};
static const char *const otlp_compressions[] = {"none", "gzip", NULL};

struct opt_def {
	const char *name;
	char shortname; /* -h as --help, or 0 */
	enum opt_kind kind;
	size_t off; /* into struct options */
	const char *arg;
	long min, max, def;
	const char *const *choices;
	const char *help;
};

#define OFF(f) offsetof(struct options, f)

static const struct opt_def table[] = {
    {"help", 'h', OPT_FLAG, OFF(help), NULL, 0, 1, 0, NULL, "print this help and exit"},
    {"version", 'V', OPT_FLAG, OFF(version), NULL, 0, 1, 0, NULL, "print the version and exit"},
    {"socket", 0, OPT_STR, OFF(socket), "PATH", 0, 0, 0, NULL,
     "agent socket path (control.sock sits beside it); default $SCOPED_SOCKET, "
     "else $XDG_RUNTIME_DIR/scoped/agent.sock, else /tmp/scoped-$UID/agent.sock"},
    {"foreground", 0, OPT_FLAG, OFF(foreground), NULL, 0, 1, 0, NULL,
     "stay in the foreground and log to stderr (default: daemonize, log to syslog)"},
    {"syslog", 0, OPT_FLAG, OFF(syslog), NULL, 0, 1, 0, NULL,
     "log to syslog even in the foreground"},
    {"log-level", 0, OPT_CHOICE, OFF(log_level), "LEVEL", 0, 3, LOG_LVL_INFO, log_levels,
     "error, warn, info or debug"},
    {"retain", 0, OPT_LONG, OFF(retain_s), "SECONDS", 0, 3600, 5, NULL,
     "keep ended tasks, closed scopes and exited threads visible this long"},
    {"max-retained", 0, OPT_LONG, OFF(max_retained), "N", 1, 100000000, 4096, NULL,
     "and at most this many of them per process, the oldest going first"},
    {"max-processes", 0, OPT_LONG, OFF(max_processes), "N", 1, 65536, 1024, NULL,
     "instrumented processes held at once, live and exited"},
    {"keep-exited", 0, OPT_LONG, OFF(keep_exited), "N", 0, 65536, 64, NULL,
     "exited processes kept for post-mortem dumps"},
    {"keep-exited-for", 0, OPT_LONG, OFF(keep_exited_s), "SECONDS", 0, 604800, 3600, NULL,
     "how long an exited process stays dumpable"},
    {"max-clients", 0, OPT_LONG, OFF(max_clients), "N", 1, 65536, 256, NULL,
     "control connections served at once"},
    {"max-entities", 0, OPT_LONG, OFF(max_entities), "N", 16, 100000000, 1000000, NULL,
     "scopes, tasks, threads and pools held per process; an agent past it is dropped"},
    {"stacks", 0, OPT_CHOICE, OFF(stacks), "MODE", 0, 3, STACKS_AUTO, stack_modes,
     "stack source for instrumented processes: auto (BPF when it loads, else signal), bpf "
     "(required), signal, or proc (registers from /proc, no signal; other processes use "
     "BPF when it loads, else proc)"},
    {"log-file", 0, OPT_STR, OFF(log_file), "PATH", 0, 0, 0, NULL,
     "append log lines, each with its UTC time, to PATH (instead of stderr or syslog)"},
    {"idle-exit", 0, OPT_LONG, OFF(idle_exit_s), "SECONDS", 0, 604800, 0, NULL,
     "exit after this long with no program and no client connected; 0 never (a daemon "
     "that scopecmd starts uses 600)"},
    {"no-prewarm", 0, OPT_FLAG, OFF(no_prewarm), NULL, 0, 1, 0, NULL,
     "do not read the debug information of libc ahead, on a thread of its own, at start (it "
     "makes the first dump of a process faster where libc's debug file is installed)"},
    {"socket-group", 0, OPT_STR, OFF(socket_group), "GROUP", 0, 0, 0, NULL,
     "let GROUP's members connect (directory 0710, sockets 0660, group GROUP); each "
     "client still sees only its own uid's processes"},
    {"metrics", 0, OPT_STR, OFF(metrics), "[ADDR:]PORT", 0, 0, 0, NULL,
     "serve Prometheus metrics at http://ADDR:PORT/metrics (default: off; ADDR "
     "defaults to 127.0.0.1, [::1] for IPv6; port 0 picks a free one, logged)"},
    {"otlp", 0, OPT_STR, OFF(otlp), "URL", 0, 0, 0, NULL,
     "export scope trees as OTLP/HTTP protobuf spans to URL (a collector's /v1/traces; "
     "default: off): failed, cancelled, late and violating trees, and a sample of the rest"},
    {"otlp-sample", 0, OPT_LONG, OFF(otlp_sample), "N", 0, 1000, 10, NULL,
     "of the trees that went well, how many in 1000 (per mille) are exported"},
    {"otlp-max-spans", 0, OPT_LONG, OFF(otlp_max_spans), "N", 1, 100000000, 100000, NULL,
     "spans held for export at once, every process together; past it spans are dropped"},
    {"otlp-max-rate", 0, OPT_LONG, OFF(otlp_max_rate), "N", 1, 100000000, 20000, NULL,
     "spans exported per second at most; whole trees past it are dropped"},
    {"otlp-protocol", 0, OPT_CHOICE, OFF(otlp_protocol), "PROTOCOL", 0, 1, OTLP_PROTOBUF,
     otlp_protocols, "http/protobuf or http/json (OTEL_EXPORTER_OTLP_PROTOCOL's names)"},
    {"otlp-compression", 0, OPT_CHOICE, OFF(otlp_compression), "KIND", 0, 1, OTLP_NONE,
     otlp_compressions, "none or gzip (the request body, with Content-Encoding: gzip)"},
    {"otlp-headers", 0, OPT_STR, OFF(otlp_headers), "K=V,...", 0, 0, 0, NULL,
     "extra HTTP headers for the collector, as OTEL_EXPORTER_OTLP_HEADERS writes them "
     "(comma-separated, percent-encoded); default: that variable's value, so that a "
     "secret stays out of the command line"},
};

#define NOPTS (sizeof table / sizeof table[0])

static void set_defaults(struct options *opt)
{
	memset(opt, 0, sizeof *opt);
	for (size_t i = 0; i < NOPTS; i++) {
		char *field = (char *)opt + table[i].off;
		if (table[i].kind == OPT_LONG)
			*(long *)field = table[i].def;
		else if (table[i].kind == OPT_CHOICE)
			*(int *)field = (int)table[i].def;
	}
}

static const struct opt_def *find(const char *name, size_t len)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
			return &table[i];
	return NULL;
}

/* A flag's one-letter form: -h, -V. */
static const struct opt_def *find_short(char c)
{
	for (size_t i = 0; i < NOPTS; i++)
		if (table[i].shortname == c && table[i].kind == OPT_FLAG)
			return &table[i];
	return NULL;
}

static int set_value(struct options *opt, const struct opt_def *d, const char *val, char *err,
		     size_t errlen)
{
	char *field = (char *)opt + d->off;
	switch (d->kind) {
	case OPT_FLAG:
		*(int *)field = 1;
		return 0;
	case OPT_STR:
		if (!*val) {
			snprintf(err, errlen, "--%s needs a non-empty %s", d->name, d->arg);
			return -1;
		}
		*(const char **)field = val;
		return 0;
	case OPT_LONG: {
		char *end;
		errno = 0;
		long v = strtol(val, &end, 10);
		if (errno || end == val || *end || v < d->min || v > d->max) {
			snprintf(err, errlen, "--%s takes a whole number from %ld to %ld, not '%s'",
				 d->name, d->min, d->max, val);
			return -1;
		}
		*(long *)field = v;
		return 0;
	}
	case OPT_CHOICE:
		for (int i = 0; d->choices[i]; i++)
			if (strcmp(d->choices[i], val) == 0) {
				*(int *)field = i;
				return 0;
			}
		snprintf(err, errlen, "--%s takes one of", d->name);
		for (int i = 0; d->choices[i]; i++) {
			size_t n = strlen(err);
			snprintf(err + n, errlen - n, "%s %s", i ? "," : "", d->choices[i]);
		}
		size_t n = strlen(err);
		snprintf(err + n, errlen - n, "; not '%s'", val);
		return -1;
	}
	return -1;
}

int options_parse(struct options *opt, int argc, char **argv, char *err, size_t errlen)
{
	set_defaults(opt);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct opt_def *sd = a[0] == '-' && a[1] && !a[2] ? find_short(a[1]) : NULL;
		if (sd) {
			set_value(opt, sd, "", err, errlen);
			continue;
		}
		if (strncmp(a, "--", 2) != 0 || !a[2]) {
			snprintf(err, errlen, "unexpected argument '%s'; see scoped --help", a);
			return -1;
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct opt_def *d = find(name, len);
		if (!d) {
			snprintf(err, errlen, "unknown option '%s'; see scoped --help", a);
			return -1;
		}
		const char *val = NULL;
		if (d->kind == OPT_FLAG) {
			if (eq) {
				snprintf(err, errlen, "--%s takes no value", d->name);
				return -1;
			}
		} else if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			snprintf(err, errlen, "--%s needs a value (%s)", d->name, d->arg);
			return -1;
		}
		if (set_value(opt, d, val, err, errlen) < 0)
			return -1;
	}
	return 0;
}

void options_usage(FILE *out)
{
	fprintf(out, "usage: scoped [OPTION]...\n"
		     "Collects the scope trees of processes using libscope and answers "
		     "scopecmd and scopetop.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt_def *d = &table[i];
		char left[64];
		if (d->shortname)
			snprintf(left, sizeof left, "-%c, --%s", d->shortname, d->name);
		else
			snprintf(left, sizeof left, "    --%s%s%s", d->name, d->arg ? " " : "",
				 d->arg ? d->arg : "");
		fprintf(out, "  %-26s %s", left, d->help);
		if (d->kind == OPT_LONG)
			fprintf(out, " (default %ld, %ld..%ld)", d->def, d->min, d->max);
		else if (d->kind == OPT_CHOICE)
			fprintf(out, " (default %s)", d->choices[d->def]);
		fputc('\n', out);
	}
}
