/* otlp.h - scoped --otlp URL: scope trees exported as OTLP/HTTP (protobuf)
 * spans to an OpenTelemetry Collector, tail-sampled and bounded (trace.h). */
#ifndef DAEMON_OTLP_H
#define DAEMON_OTLP_H

#include "daemon.h"

#include <stddef.h>

/* Checks --otlp's URL.  Returns 0, or -1 with a sentence in err. */
int otlp_check(const struct options *opt, char *err, size_t errlen);

/* Starts the sender thread and the collection timer on d->loop (after
 * daemonizing: a thread does not survive fork).  0 or a negative errno. */
int otlp_start(struct daemon *d);

/* Stops the sender (an export in flight is abandoned) and frees it all. */
void otlp_stop(struct daemon *d);

#endif
