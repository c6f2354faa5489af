/* test_agent_ring.c - the per-thread rings driven directly, without the
 * agent thread: a ring that fills past a quarter or drops events grows, its
 * thread moves to the larger ring with no event lost or reordered, the old
 * ring and the ring of a thread that exited are freed, new threads start at
 * the grown size (on rings exited threads left) until growth stops, and a
 * producer racing the drain loses nothing it does not count; a calm thread's
 * grown ring shrinks back; call sites are
 * defined once, ahead of their first use (protocol v2); a task's start and
 * end drained together go out as one TASK_RAN (protocol v3), and with their
 * fork as one TASK_DONE (protocol v4); a violation
 * the rings lose is handed on to be kept; the agent's drop count comes from
 * its drains, and a drain holds back the events after a loss. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "proto.h"
#include "scope.h"
#include "test_agent_rx.h"
#include "test_util.h"

#define MAX_RING (1024u * 1024)
#define START_RING (128u * 1024)

/* Emits TASK_START events with task ids first..first+n-1. */
static void emit_run(uint64_t first, uint64_t n)
{
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = SC_EV_TASK_START;
	ev.tid = sc_gettid();
	ev.b = 7;
	for (uint64_t i = 0; i < n; i++) {
		ev.a = first + i;
		sc_emit(&ev);
	}
}

/* Task ids of the TASK_START frames in out, in order, appended to ids. */
static size_t collect(const struct sc_buf *out, uint64_t *ids, size_t n, size_t cap)
{
	for (size_t off = 0; off < out->len;) {
		struct proto_msg m;
		size_t used;
		assert_int_equal(proto_decode(out->p + off, out->len - off, &m, &used), PROTO_OK);
		if (m.type == PROTO_EV_TASK_START) {
			assert_true(n < cap);
			ids[n++] = m.task;
		}
		off += used;
	}
	return n;
}

/* Drains everything pending into ids (after what it holds). */
static size_t drain_all(uint64_t *ids, size_t n, size_t cap)
{
	struct sc_buf out = {.max = 64u << 20};
	while (sc_rings_drain(&out, 1u << 20, INT64_MAX) > 0) {
		n = collect(&out, ids, n, cap);
		out.len = 0;
	}
	sc_buf_free(&out);
	return n;
}

static void expect_sequence(const uint64_t *ids, size_t n, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ids[i], first + i);
}

/* Lets growth go quiet, so that new threads start small again. */
static void quiet(void)
{
	for (int i = 0; i < 25; i++)
		sc_rings_reap(0);
}

static int setup(void **state)
{
	(void)state;
	assert_int_equal(sc_rings_init(MAX_RING), 0);
	sc_agent_set_streaming(1);
	sc_rings_set_cut(INT64_MIN); /* the tests stamp events with made-up times */
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	uint64_t *ids = malloc(sizeof *ids * 200000);
	(void)drain_all(ids, 0, 200000);
	free(ids);
	sc_agent_set_streaming(0);
	quiet();
	return 0;
}

/* A ring found more than a quarter full grows; events written before and
 * after the move come out complete and in order; the old ring is freed. */
static void test_grows_and_keeps_order(void **state)
{
	(void)state;
	uint64_t dropped0 = sc_rings_dropped();
	size_t rings0 = sc_rings_count(NULL);
	emit_run(1, 1); /* makes this thread's ring */
	assert_int_equal(sc_ring_bytes_self(NULL), START_RING);
	/* 40-byte frames: 1,000 fill 31% of 128 KiB. */
	emit_run(2, 999);

	/* A partial drain: the agent sees the fill and makes a larger ring. */
	struct sc_buf out = {.max = 64u << 20};
	uint64_t *ids = malloc(sizeof *ids * 4000);
	assert_true(sc_rings_drain(&out, 4096, INT64_MAX) > 0);
	size_t n = collect(&out, ids, 0, 4000);
	sc_buf_free(&out);
	assert_int_equal(sc_rings_count(NULL), rings0 + 2);
	assert_int_equal(sc_ring_bytes_self(NULL), START_RING); /* moves at its next event */

	emit_run(1001, 2000);
	assert_int_equal(sc_ring_bytes_self(NULL), MAX_RING);
	n = drain_all(ids, n, 4000);
	assert_int_equal(n, 3000);
	expect_sequence(ids, n, 1);
	assert_int_equal(sc_rings_dropped(), dropped0);

	sc_rings_reap(0); /* the old ring: retired and drained */
	assert_int_equal(sc_rings_count(NULL), rings0 + 1);
	free(ids);
}

struct filler {
	uint64_t n;
	int hold;	 /* wait for the test's go before exiting */
	size_t size;	 /* the ring size the thread ended with */
	const void *buf; /* and that ring's memory */
	pthread_barrier_t filled, go;
};

static void *fill_and_exit(void *arg)
{
	struct filler *f = arg;
	emit_run(1, f->n);
	f->size = sc_ring_bytes_self(&f->buf);
	if (f->hold) {
		pthread_barrier_wait(&f->filled);
		pthread_barrier_wait(&f->go);
	}
	return NULL;
}

/* Runs fill_and_exit for n events; returns the size its ring ended with
 * and (buf) the ring's memory. */
static size_t fill_thread_buf(uint64_t n, const void **buf)
{
	struct filler f = {.n = n};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fill_and_exit, &f), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (buf)
		*buf = f.buf;
	return f.size;
}

static size_t fill_thread(uint64_t n)
{
	return fill_thread_buf(n, NULL);
}

/* A thread whose ring dropped events gets a larger one; a thread that exits
 * before moving to it leaves neither ring behind; while rings grow, new
 * threads start at the grown size, on the rings exited threads left, and
 * small again once growth has been quiet. */
static void test_drop_growth_exit_and_start_size(void **state)
{
	(void)state;
	size_t rings0 = sc_rings_count(NULL);
	uint64_t dropped0 = sc_rings_dropped();
	/* 10,000 x 40 bytes overflow 128 KiB: drops. */
	struct filler f = {.n = 10000, .hold = 1};
	pthread_barrier_init(&f.filled, NULL, 2);
	pthread_barrier_init(&f.go, NULL, 2);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fill_and_exit, &f), 0);
	pthread_barrier_wait(&f.filled);
	assert_int_equal(f.size, START_RING);
	assert_true(sc_rings_dropped() > dropped0);

	uint64_t *ids = malloc(sizeof *ids * 20000);
	size_t n = drain_all(ids, 0, 20000); /* sees the drops: a larger ring */
	assert_true(n > 0 && n < 10000);
	expect_sequence(ids, n, 1);
	assert_int_equal(sc_rings_count(NULL), rings0 + 2);
	pthread_barrier_wait(&f.go); /* exits without moving to it */
	assert_int_equal(pthread_join(th, NULL), 0);
	pthread_barrier_destroy(&f.filled);
	pthread_barrier_destroy(&f.go);
	sc_rings_reap(0);
	assert_int_equal(sc_rings_count(NULL), rings0);

	/* The large ring of an exited thread is kept for the next one. */
	const void *buf1, *buf2;
	assert_int_equal(fill_thread_buf(1, &buf1), MAX_RING);
	(void)drain_all(ids, 0, 20000);
	sc_rings_reap(0);
	assert_int_equal(fill_thread_buf(1, &buf2), MAX_RING);
	assert_ptr_equal(buf1, buf2);
	(void)drain_all(ids, 0, 20000);
	quiet();
	assert_int_equal(fill_thread(1), START_RING);
	(void)drain_all(ids, 0, 20000);
	sc_rings_reap(0);
	assert_int_equal(sc_rings_count(NULL), rings0);
	free(ids);
}

struct race {
	uint64_t n;
	_Atomic int done;
};

static void *producer(void *arg)
{
	struct race *rc = arg;
	for (uint64_t i = 1; i <= rc->n; i += 64)
		emit_run(i, rc->n - i + 1 < 64 ? rc->n - i + 1 : 64);
	atomic_store(&rc->done, 1);
	return NULL;
}

/* Runs a producer of rc->n events against drains of `chunk` bytes with
 * `pause_us` between them, then drains what is left: the task ids that came
 * out, in order (*got of them; the caller frees them). */
static uint64_t *race(struct race *rc, uint32_t chunk, unsigned pause_us, size_t *got)
{
	uint64_t *ids = malloc(sizeof *ids * rc->n);
	size_t n = 0;
	pthread_t th;
	assert_non_null(ids);
	assert_int_equal(pthread_create(&th, NULL, producer, rc), 0);
	struct sc_buf out = {.max = 64u << 20};
	while (!atomic_load(&rc->done)) {
		(void)sc_rings_drain(&out, chunk, INT64_MAX);
		n = collect(&out, ids, n, rc->n);
		out.len = 0;
		if (pause_us)
			usleep(pause_us);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	sc_buf_free(&out);
	*got = drain_all(ids, n, rc->n);
	return ids;
}

/* A producer racing the drain (and its ring's growth): what comes out is in
 * order, and every event is either delivered or counted as dropped. */
static void test_race_with_drain(void **state)
{
	(void)state;
	struct race rc = {.n = 300000};
	uint64_t dropped0 = sc_rings_dropped();
	size_t n;
	uint64_t *ids = race(&rc, 64u << 10, 0, &n);
	for (size_t i = 1; i < n; i++)
		assert_true(ids[i] > ids[i - 1]);
	assert_int_equal(n + (sc_rings_dropped() - dropped0), rc.n);
	sc_rings_reap(0);
	free(ids);
}

/* With a block time (SCOPED_BLOCK_US), a producer far faster than a slow
 * drain (small drains with pauses: the ring fills between them) waits for
 * room instead of dropping: every event arrives, in order. */
static void test_block_loses_nothing(void **state)
{
	(void)state;
	struct race rc = {.n = 200000};
	uint64_t dropped0 = sc_rings_dropped();
	size_t n;
	sc_rings_block(5000000000ll); /* longer than any drain here takes */
	uint64_t *ids = race(&rc, 4u << 10, 200, &n);
	sc_rings_block(0);
	assert_int_equal(sc_rings_dropped() - dropped0, 0);
	assert_int_equal(n, rc.n);
	expect_sequence(ids, n, 1);
	sc_rings_reap(0);
	free(ids);
}

/* Emits task ids 1..n, one by one, unless 5 s pass first (a thread that
 * waits at every event would take minutes: this fails in seconds). */
static void *fill_undrained(void *arg)
{
	uint64_t n = (uint64_t)(uintptr_t)arg;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 1; i <= n; i++) {
		emit_run(i, 1);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 5)
			return (void *)1;
	}
	return NULL;
}

/* With nobody draining, a full ring waits once for at most the block time,
 * then drops without waiting until it has been drained below half: a
 * thread whose every event waited would take minutes here, not seconds. */
static void test_block_gives_up_once(void **state)
{
	(void)state;
	uint64_t dropped0 = sc_rings_dropped();
	const uint64_t n = 40000; /* several times what a starting ring holds */
	pthread_t th;
	void *late;
	sc_rings_block(20000000); /* 20 ms */
	assert_int_equal(pthread_create(&th, NULL, fill_undrained, (void *)(uintptr_t)n), 0);
	assert_int_equal(pthread_join(th, &late), 0);
	sc_rings_block(0);
	assert_null(late); /* 250 waits of 20 ms would have taken 5 s */
	uint64_t dropped = sc_rings_dropped() - dropped0;
	assert_true(dropped > 1000);
	uint64_t *ids = malloc(sizeof *ids * n);
	size_t got = drain_all(ids, 0, n);
	assert_int_equal(got + dropped, n);
	expect_sequence(ids, got, 1);
	free(ids);
	sc_rings_reap(0);
}

/* A grown ring whose thread has been calm long enough is swapped back for
 * a small one, with no event lost or reordered across the move. */
static void test_calm_ring_shrinks(void **state)
{
	(void)state;
	uint64_t *ids = malloc(sizeof *ids * 4000);
	emit_run(1, 1000); /* 31% of 128 KiB: large after the drain, if not already */
	size_t n = drain_all(ids, 0, 4000);
	emit_run(1001, 10);
	assert_int_equal(sc_ring_bytes_self(NULL), MAX_RING);
	n = drain_all(ids, n, 4000);

	sc_rings_tune(); /* a check that sees the burst's drains is not calm */
	for (int i = 0; i < 199; i++)
		sc_rings_tune();
	emit_run(1011, 5); /* still in the large ring: one check short */
	assert_int_equal(sc_ring_bytes_self(NULL), MAX_RING);
	n = drain_all(ids, n, 4000);
	for (int i = 0; i < 200; i++)
		sc_rings_tune();
	emit_run(1016, 5);
	assert_int_equal(sc_ring_bytes_self(NULL), START_RING);
	n = drain_all(ids, n, 4000);
	assert_int_equal(n, 1020);
	expect_sequence(ids, n, 1);
	free(ids);
}

/* Emits a TASK_FORK of task id from site. */
static void emit_fork(uint64_t id, const struct sc_site *site)
{
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = SC_EV_TASK_FORK;
	ev.tid = sc_gettid();
	ev.a = id;
	ev.b = 7;
	ev.site = *site;
	sc_emit(&ev);
}

static void *fork_from_site(void *arg)
{
	emit_fork(2, arg);
	return NULL;
}

struct site_seen {
	uint32_t id;
	int line;
};

static void collect_site(void *ctx, uint32_t id, const struct sc_site *s)
{
	struct site_seen *seen = ctx;
	if (s->line == 901 || s->line == 902)
		seen[s->line - 901] = (struct site_seen){id, s->line};
}

/* Protocol v2: the first use of a call site, by any thread, puts one SITE
 * frame ahead of it; later uses, from any thread, carry the same number and
 * no definition; the snapshot's walk lists every numbered site. */
static void test_sites_defined_once_before_use(void **state)
{
	(void)state;
	static const struct sc_site here = {"ring_test.c", "forker", 901};
	static const struct sc_site there = {"ring_test.c", "forker", 902};
	emit_fork(1, &here);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fork_from_site, (void *)&here), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	emit_fork(3, &there);
	emit_fork(4, &here);

	struct sc_buf out = {.max = 64u << 20};
	while (sc_rings_drain(&out, 1u << 20, INT64_MAX) > 0) {
	}
	uint32_t defined[8] = {0}, uses[8] = {0};
	int ndef = 0, nuse = 0;
	for (size_t off = 0; off < out.len;) {
		struct proto_msg m;
		size_t used;
		assert_int_equal(proto_decode(out.p + off, out.len - off, &m, &used), PROTO_OK);
		if (m.type == PROTO_SITE) {
			assert_true(ndef < 8);
			assert_string_equal(m.file.p, "ring_test.c");
			assert_string_equal(m.func.p, "forker");
			assert_true(m.line == 901 || m.line == 902);
			defined[ndef++] = m.site;
		} else if (m.type == PROTO_EV_TASK_FORK) {
			int known = 0;
			for (int i = 0; i < ndef; i++)
				known |= defined[i] == m.site;
			assert_true(known); /* its definition came first */
			assert_true(nuse < 8);
			uses[nuse++] = m.site;
		}
		off += used;
	}
	sc_buf_free(&out);
	assert_int_equal(ndef, 2);
	assert_int_equal(nuse, 4);
	assert_true(defined[0] != defined[1]);
	assert_int_equal(uses[0], uses[1]); /* two threads, one number */
	assert_int_equal(uses[0], uses[3]);
	assert_int_equal(uses[2], defined[1]);

	struct site_seen seen[2] = {{0, 0}, {0, 0}};
	sc_sites_walk(collect_site, seen);
	assert_int_equal(seen[0].id, uses[0]);
	assert_int_equal(seen[1].id, uses[2]);
}

static void emit_task_ev(uint16_t kind, uint64_t task, int64_t ts, uint32_t state, int64_t err)
{
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = kind;
	ev.tid = sc_gettid();
	ev.ts = ts;
	ev.a = task;
	ev.b = 7;
	ev.u = state;
	ev.i = err;
	sc_emit(&ev);
}

/* Decodes out into msgs; returns how many. */
static size_t decode_all(const struct sc_buf *out, struct proto_msg *msgs, size_t cap)
{
	size_t n = 0;
	for (size_t off = 0; off < out->len;) {
		size_t used;
		assert_true(n < cap);
		assert_int_equal(proto_decode(out->p + off, out->len - off, &msgs[n++], &used),
				 PROTO_OK);
		off += used;
	}
	return n;
}

static void *emit_between(void *arg)
{
	(void)arg;
	emit_task_ev(SC_EV_TASK_START, 900, 1500, 0, 0); /* between 100's start and end */
	return NULL;
}

/* With a version-3 session, a TASK_START followed in its ring by the same
 * task's TASK_END, both before the horizon, goes out as one TASK_RAN at the
 * start's place; anything else goes out as it was written. */
static void test_start_end_coalesce(void **state)
{
	(void)state;
	struct proto_msg m[16];
	struct sc_buf out = {.max = 1u << 20};
	uint32_t me = sc_gettid();

	sc_rings_coalesce(1);
	emit_task_ev(SC_EV_TASK_START, 100, 1000, 0, 0);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, emit_between, NULL), 0);
	pthread_join(th, NULL);
	emit_task_ev(SC_EV_TASK_END, 100, 2000, SC_TASK_FAILED, -5);
	emit_task_ev(SC_EV_TASK_START, 101, 3000, 0, 0);
	emit_task_ev(SC_EV_TASK_END, 102, 4000, SC_TASK_SUCCESS, 0); /* another task */
	emit_task_ev(SC_EV_TASK_START, 103, 5000, 0, 0);
	emit_task_ev(SC_EV_TASK_END, 103, 9000, SC_TASK_SUCCESS, 0); /* past the horizon */
	assert_int_equal(sc_rings_drain(&out, 1u << 20, 6000), 6);
	size_t n = decode_all(&out, m, 16);
	assert_int_equal(n, 5);
	assert_int_equal(m[0].type, PROTO_EV_TASK_RAN);
	assert_int_equal(m[0].task, 100);
	assert_int_equal(m[0].scope, 7);
	assert_int_equal(m[0].ts, 1000);
	assert_int_equal(m[0].end_ts, 2000);
	assert_int_equal(m[0].tid, me);
	assert_int_equal(m[0].state, SC_TASK_FAILED);
	assert_int_equal(m[0].error, -5);
	assert_int_equal(m[1].type, PROTO_EV_TASK_START); /* the other thread's, stamped 1500 */
	assert_int_equal(m[1].task, 900);
	assert_int_equal(m[2].type, PROTO_EV_TASK_START);
	assert_int_equal(m[2].task, 101);
	assert_int_equal(m[3].type, PROTO_EV_TASK_END);
	assert_int_equal(m[3].task, 102);
	assert_int_equal(m[4].type, PROTO_EV_TASK_START); /* its end is not sendable yet */
	assert_int_equal(m[4].task, 103);
	out.len = 0;
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 1);
	assert_int_equal(decode_all(&out, m, 16), 1);
	assert_int_equal(m[0].type, PROTO_EV_TASK_END);
	assert_int_equal(m[0].task, 103);

	/* A version-2 session: the pair goes out as written. */
	sc_rings_coalesce(0);
	out.len = 0;
	emit_task_ev(SC_EV_TASK_START, 104, 10000, 0, 0);
	emit_task_ev(SC_EV_TASK_END, 104, 11000, SC_TASK_SUCCESS, 0);
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 2);
	assert_int_equal(decode_all(&out, m, 16), 2);
	assert_int_equal(m[0].type, PROTO_EV_TASK_START);
	assert_int_equal(m[1].type, PROTO_EV_TASK_END);
	sc_buf_free(&out);
}

/* A TASK_FORK written as the runtime does (fn in d, no call site). */
static void emit_fork_at(uint64_t task, int64_t ts)
{
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = SC_EV_TASK_FORK;
	ev.tid = sc_gettid();
	ev.ts = ts;
	ev.a = task;
	ev.b = 7;
	ev.d = 0xf000 + task;
	ev.u = SC_TASK_FORKED;
	sc_emit(&ev);
}

/* The events another thread writes: kind, task, ts, state, error. */
struct scripted {
	int n;
	struct {
		uint16_t kind;
		uint64_t task;
		int64_t ts;
		uint32_t state;
		int64_t err;
	} ev[8];
	uint32_t tid;
};

static void *emit_scripted(void *arg)
{
	struct scripted *sc = arg;
	sc->tid = sc_gettid();
	for (int i = 0; i < sc->n; i++)
		emit_task_ev(sc->ev[i].kind, sc->ev[i].task, sc->ev[i].ts, sc->ev[i].state,
			     sc->ev[i].err);
	return NULL;
}

static uint32_t run_scripted(struct scripted *sc)
{
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, emit_scripted, sc), 0);
	pthread_join(th, NULL);
	return sc->tid;
}

/* With a version-4 session, a TASK_FORK whose task starts and ends in the
 * same drain goes out with them as one TASK_DONE, at the TASK_RAN's place;
 * a held fork goes out alone just ahead of any other event of its task, and
 * at the drain's end when its task did nothing in it. */
static void test_fork_run_fold(void **state)
{
	(void)state;
	struct proto_msg m[16];
	struct sc_buf out = {.max = 1u << 20};
	uint32_t me = sc_gettid();

	sc_rings_coalesce(2);
	for (uint64_t t = 200; t <= 203; t++)
		emit_fork_at(t, 1000 + 100 * (int64_t)(t - 200));
	struct scripted w = {5,
			     {{SC_EV_TASK_START, 200, 1500, 0, 0},
			      {SC_EV_TASK_END, 200, 1600, SC_TASK_FAILED, -7},
			      {SC_EV_TASK_START, 201, 1700, 0, 0},
			      {SC_EV_TASK_START, 299, 1750, 0, 0}, /* 201 is not done */
			      {SC_EV_TASK_END, 201, 1800, SC_TASK_SUCCESS, 0}},
			     0};
	uint32_t wt = run_scripted(&w);
	emit_task_ev(SC_EV_TASK_END, 203, 1900, SC_TASK_UNAVAILABLE, 0); /* never started */
	assert_int_equal(sc_rings_drain(&out, 1u << 20, 6000), 10);
	assert_int_equal(sc_rings_held(), 0);
	size_t n = decode_all(&out, m, 16);
	assert_int_equal(n, 8);
	assert_int_equal(m[0].type, PROTO_EV_TASK_DONE);
	assert_int_equal(m[0].task, 200);
	assert_int_equal(m[0].scope, 7);
	assert_int_equal(m[0].fn, 0xf000 + 200);
	assert_int_equal(m[0].ts, 1000);
	assert_int_equal(m[0].tid, me);
	assert_int_equal(m[0].worker, wt);
	assert_int_equal(m[0].start_ts, 1500);
	assert_int_equal(m[0].end_ts, 1600);
	assert_int_equal(m[0].state, SC_TASK_FAILED);
	assert_int_equal(m[0].error, -7);
	assert_int_equal(m[0].flags, 0);
	static const struct {
		uint16_t type;
		uint64_t task;
	} rest[] = {{PROTO_EV_TASK_FORK, 201},	{PROTO_EV_TASK_START, 201},
		    {PROTO_EV_TASK_START, 299}, {PROTO_EV_TASK_END, 201},
		    {PROTO_EV_TASK_FORK, 203},	{PROTO_EV_TASK_END, 203},
		    {PROTO_EV_TASK_FORK, 202}};
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(m[1 + i].type, rest[i].type);
		assert_int_equal(m[1 + i].task, rest[i].task);
	}
	assert_int_equal(m[1].ts, 1100);
	assert_int_equal(m[1].fn, 0xf000 + 201);

	/* A fork may wait for the next drain, while younger than hold_ns. */
	out.len = 0;
	emit_fork_at(400, 10000);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 10500, UINT64_MAX, 1000), 0);
	assert_int_equal(out.len, 0);
	assert_int_equal(sc_rings_held(), 1);
	struct scripted w2 = {2,
			      {{SC_EV_TASK_START, 400, 10600, 0, 0},
			       {SC_EV_TASK_END, 400, 10700, SC_TASK_SUCCESS, 0}},
			      0};
	run_scripted(&w2);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 11000, UINT64_MAX, 1000), 3);
	assert_int_equal(decode_all(&out, m, 16), 1);
	assert_int_equal(m[0].type, PROTO_EV_TASK_DONE);
	assert_int_equal(m[0].task, 400);
	assert_int_equal(m[0].ts, 10000);
	assert_int_equal(sc_rings_held(), 0);
	/* ... and goes out alone once older. */
	out.len = 0;
	emit_fork_at(401, 20000);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 20500, UINT64_MAX, 1000), 0);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 21500, UINT64_MAX, 1000), 1);
	assert_int_equal(decode_all(&out, m, 16), 1);
	assert_int_equal(m[0].type, PROTO_EV_TASK_FORK);
	assert_int_equal(m[0].task, 401);
	/* A drain without hold_ns sends what was held. */
	out.len = 0;
	emit_fork_at(402, 30000);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 30500, UINT64_MAX, 1000), 0);
	assert_int_equal(sc_rings_drain(&out, 1u << 20, 30600), 1);
	assert_int_equal(decode_all(&out, m, 16), 1);
	assert_int_equal(m[0].task, 402);
	/* Thrown away with the rings' events (a snapshot follows). */
	out.len = 0;
	emit_fork_at(403, 40000);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 40500, UINT64_MAX, 1000), 0);
	sc_rings_discard();
	assert_int_equal(sc_rings_held(), 0);
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 0);
	assert_int_equal(out.len, 0);
	sc_rings_set_cut(INT64_MIN); /* the made-up times below are all older */

	/* At most HOLD_KEEP (1024) forks wait for the next drain: the oldest
	 * of more go now, in order; a later drain sends the rest. */
	out.len = 0;
	for (uint64_t t = 0; t < 2000; t++)
		emit_fork_at(1000 + t, 60000 + (int64_t)t);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, 62010, UINT64_MAX, 1000000), 976);
	assert_int_equal(sc_rings_held(), 1024);
	struct sc_buf more = {.max = 1u << 20};
	assert_int_equal(sc_rings_drain(&more, 1u << 20, 62020), 1024);
	assert_int_equal(sc_rings_held(), 0);
	uint64_t next = 1000;
	for (int pass = 0; pass < 2; pass++) {
		const struct sc_buf *b = pass ? &more : &out;
		for (size_t off = 0; off < b->len;) {
			struct proto_msg f;
			size_t used;
			assert_int_equal(proto_decode(b->p + off, b->len - off, &f, &used),
					 PROTO_OK);
			assert_int_equal(f.type, PROTO_EV_TASK_FORK);
			assert_int_equal(f.task, next++);
			off += used;
		}
	}
	assert_int_equal(next, 3000);
	sc_buf_free(&more);
	out.len = 0;

	/* A version-3 session: the fork goes out alone, the run as TASK_RAN. */
	sc_rings_coalesce(1);
	emit_fork_at(500, 50000);
	emit_task_ev(SC_EV_TASK_START, 500, 50100, 0, 0);
	emit_task_ev(SC_EV_TASK_END, 500, 50200, SC_TASK_SUCCESS, 0);
	assert_int_equal(sc_rings_drain_hold(&out, 1u << 20, INT64_MAX, UINT64_MAX, 1000), 3);
	assert_int_equal(decode_all(&out, m, 16), 2);
	assert_int_equal(m[0].type, PROTO_EV_TASK_FORK);
	assert_int_equal(m[1].type, PROTO_EV_TASK_RAN);
	sc_rings_coalesce(0);
	sc_buf_free(&out);
}

/* A TASK_START that ends 8 bytes before its ring's end, so that its
 * TASK_END follows an 8-byte pad record at offset 0: the drain sends them
 * as two frames, and reads nothing past the ring (ASan checks that). */
static void *pad_at_end_thread(void *arg)
{
	(void)arg;
	uint64_t ids[600];
	emit_task_ev(SC_EV_TASK_START, 1, 1, 0, 0);
	assert_int_equal(sc_ring_bytes_self(NULL), START_RING);
	(void)drain_all(ids, 0, 600);
	/* 40-byte STARTs and 56-byte ENDs up to START_RING - 48, in chunks
	 * small enough that no drain finds the ring a quarter full. */
	uint64_t at = 40; /* the first START */
	int ends = 0;
	while (at < START_RING - 48) {
		for (int i = 0; i < 500 && at < START_RING - 48; i++) {
			if ((START_RING - 48 - at) % 40 && ends < 7) {
				emit_task_ev(SC_EV_TASK_END, 10000 + at, 1, SC_TASK_SUCCESS, 0);
				at += 56;
				ends++;
			} else {
				emit_task_ev(SC_EV_TASK_START, 10000 + at, 1, 0, 0);
				at += 40;
			}
		}
		(void)drain_all(ids, 0, 600);
	}
	assert_int_equal(at, START_RING - 48);
	assert_int_equal(sc_ring_bytes_self(NULL), START_RING);
	emit_task_ev(SC_EV_TASK_START, 77, 1, 0, 0);
	emit_task_ev(SC_EV_TASK_END, 77, 2, SC_TASK_SUCCESS, 0);
	struct sc_buf out = {.max = 1u << 20};
	struct proto_msg m[4];
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 2);
	assert_int_equal(decode_all(&out, m, 4), 2);
	assert_int_equal(m[0].type, PROTO_EV_TASK_START);
	assert_int_equal(m[1].type, PROTO_EV_TASK_END);
	assert_int_equal(m[1].task, 77);
	sc_buf_free(&out);
	return NULL;
}

static void test_coalesce_across_the_ring_end(void **state)
{
	(void)state;
	quiet(); /* new threads start small */
	sc_rings_coalesce(1);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, pad_at_end_thread, NULL), 0);
	pthread_join(th, NULL);
	sc_rings_coalesce(0);
}

/* While shedding, a thread's events are counted as dropped and not
 * written; afterwards they are written again. */
static void test_shed_counts_instead_of_writing(void **state)
{
	(void)state;
	uint64_t ids[64];
	emit_run(1, 1);
	assert_int_equal(drain_all(ids, 0, 64), 1);
	uint64_t d0 = sc_rings_dropped();
	sc_rings_shed(1);
	emit_run(2, 10);
	assert_int_equal(sc_rings_dropped() - d0, 10);
	assert_int_equal(sc_rings_pending(), 0);
	sc_rings_shed(0);
	emit_run(12, 3);
	assert_int_equal(sc_rings_dropped() - d0, 10);
	size_t n = drain_all(ids, 0, 64);
	assert_int_equal(n, 3);
	expect_sequence(ids, n, 12);
	/* A new session (or a fork child's first) starts writing, whatever
	 * the flag said before. */
	sc_rings_shed(1);
	sc_agent_set_streaming(1);
	emit_run(15, 2);
	assert_int_equal(sc_rings_dropped() - d0, 10);
	n = drain_all(ids, 0, 64);
	assert_int_equal(n, 2);
	expect_sequence(ids, n, 15);
}

/* What sc_rings_keep's function received. */
static struct sc_ev kept_ev[8];
static int kept_wait[8];
static int nkept;

static void keep_rec(const struct sc_ev *ev, int may_wait)
{
	if (nkept < 8) {
		kept_ev[nkept] = *ev;
		kept_wait[nkept] = may_wait;
	}
	nkept++;
}

static void emit_violation(uint64_t scope)
{
	struct sc_ev ev;
	memset(&ev, 0, sizeof ev);
	ev.kind = SC_EV_VIOLATION;
	ev.tid = sc_gettid();
	ev.ts = 1000 + (int64_t)scope; /* given, so the test knows it */
	ev.a = scope;
	ev.i = -1;
	ev.u = 3;
	sc_emit(&ev);
}

static void expect_kept(int i, uint64_t scope, uint32_t tid, int may_wait)
{
	assert_true(i < nkept);
	assert_int_equal(kept_ev[i].kind, SC_EV_VIOLATION);
	assert_int_equal(kept_ev[i].a, scope);
	assert_int_equal(kept_ev[i].ts, 1000 + (int64_t)scope);
	assert_int_equal(kept_ev[i].i, -1);
	assert_int_equal(kept_ev[i].u, 3);
	assert_int_equal(kept_ev[i].tid, tid);
	assert_int_equal(kept_wait[i], may_wait);
}

static void *violate_and_exit(void *arg)
{
	emit_run(500, 3);
	emit_violation((uint64_t)(uintptr_t)arg);
	return NULL;
}

/* A violation changes no state, so no snapshot can give one back: every
 * violation the rings lose goes to sc_rings_keep's function instead.
 * Dropped while shedding: on the writing thread, which must not wait.
 * Thrown away for a snapshot (sc_rings_discard), or with an exited thread's
 * ring (sc_rings_reap(1)): on the agent thread, which may.  The other events
 * are only counted. */
static void test_lost_violations_are_kept(void **state)
{
	(void)state;
	uint64_t ids[64];
	nkept = 0;
	sc_rings_keep(keep_rec);

	sc_rings_shed(1);
	emit_run(1, 2);
	emit_violation(11);
	sc_rings_shed(0);
	assert_int_equal(nkept, 1);
	expect_kept(0, 11, sc_gettid(), 0);

	emit_run(3, 2);
	emit_violation(12);
	emit_run(5, 2);
	emit_violation(13);
	sc_rings_discard();
	assert_int_equal(sc_rings_pending(), 0);
	assert_int_equal(nkept, 3);
	expect_kept(1, 12, sc_gettid(), 1);
	expect_kept(2, 13, sc_gettid(), 1);

	/* An exited thread's ring, still holding its events. */
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, violate_and_exit, (void *)(uintptr_t)14), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	sc_rings_reap(1);
	assert_int_equal(nkept, 4);
	assert_int_equal(kept_ev[3].a, 14);
	assert_int_equal(kept_ev[3].ts, 1014);
	assert_int_not_equal(kept_ev[3].tid, sc_gettid());
	assert_int_equal(kept_wait[3], 1);

	/* Drained, a violation is delivered, not kept. */
	emit_violation(15);
	struct sc_buf out = {.max = 1u << 20};
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 1);
	sc_buf_free(&out);
	assert_int_equal(nkept, 4);
	sc_rings_keep(NULL);
	assert_int_equal(drain_all(ids, 0, 64), 0);
}

static void *end_task_one(void *arg)
{
	int64_t t = *(int64_t *)arg;
	emit_task_ev(SC_EV_TASK_START, 1, t + 1, SC_TASK_RUNNING, 0);
	emit_task_ev(SC_EV_TASK_END, 1, t + 2, SC_TASK_SUCCESS, 0);
	return NULL;
}

/* A snapshot's discard is a cut in time, not at a position in each ring.
 * The race it closes: a thread stamps a task's fork and, before it
 * publishes it, the discard passes its ring; the task runs and ends on a
 * worker, whose ring the discard reaches after that and throws away; the
 * walk then finds the task ended.  Had the late fork gone out, the task
 * would stay live in the daemon for good.  It is older than the cut, so a
 * drain skips it; what is stamped after the discard goes out; a violation
 * (which no walk gives back) goes out whatever its age. */
static void test_discard_is_a_cut(void **state)
{
	(void)state;
	struct sc_buf out = {.max = 1u << 20};
	struct proto_msg m[8];
	pthread_t th;
	int64_t t0 = scope_now();

	/* The worker's start and end are written before the discard ... */
	assert_int_equal(pthread_create(&th, NULL, end_task_one, &t0), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	sc_rings_discard();
	assert_int_equal(sc_rings_pending(), 0);
	/* ... the fork, stamped before them, is published after it. */
	emit_fork_at(1, t0);
	emit_task_ev(SC_EV_TASK_START, 2, t0 + 3, SC_TASK_RUNNING, 0);
	int64_t t1 = scope_now();
	emit_fork_at(3, t1);
	emit_violation(9); /* stamped 1009: long before the cut */
	emit_task_ev(SC_EV_TASK_START, 3, t1 + 1, SC_TASK_RUNNING, 0);
	assert_int_equal(sc_rings_drain(&out, 1u << 20, INT64_MAX), 3);
	assert_int_equal(decode_all(&out, m, 8), 3);
	assert_int_equal(m[0].type, PROTO_EV_TASK_FORK);
	assert_int_equal(m[0].task, 3);
	assert_int_equal(m[1].type, PROTO_EV_VIOLATION);
	assert_int_equal(m[1].scope, 9);
	assert_int_equal(m[2].type, PROTO_EV_TASK_START);
	assert_int_equal(m[2].task, 3);
	assert_int_equal(sc_rings_pending(), 0);
	sc_buf_free(&out);
}

/* The agent learns the drop count from its own walks of the rings (a drain,
 * a discard), without one of its own; a drain told the count the session
 * knows moves nothing once the rings dropped more, so no event written
 * after a loss goes out ahead of its LOST; told the new count, it drains. */
static void test_drain_waits_for_lost(void **state)
{
	(void)state;
	uint64_t ids[64];
	struct sc_buf out = {.max = 64u << 20};
	(void)drain_all(ids, 0, 64);
	uint64_t known = sc_rings_drops_seen();
	assert_int_equal(known, sc_rings_dropped());

	emit_run(1, 5);
	assert_int_equal(sc_rings_drain_unless(&out, 1u << 20, INT64_MAX, known), 5);
	sc_rings_shed(1);
	emit_run(6, 3); /* dropped, counted */
	sc_rings_shed(0);
	emit_run(9, 4); /* written after the loss */
	/* No walk since: the count is the last drain's. */
	assert_int_equal(sc_rings_drops_seen(), known);
	assert_int_equal(sc_rings_drain_unless(&out, 1u << 20, INT64_MAX, known), 0);
	assert_int_equal(sc_rings_drops_seen(), known + 3);
	assert_int_equal(sc_rings_dropped(), known + 3);
	size_t n = collect(&out, ids, 0, 64);
	assert_int_equal(n, 5);
	expect_sequence(ids, n, 1);
	out.len = 0;

	assert_int_equal(sc_rings_drain_unless(&out, 1u << 20, INT64_MAX, known + 3), 4);
	n = collect(&out, ids, 0, 64);
	assert_int_equal(n, 4);
	expect_sequence(ids, n, 9);

	sc_rings_shed(1);
	emit_run(20, 2);
	sc_rings_shed(0);
	emit_run(22, 1);
	sc_rings_discard();
	assert_int_equal(sc_rings_drops_seen(), known + 5);
	assert_int_equal(drain_all(ids, 0, 64), 0);
	sc_buf_free(&out);
}

/* A fork child counts its drops from 0: neither the drops of the parent's
 * exited threads (kept in the ring layer after their rings were freed) nor
 * those of its live rings reach the child's LOST totals.  The agent's
 * atfork handler calls sc_rings_forget(); the child's LOST carries
 * sc_rings_dropped() as its total. */
static void test_fork_child_drops_start_at_zero(void **state)
{
	(void)state;
	uint64_t ids[64];
	int status;

	sc_rings_shed(1);
	(void)fill_thread(7); /* counted, its ring freed below */
	emit_run(1, 5);	      /* counted in this thread's live ring */
	sc_rings_shed(0);
	sc_rings_reap(0);
	assert_true(sc_rings_dropped() >= 12);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc = 0;
		sc_rings_forget();
		if (sc_rings_dropped() != 0)
			rc |= 1; /* the parent's drops came along */
		sc_rings_shed(1);
		emit_run(20, 3);
		sc_rings_shed(0);
		if (sc_rings_dropped() != 3)
			rc |= 2;
		_exit(rc);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("the child's drop count %s", WEXITSTATUS(status) & 1
							  ? "started from the parent's"
							  : "is not its own 3");
	assert_int_equal(drain_all(ids, 0, 64), 0);
}

int main(int argc, char **argv)
{
	(void)argc;
	test_without_agent(argv); /* no agent thread: the test is the consumer */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_grows_and_keeps_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drop_growth_exit_and_start_size, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_race_with_drain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_block_loses_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_block_gives_up_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_calm_ring_shrinks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sites_defined_once_before_use, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_end_coalesce, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shed_counts_instead_of_writing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_coalesce_across_the_ring_end, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_run_fold, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork_child_drops_start_at_zero, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_violations_are_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drain_waits_for_lost, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_discard_is_a_cut, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
