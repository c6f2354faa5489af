/* options.h - scoped's command-line options, driven by one table. */
#ifndef DAEMON_OPTIONS_H
#define DAEMON_OPTIONS_H

#include <stdio.h>

enum stacks_mode { STACKS_AUTO = 0, STACKS_BPF = 1, STACKS_SIGNAL = 2, STACKS_PROC = 3 };
enum otlp_protocol { OTLP_PROTOBUF = 0, OTLP_JSON = 1 };
enum otlp_compression { OTLP_NONE = 0, OTLP_GZIP = 1 };

struct options {
	int help, version, foreground, syslog;
	const char *socket;	  /* borrowed from argv; NULL: default path */
	int log_level;		  /* enum log_level */
	long retain_s;		  /* ended tasks / closed scopes kept this long */
	long max_retained;	  /* and at most this many per process */
	long max_processes;	  /* live + exited processes held */
	long keep_exited;	  /* exited processes kept, at most */
	long keep_exited_s;	  /* and for at most this long */
	long max_clients;	  /* control connections */
	long max_entities;	  /* scopes + tasks + threads + pools per process */
	int stacks;		  /* enum stacks_mode */
	int no_prewarm;		  /* do not read libc's DWARF ahead at start */
	const char *log_file;	  /* --log-file, or NULL */
	long idle_exit_s;	  /* exit after this long with nobody connected; 0 never */
	const char *socket_group; /* --socket-group: members may connect, or NULL */
	const char *metrics;	  /* borrowed from argv; NULL: no /metrics endpoint */
	const char *otlp;	  /* borrowed from argv; NULL: no trace export */
	long otlp_sample;	  /* trees that went well exported, per 1000 */
	long otlp_max_spans;	  /* spans held for export at once */
	long otlp_max_rate;	  /* spans exported per second */
	int otlp_protocol;	  /* enum otlp_protocol */
	int otlp_compression;	  /* enum otlp_compression */
	const char *otlp_headers; /* "k=v,..." from argv, or NULL: the environment's */
};

/* Fills opt with the defaults, then parses argv.  Returns 0, or -1 with a
 * sentence naming the bad option in err. */
int options_parse(struct options *opt, int argc, char **argv, char *err, size_t errlen);

/* Writes the --help text (generated from the table). */
void options_usage(FILE *out);

#endif
