/* agent_enc.c - the agent's path from a runtime event (struct sc_ev) to its
 * wire frame: one straight-line writer per event kind, expanded from the
 * message's declaration in proto/wire.h. */
#include <string.h>

#include "agent.h"
#include "scope.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the agent writes frames with native stores; port put64/put32 for big-endian"
#endif

/* The runtime reports these public enums' values as they are: the wire's
 * lists say which enumerator each value is. */
#define SAME_AS_PUBLIC(NAME, value, json, public)                                                  \
	_Static_assert((int)(public) == (value), #public " differs from its wire value");
PROTO_JOINERS(SAME_AS_PUBLIC)
PROTO_QUEUE_KINDS(SAME_AS_PUBLIC)
PROTO_POLICIES(SAME_AS_PUBLIC)

/* The frame header's type and flags are written as one u32. */
_Static_assert(PROTO_HDR_OFF(flags) == PROTO_HDR_OFF(type) + 2, "header layout");
#define EV_COMMON ((uint32_t)sizeof(struct proto_wire_common))

static inline void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* (No event has a u16 field today.) */
static inline __attribute__((unused)) void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

/* A wire string of n bytes of s (u16 n, the bytes, NUL); returns what
 * follows it. */
static uint8_t *put_str(uint8_t *p, const char *s, uint16_t n)
{
	memcpy(p, &n, 2);
	if (n)
		memcpy(p + 2, s, n);
	p[2 + n] = 0;
	return p + 3u + n;
}

/* A string's wire length: longer strings are cut, the frame must stay
 * decodable. */
static inline uint16_t cut(const char *s)
{
	return s ? (uint16_t)strnlen(s, PROTO_MAX_STR) : 0;
}

/* The pool block, from PROTO_POOL_FIELDS (struct sc_pool_info has the
 * members of struct proto_pool). */
#define POOL_PUT_U32(v) put32(p, (v)), p += 4;
#define POOL_PUT_U64(v) put64(p, (v)), p += 8;
#define POOL_PUT_I64(v) put64(p, (uint64_t)(v)), p += 8;
#define POOL_PUT_PAD32(v) put32(p, 0), p += 4;
#define POOL_PUT(kind, m) POOL_PUT_##kind(pi->m)

static uint8_t *put_pool(uint8_t *p, const struct sc_pool_info *pi)
{
	if (!pi) {
		memset(p, 0, sizeof(struct proto_wire_pool));
		return p + sizeof(struct proto_wire_pool);
	}
	PROTO_POOL_FIELDS(POOL_PUT)
	return p;
}

/* What a field's source (wire.h) names in struct sc_ev.  A source missing
 * here, or NA on an event's field, does not compile. */
#define SRC_A ev->a
#define SRC_B ev->b
#define SRC_C ev->c
#define SRC_D ev->d
#define SRC_I ev->i
#define SRC_U ev->u
#define SRC_LINE ev->site.line
#define SRC_SITE site
#define SRC_S1 ev->s1
#define SRC_S2 ev->s2
/* One field written at p, which moves past it. */
#define PUT_U16(src) put16(p, (uint16_t)(SRC_##src)), p += 2;
#define PUT_U32(src) put32(p, (uint32_t)(SRC_##src)), p += 4;
#define PUT_I32(src) put32(p, (uint32_t)(int32_t)(SRC_##src)), p += 4;
#define PUT_U64(src) put64(p, (uint64_t)(SRC_##src)), p += 8;
#define PUT_I64(src) put64(p, (uint64_t)(SRC_##src)), p += 8;
#define PUT_PAD16(src) put16(p, 0), p += 2;
#define PUT_PAD32(src) put32(p, 0), p += 4;
#define PUT_POOL(src) p = put_pool(p, ev->pool);
#define PUT(kind, m, src) PUT_##kind(src)
#define PUT_S(m, src) p = put_str(p, SRC_##src, *slen++);

/* enc_<name>(): the payload of one event kind after the common part. */
#define ENC_FN_SESSION(NAME, name)
#define ENC_FN_MARK(NAME, name)
#define ENC_FN_STACK(NAME, name)
#define ENC_FN_DERIVED(NAME, name)
#define ENC_FN_EVENT(NAME, name)                                                                   \
	static inline void enc_##name(const struct sc_ev *ev, uint8_t *p, uint32_t site,           \
				      const uint16_t *slen)                                        \
	{                                                                                          \
		(void)ev, (void)p, (void)site, (void)slen;                                         \
		PROTO_FIELDS_##name(PUT) PROTO_STRS_##name(PUT_S)                                  \
	}
#define ENC_FN(NAME, name, number, class, array) ENC_FN_##class(NAME, name)
PROTO_MESSAGES(ENC_FN)

/* Header and common part. */
static inline void put_head(uint8_t *dst, uint32_t size, const struct sc_ev *ev, uint16_t flags)
{
	put32(dst + PROTO_HDR_OFF(len), size);
	put32(dst + PROTO_HDR_OFF(type), (uint32_t)ev->kind | (uint32_t)flags << 16);
	uint8_t *c = dst + PROTO_HDR_SIZE;
	/* Stamped here when the runtime left it to us: after the ring had
	 * room, so a dropped event reads no clock. */
	put64(c + offsetof(struct proto_wire_common, ts),
	      (uint64_t)(ev->ts ? ev->ts : scope_now()));
	put32(c + offsetof(struct proto_wire_common, tid), ev->tid);
	put32(c + offsetof(struct proto_wire_common, reserved_c), 0);
}

#define MEASURE_S(m, src) n += 3u + (e->slen[i++] = cut(SRC_##src));
#define MEASURE_EVENT(NAME, name)                                                                  \
	case SC_##NAME:                                                                            \
		n = PROTO_FIXED(name);                                                             \
		PROTO_STRS_##name(MEASURE_S) e->wants_site = 0 PROTO_FIELDS_##name(SC_WANTS_SITE); \
		break;
#define MEASURE_SESSION(NAME, name)
#define MEASURE_MARK(NAME, name)
#define MEASURE_STACK(NAME, name)
#define MEASURE_DERIVED(NAME, name)
#define MEASURE(NAME, name, number, class, array) MEASURE_##class(NAME, name)

uint32_t sc_enc_measure(const struct sc_ev *ev, struct sc_enc *e)
{
	uint32_t n;
	int i = 0;
	e->slen[0] = e->slen[1] = e->slen[2] = 0;
	switch (ev->kind) {
		PROTO_MESSAGES(MEASURE)
	default:
		return 0;
	}
	(void)i;
	e->kind = ev->kind;
	e->size = n;
	e->site = 0;
	return n;
}

#define WRITE_EVENT(NAME, name)                                                                    \
	case SC_##NAME:                                                                            \
		enc_##name(ev, p, e->site, e->slen);                                               \
		break;
#define WRITE_SESSION(NAME, name)
#define WRITE_MARK(NAME, name)
#define WRITE_STACK(NAME, name)
#define WRITE_DERIVED(NAME, name)
#define WRITE(NAME, name, number, class, array) WRITE_##class(NAME, name)

void sc_enc_write(const struct sc_ev *ev, const struct sc_enc *e, uint16_t flags, uint8_t *dst)
{
	uint8_t *p = dst + PROTO_HDR_SIZE + EV_COMMON;

	put_head(dst, e->size, ev, flags);
	switch (e->kind) {
		PROTO_MESSAGES(WRITE)
	}
}

/* The kinds of every task (TASK_FORK, TASK_START, TASK_END) and SCOPE_OPEN:
 * most of what a program writes.  At most one string each (*slen). */
#define HOT_KINDS(H)                                                                               \
	H(EV_TASK_FORK, task_fork)                                                                 \
	H(EV_TASK_START, task_start) H(EV_TASK_END, task_end) H(EV_SCOPE_OPEN, scope_open)
#define ONE_STR(m, src) +1
#define HOT_SIZE_S(m, src) n += 3u + (*slen = cut(SRC_##src));
#define HOT_SIZE(NAME, name)                                                                       \
	case SC_##NAME: {                                                                          \
		_Static_assert(0 PROTO_STRS_##name(ONE_STR) <= 1, #NAME ": one string");           \
		uint32_t n = PROTO_FIXED(name);                                                    \
		PROTO_STRS_##name(HOT_SIZE_S) return n;                                            \
	}

uint32_t sc_enc_hot_size(const struct sc_ev *ev, uint16_t *slen)
{
	switch (ev->kind) {
		HOT_KINDS(HOT_SIZE)
	default:
		return 0;
	}
}

#define HOT_WRITE(NAME, name)                                                                      \
	case SC_##NAME:                                                                            \
		enc_##name(ev, dst + PROTO_HDR_SIZE + EV_COMMON, site, &slen);                     \
		break;

/* The same frames sc_enc_write makes (test_agent compares the bytes). */
void sc_enc_hot_write(const struct sc_ev *ev, uint32_t size, uint16_t slen, uint32_t site,
		      uint8_t *dst)
{
	put_head(dst, size, ev, 0);
	switch (ev->kind) {
		HOT_KINDS(HOT_WRITE)
	}
}

int sc_enc_wants_site(const struct sc_enc *e)
{
	return e->wants_site;
}

/* SITE: header, u32 site, i32 line, then file and func (cut to
 * PROTO_MAX_STR like every string). */
uint32_t sc_enc_site_size(const struct sc_site *s, uint16_t slen[2])
{
	slen[0] = cut(s->file);
	slen[1] = cut(s->func);
	return (uint32_t)PROTO_FIXED(site) + 3u + slen[0] + 3u + slen[1];
}

void sc_enc_site(uint8_t *dst, uint32_t size, uint32_t id, const struct sc_site *s,
		 const uint16_t slen[2], uint16_t flags)
{
	put32(dst + PROTO_HDR_OFF(len), size);
	put32(dst + PROTO_HDR_OFF(type), (uint32_t)PROTO_SITE | (uint32_t)flags << 16);
	put32(dst + PROTO_OFF(site, site), id);
	put32(dst + PROTO_OFF(site, line), (uint32_t)s->line);
	uint8_t *p = put_str(dst + PROTO_FIXED(site), s->file, slen[0]);
	put_str(p, s->func, slen[1]);
}
