/* test_proto.c - cmocka tests of the wire protocol: round trips of every
 * message type and a data-driven table of malformed frames. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

/* Every message type, as proto/wire.h declares them. */
#define TYPE(NAME, name, number, class, array) PROTO_##NAME,
static const uint16_t all_types[] = {PROTO_MESSAGES(TYPE)};
#undef TYPE
#define NTYPES (sizeof all_types / sizeof all_types[0])

/* --- a frame builder for hand-made (and deliberately broken) frames --- */
struct fb {
	uint8_t b[PROTO_MAX_FRAME + 64];
	size_t n;
};

static void fb_raw(struct fb *f, const void *p, size_t n)
{
	memcpy(f->b + f->n, p, n);
	f->n += n;
}
static void fb_u16(struct fb *f, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	fb_raw(f, b, 2);
}
static void fb_u32(struct fb *f, uint32_t v)
{
	fb_u16(f, (uint16_t)v);
	fb_u16(f, (uint16_t)(v >> 16));
}
static void fb_u64(struct fb *f, uint64_t v)
{
	fb_u32(f, (uint32_t)v);
	fb_u32(f, (uint32_t)(v >> 32));
}
/* A string as the protocol writes it: u16 n, n bytes, NUL. */
static void fb_str(struct fb *f, const char *s)
{
	fb_u16(f, (uint16_t)strlen(s));
	fb_raw(f, s, strlen(s) + 1);
}
static void fb_hdr(struct fb *f, uint16_t type)
{
	f->n = 0;
	fb_u32(f, 0);
	fb_u16(f, type);
	fb_u16(f, 0);
}
/* Sets the header's len to the bytes written. */
static void fb_done(struct fb *f)
{
	uint32_t n = (uint32_t)f->n;
	uint8_t b[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
	memcpy(f->b, b, 4);
}
static void fb_common(struct fb *f, uint16_t type)
{
	fb_hdr(f, type);
	fb_u64(f, 123456789);
	fb_u32(f, 4242);
	fb_u32(f, 0);
}

/* --- builders of the bad-frame table; each leaves a frame in f --- */
/* SCOPE_OPEN's fixed fields after the common ones, up to its strings. */
static void scope_open_fields(struct fb *f)
{
	for (int i = 0; i < 5; i++)
		fb_u64(f, (uint64_t)i + 1);
	fb_u32(f, 0);
	fb_u32(f, 42);
}
static void scope_open_body(struct fb *f)
{
	fb_common(f, PROTO_EV_SCOPE_OPEN);
	scope_open_fields(f);
}

static void bad_len_under_header(struct fb *f)
{
	fb_hdr(f, PROTO_EV_THREAD_EXIT);
	fb_done(f);
	f->b[0] = 7;
}
static void bad_len_over_max(struct fb *f)
{
	fb_hdr(f, PROTO_EV_THREAD_EXIT);
	uint32_t n = PROTO_MAX_FRAME + 1;
	memcpy(f->b, (uint8_t[4]){(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), 0}, 4);
	f->n = 4; /* the header's len alone must be enough to refuse it */
}
static void bad_unterminated(struct fb *f)
{
	scope_open_body(f);
	fb_str(f, "name");
	f->b[f->n - 1] = 'x';
	fb_done(f);
}
static void bad_nul_inside(struct fb *f)
{
	fb_hdr(f, PROTO_SITE);
	fb_u32(f, 1);
	fb_u32(f, 7);
	fb_str(f, "fi\1e.c");
	f->b[f->n - 5] = 0; /* "fi\0e.c" with its terminator */
	fb_str(f, "func");
	fb_done(f);
}
static void bad_string_over_cap(struct fb *f)
{
	static char big[PROTO_MAX_STR + 2];
	memset(big, 'a', PROTO_MAX_STR + 1);
	fb_common(f, PROTO_EV_THREAD_NAME);
	fb_str(f, big);
	fb_done(f);
}
static void stack_request(struct fb *f, uint16_t max_frames, uint16_t ntids, int have)
{
	fb_hdr(f, PROTO_STACK_REQUEST);
	fb_u64(f, 9);
	fb_u16(f, max_frames);
	fb_u16(f, ntids);
	fb_u32(f, 0);
	for (int i = 0; i < have; i++)
		fb_u32(f, (uint32_t)(100 + i));
	fb_done(f);
}
static void bad_ntids_over_cap(struct fb *f)
{
	stack_request(f, 16, PROTO_MAX_TIDS + 1, PROTO_MAX_TIDS + 1);
}
static void bad_ntids_more_bytes(struct fb *f)
{
	stack_request(f, 16, 2, 3);
}
static void bad_ntids_fewer_bytes(struct fb *f)
{
	stack_request(f, 16, 3, 2);
}
static void bad_max_frames(struct fb *f)
{
	stack_request(f, PROTO_MAX_FRAMES + 1, 0, 0);
}
static void stack_reply(struct fb *f, uint16_t nframes, int have)
{
	fb_hdr(f, PROTO_STACK_REPLY);
	fb_u64(f, 9);
	fb_u32(f, 4242);
	fb_u32(f, 0);
	fb_u64(f, 1000);
	fb_u16(f, nframes);
	fb_u16(f, 0);
	fb_u32(f, 0);
	for (int i = 0; i < have; i++)
		fb_u64(f, 0x400000 + (uint64_t)i);
	fb_done(f);
}
static void bad_nframes_over_cap(struct fb *f)
{
	stack_reply(f, PROTO_MAX_FRAMES + 1, PROTO_MAX_FRAMES + 1);
}
static void bad_nframes_mismatch(struct fb *f)
{
	stack_reply(f, 4, 5);
}
static void hello(struct fb *f, uint16_t version, int extra)
{
	fb_hdr(f, PROTO_HELLO);
	fb_u16(f, version);
	fb_u16(f, 0);
	fb_u32(f, 1);
	fb_u64(f, 1);
	fb_u64(f, 2);
	fb_u64(f, 3);
	fb_str(f, "0.1.0");
	fb_str(f, "prog");
	fb_str(f, "/bin/prog");
	for (int i = 0; i < extra; i++)
		fb_u32(f, 0);
	fb_done(f);
}
static void bad_hello_version(struct fb *f)
{
	hello(f, PROTO_VERSION + 1, 0);
}
static void bad_hello_version_other_layout(struct fb *f)
{
	hello(f, PROTO_VERSION + 1, 3);
}
static void bad_hello_version_zero(struct fb *f)
{
	hello(f, 0, 0);
}
static void bad_hello_version_below_min(struct fb *f)
{
	hello(f, PROTO_VERSION_MIN - 1, 0);
}
/* A TASK_FORK as it was before fn joined it (task, scope, state, line). */
static void task_fork_without_fn(struct fb *f, int strings)
{
	fb_common(f, PROTO_EV_TASK_FORK);
	fb_u64(f, 12);
	fb_u64(f, 7);
	fb_u32(f, 0);
	fb_u32(f, 40);
	if (strings) {
		fb_str(f, "demo.c");
		fb_str(f, "serve");
	}
	fb_done(f);
}
static void bad_fork_without_fn(struct fb *f)
{
	task_fork_without_fn(f, 0);
}
/* Version 1's fork site strings behind it: its 24 fixed bytes and 9 of
 * the strings' fill version 2's 32 fixed bytes; 8 bytes are left over. */
static void bad_fork_without_fn_strings(struct fb *f)
{
	task_fork_without_fn(f, 1);
}

/* One piece of a frame that a table row spells out: a little-endian integer
 * of 2, 4 or 8 bytes, a protocol string, or n raw bytes. */
enum step_kind { S_END = 0, S_U16, S_U32, S_U64, S_STR, S_RAW };
struct step {
	enum step_kind k;
	uint64_t v;
	const char *s;
};
#define U16(v)                                                                                     \
	{                                                                                          \
		S_U16, (v), NULL                                                                   \
	}
#define U32(v)                                                                                     \
	{                                                                                          \
		S_U32, (v), NULL                                                                   \
	}
#define U64(v)                                                                                     \
	{                                                                                          \
		S_U64, (v), NULL                                                                   \
	}
#define STR(s)                                                                                     \
	{                                                                                          \
		S_STR, 0, (s)                                                                      \
	}
#define RAW(s, n)                                                                                  \
	{                                                                                          \
		S_RAW, (n), (s)                                                                    \
	}
#define END                                                                                        \
	{                                                                                          \
		S_END, 0, NULL                                                                     \
	}

/* How a spelled-out frame starts: the header alone, the header and the
 * common event fields, or a whole SCOPE_OPEN up to its strings. */
enum start { HDR, COMMON, SCOPE_OPEN };

/* A bad frame: made by build, or else by start, type and steps. */
struct bad_case {
	const char *what;
	int want;
	void (*build)(struct fb *f);
	enum start start;
	uint16_t type;
	struct step steps[8]; /* up to 7, then S_END (the zeroed rest) */
};

static void build_spelled(struct fb *f, const struct bad_case *c)
{
	static void (*const starts[])(struct fb *, uint16_t) = {
	    [HDR] = fb_hdr, [COMMON] = fb_common, [SCOPE_OPEN] = fb_common};
	starts[c->start](f, c->type);
	if (c->start == SCOPE_OPEN)
		scope_open_fields(f);
	for (const struct step *st = c->steps; st->k != S_END; st++) {
		switch (st->k) {
		case S_U16:
			fb_u16(f, (uint16_t)st->v);
			break;
		case S_U32:
			fb_u32(f, (uint32_t)st->v);
			break;
		case S_U64:
			fb_u64(f, st->v);
			break;
		case S_STR:
			fb_str(f, st->s);
			break;
		default:
			fb_raw(f, st->s, (size_t)st->v);
			break;
		}
	}
	fb_done(f);
}

#define BUILT(what, fn, want)                                                                      \
	{                                                                                          \
		what, want, fn, HDR, 0,                                                            \
		{                                                                                  \
			END                                                                        \
		}                                                                                  \
	}
#define SPELLED(what, want, start, type, ...)                                                      \
	{                                                                                          \
		what, want, NULL, start, type,                                                     \
		{                                                                                  \
			__VA_ARGS__                                                                \
		}                                                                                  \
	}

/* TASK_DONE's 64 bytes of fields (any values decode). */
#define DONE_FIELDS "taskTASKscopSCOPfn..FN..errrERRRstatsiteworkresvstartSTAend_END_"

static const struct bad_case bad_cases[] = {
    BUILT("len below the header size", bad_len_under_header, PROTO_ESHORT),
    BUILT("len over PROTO_MAX_FRAME", bad_len_over_max, PROTO_ETOOBIG),
    SPELLED("event with a header only", PROTO_ESHORT, HDR, PROTO_EV_SCOPE_OPEN, END),
    SPELLED("fixed payload cut short", PROTO_ESHORT, COMMON, PROTO_EV_JOIN_END, U64(7),
	    U32(0) /* result needs 8 bytes */),
    SPELLED("a string missing", PROTO_ESHORT, HDR, PROTO_SITE, U32(1), U32(7),
	    STR("file.c") /* func absent */),
    SPELLED("SITE numbered 0", PROTO_EVALUE, HDR, PROTO_SITE, U32(0), U32(7), STR("file.c"),
	    STR("fn")),
    SPELLED("SCOPE_OPEN with version 1's strings", PROTO_ELONG, SCOPE_OPEN, PROTO_EV_SCOPE_OPEN,
	    STR("name"), STR("file.c"), STR("fn")),
    BUILT("string without its NUL", bad_unterminated, PROTO_ESTR),
    BUILT("string with a NUL inside", bad_nul_inside, PROTO_ESTR),
    BUILT("string over PROTO_MAX_STR", bad_string_over_cap, PROTO_ESTR),
    SPELLED("string running past the frame", PROTO_ESHORT, COMMON, PROTO_EV_THREAD_NAME, U16(50),
	    RAW("short", 6)),
    SPELLED("string length cut in half", PROTO_ESHORT, COMMON, PROTO_EV_THREAD_NAME,
	    RAW("\5", 1) /* half of the u16 */),
    BUILT("ntids over PROTO_MAX_TIDS", bad_ntids_over_cap, PROTO_ECOUNT),
    BUILT("ntids below the tids sent", bad_ntids_more_bytes, PROTO_ECOUNT),
    BUILT("ntids above the tids sent", bad_ntids_fewer_bytes, PROTO_ECOUNT),
    BUILT("max_frames over PROTO_MAX_FRAMES", bad_max_frames, PROTO_ECOUNT),
    BUILT("nframes over PROTO_MAX_FRAMES", bad_nframes_over_cap, PROTO_ECOUNT),
    BUILT("nframes not matching len", bad_nframes_mismatch, PROTO_ECOUNT),
    BUILT("HELLO of the next version", bad_hello_version, PROTO_EVERSION),
    BUILT("HELLO of another version and layout", bad_hello_version_other_layout, PROTO_EVERSION),
    BUILT("HELLO of version 0", bad_hello_version_zero, PROTO_EVERSION),
    BUILT("HELLO older than PROTO_VERSION_MIN", bad_hello_version_below_min, PROTO_EVERSION),
    SPELLED("HELLO_ACK of another version", PROTO_EVERSION, HDR, PROTO_HELLO_ACK, U16(77), U16(0),
	    U32(0)),
    SPELLED("type 0x0000", PROTO_ETYPE, HDR, 0x0000, END),
    SPELLED("type 0x0300", PROTO_ETYPE, HDR, 0x0300, END),
    SPELLED("type 0xffff", PROTO_ETYPE, HDR, 0xffff, U64(0)),
    SPELLED("a byte left over", PROTO_ELONG, COMMON, PROTO_EV_JOIN_BEGIN, U64(5), RAW("!", 1)),
    SPELLED("bytes left over after a string", PROTO_ELONG, COMMON, PROTO_EV_THREAD_NAME,
	    STR("worker-1"), U32(0)),
    SPELLED("PROCESS_EXIT with how 3", PROTO_EVALUE, COMMON, PROTO_EV_PROCESS_EXIT, U32(3), U32(0)),
    BUILT("TASK_FORK without fn, no strings", bad_fork_without_fn, PROTO_ESHORT),
    BUILT("TASK_FORK without fn, with strings", bad_fork_without_fn_strings, PROTO_ELONG),
    /* The two frames proto_decode reads without its layout walk. */
    SPELLED("TASK_FORK with a byte more", PROTO_ELONG, COMMON, PROTO_EV_TASK_FORK, U64(1), U64(2),
	    U64(3), U32(1), U32(1), RAW("!", 1)),
    SPELLED("TASK_FORK without its site", PROTO_ESHORT, COMMON, PROTO_EV_TASK_FORK, U64(1), U64(2),
	    U64(3), U32(1)),
    SPELLED("TASK_RAN with a field more", PROTO_ELONG, COMMON, PROTO_EV_TASK_RAN, U64(1), U64(2),
	    U64(0), U32(2), U32(0), U64(9), U64(9)),
    SPELLED("TASK_RAN without end_ts", PROTO_ESHORT, COMMON, PROTO_EV_TASK_RAN, U64(1), U64(2),
	    U64(0), U32(2), U32(0)),
    SPELLED("TASK_RAN with end_ts cut short", PROTO_ESHORT, COMMON, PROTO_EV_TASK_RAN, U64(1),
	    U64(2), U64(0), U32(2), U32(0), U32(9)),
    SPELLED("TASK_DONE with a field more", PROTO_ELONG, COMMON, PROTO_EV_TASK_DONE,
	    RAW(DONE_FIELDS, 64), U32(0)),
    SPELLED("TASK_DONE without end_ts", PROTO_ESHORT, COMMON, PROTO_EV_TASK_DONE,
	    RAW(DONE_FIELDS, 56)),
    SPELLED("TASK_DONE with end_ts cut short", PROTO_ESHORT, COMMON, PROTO_EV_TASK_DONE,
	    RAW(DONE_FIELDS, 60)),
};

static void test_bad_frames(void **state)
{
	(void)state;
	static struct fb f;
	struct proto_msg m;
	size_t used;

	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
		memset(&f, 0, sizeof f);
		if (bad_cases[i].build)
			bad_cases[i].build(&f);
		else
			build_spelled(&f, &bad_cases[i]);
		int rc = proto_decode(f.b, f.n, &m, &used);
		if (rc != bad_cases[i].want)
			fail_msg("case '%s': decode returned %d (%s), want %d (%s)",
				 bad_cases[i].what, rc, proto_strerror(rc), bad_cases[i].want,
				 proto_strerror(bad_cases[i].want));
		assert_string_not_equal(proto_strerror(rc), "unknown protocol error");
	}
}

/* Fills every field of the message a type uses with distinct values. */
static void fill(struct proto_msg *m, uint16_t type, uint32_t *tids, uint64_t *addrs)
{
	memset(m, 0, sizeof *m);
	m->type = type;
	m->flags = PROTO_F_SNAPSHOT;
	m->version = PROTO_VERSION;
	m->pid = 4242;
	m->start_realtime_ns = 1764441600000000000;
	m->ref_mono_ns = 5000000001;
	m->ref_realtime_ns = 1764441605000000001;
	m->runtime_version = (struct proto_str){"0.1.0", 5};
	m->program = (struct proto_str){"scope-demo", 0}; /* len 0: encoder measures */
	m->exe = (struct proto_str){"/usr/bin/scope-demo", 19};
	m->ts = -77; /* signedness survives */
	m->tid = 0xfffffff0u;
	m->scope = 0x1122334455667788ull;
	m->parent = 2;
	m->parent_task = 3;
	m->task = 0xfedcba9876543210ull;
	m->pool_id = 5;
	m->fn = 0x00005566778899abull;
	m->deadline = 1234567890123;
	m->result = -20001;
	m->error = -110;
	m->end_ts = 5000000999;
	m->start_ts = 5000000555;
	m->worker = 0xfffffff1u;
	m->joiner = 3;
	m->reason = 4;
	m->state = 2;
	m->role = 1;
	m->kind = 6;
	m->how = 2;
	m->line = -1;
	m->site = 0xfffffffeu;
	m->name = (struct proto_str){"handle", 6};
	m->file = (struct proto_str){"demo.c", 6};
	m->func = (struct proto_str){"serve", 5};
	m->key = (struct proto_str){"request_id", 10};
	m->value = (struct proto_str){"", 0};
	m->pool = (struct proto_pool){1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, -12};
	m->code = -9;
	m->message = (struct proto_str){"bad peer", 8};
	m->seq = 17;
	m->count = 1000;
	m->total_lost = 99;
	m->lost_since = 11;
	m->req = 31;
	m->max_frames = 64;
	m->ntids = 3;
	m->nframes = 4;
	m->pause_ns = 12345;
	m->total_ns = 99999;
	m->max_pause_ns = 2222;
	m->nthreads = 3;
	for (int i = 0; i < 3; i++)
		tids[i] = 100u + (uint32_t)i;
	for (int i = 0; i < 4; i++)
		addrs[i] = 0x7f0000001000ull + (uint64_t)i * 16;
}

/* encode -> decode -> encode must give the same bytes for every type, and
 * every prefix of a frame must ask for more. */
static void test_round_trip_every_type(void **state)
{
	(void)state;
	uint8_t a[4096], b[4096];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, d;
	size_t used;

	for (size_t t = 0; t < NTYPES; t++) {
		fill(&m, all_types[t], tids, addrs);
		int n = proto_encode(a, sizeof a, &m, tids, addrs);
		assert_true(n >= (int)PROTO_HDR_SIZE);
		assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
		assert_int_equal(used, (size_t)n);
		assert_int_equal(d.type, all_types[t]);
		assert_int_equal(d.flags, PROTO_F_SNAPSHOT);
		assert_int_equal(d.len, (uint32_t)n);
		assert_string_not_equal(proto_type_name(all_types[t]), "unknown");

		uint32_t dt[PROTO_MAX_TIDS];
		uint64_t da[PROTO_MAX_FRAMES];
		for (size_t i = 0; i < d.ntids; i++)
			dt[i] = proto_tid_at(&d, i);
		for (size_t i = 0; i < d.nframes; i++)
			da[i] = proto_addr_at(&d, i);
		int n2 = proto_encode(b, sizeof b, &d, dt, da);
		assert_int_equal(n2, n);
		assert_memory_equal(a, b, (size_t)n);

		for (int cut = 0; cut < n; cut++) {
			int rc = proto_decode(a, (size_t)cut, &d, &used);
			if (rc != PROTO_EAGAIN)
				fail_msg("%s cut to %d bytes: %s", proto_type_name(all_types[t]),
					 cut, proto_strerror(rc));
			assert_true(used > 0);
			assert_true(used <= (size_t)n - (size_t)cut);
		}
	}
}

/* Every version from PROTO_VERSION_MIN to PROTO_VERSION is read, in HELLO
 * and in HELLO_ACK (a reader acks the older of two versions). */
static void test_versions_read(void **state)
{
	(void)state;
	uint8_t a[4096];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, d;
	size_t used;
	assert_true(PROTO_VERSION_MIN <= PROTO_VERSION);
	for (uint16_t v = PROTO_VERSION_MIN; v <= PROTO_VERSION; v++) {
		static const uint16_t types[] = {PROTO_HELLO, PROTO_HELLO_ACK};
		for (int t = 0; t < 2; t++) {
			fill(&m, types[t], tids, addrs);
			m.version = v;
			int n = proto_encode(a, sizeof a, &m, NULL, NULL);
			assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
			assert_int_equal(d.version, v);
		}
	}
}

static void test_field_values(void **state)
{
	(void)state;
	uint8_t a[4096];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, d;
	size_t used;

	fill(&m, PROTO_HELLO, tids, addrs);
	int n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_int_equal(d.version, PROTO_VERSION);
	assert_int_equal(d.pid, 4242);
	assert_true(d.ref_realtime_ns == 1764441605000000001);
	assert_string_equal(d.program.p, "scope-demo");
	assert_int_equal(d.program.len, 10);
	assert_string_equal(d.exe.p, "/usr/bin/scope-demo");
	assert_int_equal(d.ts, 0); /* fields the type does not use stay zero */
	assert_null(d.name.p);

	/* Version 2: the open site by number; file, func and line are SITE's. */
	fill(&m, PROTO_EV_SCOPE_OPEN, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(n, 8 + 16 + 5 * 8 + 8 + (2 + 6 + 1));
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.ts == -77);
	assert_true(d.tid == 0xfffffff0u);
	assert_true(d.scope == 0x1122334455667788ull);
	assert_true(d.deadline == 1234567890123);
	assert_true(d.site == 0xfffffffeu);
	assert_int_equal(d.line, 0);
	assert_string_equal(d.name.p, "handle");
	assert_null(d.file.p);
	assert_null(d.func.p);
	assert_int_equal(d.version, 0);

	fill(&m, PROTO_SITE, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(n, 8 + 8 + (2 + 6 + 1) + (2 + 5 + 1));
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.site == 0xfffffffeu);
	assert_int_equal(d.line, -1);
	assert_string_equal(d.file.p, "demo.c");
	assert_string_equal(d.func.p, "serve");
	assert_int_equal(d.ts, 0);
	m.site = 0; /* 0 means "no site": not a definition */
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_EVALUE);

	/* fn sits right after scope, and only TASK_FORK carries it. */
	fill(&m, PROTO_EV_TASK_FORK, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(n, 8 + 16 + 3 * 8 + 8);
	uint64_t wire_fn = 0;
	for (int i = 7; i >= 0; i--)
		wire_fn = wire_fn << 8 | a[8 + 16 + 16 + i];
	assert_true(wire_fn == 0x00005566778899abull);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.fn == 0x00005566778899abull);
	assert_true(d.task == 0xfedcba9876543210ull);
	assert_true(d.scope == 0x1122334455667788ull);
	assert_int_equal(d.state, 2);
	assert_true(d.site == 0xfffffffeu);
	assert_null(d.file.p);
	m.fn = 0; /* unknown */
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.fn == 0);
	fill(&m, PROTO_EV_TASK_START, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.fn == 0);

	fill(&m, PROTO_STACK_REPLY, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, addrs);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_true(d.error == -110); /* i32 on the wire, sign-extended */
	assert_int_equal(d.nframes, 4);
	assert_true(proto_addr_at(&d, 3) == 0x7f0000001030ull);
	assert_true(proto_addr_at(&d, 4) == 0); /* out of range: 0, no read */

	fill(&m, PROTO_STACK_REQUEST, tids, addrs);
	n = proto_encode(a, sizeof a, &m, tids, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_int_equal(d.ntids, 3);
	assert_int_equal(proto_tid_at(&d, 2), 102);

	fill(&m, PROTO_EV_POOL_CREATE, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_int_equal(d.pool.policy, 7);
	assert_true(d.pool.rejected == 11);
	assert_true(d.pool.keep_alive_ns == -12);
	assert_string_equal(d.name.p, "handle");

	fill(&m, PROTO_EV_VALUE_BIND, tids, addrs);
	m.value.p = NULL; /* NULL encodes as empty */
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
	assert_string_equal(d.value.p, "");
	assert_int_equal(d.value.len, 0);
}

/* TASK_FORK, TASK_RAN and TASK_DONE decode without the layout walk: the
 * result is exactly what the table says, every field the type uses and
 * nothing else (the rest stays zero, as for every type). */
static void test_hot_frames_exact(void **state)
{
	(void)state;
	static const uint16_t hot[] = {PROTO_EV_TASK_FORK, PROTO_EV_TASK_RAN, PROTO_EV_TASK_DONE};
	static const int len[] = {56, 64, 88};
	uint8_t a[256];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, d, want;
	size_t used;

	for (int t = 0; t < 3; t++) {
		fill(&m, hot[t], tids, addrs);
		int n = proto_encode(a, sizeof a, &m, NULL, NULL);
		assert_int_equal(n, len[t]);
		memset(&d, 0x5a, sizeof d); /* what a reused message held before */
		assert_int_equal(proto_decode(a, (size_t)n, &d, &used), PROTO_OK);
		memset(&want, 0, sizeof want);
		want.type = hot[t];
		want.flags = m.flags;
		want.len = (uint32_t)n;
		want.ts = m.ts;
		want.tid = m.tid;
		want.task = m.task;
		want.scope = m.scope;
		want.state = m.state;
		if (hot[t] != PROTO_EV_TASK_RAN) {
			want.fn = m.fn;
			want.site = m.site;
		}
		if (hot[t] != PROTO_EV_TASK_FORK) {
			want.error = m.error;
			want.end_ts = m.end_ts;
		}
		if (hot[t] == PROTO_EV_TASK_DONE) {
			want.start_ts = m.start_ts;
			want.worker = m.worker;
		}
		assert_memory_equal(&d, &want, sizeof d);
	}
}

/* proto_decode_hot, into one message zeroed once and reused for hot frames
 * of every kind in turn, leaves it exactly as proto_decode leaves a message
 * of its own; it takes no other frame, no wrong length, no part of a
 * frame. */
static void test_decode_hot_reused(void **state)
{
	(void)state;
	static const uint16_t seq[] = {PROTO_EV_TASK_DONE, PROTO_EV_TASK_FORK, PROTO_EV_TASK_RAN,
				       PROTO_EV_TASK_DONE, PROTO_EV_TASK_RAN,  PROTO_EV_TASK_FORK};
	uint8_t a[256];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, hot, want;
	size_t used;

	memset(&hot, 0, sizeof hot);
	for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
		fill(&m, seq[i], tids, addrs);
		m.flags = (uint16_t)i;
		m.task += i;
		m.ts += (int64_t)i;
		int n = proto_encode(a, sizeof a, &m, NULL, NULL);
		assert_true(n > 0);
		assert_int_equal(proto_decode(a, (size_t)n, &want, &used), PROTO_OK);
		used = 0;
		assert_int_equal(proto_decode_hot(a, (size_t)n, &hot, &used), 1);
		assert_int_equal(used, (size_t)n);
		assert_memory_equal(&hot, &want, sizeof hot);
		assert_int_equal(proto_decode_hot(a, (size_t)n - 1, &hot, &used), 0);
	}
	/* Not hot: another type; a hot type with a byte more (which
	 * proto_decode refuses). */
	fill(&m, PROTO_EV_TASK_START, tids, addrs);
	int n = proto_encode(a, sizeof a, &m, NULL, NULL);
	assert_int_equal(proto_decode_hot(a, (size_t)n, &hot, &used), 0);
	fill(&m, PROTO_EV_TASK_DONE, tids, addrs);
	n = proto_encode(a, sizeof a, &m, NULL, NULL);
	a[n] = 0;
	a[0] = (uint8_t)(n + 1);
	assert_int_equal(proto_decode_hot(a, (size_t)n + 1, &hot, &used), 0);
	assert_int_equal(proto_decode(a, (size_t)n + 1, &want, &used), PROTO_ELONG);
	assert_int_equal(proto_decode_hot(a, 3, &hot, &used), 0);
}

/* The packed struct proto_wire_<name> of every message, which code that
 * touches frame bytes directly uses (the agent's TASK_RAN, its encoder, the
 * hot decoder), reads each field of an encoded frame where the encoder put
 * it; reserved fields are zero. */
#define WCHECK_VER(m) assert_int_equal(w.m, d.m);
#define WCHECK_U16(m) assert_int_equal(w.m, d.m);
#define WCHECK_U32(m) assert_int_equal(w.m, d.m);
#define WCHECK_I32(m) assert_int_equal(w.m, d.m);
#define WCHECK_I32W(m) assert_int_equal(w.m, (int32_t)d.m);
#define WCHECK_U64(m) assert_int_equal(w.m, d.m);
#define WCHECK_I64(m) assert_int_equal(w.m, d.m);
#define WCHECK_PAD16(m) assert_int_equal(w.m, 0);
#define WCHECK_PAD32(m) assert_int_equal(w.m, 0);
#define WCHECK_POOLF(kind, x) WCHECK_POOL_##kind(x)
#define WCHECK_POOL_U32(x) assert_int_equal(w.pool.x, d.pool.x);
#define WCHECK_POOL_U64(x) assert_int_equal(w.pool.x, d.pool.x);
#define WCHECK_POOL_I64(x) assert_int_equal(w.pool.x, d.pool.x);
#define WCHECK_POOL_PAD32(x) assert_int_equal(w.pool.x, 0);
#define WCHECK_POOL(m) PROTO_POOL_FIELDS(WCHECK_POOLF)
#define WCHECK(kind, m, source) WCHECK_##kind(m)
#define WCHECK_MSG(NAME, name, number, class, array)                                               \
	{                                                                                          \
		struct proto_wire_##name w;                                                        \
		fill(&d, PROTO_##NAME, tids, addrs);                                               \
		int n = proto_encode(a, sizeof a, &d, tids, addrs);                                \
		assert_true(n >= (int)PROTO_FIXED(name));                                          \
		memcpy(&w, a + PROTO_HDR_SIZE, sizeof w);                                          \
		PROTO_PREFIX_##class(WCHECK) PROTO_FIELDS_##name(WCHECK) checked++;                \
	}

static void test_wire_structs_match_frames(void **state)
{
	(void)state;
	uint8_t a[4096];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg d;
	size_t checked = 0;

	PROTO_MESSAGES(WCHECK_MSG)
	assert_int_equal(checked, NTYPES);
	assert_int_equal(PROTO_FIXED(task_ran), 64);
	assert_int_equal(PROTO_OFF(task_ran, end_ts), 56);
	assert_int_equal(PROTO_FIXED(task_done), 88);
	assert_int_equal(PROTO_OFF(task_done, start_ts), 72);
	assert_int_equal(PROTO_OFF(task_done, end_ts), 80);
}

/* A newer message in a known range is skipped by its len, not refused. */
static void test_unknown_type_in_range_skipped(void **state)
{
	(void)state;
	static struct fb f;
	struct proto_msg m;
	size_t used;
	const uint16_t types[] = {0x00ff, 0x0150, 0x02ff};

	for (size_t i = 0; i < 3; i++) {
		fb_hdr(&f, types[i]);
		fb_u64(&f, 1);
		fb_u32(&f, 2);
		fb_done(&f);
		assert_int_equal(proto_decode(f.b, f.n, &m, &used), PROTO_OK);
		assert_int_equal(used, 20);
		assert_int_equal(m.type, types[i]);
		assert_string_equal(proto_type_name(types[i]), "unknown");
	}
}

/* Frames back to back decode one at a time; the header len alone settles
 * oversize and undersize lens before the rest arrives. */
static void test_stream_and_early_refusal(void **state)
{
	(void)state;
	uint8_t buf[256];
	struct proto_msg m, d;
	uint32_t tids[3];
	uint64_t addrs[4];
	size_t used, off = 0;

	fill(&m, PROTO_EV_JOIN_BEGIN, tids, addrs);
	int n1 = proto_encode(buf, sizeof buf, &m, NULL, NULL);
	fill(&m, PROTO_EV_THREAD_NAME, tids, addrs);
	int n2 = proto_encode(buf + n1, sizeof buf - (size_t)n1, &m, NULL, NULL);
	assert_int_equal(proto_decode(buf, (size_t)(n1 + n2), &d, &used), PROTO_OK);
	assert_int_equal(d.type, PROTO_EV_JOIN_BEGIN);
	off += used;
	assert_int_equal(proto_decode(buf + off, (size_t)(n1 + n2) - off, &d, &used), PROTO_OK);
	assert_int_equal(d.type, PROTO_EV_THREAD_NAME);
	assert_string_equal(d.name.p, "handle");

	assert_int_equal(proto_decode(buf, 0, &d, &used), PROTO_EAGAIN);
	assert_int_equal(used, PROTO_HDR_SIZE);
	uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
	assert_int_equal(proto_decode(huge, 4, &d, &used), PROTO_ETOOBIG);
	uint8_t tiny[4] = {3, 0, 0, 0};
	assert_int_equal(proto_decode(tiny, 4, &d, &used), PROTO_ESHORT);
}

static void test_encode_errors(void **state)
{
	(void)state;
	uint8_t buf[4096];
	static char big[PROTO_MAX_STR + 2];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m;

	fill(&m, PROTO_EV_THREAD_NAME, tids, addrs);
	memset(big, 'b', PROTO_MAX_STR + 1);
	m.name = (struct proto_str){big, 0};
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL), PROTO_ESTR);
	m.name = (struct proto_str){big, PROTO_MAX_STR};
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL),
			 (int)(8 + 16 + 2 + PROTO_MAX_STR + 1));
	m.name = (struct proto_str){"a\0b", 3};
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL), PROTO_ESTR);

	fill(&m, PROTO_EV_SCOPE_OPEN, tids, addrs);
	assert_int_equal(proto_encode(buf, 20, &m, NULL, NULL), PROTO_ETOOBIG);
	m.type = 0x0300;
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL), PROTO_ETYPE);
	m.type = 0x0150; /* in range but without a layout: we cannot encode it */
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL), PROTO_ETYPE);

	fill(&m, PROTO_STACK_REQUEST, tids, addrs);
	m.ntids = PROTO_MAX_TIDS + 1;
	assert_int_equal(proto_encode(buf, sizeof buf, &m, tids, NULL), PROTO_ECOUNT);
	m.ntids = 2;
	assert_int_equal(proto_encode(buf, sizeof buf, &m, NULL, NULL), PROTO_EVALUE);
}

/* Random bytes and random mutations of valid frames: decode must return,
 * and on success used must stay within the buffer. */
static void test_random_garbage(void **state)
{
	(void)state;
	uint8_t a[4096];
	uint32_t tids[3];
	uint64_t addrs[4];
	struct proto_msg m, d;
	size_t used;
	unsigned seed = 12345;

	for (int iter = 0; iter < 20000; iter++) {
		fill(&m, all_types[(size_t)iter % NTYPES], tids, addrs);
		int n = proto_encode(a, sizeof a, &m, tids, addrs);
		assert_true(n > 0);
		int flips = 1 + rand_r(&seed) % 4;
		for (int k = 0; k < flips; k++)
			a[rand_r(&seed) % n] = (uint8_t)rand_r(&seed);
		int rc = proto_decode(a, (size_t)n, &d, &used);
		if (rc == PROTO_OK)
			assert_true(used <= (size_t)n);
		else
			assert_true(rc < 0 && rc >= PROTO_EVALUE);
	}
}

static void test_strerror(void **state)
{
	(void)state;
	for (int e = PROTO_OK; e >= PROTO_EVALUE; e--)
		assert_string_not_equal(proto_strerror(e), "unknown protocol error");
	assert_string_equal(proto_strerror(-100), "unknown protocol error");
	assert_string_equal(proto_strerror(5), "unknown protocol error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_every_type),
	    cmocka_unit_test(test_field_values),
	    cmocka_unit_test(test_hot_frames_exact),
	    cmocka_unit_test(test_decode_hot_reused),
	    cmocka_unit_test(test_wire_structs_match_frames),
	    cmocka_unit_test(test_bad_frames),
	    cmocka_unit_test(test_unknown_type_in_range_skipped),
	    cmocka_unit_test(test_stream_and_early_refusal),
	    cmocka_unit_test(test_encode_errors),
	    cmocka_unit_test(test_random_garbage),
	    cmocka_unit_test(test_strerror),
	    cmocka_unit_test(test_versions_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
