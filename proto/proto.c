/* proto.c - table-driven encoder and bounds-checked decoder of the scoped wire
 * protocol (layouts in proto.h, byte-level spec in schemas/protocol.md). */
#include "proto.h"

#include <stddef.h>
#include <string.h>

/* How one fixed-payload field moves between the wire and struct proto_msg
 * (the kinds of wire.h's PROTO_FIELDS_* lists). */
enum fkind {
	F_END = 0,
	F_U16,	 /* u16 <-> uint16_t */
	F_VER,	 /* u16 <-> uint16_t, checked before the layout (check_version) */
	F_U32,	 /* u32 <-> uint32_t */
	F_I32,	 /* i32 <-> int32_t */
	F_I32W,	 /* i32 on the wire, int64_t in the struct (sign-extended) */
	F_64,	 /* u64/i64 <-> 8-byte field */
	F_PAD16, /* reserved u16: written 0, ignored when read */
	F_PAD32, /* reserved u32 */
};

struct fld {
	uint8_t kind;
	uint16_t off; /* offsetof(struct proto_msg, field) */
};

/* Variable array after the fixed payload (STACK_REQUEST / STACK_REPLY). */
enum akind { A_NONE = 0, A_TIDS, A_ADDRS };

#define MAX_FLDS 20
#define MAX_STRS 3

struct layout {
	uint16_t type;
	const char *name;
	uint8_t array;
	struct fld f[MAX_FLDS];
	uint16_t str[MAX_STRS + 1]; /* offsets of struct proto_str members; 0 ends */
};

/* wire.h's lists expanded into layouts[]: one row per message, indexed by
 * L_<name>. */
#define O(m) ((uint16_t)offsetof(struct proto_msg, m))
#define FLD_VER(m) {F_VER, O(m)},
#define FLD_U16(m) {F_U16, O(m)},
#define FLD_U32(m) {F_U32, O(m)},
#define FLD_I32(m) {F_I32, O(m)},
#define FLD_I32W(m) {F_I32W, O(m)},
#define FLD_U64(m) {F_64, O(m)},
#define FLD_I64(m) {F_64, O(m)},
#define FLD_PAD16(m) {F_PAD16, 0},
#define FLD_PAD32(m) {F_PAD32, 0},
#define FLD_POOLF(kind, m) FLD_##kind(pool.m)
#define FLD_POOL(m) PROTO_POOL_FIELDS(FLD_POOLF)
#define FLD(kind, m, source) FLD_##kind(m)
#define STR(m, source) O(m),
/* The name without EV_: "TASK_FORK". */
#define NAME_SKIP_SESSION 0
#define NAME_SKIP_MARK 0
#define NAME_SKIP_STACK 0
#define NAME_SKIP_EVENT 3
#define NAME_SKIP_DERIVED 3

#define INDEX(NAME, name, number, class, array) L_##name,
enum { PROTO_MESSAGES(INDEX) NLAYOUTS };

#define ARRAY(NAME, name, number, class, array) ARRAY_##name = A_##array,
enum { PROTO_MESSAGES(ARRAY) };

#define LAYOUT(NAME, name, number, class, array)                                                   \
	[L_##name] = {PROTO_##NAME,                                                                \
		      &#NAME[NAME_SKIP_##class],                                                   \
		      A_##array,                                                                   \
		      {PROTO_PREFIX_##class(FLD) PROTO_FIELDS_##name(FLD){F_END, 0}},              \
		      {PROTO_STRS_##name(STR) 0}},
static const struct layout layouts[NLAYOUTS] = {PROTO_MESSAGES(LAYOUT)};

/* The numbered ranges of enum proto_type; a type inside one but without a
 * layout is a newer message we skip. */
static const struct {
	uint16_t lo, hi;
} ranges[] = {{0x0001, 0x00ff}, {0x0100, 0x01ff}, {0x0200, 0x02ff}};

static const uint8_t fsize[] = {
    [F_U16] = 2,  [F_VER] = 2, [F_U32] = 4,   [F_I32] = 4,
    [F_I32W] = 4, [F_64] = 8,  [F_PAD16] = 2, [F_PAD32] = 4,
};

static const struct {
	uint16_t elem, cap, count_off;
} arrays[] = {
    [A_TIDS] = {4, PROTO_MAX_TIDS, O(ntids)},
    [A_ADDRS] = {8, PROTO_MAX_FRAMES, O(nframes)},
};

/* The layout of a type found by indexing rather than by a scan of the table
 * (the daemon decodes millions of frames a second), and each layout's fixed
 * payload size, so that one comparison bounds all its fields.  A message
 * number outside the index does not compile. */
#define SLOTS 0x50 /* types per range with a layout: 0x?00 .. 0x?4f */
#define SLOT(NAME, name, number, class, array) [(number) >> 8][(number)&0xff] = L_##name + 1,
static const uint8_t slot_of[3][SLOTS] = {PROTO_MESSAGES(SLOT)}; /* index + 1; 0: none */
#define FIXED(NAME, name, number, class, array) [L_##name] = sizeof(struct proto_wire_##name),
static const uint16_t fixed_of[NLAYOUTS] = {PROTO_MESSAGES(FIXED)};

static const struct layout *find_layout(uint16_t type)
{
	unsigned hi = type >> 8, lo = type & 0xffu;
	if (hi >= 3 || lo >= SLOTS || !slot_of[hi][lo])
		return NULL;
	return &layouts[slot_of[hi][lo] - 1];
}

static int in_known_range(uint16_t type)
{
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
		if (type >= ranges[i].lo && type <= ranges[i].hi)
			return 1;
	return 0;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* Field access through offsets; memcpy keeps it free of aliasing trouble.
 * Every copy has a constant size, so each compiles to one move: a size
 * looked up from a table made the compiler emit a generic copy (rep movs)
 * per field, which was most of the decoder's time. */
static void store(struct proto_msg *m, const struct fld *f, const uint8_t *p)
{
	char *dst = (char *)m + f->off;

	switch (f->kind) {
	case F_U16:
	case F_VER: {
		uint16_t v = get16(p);
		memcpy(dst, &v, sizeof v);
		break;
	}
	case F_U32:
	case F_I32: {
		uint32_t v = get32(p);
		memcpy(dst, &v, sizeof v);
		break;
	}
	case F_I32W: {
		int64_t v = (int32_t)get32(p);
		memcpy(dst, &v, sizeof v);
		break;
	}
	case F_64: {
		uint64_t v = get64(p);
		memcpy(dst, &v, sizeof v);
		break;
	}
	default: /* reserved fields are not read */
		break;
	}
}

static void load(const struct proto_msg *m, const struct fld *f, uint8_t *p)
{
	const char *src = (const char *)m + f->off;

	switch (f->kind) {
	case F_U16:
	case F_VER: {
		uint16_t v;
		memcpy(&v, src, sizeof v);
		put16(p, v);
		break;
	}
	case F_U32:
	case F_I32: {
		uint32_t v;
		memcpy(&v, src, sizeof v);
		put32(p, v);
		break;
	}
	case F_I32W: {
		int64_t v;
		memcpy(&v, src, sizeof v);
		put32(p, (uint32_t)(int32_t)v);
		break;
	}
	case F_64: {
		uint64_t v;
		memcpy(&v, src, sizeof v);
		put64(p, v);
		break;
	}
	case F_PAD16:
		put16(p, 0);
		break;
	case F_PAD32:
		put32(p, 0);
		break;
	default:
		break;
	}
}

static uint16_t get_count(const struct proto_msg *m, uint8_t array)
{
	uint16_t n;
	memcpy(&n, (const char *)m + arrays[array].count_off, 2);
	return n;
}

/* Checks the version of HELLO/HELLO_ACK before the layout, so that a peer of
 * another version whose HELLO is laid out differently still gets EVERSION.
 * Every version from PROTO_VERSION_MIN on lays HELLO out alike. */
static int check_version(const struct layout *l, const uint8_t *payload, size_t plen)
{
	if (l->f[0].kind != F_VER || plen < 2)
		return PROTO_OK;
	uint16_t v = get16(payload);
	return v >= PROTO_VERSION_MIN && v <= PROTO_VERSION ? PROTO_OK : PROTO_EVERSION;
}

/* Domain checks on decoded values. */
static int check_values(const struct proto_msg *m)
{
	if (m->type == PROTO_EV_PROCESS_EXIT && m->how != 1 && m->how != 2)
		return PROTO_EVALUE;
	if (m->type == PROTO_STACK_REQUEST && m->max_frames > PROTO_MAX_FRAMES)
		return PROTO_ECOUNT;
	if (m->type == PROTO_SITE && m->site == 0)
		return PROTO_EVALUE; /* 0 means "no site" in the events */
	return PROTO_OK;
}

/* Zeroes *msg through the C library's memset: with the size known, the
 * compiler inlines a string store (rep stos) whose start-up cost is a large
 * part of a small frame's decode (docs/perf-notes.md); the library's vector
 * stores are not. */
static void clear_msg(struct proto_msg *msg)
{
	size_t n = sizeof *msg;
	__asm__("" : "+r"(n)); /* hides the constant size from the compiler */
	memset(msg, 0, n);
}

/* The frames of a fork storm, most of what a daemon decodes there:
 * TASK_FORK and TASK_RAN, or TASK_DONE from version 4, read field by field without the layout walk
 * and its switch per field.  The code is wire.h's field lists expanded into straight loads at
 * constant offsets.  Their layouts fix their lengths exactly and hold no string, array or checked
 * value, so a right length is all there is to check; any other length goes the general way, to its
 * error.  test_proto checks these against the table for every field.
 * Returns whether it decoded buf. */
#define HOT_VER(m) HOT_U16(m) /* (not a hot message's kind: no check here) */
#define HOT_U16(m) msg->m = get16(p + o), o += 2;
#define HOT_U32(m) msg->m = get32(p + o), o += 4;
#define HOT_I32(m) msg->m = (int32_t)get32(p + o), o += 4;
#define HOT_U64(m) msg->m = get64(p + o), o += 8;
#define HOT_I64(m) msg->m = (int64_t)get64(p + o), o += 8;
#define HOT_PAD16(m) o += 2;
#define HOT_PAD32(m) o += 4;
#define HOT(kind, m, source) HOT_##kind(m)
#define ONE_STR(m, source) +1
#define HOT_DECODE(NAME, name, class)                                                              \
	_Static_assert(0 PROTO_STRS_##name(ONE_STR) == 0, #NAME " has strings");                   \
	_Static_assert((int)ARRAY_##name == (int)A_NONE, #NAME " has an array");                   \
	if (msg->type == PROTO_##NAME && flen == PROTO_FIXED(name)) {                              \
		size_t o = 0;                                                                      \
		PROTO_PREFIX_##class(HOT) PROTO_FIELDS_##name(HOT)(void) o;                        \
		return 1;                                                                          \
	}

static int decode_hot(const uint8_t *buf, uint32_t flen, struct proto_msg *msg)
{
	const uint8_t *p = buf + PROTO_HDR_SIZE;

	HOT_DECODE(EV_TASK_FORK, task_fork, EVENT)
	HOT_DECODE(EV_TASK_RAN, task_ran, DERIVED)
	HOT_DECODE(EV_TASK_DONE, task_done, DERIVED)
	return 0;
}

/* Every field the hot messages decode into, zeroed: a message that only
 * proto_decode_hot fills keeps nothing of the frame before. */
#define HOT_ZERO_VER(m)
#define HOT_ZERO_U16(m) msg->m = 0;
#define HOT_ZERO_U32(m) msg->m = 0;
#define HOT_ZERO_I32(m) msg->m = 0;
#define HOT_ZERO_U64(m) msg->m = 0;
#define HOT_ZERO_I64(m) msg->m = 0;
#define HOT_ZERO_PAD16(m)
#define HOT_ZERO_PAD32(m)
#define HOT_ZERO(kind, m, source) HOT_ZERO_##kind(m)

/* clang-format off */
static void hot_zero(struct proto_msg *msg)
{
	PROTO_COMMON(HOT_ZERO)
	PROTO_FIELDS_task_fork(HOT_ZERO)
	PROTO_FIELDS_task_ran(HOT_ZERO)
	PROTO_FIELDS_task_done(HOT_ZERO)
}
/* clang-format on */

int proto_decode_hot(const uint8_t *buf, size_t len, struct proto_msg *msg, size_t *used)
{
	if (len < PROTO_HDR_SIZE)
		return 0;
	uint32_t flen = get32(buf);
	if (flen > len)
		return 0;
	uint16_t type = get16(buf + 4);
	if (type != PROTO_EV_TASK_FORK && type != PROTO_EV_TASK_RAN && type != PROTO_EV_TASK_DONE)
		return 0;
	hot_zero(msg);
	msg->len = flen;
	msg->type = type;
	msg->flags = get16(buf + 6);
	if (!decode_hot(buf, flen, msg))
		return 0; /* a wrong length: proto_decode says what is wrong */
	*used = flen;
	return 1;
}

int proto_decode(const uint8_t *buf, size_t len, struct proto_msg *msg, size_t *used)
{
	clear_msg(msg);
	*used = 0;
	if (len < 4) {
		*used = PROTO_HDR_SIZE - len;
		return PROTO_EAGAIN;
	}
	uint32_t flen = get32(buf);
	if (flen > PROTO_MAX_FRAME)
		return PROTO_ETOOBIG;
	if (flen < PROTO_HDR_SIZE)
		return PROTO_ESHORT;
	if (len < flen) {
		*used = flen - len;
		return PROTO_EAGAIN;
	}
	msg->len = flen;
	msg->type = get16(buf + 4);
	msg->flags = get16(buf + 6);
	if (decode_hot(buf, flen, msg)) {
		*used = flen;
		return PROTO_OK;
	}

	const struct layout *l = find_layout(msg->type);
	if (!l) {
		if (!in_known_range(msg->type))
			return PROTO_ETYPE;
		*used = flen; /* a newer message in a known range: skipped */
		return PROTO_OK;
	}

	const uint8_t *p = buf + PROTO_HDR_SIZE, *end = buf + flen;
	int rc = check_version(l, p, (size_t)(end - p));
	if (rc)
		return rc;

	if ((size_t)(end - p) < fixed_of[l - layouts])
		return PROTO_ESHORT;
	for (const struct fld *f = l->f; f->kind != F_END; f++) {
		store(msg, f, p);
		p += fsize[f->kind];
	}

	if (l->array != A_NONE) {
		size_t n = get_count(msg, l->array), elem = arrays[l->array].elem;
		if (n > arrays[l->array].cap || (size_t)(end - p) != n * elem)
			return PROTO_ECOUNT;
		if (l->array == A_TIDS)
			msg->tids_raw = p;
		else
			msg->addrs_raw = p;
		p += n * elem;
	}

	for (int i = 0; i < MAX_STRS && l->str[i]; i++) {
		struct proto_str *s = (struct proto_str *)((char *)msg + l->str[i]);
		if (end - p < 2)
			return PROTO_ESHORT;
		uint16_t n = get16(p);
		if (n > PROTO_MAX_STR)
			return PROTO_ESTR;
		p += 2;
		if ((size_t)(end - p) < (size_t)n + 1)
			return PROTO_ESHORT;
		if (p[n] != 0 || memchr(p, 0, n))
			return PROTO_ESTR;
		s->p = (const char *)p;
		s->len = n;
		p += n + 1;
	}

	if (p != end)
		return PROTO_ELONG;
	rc = check_values(msg);
	if (rc)
		return rc;
	*used = flen;
	return PROTO_OK;
}

uint32_t proto_tid_at(const struct proto_msg *msg, size_t i)
{
	if (!msg->tids_raw || i >= msg->ntids)
		return 0;
	return get32(msg->tids_raw + 4 * i);
}

uint64_t proto_addr_at(const struct proto_msg *msg, size_t i)
{
	if (!msg->addrs_raw || i >= msg->nframes)
		return 0;
	return get64(msg->addrs_raw + 8 * i);
}

/* The encoded length of a string, or PROTO_ESTR.  len == 0 with p set means
 * "measure it", so callers may fill only p. */
static int str_len(const struct proto_str *s, size_t *out)
{
	size_t n = 0;
	if (s->p) {
		n = s->len ? s->len : strnlen(s->p, PROTO_MAX_STR + 1);
		if (n > PROTO_MAX_STR || memchr(s->p, 0, n))
			return PROTO_ESTR;
	}
	*out = n;
	return PROTO_OK;
}

int proto_encode(uint8_t *buf, size_t cap, const struct proto_msg *msg, const uint32_t *tids,
		 const uint64_t *addrs)
{
	const struct layout *l = find_layout(msg->type);
	if (!l)
		return PROTO_ETYPE;

	size_t total = PROTO_HDR_SIZE, slen[MAX_STRS] = {0}, n = 0;
	for (const struct fld *f = l->f; f->kind != F_END; f++)
		total += fsize[f->kind];
	if (l->array != A_NONE) {
		n = get_count(msg, l->array);
		if (n > arrays[l->array].cap)
			return PROTO_ECOUNT;
		if (n && !(l->array == A_TIDS ? (const void *)tids : (const void *)addrs))
			return PROTO_EVALUE;
		total += n * arrays[l->array].elem;
	}
	for (int i = 0; i < MAX_STRS && l->str[i]; i++) {
		const struct proto_str *s = (const void *)((const char *)msg + l->str[i]);
		int rc = str_len(s, &slen[i]);
		if (rc)
			return rc;
		total += 2 + slen[i] + 1;
	}
	if (total > PROTO_MAX_FRAME || total > cap)
		return PROTO_ETOOBIG;

	uint8_t *p = buf;
	put32(p, (uint32_t)total);
	put16(p + 4, msg->type);
	put16(p + 6, msg->flags);
	p += PROTO_HDR_SIZE;
	for (const struct fld *f = l->f; f->kind != F_END; f++) {
		load(msg, f, p);
		p += fsize[f->kind];
	}
	for (size_t i = 0; i < n; i++) {
		if (l->array == A_TIDS) {
			put32(p, tids[i]);
			p += 4;
		} else {
			put64(p, addrs[i]);
			p += 8;
		}
	}
	for (int i = 0; i < MAX_STRS && l->str[i]; i++) {
		const struct proto_str *s = (const void *)((const char *)msg + l->str[i]);
		put16(p, (uint16_t)slen[i]);
		if (slen[i])
			memcpy(p + 2, s->p, slen[i]);
		p[2 + slen[i]] = 0;
		p += 2 + slen[i] + 1;
	}
	return (int)total;
}

static const char *const errnames[] = {
    [0] = "ok",
    [-PROTO_EAGAIN] = "incomplete frame (read more)",
    [-PROTO_ETOOBIG] = "frame longer than the maximum frame size",
    [-PROTO_ESHORT] = "frame shorter than its layout",
    [-PROTO_ELONG] = "bytes left over after the frame's layout",
    [-PROTO_ESTR] = "string unterminated, too long or with a NUL inside",
    [-PROTO_ETYPE] = "message type outside every known range",
    [-PROTO_EVERSION] = "protocol version not supported",
    [-PROTO_ECOUNT] = "count over its cap or not matching the frame length",
    [-PROTO_EVALUE] = "field value out of its domain",
};

const char *proto_strerror(int err)
{
	if (err > 0 || (size_t)-err >= sizeof errnames / sizeof errnames[0])
		return "unknown protocol error";
	return errnames[-err];
}

const char *proto_type_name(uint16_t type)
{
	const struct layout *l = find_layout(type);
	return l ? l->name : "unknown";
}
