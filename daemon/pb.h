/* pb.h - just enough of the protobuf wire format to write OTLP messages into a
 * jbuf: varints, fixed-width numbers, bytes, and nested messages whose length
 * is filled in when they end. */
#ifndef DAEMON_PB_H
#define DAEMON_PB_H

#include "jbuf.h"

#include <stddef.h>
#include <stdint.h>

void pb_varint(struct jbuf *b, uint64_t v);
void pb_uint(struct jbuf *b, unsigned field, uint64_t v);    /* varint field */
void pb_fixed64(struct jbuf *b, unsigned field, uint64_t v); /* wire type 1 */
void pb_double(struct jbuf *b, unsigned field, double v);
void pb_bytes(struct jbuf *b, unsigned field, const void *p, size_t n);
void pb_str(struct jbuf *b, unsigned field, const char *s); /* NULL: nothing */
/* Starts a nested message; returns where its body starts, for pb_end. */
size_t pb_begin(struct jbuf *b);
/* Ends the message begun at start as field (tag and length go before it). */
void pb_end(struct jbuf *b, unsigned field, size_t start);

#endif
