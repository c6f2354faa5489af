/* pb.c - a protobuf writer for the OTLP export: fields appended to a jbuf, a
 * nested message's header inserted in front of its body when it ends. */
#include "pb.h"

#include <string.h>

static size_t varint_to(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

void pb_varint(struct jbuf *b, uint64_t v)
{
	uint8_t tmp[10];
	jb_raw(b, (const char *)tmp, varint_to(tmp, v));
}

static void tag(struct jbuf *b, unsigned field, unsigned wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

void pb_uint(struct jbuf *b, unsigned field, uint64_t v)
{
	tag(b, field, 0);
	pb_varint(b, v);
}

void pb_fixed64(struct jbuf *b, unsigned field, uint64_t v)
{
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	tag(b, field, 1);
	jb_raw(b, (const char *)le, 8);
}

void pb_double(struct jbuf *b, unsigned field, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	pb_fixed64(b, field, u);
}

void pb_bytes(struct jbuf *b, unsigned field, const void *p, size_t n)
{
	tag(b, field, 2);
	pb_varint(b, n);
	jb_raw(b, p, n);
}

void pb_str(struct jbuf *b, unsigned field, const char *s)
{
	if (s)
		pb_bytes(b, field, s, strlen(s));
}

size_t pb_begin(struct jbuf *b)
{
	return b->len;
}

void pb_end(struct jbuf *b, unsigned field, size_t start)
{
	uint8_t head[20];
	size_t body = b->len - start;
	size_t n = varint_to(head, (uint64_t)field << 3 | 2);
	n += varint_to(head + n, body);
	jb_raw(b, (const char *)head, n); /* room for the header */
	if (b->oom)
		return;
	memmove(b->p + start + n, b->p + start, body);
	memcpy(b->p + start, head, n);
}
