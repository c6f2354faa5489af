/* proto.h - the scoped wire protocol between libscope's agent and the daemon:
 * framing, message types, the decoded forms, the encoder and the bounds-
 * checked decoder.  schemas/protocol.md documents every byte.
 *
 * Framing.  A stream of frames over a SOCK_STREAM Unix socket.  All integers
 * are little-endian.  Every frame starts with an 8-byte header:
 *
 *   u32 len    total frame length in bytes, header included;
 *              PROTO_HDR_SIZE <= len <= PROTO_MAX_FRAME
 *   u16 type   enum proto_type
 *   u16 flags  PROTO_F_*
 *
 * followed by the type's fixed payload (layouts below, packed, no padding
 * beyond what is written), then the type's strings in order, each as
 *   u16 n, n bytes, one NUL byte      (n <= PROTO_MAX_STR; no NUL inside)
 * A frame whose fixed payload or strings do not fit its len exactly is
 * malformed.  Unknown types in a known range are skipped by len (forward
 * compatibility); a bad len drops the connection.
 *
 * Session.  The agent connects, sends HELLO; the daemon answers HELLO_ACK (or
 * ERROR and closes).  The agent then sends SNAPSHOT_BEGIN, the snapshot
 * events (flag PROTO_F_SNAPSHOT), SNAPSHOT_END, and from then on live events.
 * After it lost events it sends LOST, then a fresh snapshot.
 */
#ifndef PROTO_H
#define PROTO_H

#include <stddef.h>
#include <stdint.h>

/* The version this build speaks, and the oldest it still reads.  3: TASK_RAN;
 * 2: call sites sent once (SITE) and referred to by number.  A reader acks
 * the older of the HELLO's version and its own, and that is the session's:
 * an agent sends TASK_RAN only when the ack says 3 or later. */
#define PROTO_VERSION 3
#define PROTO_VERSION_MIN 2
#define PROTO_HDR_SIZE 8u
#define PROTO_MAX_FRAME 65536u  /* bytes, header included */
#define PROTO_MAX_STR 1024u     /* bytes of one string, NUL excluded */
#define PROTO_MAX_FRAMES 256u   /* return addresses in one STACK_REPLY */
#define PROTO_MAX_TIDS 4096u    /* tids in one STACK_REQUEST */

#define PROTO_F_SNAPSHOT 0x1u /* event synthesized by a snapshot walk */

/* Message types, in numbered ranges:
 *   0x0001-0x00ff session and control
 *   0x0100-0x01ff lifecycle events (numbers equal enum sc_ev_kind)
 *   0x0200-0x02ff stacks
 */
enum proto_type {
	/* session: agent -> daemon unless noted */
	PROTO_HELLO = 0x0001,
	/* payload: u16 version, u16 reserved, u32 pid (informative only; the
	 * daemon uses SO_PEERCRED), i64 start_realtime_ns, i64 ref_mono_ns,
	 * i64 ref_realtime_ns (the same instant on both clocks)
	 * strings: runtime_version, program name, exe path */
	PROTO_HELLO_ACK = 0x0002, /* daemon -> agent. payload: u16 version, u16 reserved, u32 reserved */
	PROTO_ERROR = 0x0003,     /* daemon -> agent. payload: i32 code, u32 reserved; strings: message */
	PROTO_SNAPSHOT_BEGIN = 0x0010, /* payload: u64 seq, i64 ts */
	PROTO_SNAPSHOT_END = 0x0011,   /* payload: u64 seq, i64 ts, u64 events (in the snapshot) */
	PROTO_LOST = 0x0012,           /* payload: u64 total lost so far, u64 lost since last LOST, i64 ts */
	PROTO_SITE = 0x0013,           /* payload: u32 site (>= 1), i32 line; strings: file, func.
					* Defines a call site that SCOPE_OPEN and TASK_FORK refer to
					* by number: sent before the first event that uses it, and
					* again for every known site right after SNAPSHOT_BEGIN (with
					* PROTO_F_SNAPSHOT).  Numbers are the process's, for its
					* lifetime; a new definition of a number replaces the old. */

	/* lifecycle events.  Every payload starts with the common part:
	 *   i64 ts, u32 tid, u32 reserved
	 * then, per type: */
	PROTO_EV_THREAD_START = 0x0100, /* u64 pool, u32 role, u32 reserved; strings: name */
	PROTO_EV_THREAD_EXIT = 0x0101,  /* (common only) */
	PROTO_EV_THREAD_NAME = 0x0102,  /* strings: name */
	PROTO_EV_PROCESS_EXIT = 0x0103, /* u32 how (1 exit, 2 signal), i32 code (status or
					 * signal number); sent by the agent from on_exit() or
					 * from its fatal-signal handler, just before the end */
	PROTO_EV_SCOPE_OPEN = 0x0110,   /* u64 scope, u64 parent, u64 parent_task, u64 pool,
					 * i64 deadline, u32 joiner, u32 site (the open
					 * site, see SITE; 0 none); strings: name */
	PROTO_EV_JOIN_BEGIN = 0x0111,   /* u64 scope */
	PROTO_EV_JOIN_END = 0x0112,     /* u64 scope, i64 result */
	PROTO_EV_SCOPE_CANCEL = 0x0113, /* u64 scope, u32 reason, u32 reserved */
	PROTO_EV_SCOPE_CLOSE = 0x0114,  /* u64 scope, i64 result */
	PROTO_EV_TASK_FORK = 0x0120,    /* u64 task, u64 scope, u64 fn, u32 state, u32 site.
					 * fn is the body's address in the target (0
					 * unknown); site the fork site (see SITE; 0 none) */
	PROTO_EV_TASK_START = 0x0121,   /* u64 task, u64 scope */
	PROTO_EV_TASK_END = 0x0122,     /* u64 task, u64 scope, i64 error, u32 state, u32 reserved */
	PROTO_EV_TASK_RAN = 0x0123,     /* u64 task, u64 scope, i64 error, u32 state, u32 reserved,
					 * i64 end_ts: a TASK_START (the common part) and its
					 * TASK_END (end_ts; the rest) in one frame (version 3) */
	PROTO_EV_VIOLATION = 0x0130,    /* u64 scope, i64 error, u32 kind, u32 reserved */
	PROTO_EV_VALUE_BIND = 0x0131,   /* u64 scope; strings: key, value */
	PROTO_EV_POOL_CREATE = 0x0140,  /* u64 pool, then the pool block; strings: name */
	PROTO_EV_POOL_STATS = 0x0141,   /* u64 pool, then the pool block */
	PROTO_EV_POOL_DESTROY = 0x0142, /* u64 pool */
	/* pool block: u32 core, u32 max, u32 size, u32 active, u32 largest,
	 * u32 queue_kind, u32 policy, u32 reserved, u64 queue_capacity,
	 * u64 queued, u64 completed, u64 rejected, i64 keep_alive_ns */

	/* stacks */
	PROTO_STACK_REQUEST = 0x0200, /* daemon -> agent. u64 req, u16 max_frames, u16 ntids,
				       * u32 reserved, then ntids x u32 tid (0 tids: all threads) */
	PROTO_STACK_REPLY = 0x0201,   /* agent -> daemon, one per thread. u64 req, u32 tid,
				       * i32 error, i64 pause_ns, u16 nframes, u16 reserved,
				       * u32 reserved, then nframes x u64 address (top first) */
	PROTO_STACK_DONE = 0x0202,    /* agent -> daemon. u64 req, u32 nthreads, u32 reserved,
				       * i64 total_ns, i64 max_pause_ns */
};

/* Decoder errors (negative). proto_strerror() names them. */
enum proto_err {
	PROTO_OK = 0,
	PROTO_EAGAIN = -1,     /* not a whole frame yet: read more */
	PROTO_ETOOBIG = -2,    /* len > PROTO_MAX_FRAME */
	PROTO_ESHORT = -3,     /* len < header, or payload shorter than its layout */
	PROTO_ELONG = -4,      /* bytes left over after the layout */
	PROTO_ESTR = -5,       /* string over PROTO_MAX_STR, unterminated, or with NUL inside */
	PROTO_ETYPE = -6,      /* type outside every known range */
	PROTO_EVERSION = -7,   /* HELLO with a version we do not speak */
	PROTO_ECOUNT = -8,     /* a count field over its cap or not matching len */
	PROTO_EVALUE = -9,     /* a field value out of its domain */
};

/* A decoded string: points into the frame buffer (borrowed; valid while the
 * buffer is), NUL-terminated, len excludes the NUL. */
struct proto_str {
	const char *p;
	uint16_t len;
};

struct proto_pool {
	uint32_t core, max, size, active, largest, queue_kind, policy;
	uint64_t queue_capacity, queued, completed, rejected;
	int64_t keep_alive_ns;
};

/* The decoded form of any message.  Which fields mean something depends on
 * type (see enum proto_type); the rest are zero. */
struct proto_msg {
	uint16_t type, flags;
	uint32_t len; /* frame length */

	/* HELLO */
	uint16_t version;
	uint32_t pid;
	int64_t start_realtime_ns, ref_mono_ns, ref_realtime_ns;
	struct proto_str runtime_version, program, exe;

	/* events: common part */
	int64_t ts;
	uint32_t tid;
	/* events: ids and values (names as in enum proto_type) */
	uint64_t scope, parent, parent_task, task, pool_id, fn;
	int64_t deadline, result, error, end_ts;
	uint32_t joiner, reason, state, role, kind, how;
	int32_t line;
	struct proto_str name, file, func, key, value;
	struct proto_pool pool;

	/* ERROR */
	int32_t code;
	struct proto_str message;

	/* SITE; and SCOPE_OPEN, TASK_FORK, which refer to one (line, file and
	 * func are SITE's) */
	uint32_t site;

	/* SNAPSHOT_*, LOST */
	uint64_t seq, count, total_lost, lost_since;

	/* STACK_* */
	uint64_t req;
	uint16_t max_frames;
	uint16_t ntids, nframes;
	const uint8_t *tids_raw;  /* ntids x u32 LE; read with proto_tid_at() */
	const uint8_t *addrs_raw; /* nframes x u64 LE; read with proto_addr_at() */
	int64_t pause_ns, total_ns, max_pause_ns;
	uint32_t nthreads;
};

/* Decodes one frame from buf[0..len).  On success returns PROTO_OK, fills
 * *msg (strings borrowed from buf) and sets *used to the frame length.
 * PROTO_EAGAIN when buf holds less than a whole frame (*used = bytes still
 * needed at least); any other error means the stream is broken: drop the
 * peer.  Never allocates, never reads past len. */
int proto_decode(const uint8_t *buf, size_t len, struct proto_msg *msg, size_t *used);

/* Reads the i-th tid / address of a decoded STACK_REQUEST / STACK_REPLY. */
uint32_t proto_tid_at(const struct proto_msg *msg, size_t i);
uint64_t proto_addr_at(const struct proto_msg *msg, size_t i);

/* Encodes msg (only the fields its type uses) into buf[0..cap).  Returns the
 * frame length, or a negative proto_err: PROTO_ETOOBIG when it does not fit
 * cap or PROTO_MAX_FRAME, PROTO_ESTR for a string over PROTO_MAX_STR (the
 * encoder truncates nothing silently), PROTO_ETYPE for an unknown type.
 * Strings with p == NULL encode as empty.  For STACK_REQUEST and STACK_REPLY
 * the arrays come from tids/addrs below instead of the *_raw fields. */
int proto_encode(uint8_t *buf, size_t cap, const struct proto_msg *msg, const uint32_t *tids,
		 const uint64_t *addrs);

/* Name of a proto_err, such as "string unterminated or too long". */
const char *proto_strerror(int err);

/* Name of a message type, such as "SCOPE_OPEN"; "unknown" otherwise. */
const char *proto_type_name(uint16_t type);

#endif /* PROTO_H */
