/* agent.h - internal interface between the reporting agent's files: the
 * event encoder, the per-thread rings, the output buffer, stack capture and
 * the exit paths.  Everything here is hidden inside libscope. */
#ifndef SC_AGENT_H
#define SC_AGENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "proto.h"

/* ---- encoder (agent_enc.c): struct sc_ev -> one wire frame ---- */

/* The measured shape of one event: its kind, its string lengths (cut to
 * PROTO_MAX_STR) and the frame size. */
struct sc_enc {
	uint16_t kind;
	uint8_t wants_site; /* the kind carries a call site's number */
	uint16_t slen[3];
	uint32_t size;
	uint32_t site; /* the call site's number, for kinds that carry one (0: none) */
};

/* Measures ev into e; returns the frame size, or 0 for a kind the protocol
 * has no message for. */
SC_HIDDEN uint32_t sc_enc_measure(const struct sc_ev *ev, struct sc_enc *e);

/* Writes the frame measured by sc_enc_measure into dst (e->size bytes). */
SC_HIDDEN void sc_enc_write(const struct sc_ev *ev, const struct sc_enc *e, uint16_t flags,
			    uint8_t *dst);
/* The three events of every task (TASK_FORK, TASK_START, TASK_END) and
 * SCOPE_OPEN, most of what a program writes, without the layout walk: the
 * frame size of ev (0: not one of them; *slen gets SCOPE_OPEN's name
 * length), and the frame, stamped as by sc_enc_write, with the call site's
 * number (TASK_FORK's and SCOPE_OPEN's). */
SC_HIDDEN uint32_t sc_enc_hot_size(const struct sc_ev *ev, uint16_t *slen);
SC_HIDDEN void sc_enc_hot_write(const struct sc_ev *ev, uint32_t size, uint16_t slen, uint32_t site,
				uint8_t *dst);
/* Whether the measured kind refers to its call site by number (then set
 * e->site before sc_enc_write). */
SC_HIDDEN int sc_enc_wants_site(const struct sc_enc *e);
/* The same for an event kind (the hot path's, which measures nothing):
 * whether one of its fields has the source SITE in proto/wire.h. */
#define SC_WANTS_SITE_A 0
#define SC_WANTS_SITE_B 0
#define SC_WANTS_SITE_C 0
#define SC_WANTS_SITE_D 0
#define SC_WANTS_SITE_I 0
#define SC_WANTS_SITE_U 0
#define SC_WANTS_SITE_LINE 0
#define SC_WANTS_SITE_POOL 0
#define SC_WANTS_SITE_NA 0
#define SC_WANTS_SITE_SITE 1
#define SC_WANTS_SITE(kind, member, source) | SC_WANTS_SITE_##source
#define SC_KIND_WANTS_SITE_EVENT(NAME, name)                                                       \
	case SC_##NAME:                                                                            \
		return 0 PROTO_FIELDS_##name(SC_WANTS_SITE);
#define SC_KIND_WANTS_SITE_SESSION(NAME, name)
#define SC_KIND_WANTS_SITE_MARK(NAME, name)
#define SC_KIND_WANTS_SITE_STACK(NAME, name)
#define SC_KIND_WANTS_SITE_DERIVED(NAME, name)
#define SC_KIND_WANTS_SITE(NAME, name, number, class, array) SC_KIND_WANTS_SITE_##class(NAME, name)
static inline int sc_enc_kind_wants_site(uint16_t kind)
{
	switch (kind) {
		PROTO_MESSAGES(SC_KIND_WANTS_SITE)
	default:
		return 0;
	}
}
/* A SITE frame defining site number id: its size (slen gets the string
 * lengths), and the frame written into dst. */
SC_HIDDEN uint32_t sc_enc_site_size(const struct sc_site *s, uint16_t slen[2]);
SC_HIDDEN void sc_enc_site(uint8_t *dst, uint32_t size, uint32_t id, const struct sc_site *s,
			   const uint16_t slen[2], uint16_t flags);

/* ---- call sites (agent_site.c): numbered once, for protocol v2 ---- */

/* The number of call site s (0 for a site without file and func, or past
 * the cap).  The first time any thread asks for a site, define(ctx, id, s)
 * runs before the number is given to anyone else, holding the sites' lock:
 * it writes the SITE frame ahead of the event, so the definition always
 * reaches the daemon before any use of it. */
SC_HIDDEN uint32_t sc_site_number(const struct sc_site *s,
				  void (*define)(void *ctx, uint32_t id, const struct sc_site *s),
				  void *ctx);
/* Calls fn for every numbered site, in number order (the snapshot sends
 * them all again). */
SC_HIDDEN void sc_sites_walk(void (*fn)(void *ctx, uint32_t id, const struct sc_site *s),
			     void *ctx);
/* In a fork child: the sites' lock may have been held by a thread that is
 * gone.  The numbers stay (the child's strings are the parent's). */
SC_HIDDEN void sc_sites_after_fork(void);

/* ---- output buffer (agent_buf.c): frames waiting for the socket ---- */

struct sc_buf {
	uint8_t *p;
	size_t len;	 /* bytes appended */
	size_t sent;	 /* bytes already written to the socket */
	size_t cap;	 /* allocated */
	size_t max;	 /* cap never grows past this */
	size_t frame_at; /* start of the frame that contains byte `sent` */
	int overflow;	 /* an append did not fit under max */
};

/* Room for n more bytes at the end, or NULL (overflow set) past max. */
SC_HIDDEN uint8_t *sc_buf_reserve(struct sc_buf *b, size_t n);
/* Appends one encoded message; 0, or -1 when it did not fit. */
SC_HIDDEN int sc_buf_put_msg(struct sc_buf *b, const struct proto_msg *m, const uint32_t *tids,
			     const uint64_t *addrs);
/* Appends one event frame; 0, or -1 when it did not fit. */
SC_HIDDEN int sc_buf_put_ev(struct sc_buf *b, const struct sc_ev *ev, uint16_t flags);
/* Appends a SITE frame defining site number id; 0 or -1 (overflow). */
SC_HIDDEN int sc_buf_put_site(struct sc_buf *b, uint32_t id, const struct sc_site *s,
			      uint16_t flags);
/* Writes what it can without blocking.  Returns 1 when everything is sent
 * (the buffer is then empty), 0 when bytes remain, -1 on a socket error. */
SC_HIDDEN int sc_buf_flush(struct sc_buf *b, int fd);
SC_HIDDEN void sc_buf_free(struct sc_buf *b);

/* ---- per-thread rings (agent_ring.c) ---- */

/* Set while a daemon session streams events, and installs the observer
 * (sc_ring_observe) for that time only: an absent daemon costs the app the
 * runtime's one predictable branch per event. */
SC_HIDDEN void sc_agent_set_streaming(int on);

/* The observer installed with sc_observer_set(). */
SC_HIDDEN void sc_ring_observe(const struct sc_ev *ev);
/* Sets the largest ring a thread may grow to (rounded up to a power of two)
 * and the thread-exit key; 0 or -errno. */
SC_HIDDEN int sc_rings_init(size_t ring_bytes);
/* How long a thread whose ring is full waits for room (SCOPED_BLOCK_US);
 * 0, the default: never, the event is dropped and counted. */
SC_HIDDEN void sc_rings_block(int64_t ns);
/* Moves pending events with ts < horizon into out, merged by ts, until out
 * holds max_bytes.  Returns the number of events moved. */
SC_HIDDEN size_t sc_rings_drain(struct sc_buf *out, size_t max_bytes, int64_t horizon);
/* The same, unless the rings have dropped events beyond drops (a count of
 * sc_rings_drops_seen): then it moves nothing and returns 0, so that none
 * of the events written after a loss go out ahead of its LOST. */
SC_HIDDEN size_t sc_rings_drain_unless(struct sc_buf *out, size_t max_bytes, int64_t horizon,
				       uint64_t drops);
/* The same, and with the session at version 4 (sc_rings_coalesce 2) it
 * may keep TASK_FORKs whose task has not run yet for the next drain, while
 * they are younger than hold_ns before the horizon, so that more of them
 * go out with their TASK_RAN as one TASK_DONE.  hold_ns 0: keeps none. */
SC_HIDDEN size_t sc_rings_drain_hold(struct sc_buf *out, size_t max_bytes, int64_t horizon,
				     uint64_t drops, int64_t hold_ns);
/* TASK_FORKs a drain kept for the next (none unless hold_ns was set). */
SC_HIDDEN size_t sc_rings_held(void);
/* What drains may compose: 0 nothing; 1 a TASK_START and its TASK_END as
 * one TASK_RAN (the session's protocol version is 3 or later); 2 that, and
 * a TASK_FORK and its TASK_RAN as one TASK_DONE (version 4 or later). */
SC_HIDDEN void sc_rings_coalesce(int level);
/* While on, threads count their new events as dropped instead of writing
 * them (the agent sets it when the daemon has not read for SHED_NS). */
SC_HIDDEN void sc_rings_shed(int on);
/* How full the fullest ring was (percent) when the last drain began. */
SC_HIDDEN unsigned sc_rings_last_fill(void);
/* Throws away every pending event (a snapshot follows and covers them),
 * and every event stamped before its end that a thread publishes later. */
SC_HIDDEN void sc_rings_discard(void);
/* Sets the discard's cut: drains skip events stamped before ts (tests
 * that stamp events with made-up times). */
SC_HIDDEN void sc_rings_set_cut(int64_t ts);
/* Receives each structure violation the rings lose: dropped when written
 * (shedding, a full ring) with may_wait 0, on the writing thread; thrown
 * away by sc_rings_discard or sc_rings_reap(1) with may_wait 1, on the
 * agent thread.  No snapshot can give a violation back. */
typedef void (*sc_keep_fn)(const struct sc_ev *ev, int may_wait);
SC_HIDDEN void sc_rings_keep(sc_keep_fn fn);
/* Frees the rings of exited threads; with discard, also those that still
 * hold events (counted as dropped). */
SC_HIDDEN void sc_rings_reap(int discard);
/* Events dropped so far because a ring was full (or could not be made). */
SC_HIDDEN uint64_t sc_rings_dropped(void);
/* The same, as the agent's last sc_rings_drain or sc_rings_discard counted
 * them (agent thread only): never more than sc_rings_dropped, never less
 * than at that walk. */
SC_HIDDEN uint64_t sc_rings_drops_seen(void);
/* Bytes pending in all rings. */
SC_HIDDEN size_t sc_rings_pending(void);
/* Swaps the rings of threads that have been quiet for a while back to the
 * small size; the agent calls it every REAP_NS. */
SC_HIDDEN void sc_rings_tune(void);
/* New threads start with small rings again (the agent cannot drain: large
 * rings would only hold more events to throw away). */
SC_HIDDEN void sc_rings_calm(void);
/* For tests and benchmarks: the size of the calling thread's ring (0: it
 * has none yet) and (buf, if not NULL) its memory; how many rings exist,
 * and (bytes, if not NULL) their sizes' sum. */
SC_HIDDEN size_t sc_ring_bytes_self(const void **buf);
SC_HIDDEN size_t sc_rings_count(size_t *bytes);
/* Forgets every ring without touching them (in a fork child, where their
 * threads do not exist).  Leaks them on purpose: they may be mid-write.
 * sc_rings_dropped() counts from 0 again: drops are the parent's. */
SC_HIDDEN void sc_rings_forget(void);

/* ---- stacks (agent_stack.c) ---- */

/* Installs SC_SIG_STACK's handler and warms libunwind up; 0 or -errno. */
SC_HIDDEN int sc_stack_init(void);
/* Answers one STACK_REQUEST: one STACK_REPLY per thread and a STACK_DONE
 * appended to out.  agent_tid is the caller's, unwound directly. */
SC_HIDDEN void sc_stack_answer(const struct proto_msg *req, struct sc_buf *out, uint32_t agent_tid);
/* In a signal handler: unwinds the interrupted context uctx into
 * addr[0..max), top first, with the pre-warmed unwinder (no allocation, no
 * lock); returns the frame count, 0 when it cannot do so safely. */
SC_HIDDEN uint16_t sc_stack_unwind_here(void *uctx, uint64_t *addr, uint16_t max);

/* ---- exit paths (agent_exit.c) ---- */

/* Installs the on_exit() handler and the fatal-signal handlers (with
 * SA_ONSTACK); once SIGSEGV's is ours, turns alternate stacks on. */
SC_HIDDEN void sc_exit_init(void);
/* From now on every thread the runtime registers gets an alternate signal
 * stack (agent_altstack.c); the calling thread gets one now. */
SC_HIDDEN void sc_altstack_enable(void);
/* The socket the fatal-signal handler may write to (-1: none). */
extern _Atomic int sc_exit_fd SC_HIDDEN;
/* Who owns the socket: 0 nobody, 1 the agent thread (in write()), 2 the
 * fatal-signal handler (forever). */
extern _Atomic int sc_sock_owner SC_HIDDEN;
/* The unsent tail of the frame the stream is inside, for the fatal-signal
 * handler to finish before it writes its own frame. */
extern const uint8_t *_Atomic sc_exit_rest SC_HIDDEN;
extern _Atomic size_t sc_exit_rest_len SC_HIDDEN;

/* ---- the agent thread (agent.c), as the exit paths and tests see it ---- */

/* Asks the agent thread for a last flush and a PROCESS_EXIT(how, code);
 * waits at most timeout_ms.  0 when it was sent. */
SC_HIDDEN int sc_agent_final(uint32_t how, int32_t code, int timeout_ms);

struct sc_agent_stats {
	int connected;		/* a session is up (HELLO_ACK received) */
	uint64_t sessions;	/* connects that got HELLO_ACK */
	uint64_t snapshots;	/* snapshots sent */
	uint64_t events;	/* live events sent */
	uint64_t lost;		/* events dropped */
	uint64_t lost_msgs;	/* LOST messages sent */
	uint64_t stack_reqs;	/* STACK_REQUESTs answered */
	uint64_t sheds;		/* daemon stalls long enough that events were shed */
	uint64_t sheds_stopped; /* of those, shed because the daemon was seen stopped */
	int64_t cpu_ns;		/* CPU time the agent thread used so far (-1: unknown) */
	uint32_t tid;		/* the agent thread's (0: not running or not started yet) */
};
SC_HIDDEN void sc_agent_get_stats(struct sc_agent_stats *st);

/* Starts the agent on a socket path (NULL: the default resolution);
 * 0 or -errno.  sc_agent_init() calls it unless SCOPED_DISABLE=1. */
SC_HIDDEN int sc_agent_start(const char *path);
/* Stops the agent thread, closes the session, removes the observer. */
SC_HIDDEN void sc_agent_stop(void);
/* Waits until every event emitted before the call is written to the
 * socket (or timeout_ms passes); 0, or -ETIMEDOUT / -ENOTCONN. */
SC_HIDDEN int sc_agent_flush(int timeout_ms);
/* Wakes the agent thread to drain now (a producer's ring passed half
 * full); cheap to call from any thread, a write to an eventfd. */
SC_HIDDEN void sc_agent_nudge(void);

#endif /* SC_AGENT_H */
