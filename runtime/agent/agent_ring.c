/* agent_ring.c - the agent's hot path: each application thread writes its
 * events into a ring of its own (single producer, single consumer: the
 * agent thread), with no lock and no system call per event. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "scope.h"

/* Records are whole frames padded to 8 bytes; a frame never wraps.  When
 * the room left before the end is too small, a pad record (type 0, len =
 * the room) fills it and the frame starts at offset 0.
 *
 * Rings grow.  A thread starts with a small ring (RING_START); when the
 * agent finds one at least a quarter full at a drain, or finds that it
 * dropped events, it makes a ring RING_GROWTH times larger (up to ring_max,
 * set by SCOPED_BUFFER_KB) and hands it over through the old ring's
 * `grown`.  The
 * producer moves to it at its next event and retires the old ring, which
 * the agent drains and frees like the ring of an exited thread; the merge
 * by timestamp keeps the old ring's events ahead of the new one's.  So
 * memory goes to the threads that produce events faster than the agent's
 * wake-ups on busy cores can keep up with (a fork storm fills 128 KiB in
 * about 3 ms), not to every thread.  While rings are growing, new threads
 * start at the grown size (threads come and go during such bursts and would
 * each drop events before growing); after about a second without growth,
 * new threads start small again.  A grown ring whose thread has been
 * quiet for about ten seconds (never a quarter of a small ring pending at
 * a drain) is swapped back the same way for a small one: a pool worker that
 * once took part in a burst does not keep its grown ring for the rest of
 * its life. */
#define REC_ALIGN 8u
#define PAD_TYPE 0u

struct sc_ring {
	/* The producer's cache line. */
	_Atomic uint64_t head; /* bytes written, release-published */
	uint64_t tail_cache;   /* producer's last view of tail */
	_Atomic uint64_t dropped;
	uint8_t *buf;
	uint64_t mask;
	struct sc_ring
	    *_Atomic grown;	   /* the agent's replacement: larger, or after a calm smaller */
	_Atomic uint64_t viol_end; /* head after the last VIOLATION written (0: none) */
	bool congested;		   /* the producer's: a wait for room timed out, and the ring
				    * has not been below half full since (no waiting then) */
	/* The consumer's cache line, so the producer's stores do not bounce it. */
	_Alignas(64) _Atomic uint64_t tail;
	_Atomic int retired;   /* replaced or its thread exited: free once drained */
	_Atomic int exited;    /* its thread has exited */
	uint64_t dropped_seen; /* the agent's: dropped when it last looked */
	uint64_t peak;	       /* the agent's: most bytes pending at a drain lately */
	unsigned calm;	       /* the agent's: checks in a row with a small peak */
	struct sc_ring *_Atomic next;
	struct sc_ring *spare_next; /* in the spare list, under rings_lock */
};

/* Read by every event, written a few times per session: alone on its cache
 * line, so no neighbour's writes make the hot path miss.  One word, so that
 * an event reads one value: STREAM_OFF, STREAM_WRITE, or STREAM_SHED (the
 * daemon stalls: threads count their new events instead of writing them). */
enum { STREAM_OFF, STREAM_WRITE, STREAM_SHED };
static struct {
	_Alignas(64) _Atomic int state;
	char pad[60];
} streaming;

void sc_rings_shed(int on)
{
	/* Only while a session writes: shedding is a state of its stall. */
	int from = on ? STREAM_WRITE : STREAM_SHED;
	atomic_compare_exchange_strong(&streaming.state, &from, on ? STREAM_SHED : STREAM_WRITE);
}

void sc_agent_set_streaming(int on)
{
	/* A session starts (or ends) writing, not shedding: a fork() child
	 * also inherits the parent's state. */
	atomic_store(&streaming.state, on ? STREAM_WRITE : STREAM_OFF);
	/* Installed only while a session streams: with the daemon absent the
	 * runtime's sc_observed() is false, so it builds no event at all
	 * (each would cost a clock read for nothing). */
	sc_observer_set(on ? sc_ring_observe : NULL);
}

static __thread struct sc_ring *my_ring __attribute__((tls_model("initial-exec")));
static pthread_key_t ring_key;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_ring *_Atomic rings;
#define RING_START (128u * 1024) /* a new thread's ring, unless the maximum is smaller */
#define RING_GROWTH 8u
#define SHRINK_CALM 200u /* sc_rings_tune calls (x REAP_NS, agent.c: 10 s) */
static size_t ring_max = 1024 * 1024;
static int64_t block_ns; /* SCOPED_BLOCK_US: a full ring's wait for room (0: none) */
static _Atomic size_t start_bytes = RING_START; /* a new thread's ring */
static unsigned quiet_reaps;			/* agent's: reaps since the last growth */
#define QUIET_REAPS 20				/* x REAP_NS (agent.c): back to RING_START */
static _Atomic uint64_t gone_dropped;		/* drops of rings already freed or never made */

/* Per-batch state of the merge: one cursor per ring with pending events. */
struct cursor {
	struct sc_ring *r;
	/* The ring's buf and mask, copied: they sit on the producer's cache
	 * line, which its every event writes (head).  Read from the ring for
	 * each record drained, that line bounced between the agent and the
	 * producer: a miss for the agent, and for the producer's next event
	 * a store to a line it no longer held. */
	const uint8_t *buf;
	uint64_t mask;
	uint64_t pos, end;
	int64_t ts;
};
static struct cursor *cursors;
static size_t ncursors_cap;
static size_t *heap;

/* The thread-exit destructor.  A larger ring the agent made for the thread
 * but the thread never moved to goes too.  Paired with ring_replace(): each
 * side stores, then loads the other's flag (sequentially consistent), so at
 * least one of them sees the other and that ring is not orphaned.  retired
 * is stored last: from then on the agent may free r. */
static void ring_retire(void *p)
{
	struct sc_ring *r = p;
	if (my_ring == r)
		my_ring = NULL;
	atomic_store(&r->exited, 1);
	struct sc_ring *g = atomic_load(&r->grown);
	if (g) {
		atomic_store(&g->exited, 1);
		atomic_store_explicit(&g->retired, 1, memory_order_release);
	}
	atomic_store_explicit(&r->retired, 1, memory_order_release);
}

void sc_rings_block(int64_t ns)
{
	block_ns = ns > 0 ? ns : 0;
}

int sc_rings_init(size_t bytes)
{
	static int key_made;
	size_t b = 16 * 1024;
	while (b < bytes && b < (64u << 20))
		b *= 2;
	ring_max = b;
	if (!key_made) {
		int rc = pthread_key_create(&ring_key, ring_retire);
		if (rc)
			return -rc;
		key_made = 1;
	}
	return 0;
}

/* Rings of exited threads, drained, kept for the next threads (under
 * rings_lock).  Threads come and go in the bursts that grow rings; a fresh
 * 1 MiB ring costs 256 page faults and its munmap, a kept one nothing.  Freed once growth has been
 * quiet for a while. */
#define MAX_SPARES 8
static struct sc_ring *spares;
static unsigned nspares;

static void free_spares(void)
{
	pthread_mutex_lock(&rings_lock);
	struct sc_ring *r = spares;
	spares = NULL;
	nspares = 0;
	pthread_mutex_unlock(&rings_lock);
	while (r) {
		struct sc_ring *next = r->spare_next;
		free(r->buf);
		free(r);
		r = next;
	}
}

/* A kept ring of exactly bytes, reset, or NULL.  Under rings_lock. */
static struct sc_ring *take_spare(size_t bytes)
{
	for (struct sc_ring **link = &spares; *link; link = &(*link)->spare_next) {
		struct sc_ring *r = *link;
		if ((size_t)r->mask + 1 != bytes)
			continue;
		*link = r->spare_next;
		nspares--;
		uint8_t *buf = r->buf;
		memset(r, 0, sizeof *r);
		r->buf = buf;
		r->mask = bytes - 1;
		return r;
	}
	return NULL;
}

/* A ring of bytes (a power of two), linked into the list the agent drains;
 * *kept says whether it is a spare, whose pages are in already. */
static struct sc_ring *ring_alloc(size_t bytes, int *kept)
{
	pthread_mutex_lock(&rings_lock);
	struct sc_ring *r = take_spare(bytes);
	pthread_mutex_unlock(&rings_lock);
	*kept = r != NULL;
	if (!r) {
		r = aligned_alloc(64, sizeof *r);
		if (!r)
			return NULL;
		memset(r, 0, sizeof *r);
		r->buf = malloc(bytes);
		if (!r->buf) {
			free(r);
			return NULL;
		}
		r->mask = bytes - 1;
	}
	pthread_mutex_lock(&rings_lock);
	atomic_store_explicit(&r->next, atomic_load_explicit(&rings, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&rings, r, memory_order_release);
	pthread_mutex_unlock(&rings_lock);
	return r;
}

static struct sc_ring *ring_new(void)
{
	size_t start = atomic_load_explicit(&start_bytes, memory_order_relaxed);
	int kept;
	struct sc_ring *r = ring_alloc(ring_max < start ? ring_max : start, &kept);
	if (!r)
		return NULL;
	my_ring = r;
	/* After the thread's exit the key's destructor retires the ring; if
	 * this fails the ring simply lives on, empty, until the process ends. */
	(void)pthread_setspecific(ring_key, r);
	return r;
}

static void count_drop(struct sc_ring *r)
{
	uint64_t d = atomic_load_explicit(&r->dropped, memory_order_relaxed);
	atomic_store_explicit(&r->dropped, d + 1, memory_order_relaxed);
}

/* Where violations go that the rings lose (sc_rings_keep). */
static _Atomic(sc_keep_fn) keep_fn;

void sc_rings_keep(sc_keep_fn fn)
{
	atomic_store_explicit(&keep_fn, fn, memory_order_release);
}

/* A dropped event: a violation is handed to keep_fn, the rest are only
 * counted (a snapshot gives back the state they changed). */
static void keep_dropped(const struct sc_ev *ev)
{
	sc_keep_fn fn;
	if (ev->kind == SC_EV_VIOLATION &&
	    (fn = atomic_load_explicit(&keep_fn, memory_order_acquire)) != NULL)
		fn(ev, 0);
}

/* With SCOPED_BLOCK_US set, a thread whose ring is full waits up to that
 * long for the agent to drain it to `want` (the tail it needs), yielding its
 * core, which on a busy machine is what the agent and the daemon need.  Not
 * while the daemon stalls (the agent sheds: nobody drains), not on the
 * agent's own thread, and not again after a wait in vain until the ring has
 * been below half full (a thread holding a lock the agent's snapshot waits
 * for must not wait at every event).  True when the room came. */
static bool wait_for_room(struct sc_ring *r, uint64_t want)
{
	int64_t until = 0;

	if (!block_ns || r->congested ||
	    atomic_load_explicit(&streaming.state, memory_order_relaxed) != STREAM_WRITE ||
	    sc_thread_is_agent())
		return false;
	sc_agent_nudge();
	for (unsigned i = 1;; i++) {
		sched_yield();
		r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (r->tail_cache >= want)
			return true;
		if ((i & 15) == 0) {
			int64_t now = scope_now();
			if (!until)
				until = now + block_ns;
			if (now >= until ||
			    atomic_load_explicit(&streaming.state, memory_order_relaxed) !=
				STREAM_WRITE) {
				r->congested = true;
				return false;
			}
		}
	}
}

/* Room for a frame of n bytes in r: where to write it, and (*head) the
 * head to publish once it is written.  NULL, and the drop counted, when the
 * ring is full (after the wait SCOPED_BLOCK_US allows, if any). */
#define RING_PREFETCH 512 /* bytes ahead of the write a line is fetched */

static inline void prefetch_for_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	/* PREFETCHW: a no-op on processors without it. */
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1, 3);
#endif
}

static uint8_t *ring_reserve(struct sc_ring *r, uint32_t n, uint64_t *next_head)
{
	uint64_t rec = (n + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t size = r->mask + 1, pos = head & r->mask, room = size - pos;
	uint64_t need = rec <= room ? rec : room + rec;

	if (head + need - r->tail_cache > size) {
		r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (head + need - r->tail_cache > size && !wait_for_room(r, head + need - size)) {
			count_drop(r);
			return NULL;
		}
	}
	if (r->congested && head - r->tail_cache <= size / 2)
		r->congested = false;
	/* Past half full with this frame (as far as this thread knows the
	 * agent's progress): the agent is told now rather than at its next
	 * period, which a burst on a slow core can outrun.  Once per crossing,
	 * so a write per half ring at most. */
	if (head - r->tail_cache <= size / 2 && head + need - r->tail_cache > size / 2)
		sc_agent_nudge();
	if (rec > room) {
		uint32_t pad[2] = {(uint32_t)room, PAD_TYPE};
		memcpy(r->buf + pos, pad, sizeof pad);
		head += room;
		pos = 0;
	}
	/* The line a few records ahead, for writing.  The agent read it last
	 * time round, so it sits in the agent's core: fetched here only when
	 * written, the miss held up this thread's next fence (a push, a
	 * count's update) by a cross-core transfer per line. */
	prefetch_for_write(r->buf + ((pos + RING_PREFETCH) & r->mask));
	*next_head = head + rec;
	return r->buf + pos;
}

/* sc_site_number's definer on the hot path: the SITE frame goes into the
 * thread's own ring just ahead of the event that first uses the site.  If
 * it is dropped, the LOST that follows brings a snapshot, which defines
 * every site again. */
static void ring_define_site(void *ctx, uint32_t id, const struct sc_site *site)
{
	struct sc_ring *r = ctx;
	uint16_t slen[2];
	uint32_t n = sc_enc_site_size(site, slen);
	uint64_t head;
	uint8_t *dst = ring_reserve(r, n, &head);
	if (!dst)
		return;
	sc_enc_site(dst, n, id, site, slen, 0);
	atomic_store_explicit(&r->head, head, memory_order_release);
}

void sc_ring_observe(const struct sc_ev *ev)
{
	int state = atomic_load_explicit(&streaming.state, memory_order_relaxed);
	if (state == STREAM_OFF)
		return;
	struct sc_ring *r = my_ring;
	if (__builtin_expect(!r, 0)) {
		r = ring_new();
		if (!r) {
			atomic_fetch_add_explicit(&gone_dropped, 1, memory_order_relaxed);
			keep_dropped(ev);
			return;
		}
	}
	if (__builtin_expect(state == STREAM_SHED, 0)) {
		count_drop(r);
		keep_dropped(ev);
		return;
	}
	struct sc_ring *g = atomic_load_explicit(&r->grown, memory_order_acquire);
	if (__builtin_expect(g != NULL, 0)) {
		/* The agent made this thread a new ring (larger, or smaller
		 * after a calm): move to it.  The old one is drained and freed
		 * once retired. */
		my_ring = g;
		(void)pthread_setspecific(ring_key, g);
		atomic_store_explicit(&r->retired, 1, memory_order_release);
		r = g;
	}
	uint64_t head;
	uint8_t *dst;
	uint16_t slen = 0;
	uint32_t n = sc_enc_hot_size(ev, &slen);
	if (n) { /* a task's events and SCOPE_OPEN: most of them */
		uint32_t site = sc_enc_kind_wants_site(ev->kind)
				    ? sc_site_number(&ev->site, ring_define_site, r)
				    : 0;
		dst = ring_reserve(r, n, &head);
		if (!dst)
			return; /* not a violation: only counted */
		sc_enc_hot_write(ev, n, slen, site, dst);
		atomic_store_explicit(&r->head, head, memory_order_release);
		return;
	}
	struct sc_enc e;
	n = sc_enc_measure(ev, &e);
	if (!n)
		return;
	if (sc_enc_wants_site(&e))
		e.site = sc_site_number(&ev->site, ring_define_site, r);
	dst = ring_reserve(r, n, &head);
	if (!dst) {
		keep_dropped(ev);
		return;
	}
	sc_enc_write(ev, &e, 0, dst);
	if (ev->kind == SC_EV_VIOLATION) /* published with head, below */
		atomic_store_explicit(&r->viol_end, head, memory_order_relaxed);
	atomic_store_explicit(&r->head, head, memory_order_release);
}

/* The record at pos: its frame length and type. */
static void rec_at(const uint8_t *buf, uint64_t mask, uint64_t pos, uint32_t *len, uint16_t *type)
{
	const uint8_t *p = buf + (pos & mask);
	memcpy(len, p + PROTO_HDR_OFF(len), 4);
	memcpy(type, p + PROTO_HDR_OFF(type), 2);
}

static uint64_t rec_size(uint32_t len)
{
	return ((uint64_t)len + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1);
}

/* Where every event frame holds its ts. */
#define EV_TS_OFF (PROTO_HDR_SIZE + offsetof(struct proto_wire_common, ts))

/* The cut of the last sc_rings_discard: an event stamped before it that a
 * drain finds is one whose thread published it after the discard had
 * passed its ring.  Agent thread only. */
static int64_t stale_before = INT64_MIN;

/* Advances c past pad records and events older than the cut; loads the ts
 * of the frame it stops at.
 * Returns whether a frame is there. */
static int cursor_settle(struct cursor *c)
{
	while (c->pos < c->end) {
		uint32_t len;
		uint16_t type;
		rec_at(c->buf, c->mask, c->pos, &len, &type);
		if (type == PROTO_SITE) {
			/* No timestamp: a definition goes out as soon as it
			 * is its ring's next frame (it precedes, in that ring,
			 * every event that uses it; order among definitions
			 * does not matter). */
			c->ts = INT64_MIN;
			return 1;
		}
		if (type == PAD_TYPE) {
			c->pos += len;
			continue;
		}
		memcpy(&c->ts, c->buf + (c->pos & c->mask) + EV_TS_OFF, 8);
		/* Older than the last discard's cut: the snapshot that
		 * followed covers it (see sc_rings_discard).  A violation
		 * changed no state, so it goes out whatever its age. */
		if (__builtin_expect(c->ts >= stale_before, 1) || type == PROTO_EV_VIOLATION)
			return 1;
		c->pos += rec_size(len);
	}
	return 0;
}

/* A frame may go out when it is older than the horizon: everything that
 * happened before it had finished writing by then, so causes precede
 * effects across threads.  A ts far beyond the horizon is bogus; send it
 * rather than stall the ring behind it. */
static int sendable(const struct cursor *c, int64_t horizon)
{
	return c->ts < horizon || c->ts > horizon + 1000000000;
}

static int heap_less(size_t a, size_t b)
{
	return cursors[a].ts < cursors[b].ts;
}

static void heap_push(size_t *n, size_t idx)
{
	size_t i = (*n)++;
	heap[i] = idx;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!heap_less(heap[i], heap[p]))
			break;
		size_t t = heap[i];
		heap[i] = heap[p];
		heap[p] = t;
		i = p;
	}
}

/* Restores the heap order from the top down (its cursor moved on). */
static void heap_sift_top(size_t n)
{
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && heap_less(heap[l], heap[m]))
			m = l;
		if (r < n && heap_less(heap[r], heap[m]))
			m = r;
		if (m == i)
			break;
		size_t t = heap[i];
		heap[i] = heap[m];
		heap[m] = t;
		i = m;
	}
}

static int cursors_fit(size_t n)
{
	if (n <= ncursors_cap)
		return 0;
	size_t cap = ncursors_cap ? ncursors_cap : 64;
	while (cap < n)
		cap *= 2;
	struct cursor *c = realloc(cursors, cap * sizeof *c);
	if (!c)
		return -1;
	cursors = c;
	size_t *h = realloc(heap, cap * sizeof *h);
	if (!h)
		return -1;
	heap = h;
	ncursors_cap = cap;
	return 0;
}

static unsigned last_fill_pct;
/* The drops as the agent's last walk of the rings (a drain or a discard)
 * summed them: sc_rings_dropped without a walk of its own.  Each walk of
 * every ring reads its producer's cache line, which that thread's every
 * event writes; the session asked after every batch (several hundred times
 * a second in a fork storm), and that walk was 6% of the agent's time.
 * Only the agent thread walks, reaps and reads this, so no lock. */
static uint64_t drops_seen;
/* What the session lets a drain compose (sc_rings_coalesce): 0 nothing,
 * 1 TASK_RAN (version 3), 2 TASK_RAN and TASK_DONE (version 4). */
static _Atomic int coalesce;

void sc_rings_coalesce(int level)
{
	atomic_store_explicit(&coalesce, level, memory_order_relaxed);
}

/* Frame sizes of the task events (fixed: no strings). */
#define FORK_LEN ((uint32_t)PROTO_FIXED(task_fork))
#define START_LEN ((uint32_t)PROTO_FIXED(task_start))
#define END_LEN ((uint32_t)PROTO_FIXED(task_end))
#define RAN_LEN ((uint32_t)PROTO_FIXED(task_ran))
#define DONE_LEN ((uint32_t)PROTO_FIXED(task_done))

/* Copies field m of a src_name frame at src into field m of a dst_name
 * frame at dst, both where proto/wire.h lays them out. */
#define FIELD_SIZE(name, m) sizeof(((struct proto_wire_##name *)0)->m)
#define COPY_FIELD(dst, dst_name, dst_m, src, src_name, src_m)                                     \
	do {                                                                                       \
		_Static_assert(FIELD_SIZE(dst_name, dst_m) == FIELD_SIZE(src_name, src_m),         \
			       #dst_m);                                                            \
		memcpy((dst) + PROTO_OFF(dst_name, dst_m), (src) + PROTO_OFF(src_name, src_m),     \
		       FIELD_SIZE(dst_name, dst_m));                                               \
	} while (0)

static uint64_t frame_task(const uint8_t *f)
{
	uint64_t id;
	_Static_assert(PROTO_OFF(task_fork, task) == PROTO_OFF(task_start, task) &&
			   PROTO_OFF(task_start, task) == PROTO_OFF(task_end, task),
		       "a task event's task is at one offset");
	memcpy(&id, f + PROTO_OFF(task_fork, task), sizeof id);
	return id;
}

/* TASK_FORKs held back within one drain (version 4): a fork storm's task
 * is forked, started and ended between two drains, and its TASK_FORK and
 * TASK_RAN then go out as one TASK_DONE at the TASK_RAN's place: one frame
 * of 88 bytes instead of two of 120, and one event instead of two for the
 * reader.  A held fork goes out alone ahead of any other event of its task
 * in the drain, or at the drain's end; none of the frames it then follows
 * is about its task, and all of them leave in the same write.  Agent
 * thread only. */
#define HOLD_MAX 4096u		  /* forks held in one drain at most */
#define HOLD_SLOTS (2 * HOLD_MAX) /* hash slots: load <= 1/2 */
#define HOLD_KEEP (HOLD_MAX / 4)  /* forks kept for the next drain at most */
struct hold_slot {
	uint64_t task; /* its frame's, so that a probe reads no frame */
	uint32_t k;    /* held index + 1; 0: empty */
};
static struct {
	uint8_t (*frame)[PROTO_FIXED(task_fork)]; /* the held frames, in merge order */
	uint32_t *slot_of;			  /* each held frame's hash slot */
	struct hold_slot *slots;
	uint8_t *gone;	/* sent (as TASK_DONE or alone) */
	uint32_t n;	/* frames in the table, sent ones too */
	uint32_t first; /* none before it is still to send */
	size_t bytes;	/* of the held frames not yet sent */
	bool failed;	/* no memory for the tables: nothing is held */
} hold;

static bool hold_ready(void)
{
	if (hold.slots || hold.failed)
		return hold.slots != NULL;
	hold.frame = malloc(HOLD_MAX * sizeof *hold.frame);
	hold.slot_of = malloc(HOLD_MAX * sizeof *hold.slot_of);
	hold.gone = malloc(HOLD_MAX);
	hold.slots = calloc(HOLD_SLOTS, sizeof *hold.slots);
	if (!hold.frame || !hold.slot_of || !hold.gone || !hold.slots) {
		free(hold.frame);
		free(hold.slot_of);
		free(hold.gone);
		free(hold.slots);
		hold.slots = NULL;
		hold.failed = true;
	}
	return hold.slots != NULL;
}

/* A task's slot: its id's low bits.  The runtime hands ids out in dense
 * blocks (SC_ID_BLOCK a thread), and a drain holds and finds them in about
 * the order they were forked, so consecutive ids share cache lines; a
 * multiplicative hash scattered them, and the table's misses were most of
 * the holding's cost (the ids are the process's own, not a peer's). */
static uint32_t hold_hash(uint64_t task)
{
	return (uint32_t)task & (HOLD_SLOTS - 1);
}

/* The held, unsent TASK_FORK of task, or -1. */
static int hold_find(uint64_t task)
{
	for (uint32_t i = hold_hash(task);; i = (i + 1) & (HOLD_SLOTS - 1)) {
		uint32_t k = hold.slots[i].k;
		if (!k)
			return -1;
		if (hold.slots[i].task == task && !hold.gone[k - 1])
			return (int)k - 1;
	}
}

static void hold_put(const uint8_t *f)
{
	uint64_t task = frame_task(f);
	uint32_t i = hold_hash(task);
	while (hold.slots[i].k)
		i = (i + 1) & (HOLD_SLOTS - 1);
	if (f != hold.frame[hold.n])
		memcpy(hold.frame[hold.n], f, FORK_LEN);
	hold.gone[hold.n] = 0;
	hold.slot_of[hold.n] = i;
	hold.slots[i] = (struct hold_slot){task, hold.n + 1};
	hold.n++;
	hold.bytes += FORK_LEN;
}

/* Sends held fork k alone (room was reserved when it was held). */
static void hold_send(struct sc_buf *out, int k)
{
	uint8_t *d = sc_buf_reserve(out, FORK_LEN);
	if (d) { /* (it cannot fail: see the reservations in the drain) */
		memcpy(d, hold.frame[k], FORK_LEN);
		out->len += FORK_LEN;
	}
	hold.gone[k] = 1;
	hold.bytes -= FORK_LEN;
}

static int64_t frame_ts(const uint8_t *f)
{
	int64_t ts;
	memcpy(&ts, f + PROTO_HDR_SIZE + offsetof(struct proto_wire_common, ts), sizeof ts);
	return ts;
}

/* Moves the held forks not sent yet to the front, and hashes them again
 * (the slots of sent ones are only freed here or by hold_drop). */
static void hold_compact(void)
{
	uint32_t kept = 0;
	for (uint32_t k = 0; k < hold.n; k++)
		hold.slots[hold.slot_of[k]].k = 0;
	for (uint32_t k = 0; k < hold.n; k++) {
		if (hold.gone[k])
			continue;
		if (kept != k)
			memcpy(hold.frame[kept], hold.frame[k], FORK_LEN);
		kept++;
	}
	hold.n = 0;
	hold.first = 0;
	hold.bytes = 0;
	for (uint32_t k = 0; k < kept; k++)
		hold_put(hold.frame[k]);
}

static void hold_drop(void);

/* At a drain's end: sends the held forks stamped before cutoff (or far
 * after it: a bogus ts), oldest first, up to the first younger one, and
 * more while over HOLD_KEEP are left; the rest wait for the next drain.
 * Only what is sent is walked, so a drain that keeps a thousand forks
 * costs nothing for them; the table is compacted once it is half full,
 * which HOLD_KEEP makes rare.  Returns the events sent. */
static size_t hold_settle(struct sc_buf *out, int64_t cutoff)
{
	size_t sent = 0;
	uint32_t k = hold.first;
	for (; k < hold.n; k++) {
		if (hold.gone[k])
			continue;
		int64_t ts = frame_ts(hold.frame[k]);
		if (ts >= cutoff && (uint64_t)ts - (uint64_t)cutoff <= 1000000000u &&
		    hold.bytes <= HOLD_KEEP * FORK_LEN)
			break;
		hold_send(out, (int)k);
		sent++;
	}
	hold.first = k;
	if (!hold.bytes)
		hold_drop();
	else if (hold.n > HOLD_MAX / 2)
		hold_compact();
	return sent;
}

/* Forgets the held forks (the rings' events are thrown away too). */
static void hold_drop(void)
{
	for (uint32_t k = 0; k < hold.n; k++)
		hold.slots[hold.slot_of[k]].k = 0;
	hold.n = 0;
	hold.first = 0;
	hold.bytes = 0;
}

/* Whether the frame at f, the top of the merge, is a TASK_FORK to hold. */
static bool holdable(const uint8_t *f, uint32_t len, uint16_t type)
{
	if (type != PROTO_EV_TASK_FORK || len != FORK_LEN || hold.n >= HOLD_MAX)
		return false;
	uint16_t flags;
	uint32_t state;
	memcpy(&flags, f + PROTO_HDR_OFF(flags), sizeof flags);
	memcpy(&state, f + PROTO_OFF(task_fork, state), sizeof state);
	return flags == 0 && state == PROTO_TASK_FORKED;
}

/* When the frame at c is a TASK_START whose very next record in its ring is
 * the same task's TASK_END, sendable too, writes both as one TASK_RAN into
 * out (or, with the task's TASK_FORK held, the three as one TASK_DONE) and
 * returns the bytes they took in the ring; else 0.  In a fork storm nearly
 * every task starts and ends between two drains, and the pair is a third
 * of the events: one frame instead of two is 32 bytes less to copy and to
 * send, and one event less for the reader to apply.  The TASK_END goes out
 * at its TASK_START's place in the merge, ahead of other threads' events
 * stamped between the two; none of those can depend on the end (an effect
 * is stamped after its cause).  *events: the events the frame carries. */
static uint64_t take_ran(const struct cursor *c, struct sc_buf *out, int64_t horizon,
			 size_t *events)
{
	const uint8_t *s = c->buf + (c->pos & c->mask);
	uint64_t next = c->pos + rec_size(START_LEN);
	if (next >= c->end)
		return 0;
	uint32_t len;
	uint16_t type;
	rec_at(c->buf, c->mask, next, &len, &type);
	if (type != PROTO_EV_TASK_END || len != END_LEN)
		return 0; /* (a pad record may be 8 bytes at the ring's very end) */
	const uint8_t *e = c->buf + (next & c->mask);
	int64_t end_ts;
	memcpy(&end_ts, e + PROTO_OFF(task_end, ts), sizeof end_ts);
	if (frame_task(s) != frame_task(e) || end_ts >= horizon)
		return 0;
	int k = hold.n ? hold_find(frame_task(s)) : -1;
	if (k >= 0) {
		uint8_t *d = sc_buf_reserve(out, DONE_LEN + hold.bytes);
		if (!d)
			return 0;
		/* The fork's header flags, common part, task, scope, fn and
		 * site; the start's tid and ts; the end's error, state and ts. */
		const uint8_t *f = hold.frame[k];
		uint32_t hdr[2] = {DONE_LEN, PROTO_EV_TASK_DONE};
		memcpy(d, hdr, 8);
		memcpy(d + PROTO_HDR_OFF(flags), f + PROTO_HDR_OFF(flags), 2);
		COPY_FIELD(d, task_done, ts, f, task_fork, ts);
		COPY_FIELD(d, task_done, tid, f, task_fork, tid);
		COPY_FIELD(d, task_done, reserved_c, f, task_fork, reserved_c);
		COPY_FIELD(d, task_done, task, f, task_fork, task);
		COPY_FIELD(d, task_done, scope, f, task_fork, scope);
		COPY_FIELD(d, task_done, fn, f, task_fork, fn);
		COPY_FIELD(d, task_done, site, f, task_fork, site);
		COPY_FIELD(d, task_done, worker, s, task_start, tid);
		COPY_FIELD(d, task_done, start_ts, s, task_start, ts);
		COPY_FIELD(d, task_done, error, e, task_end, error);
		COPY_FIELD(d, task_done, state, e, task_end, state);
		COPY_FIELD(d, task_done, reserved0, e, task_end, reserved0);
		COPY_FIELD(d, task_done, end_ts, e, task_end, ts);
		out->len += DONE_LEN;
		hold.gone[k] = 1;
		hold.bytes -= FORK_LEN;
		*events = 3;
		return rec_size(START_LEN) + rec_size(END_LEN);
	}
	uint8_t *d = sc_buf_reserve(out, RAN_LEN + hold.bytes);
	if (!d)
		return 0;
	/* The start's header flags, common part, task and scope; the end's
	 * error and state, and its ts as end_ts. */
	uint32_t hdr[2] = {RAN_LEN, PROTO_EV_TASK_RAN};
	memcpy(d, hdr, 8);
	memcpy(d + PROTO_HDR_OFF(flags), s + PROTO_HDR_OFF(flags), 2);
	COPY_FIELD(d, task_ran, ts, s, task_start, ts);
	COPY_FIELD(d, task_ran, tid, s, task_start, tid);
	COPY_FIELD(d, task_ran, reserved_c, s, task_start, reserved_c);
	COPY_FIELD(d, task_ran, task, s, task_start, task);
	COPY_FIELD(d, task_ran, scope, s, task_start, scope);
	COPY_FIELD(d, task_ran, error, e, task_end, error);
	COPY_FIELD(d, task_ran, state, e, task_end, state);
	COPY_FIELD(d, task_ran, reserved0, e, task_end, reserved0);
	COPY_FIELD(d, task_ran, end_ts, e, task_end, ts);
	out->len += RAN_LEN;
	*events = 2;
	return rec_size(START_LEN) + rec_size(END_LEN);
}

/* Hands r's thread a ring of bytes instead (see the top of the file).
 * Agent thread only. */
static void ring_replace(struct sc_ring *r, size_t bytes)
{
	if (atomic_load_explicit(&r->grown, memory_order_relaxed) || atomic_load(&r->exited) ||
	    atomic_load_explicit(&r->retired, memory_order_acquire))
		return;
	int kept;
	struct sc_ring *g = ring_alloc(bytes, &kept);
	if (!g)
		return; /* the old ring goes on as it is */
	/* Fault its pages in here, on the agent's time: the producer would
	 * otherwise take a page fault every 4 KiB of events (docs/perf-notes.md). */
	if (!kept)
		memset(g->buf, 0, bytes);
	atomic_store(&r->grown, g);
	if (atomic_load(&r->exited)) {
		atomic_store(&g->exited, 1);
		atomic_store_explicit(&g->retired, 1, memory_order_release);
	}
}

/* Makes r's thread a ring RING_GROWTH times larger (see the top of the
 * file).  Agent thread only. */
static void ring_grow(struct sc_ring *r)
{
	size_t size = (size_t)r->mask + 1;
	if (size >= ring_max)
		return;
	size_t bigger = size * RING_GROWTH < ring_max ? size * RING_GROWTH : ring_max;
	ring_replace(r, bigger);
	atomic_store_explicit(&start_bytes, bigger, memory_order_relaxed);
	quiet_reaps = 0;
}

void sc_rings_tune(void)
{
	size_t small = ring_max < RING_START ? ring_max : RING_START;
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r;
	     r = r->next) {
		if ((size_t)r->mask + 1 <= small)
			continue;
		/* Lately never more than a quarter of a small ring pending at a
		 * drain: the burst that grew it is over. */
		r->calm = r->peak < small / 4 ? r->calm + 1 : 0;
		r->peak = 0;
		if (r->calm >= SHRINK_CALM) {
			r->calm = 0;
			ring_replace(r, small);
		}
	}
}

unsigned sc_rings_last_fill(void)
{
	return last_fill_pct;
}

size_t sc_rings_drain(struct sc_buf *out, size_t max_bytes, int64_t horizon)
{
	return sc_rings_drain_hold(out, max_bytes, horizon, UINT64_MAX, 0);
}

size_t sc_rings_drain_unless(struct sc_buf *out, size_t max_bytes, int64_t horizon, uint64_t drops)
{
	return sc_rings_drain_hold(out, max_bytes, horizon, drops, 0);
}

size_t sc_rings_held(void)
{
	return hold.bytes / FORK_LEN;
}

size_t sc_rings_drain_hold(struct sc_buf *out, size_t max_bytes, int64_t horizon, uint64_t drops,
			   int64_t hold_ns)
{
	size_t nc = 0, nheap = 0, moved = 0;
	unsigned fill = 0;

	uint64_t seen = atomic_load_explicit(&gone_dropped, memory_order_relaxed);
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r;
	     r = r->next) {
		uint64_t end = atomic_load_explicit(&r->head, memory_order_acquire);
		uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
		seen += dropped;
		if (pos == end)
			continue;
		unsigned pct = (unsigned)((end - pos) * 100 / (r->mask + 1));
		if (pct > fill)
			fill = pct;
		if (end - pos > r->peak)
			r->peak = end - pos;
		if (pct >= 25 || dropped != r->dropped_seen) {
			r->dropped_seen = dropped;
			ring_grow(r); /* linked at the head: not visited by this loop */
		}
		if (cursors_fit(nc + 1)) {
			seen = drops_seen; /* a partial sum: keep the last whole one */
			break;		   /* out of memory: drain the rings we have now */
		}
		cursors[nc] = (struct cursor){r, r->buf, r->mask, pos, end, 0};
		nc++;
	}
	last_fill_pct = fill;
	drops_seen = seen;
	if (drops != UINT64_MAX && seen != drops)
		return 0; /* the events after a loss wait for the session's LOST */
	/* Room for the forks held since the last drain, whatever follows. */
	if (hold.bytes && !sc_buf_reserve(out, hold.bytes))
		return 0;
	for (size_t i = 0; i < nc; i++)
		if (cursor_settle(&cursors[i]) && sendable(&cursors[i], horizon))
			heap_push(&nheap, i);

	int level = atomic_load_explicit(&coalesce, memory_order_relaxed);
	bool fold = level >= 2 && hold_ready();
	/* Every reservation below leaves room for the held forks too, so that
	 * whatever stops the drain, they still fit at its end. */
	while (nheap > 0 && out->len + hold.bytes < max_bytes) {
		struct cursor *c = &cursors[heap[0]];
		const uint8_t *f = c->buf + (c->pos & c->mask);
		uint32_t len;
		uint16_t type;
		rec_at(c->buf, c->mask, c->pos, &len, &type);
		uint64_t took = 0;
		size_t events = 0;
		if (fold && holdable(f, len, type)) {
			if (!sc_buf_reserve(out, hold.bytes + FORK_LEN))
				break;
			hold_put(f);
			took = rec_size(len);
		} else if (level && type == PROTO_EV_TASK_START && len == START_LEN &&
			   (took = take_ran(c, out, horizon, &events)) != 0) {
			moved += events;
		} else {
			int k = -1;
			if (hold.n && (type == PROTO_EV_TASK_START || type == PROTO_EV_TASK_END) &&
			    len >= PROTO_OFF(task_fork, task) + 8)
				k = hold_find(frame_task(f));
			uint8_t *dst = sc_buf_reserve(out, len + hold.bytes);
			if (!dst)
				break;
			if (k >= 0) { /* its fork first (room was there) */
				hold_send(out, k);
				moved++;
				dst = out->p + out->len;
			}
			memcpy(dst, f, len);
			out->len += len;
			moved++;
			took = rec_size(len);
		}
		c->pos += took;
		/* The top's cursor moved on: sift it down in place, or drop it
		 * from the heap (one pass, not a pop and a push). */
		if (!(cursor_settle(c) && sendable(c, horizon)))
			heap[0] = heap[--nheap];
		heap_sift_top(nheap);
	}
	if (hold.n)
		moved += hold_settle(out, hold_ns > 0 ? horizon - hold_ns : INT64_MAX);
	for (size_t i = 0; i < nc; i++)
		atomic_store_explicit(&cursors[i].r->tail, cursors[i].pos, memory_order_release);
	return moved;
}

/* The frames between r's tail and end, about to be thrown away: counts
 * them, and hands each violation among them to keep_fn (a snapshot gives
 * back every state the others changed, but a violation changed none). */
static uint64_t throw_away(const struct sc_ring *r, uint64_t end)
{
	sc_keep_fn fn = atomic_load_explicit(&keep_fn, memory_order_acquire);
	uint64_t n = 0, pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
	while (pos < end) {
		uint32_t len;
		uint16_t type;
		rec_at(r->buf, r->mask, pos, &len, &type);
		if (type != PAD_TYPE)
			n++;
		struct proto_msg m;
		size_t used;
		if (type == SC_EV_VIOLATION && fn &&
		    proto_decode(r->buf + (pos & r->mask), len, &m, &used) == PROTO_OK) {
			struct sc_ev ev = {.kind = SC_EV_VIOLATION,
					   .ts = m.ts,
					   .tid = m.tid,
					   .a = m.scope,
					   .i = m.error,
					   .u = m.kind};
			fn(&ev, 1);
		}
		pos += type == PAD_TYPE ? len : rec_size(len);
	}
	return n;
}

void sc_rings_discard(void)
{
	hold_drop();
	uint64_t seen = atomic_load_explicit(&gone_dropped, memory_order_relaxed);
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r;
	     r = r->next) {
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		seen += atomic_load_explicit(&r->dropped, memory_order_relaxed);
		/* Walked only as far as its last violation, if one is pending:
		 * a snapshot after a loss in a fork storm throws away megabytes
		 * of records, and walking them all cost the agent CPU. */
		uint64_t ve = atomic_load_explicit(&r->viol_end, memory_order_relaxed);
		if (ve > atomic_load_explicit(&r->tail, memory_order_relaxed))
			(void)throw_away(r, ve < head ? ve : head);
		atomic_store_explicit(&r->tail, head, memory_order_release);
	}
	drops_seen = seen;
	/* The loop above is no cut across threads: an event being written
	 * as it passed a ring is published after, while its effects, in
	 * rings the loop reached later, were thrown away (a fork published
	 * late, its task's start and end discarded: the snapshot does not
	 * list the ended task, and the late fork made it live for good).
	 * The clock read after the loop is one: every event thrown away was
	 * stamped before it, and an event stamped before it changed the
	 * registry before it too (each is stamped after its change), so the
	 * walk that follows sees the change.  Drains skip what is older, and
	 * send what is newer even if the walk sees it too (a repeat the
	 * daemon ignores). */
	stale_before = scope_now();
}

void sc_rings_set_cut(int64_t ts)
{
	stale_before = ts;
}

uint64_t sc_rings_drops_seen(void)
{
	return drops_seen;
}

void sc_rings_reap(int discard)
{
	if (++quiet_reaps == QUIET_REAPS) {
		atomic_store_explicit(&start_bytes, RING_START, memory_order_relaxed);
		free_spares();
	}
	pthread_mutex_lock(&rings_lock);
	struct sc_ring *_Atomic *link = &rings;
	struct sc_ring *r;
	while ((r = atomic_load_explicit(link, memory_order_relaxed))) {
		int empty = atomic_load_explicit(&r->tail, memory_order_relaxed) ==
			    atomic_load_explicit(&r->head, memory_order_acquire);
		if (!atomic_load_explicit(&r->retired, memory_order_acquire) ||
		    (!empty && !discard)) {
			link = &r->next;
			continue;
		}
		uint64_t lost = atomic_load_explicit(&r->dropped, memory_order_relaxed);
		if (!empty)
			lost += throw_away(r, atomic_load_explicit(&r->head, memory_order_acquire));
		atomic_fetch_add_explicit(&gone_dropped, lost, memory_order_relaxed);
		atomic_store_explicit(link, r->next, memory_order_release);
		if (nspares < MAX_SPARES && quiet_reaps < QUIET_REAPS) {
			/* Nobody refers to it any more: the thread moved on or is
			 * gone, and only this thread drains. */
			r->spare_next = spares;
			spares = r;
			nspares++;
		} else {
			free(r->buf);
			free(r);
		}
	}
	pthread_mutex_unlock(&rings_lock);
}

uint64_t sc_rings_dropped(void)
{
	/* Read gone_dropped under the lock so a ring being reaped is counted
	 * either in the list or in gone_dropped, never twice or not at all. */
	pthread_mutex_lock(&rings_lock);
	uint64_t n = atomic_load_explicit(&gone_dropped, memory_order_relaxed);
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r; r = r->next)
		n += atomic_load_explicit(&r->dropped, memory_order_relaxed);
	pthread_mutex_unlock(&rings_lock);
	return n;
}

size_t sc_rings_pending(void)
{
	size_t n = 0;
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r; r = r->next)
		n += atomic_load_explicit(&r->head, memory_order_acquire) -
		     atomic_load_explicit(&r->tail, memory_order_relaxed);
	return n;
}

void sc_rings_calm(void)
{
	atomic_store_explicit(&start_bytes, RING_START, memory_order_relaxed);
}

size_t sc_ring_bytes_self(const void **buf)
{
	if (buf)
		*buf = my_ring ? my_ring->buf : NULL;
	return my_ring ? (size_t)my_ring->mask + 1 : 0;
}

size_t sc_rings_count(size_t *bytes)
{
	size_t n = 0, b = 0;
	pthread_mutex_lock(&rings_lock);
	for (struct sc_ring *r = atomic_load_explicit(&rings, memory_order_acquire); r;
	     r = r->next) {
		n++;
		b += (size_t)r->mask + 1;
	}
	pthread_mutex_unlock(&rings_lock);
	if (bytes)
		*bytes = b;
	return n;
}

void sc_rings_forget(void)
{
	atomic_store_explicit(&rings, NULL, memory_order_relaxed);
	/* The drops of the parent's exited threads are the parent's: the
	 * child's LOST totals count from 0 (the rings just forgotten took
	 * their own counters with them). */
	atomic_store_explicit(&gone_dropped, 0, memory_order_relaxed);
	spares = NULL; /* the parent's: left alone */
	nspares = 0;
	my_ring = NULL;
	pthread_mutex_init(&rings_lock, NULL);
	drops_seen = 0;
	stale_before = INT64_MIN;
	if (hold.slots)
		hold_drop();
}
