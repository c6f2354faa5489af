/* metrics.h - scoped's Prometheus endpoint: an HTTP server (libmicrohttpd)
 * run from the daemon's own event loop, and the text exposition of what the
 * daemon knows (docs/metrics.md lists every metric). */
#ifndef DAEMON_METRICS_H
#define DAEMON_METRICS_H

#include "daemon.h"
#include "jbuf.h"
#include "tally.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Stack captures of one source, for scoped_stack_capture*. */
struct metrics_stacks {
	const char *source; /* static: "bpf", "signal" */
	uint64_t ok, failed;
	struct tally_hist duration; /* request to reply, failed ones included */
};

#define METRICS_SOURCES 2

/* Parses --metrics "[ADDR:]PORT" ("9464", ":9464", "0.0.0.0:9464",
 * "[::1]:9464", "localhost:9464") into *sa (loopback when ADDR is empty).
 * Returns 0, or -1 with a sentence in err. */
int metrics_parse_addr(const char *spec, struct sockaddr_storage *sa, socklen_t *salen, char *err,
		       size_t errlen);

/* Binds and listens on d->opt.metrics (before daemonizing, so that a taken
 * port is reported on the terminal).  Allocates d->metrics.  Returns 0, or
 * -1 with a sentence in err. */
int metrics_open(struct daemon *d, char *err, size_t errlen);

/* Starts serving from d->loop.  Returns 0 or a negative errno. */
int metrics_start(struct daemon *d);

/* Stops serving and frees d->metrics (NULL: nothing to do). */
void metrics_stop(struct daemon *d);

/* "ADDR:PORT" actually listened on (the port chosen when 0 was asked). */
const char *metrics_address(const struct daemon *d);

/* Counts a finished stack request (no-op when the endpoint is off). */
void metrics_stack_done(struct daemon *d, const struct stack_req *r, bool ok);

/* The capture counters by source (METRICS_SOURCES of them). */
const struct metrics_stacks *metrics_stack_stats(const struct daemon *d);

/* Writes the whole exposition (text format 0.0.4) of d into b. */
void metrics_render(struct daemon *d, struct jbuf *b);

#endif
