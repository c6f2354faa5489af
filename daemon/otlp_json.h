/* otlp_json.h - an OTLP ExportTraceServiceRequest rewritten from protobuf to
 * OTLP/JSON, for --otlp-protocol http/json. */
#ifndef DAEMON_OTLP_JSON_H
#define DAEMON_OTLP_JSON_H

#include "jbuf.h"

#include <stddef.h>

/* Appends the JSON of the protobuf request pb (n bytes) to out.  0, or -1
 * when pb does not parse as the messages trace.c writes, or memory ran out
 * (out is then unusable). */
int otlp_json_request(const void *pb, size_t n, struct jbuf *out);

#endif
