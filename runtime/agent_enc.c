/* agent_enc.c - the agent's fast path from a runtime event (struct sc_ev) to
 * its wire frame (proto.h), driven by one layout table per event kind. */
#include <string.h>

#include "agent.h"
#include "scope.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the agent writes frames with native stores; port put64/put32 for big-endian"
#endif

/* One fixed field of an event frame after the common part: where its value
 * comes from in struct sc_ev. */
enum op {
	OP_END = 0,
	OP_A,    /* u64 ev->a */
	OP_B,    /* u64 ev->b */
	OP_C,    /* u64 ev->c */
	OP_D,    /* u64 ev->d */
	OP_I64,  /* i64 ev->i */
	OP_I32,  /* i32 ev->i */
	OP_U32,  /* u32 ev->u */
	OP_LINE, /* i32 ev->site.line */
	OP_Z32,  /* reserved u32 */
	OP_POOL, /* the 80-byte pool block from ev->pool */
	OP_SITE, /* u32 the call site's number (e->site, see agent_site.c) */
};

/* Strings, in wire order. */
enum sop { S_END = 0, S_S1, S_S2, S_FILE, S_FUNC };

#define EV_COMMON 16u  /* i64 ts, u32 tid, u32 reserved */
#define POOL_BLOCK 72u

struct sc_enc_layout {
	uint8_t known;  /* 0: a hole in the table, no message for that kind */
	uint16_t fixed; /* header + common part + the ops' bytes */
	uint8_t ops[8];
	uint8_t strs[3];
	uint8_t site; /* one of ops is OP_SITE (ES below): kept as a bit because
		       * every event asks, see sc_enc_wants_site */
};

static const uint8_t op_size[] = {
	[OP_A] = 8, [OP_B] = 8, [OP_C] = 8, [OP_D] = 8, [OP_I64] = 8, [OP_I32] = 4,
	[OP_U32] = 4, [OP_LINE] = 4, [OP_Z32] = 4, [OP_POOL] = POOL_BLOCK, [OP_SITE] = 4,
};

/* bytes: what the ops write after the common part (test_agent checks every
 * layout against proto_decode, which insists on exact lengths). */
#define K(kind) [(kind) - 0x100]
/* clang-format off */
#define E(bytes, ...) {1, PROTO_HDR_SIZE + EV_COMMON + (bytes), __VA_ARGS__, 0}
/* The same for the kinds that carry a call site's number (OP_SITE). */
#define ES(bytes, ...) {1, PROTO_HDR_SIZE + EV_COMMON + (bytes), __VA_ARGS__, 1}
/* clang-format on */
static const struct sc_enc_layout layouts[0x43] = {
	K(SC_EV_THREAD_START) = E(16, {OP_A, OP_I32, OP_Z32}, {S_S1}),
	K(SC_EV_THREAD_EXIT) = E(0, {0}, {0}),
	K(SC_EV_THREAD_NAME) = E(0, {0}, {S_S1}),
	K(SC_EV_PROCESS_EXIT) = E(8, {OP_U32, OP_I32}, {0}),
	K(SC_EV_SCOPE_OPEN) = ES(48, {OP_A, OP_B, OP_C, OP_D, OP_I64, OP_U32, OP_SITE}, {S_S1}),
	K(SC_EV_JOIN_BEGIN) = E(8, {OP_A}, {0}),
	K(SC_EV_JOIN_END) = E(16, {OP_A, OP_I64}, {0}),
	K(SC_EV_SCOPE_CANCEL) = E(16, {OP_A, OP_U32, OP_Z32}, {0}),
	K(SC_EV_SCOPE_CLOSE) = E(16, {OP_A, OP_I64}, {0}),
	K(SC_EV_TASK_FORK) = ES(32, {OP_A, OP_B, OP_D, OP_U32, OP_SITE}, {0}),
	K(SC_EV_TASK_START) = E(16, {OP_A, OP_B}, {0}),
	K(SC_EV_TASK_END) = E(32, {OP_A, OP_B, OP_I64, OP_U32, OP_Z32}, {0}),
	K(SC_EV_VIOLATION) = E(24, {OP_A, OP_I64, OP_U32, OP_Z32}, {0}),
	K(SC_EV_VALUE_BIND) = E(8, {OP_A}, {S_S1, S_S2}),
	K(SC_EV_POOL_CREATE) = E(8 + POOL_BLOCK, {OP_A, OP_POOL}, {S_S1}),
	K(SC_EV_POOL_STATS) = E(8 + POOL_BLOCK, {OP_A, OP_POOL}, {0}),
	K(SC_EV_POOL_DESTROY) = E(8, {OP_A}, {0}),
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

static const struct sc_enc_layout *layout_of(uint16_t kind)
{
	unsigned k = (unsigned)kind - 0x100u;
	return (k < NLAYOUTS && layouts[k].known) ? &layouts[k] : NULL;
}

static const char *str_of(const struct sc_ev *ev, uint8_t s)
{
	switch (s) {
	case S_S1:
		return ev->s1;
	case S_S2:
		return ev->s2;
	case S_FILE:
		return ev->site.file;
	default:
		return ev->site.func;
	}
}

uint32_t sc_enc_measure(const struct sc_ev *ev, struct sc_enc *e)
{
	const struct sc_enc_layout *l = layout_of(ev->kind);
	if (!l)
		return 0;
	uint32_t n = l->fixed;
	for (int i = 0; i < 3; i++) {
		if (!l->strs[i]) {
			e->slen[i] = 0;
			continue;
		}
		const char *s = str_of(ev, l->strs[i]);
		/* Longer strings are cut: the frame must stay decodable. */
		e->slen[i] = s ? (uint16_t)strnlen(s, PROTO_MAX_STR) : 0;
		n += 3u + e->slen[i];
	}
	e->l = l;
	e->size = n;
	e->site = 0;
	return n;
}

static inline void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
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

static uint8_t *put_pool(uint8_t *p, const struct sc_pool_info *pi)
{
	if (!pi) {
		memset(p, 0, POOL_BLOCK);
		return p + POOL_BLOCK;
	}
	const uint32_t w[8] = {pi->core,  pi->max,        pi->size,   pi->active,
			       pi->largest, pi->queue_kind, pi->policy, 0};
	memcpy(p, w, sizeof w);
	put64(p + 32, pi->queue_capacity);
	put64(p + 40, pi->queued);
	put64(p + 48, pi->completed);
	put64(p + 56, pi->rejected);
	put64(p + 64, (uint64_t)pi->keep_alive_ns);
	return p + POOL_BLOCK;
}

void sc_enc_write(const struct sc_ev *ev, const struct sc_enc *e, uint16_t flags, uint8_t *dst)
{
	const struct sc_enc_layout *l = e->l;
	uint8_t *p = dst;

	put32(p, e->size);
	put32(p + 4, (uint32_t)ev->kind | (uint32_t)flags << 16);
	/* Stamped here when the runtime left it to us: after the ring had
	 * room, so a dropped event reads no clock. */
	put64(p + 8, (uint64_t)(ev->ts ? ev->ts : scope_now()));
	put32(p + 16, ev->tid);
	put32(p + 20, 0);
	p += PROTO_HDR_SIZE + EV_COMMON;
	for (const uint8_t *o = l->ops; o < l->ops + 8 && *o; o++) {
		switch (*o) {
		case OP_A: put64(p, ev->a); break;
		case OP_B: put64(p, ev->b); break;
		case OP_C: put64(p, ev->c); break;
		case OP_D: put64(p, ev->d); break;
		case OP_I64: put64(p, (uint64_t)ev->i); break;
		case OP_I32: put32(p, (uint32_t)(int32_t)ev->i); break;
		case OP_U32: put32(p, ev->u); break;
		case OP_LINE: put32(p, (uint32_t)ev->site.line); break;
		case OP_Z32: put32(p, 0); break;
		case OP_POOL: put_pool(p, ev->pool); break;
		case OP_SITE: put32(p, e->site); break;
		}
		p += op_size[*o];
	}
	for (int i = 0; i < 3 && l->strs[i]; i++)
		p = put_str(p, str_of(ev, l->strs[i]), e->slen[i]);
}

uint32_t sc_enc_hot_size(const struct sc_ev *ev, uint16_t *slen)
{
	switch (ev->kind) {
	case SC_EV_TASK_START:
		return PROTO_HDR_SIZE + EV_COMMON + 16;
	case SC_EV_TASK_END:
	case SC_EV_TASK_FORK:
		return PROTO_HDR_SIZE + EV_COMMON + 32;
	case SC_EV_SCOPE_OPEN:
		/* Cut to the cap, as sc_enc_measure cuts every string. */
		*slen = ev->s1 ? (uint16_t)strnlen(ev->s1, PROTO_MAX_STR) : 0;
		return PROTO_HDR_SIZE + EV_COMMON + 48 + 3u + *slen;
	default:
		return 0;
	}
}

/* The layouts table's TASK_START, TASK_END, TASK_FORK and SCOPE_OPEN,
 * written out (test_agent compares the bytes with sc_enc_write's). */
void sc_enc_hot_write(const struct sc_ev *ev, uint32_t size, uint16_t slen, uint32_t site,
		      uint8_t *dst)
{
	put32(dst, size);
	put32(dst + 4, ev->kind);
	put64(dst + 8, (uint64_t)(ev->ts ? ev->ts : scope_now()));
	put32(dst + 16, ev->tid);
	put32(dst + 20, 0);
	put64(dst + 24, ev->a);
	put64(dst + 32, ev->b);
	switch (ev->kind) {
	case SC_EV_TASK_END:
		put64(dst + 40, (uint64_t)ev->i);
		put32(dst + 48, ev->u);
		put32(dst + 52, 0);
		break;
	case SC_EV_TASK_FORK:
		put64(dst + 40, ev->d);
		put32(dst + 48, ev->u);
		put32(dst + 52, site);
		break;
	case SC_EV_SCOPE_OPEN:
		put64(dst + 40, ev->c);
		put64(dst + 48, ev->d);
		put64(dst + 56, (uint64_t)ev->i);
		put32(dst + 64, ev->u);
		put32(dst + 68, site);
		put_str(dst + 72, ev->s1, slen);
		break;
	}
}

int sc_enc_wants_site(const struct sc_enc *e)
{
	return e->l->site;
}

/* SITE: header, u32 site, i32 line, then file and func (cut to
 * PROTO_MAX_STR like every string). */
uint32_t sc_enc_site_size(const struct sc_site *s, uint16_t slen[2])
{
	slen[0] = s->file ? (uint16_t)strnlen(s->file, PROTO_MAX_STR) : 0;
	slen[1] = s->func ? (uint16_t)strnlen(s->func, PROTO_MAX_STR) : 0;
	return PROTO_HDR_SIZE + 8u + 3u + slen[0] + 3u + slen[1];
}

void sc_enc_site(uint8_t *dst, uint32_t size, uint32_t id, const struct sc_site *s,
		 const uint16_t slen[2], uint16_t flags)
{
	put32(dst, size);
	put32(dst + 4, (uint32_t)PROTO_SITE | (uint32_t)flags << 16);
	put32(dst + 8, id);
	put32(dst + 12, (uint32_t)s->line);
	uint8_t *p = put_str(dst + PROTO_HDR_SIZE + 8, s->file, slen[0]);
	put_str(p, s->func, slen[1]);
}
