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

/* The version this build speaks, and the oldest it still reads.  4:
 * TASK_DONE; 3: TASK_RAN; 2: call sites sent once (SITE) and referred to by
 * number.  A reader acks the older of the HELLO's version and its own, and
 * that is the session's: an agent sends TASK_RAN only when the ack says 3 or
 * later, TASK_DONE only when it says 4 or later. */
#define PROTO_VERSION 4
#define PROTO_VERSION_MIN 2
#define PROTO_HDR_SIZE 8u
#define PROTO_MAX_FRAME 65536u /* bytes, header included */
#define PROTO_MAX_STR 1024u    /* bytes of one string, NUL excluded */
#define PROTO_MAX_FRAMES 256u  /* return addresses in one STACK_REPLY */
#define PROTO_MAX_TIDS 4096u   /* tids in one STACK_REQUEST */

#define PROTO_F_SNAPSHOT 0x1u /* event synthesized by a snapshot walk */

#include "wire.h"

/* Message types (wire.h declares each), in numbered ranges:
 *   0x0001-0x00ff session and control
 *   0x0100-0x01ff lifecycle events (numbers equal enum sc_ev_kind)
 *   0x0200-0x02ff stacks
 */
#define PROTO_TYPE_ENUM(NAME, name, number, class, array) PROTO_##NAME = number,
enum proto_type { PROTO_MESSAGES(PROTO_TYPE_ENUM) };
#undef PROTO_TYPE_ENUM

/* The wire values of wire.h's lists, as enums: PROTO_TASK_FORKED, ... */
#define PROTO_VALUE_ENUM(prefix, NAME, value) prefix##NAME = value,
#define PROTO_E_TASK(N, v, s) PROTO_VALUE_ENUM(PROTO_TASK_, N, v)
#define PROTO_E_CANCEL(N, v, s) PROTO_VALUE_ENUM(PROTO_CANCEL_, N, v)
#define PROTO_E_VIOL(N, v, s) PROTO_VALUE_ENUM(PROTO_VIOL_, N, v)
#define PROTO_E_ROLE(N, v, s) PROTO_VALUE_ENUM(PROTO_ROLE_, N, v)
#define PROTO_E_EXIT(N, v, s) PROTO_VALUE_ENUM(PROTO_EXIT_, N, v)
#define PROTO_E_WARN(N, v, s) PROTO_VALUE_ENUM(PROTO_WARN_, N, v)
#define PROTO_E_JOINER(N, v, s, pub) PROTO_VALUE_ENUM(PROTO_JOINER_, N, v)
#define PROTO_E_QUEUE(N, v, s, pub) PROTO_VALUE_ENUM(PROTO_QUEUE_, N, v)
#define PROTO_E_POLICY(N, v, s, pub) PROTO_VALUE_ENUM(PROTO_POLICY_, N, v)
#define PROTO_E_SFLAG(N, v, s, pub) PROTO_VALUE_ENUM(PROTO_SCOPE_, N, v)
enum proto_task_state { PROTO_TASK_STATES(PROTO_E_TASK) };
enum proto_cancel_reason { PROTO_CANCEL_REASONS(PROTO_E_CANCEL) };
enum proto_violation { PROTO_VIOLATIONS(PROTO_E_VIOL) };
enum proto_role { PROTO_ROLES(PROTO_E_ROLE) };
enum proto_exit_how { PROTO_EXIT_HOWS(PROTO_E_EXIT) };
enum proto_warning { PROTO_WARNINGS(PROTO_E_WARN) };
enum proto_joiner { PROTO_JOINERS(PROTO_E_JOINER) };
enum proto_queue_kind { PROTO_QUEUE_KINDS(PROTO_E_QUEUE) };
enum proto_policy { PROTO_POLICIES(PROTO_E_POLICY) };
enum proto_scope_flag { PROTO_SCOPE_FLAGS(PROTO_E_SFLAG) };

/* The fixed payload of each message as a packed struct, struct
 * proto_wire_<name> (the common part first for events): its offsets and
 * sizes are the wire's, for code that writes or reads a frame's bytes
 * directly.  Every integer on the wire is little-endian. */
#define PROTO_WT_VER(m) uint16_t m;
#define PROTO_WT_U16(m) uint16_t m;
#define PROTO_WT_U32(m) uint32_t m;
#define PROTO_WT_I32(m) int32_t m;
#define PROTO_WT_I32W(m) int32_t m;
#define PROTO_WT_U64(m) uint64_t m;
#define PROTO_WT_I64(m) int64_t m;
#define PROTO_WT_PAD16(m) uint16_t m;
#define PROTO_WT_PAD32(m) uint32_t m;
#define PROTO_WT_POOL(m) struct proto_wire_pool m;
#define PROTO_WT(kind, member, source) PROTO_WT_##kind(member)
#define PROTO_WT_P(kind, member) PROTO_WT_##kind(member)
/* The fields a class puts before a message's own. */
#define PROTO_PREFIX_SESSION(F)
#define PROTO_PREFIX_MARK(F)
#define PROTO_PREFIX_STACK(F)
#define PROTO_PREFIX_EVENT(F) PROTO_COMMON(F)
#define PROTO_PREFIX_DERIVED(F) PROTO_COMMON(F)

struct __attribute__((packed)) proto_wire_hdr {
	uint32_t len;
	uint16_t type, flags;
};
struct __attribute__((packed)) proto_wire_common {
	PROTO_COMMON(PROTO_WT)
};
struct __attribute__((packed)) proto_wire_pool {
	PROTO_POOL_FIELDS(PROTO_WT_P)
};
#define PROTO_WIRE_STRUCT(NAME, name, number, class, array)                                        \
	struct __attribute__((packed)) proto_wire_##name {                                         \
		PROTO_PREFIX_##class(PROTO_WT) PROTO_FIELDS_##name(PROTO_WT)                       \
	};
PROTO_MESSAGES(PROTO_WIRE_STRUCT)
#undef PROTO_WIRE_STRUCT

/* A message's frame length without its strings and array (header, common
 * part and fixed payload), and the offset of one of its fields in the frame:
 * PROTO_FIXED(task_ran), PROTO_OFF(task_ran, end_ts). */
#define PROTO_FIXED(name) (PROTO_HDR_SIZE + sizeof(struct proto_wire_##name))
#define PROTO_OFF(name, member) (PROTO_HDR_SIZE + offsetof(struct proto_wire_##name, member))
#define PROTO_HDR_OFF(member) offsetof(struct proto_wire_hdr, member)

/* Decoder errors (negative). proto_strerror() names them. */
enum proto_err {
	PROTO_OK = 0,
	PROTO_EAGAIN = -1,   /* not a whole frame yet: read more */
	PROTO_ETOOBIG = -2,  /* len > PROTO_MAX_FRAME */
	PROTO_ESHORT = -3,   /* len < header, or payload shorter than its layout */
	PROTO_ELONG = -4,    /* bytes left over after the layout */
	PROTO_ESTR = -5,     /* string over PROTO_MAX_STR, unterminated, or with NUL inside */
	PROTO_ETYPE = -6,    /* type outside every known range */
	PROTO_EVERSION = -7, /* HELLO with a version we do not speak */
	PROTO_ECOUNT = -8,   /* a count field over its cap or not matching len */
	PROTO_EVALUE = -9,   /* a field value out of its domain */
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
	int64_t start_ts; /* TASK_DONE: its TASK_START's ts */
	uint32_t worker;  /* TASK_DONE: its TASK_START's tid */
	uint32_t joiner, reason, state, role, kind, how;
	/* SCOPE_CANCEL's cause, SCOPE_FLAGS', SCOPE_HANDLERS' counts */
	uint32_t cause, scope_flags, armed, ran;
	uint64_t subject, limit; /* WARNING */
	int64_t amount;
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

	/* CRASH (tid, and the signal in code) */
	int32_t si_code;
	uint64_t fault_addr;
};

/* Decodes one frame from buf[0..len).  On success returns PROTO_OK, fills
 * *msg (strings borrowed from buf) and sets *used to the frame length.
 * PROTO_EAGAIN when buf holds less than a whole frame (*used = bytes still
 * needed at least); any other error means the stream is broken: drop the
 * peer.  Never allocates, never reads past len. */
int proto_decode(const uint8_t *buf, size_t len, struct proto_msg *msg, size_t *used);

/* The hot frames of a fork storm (TASK_FORK, TASK_RAN, TASK_DONE) only,
 * for a reader that keeps one message for them: when buf starts with a
 * whole, well-formed one, decodes it into *msg, sets *used and returns 1,
 * writing every field any of the three uses (zero where its own layout has
 * none) and no other; so a *msg zeroed once ends as proto_decode would
 * leave it, without clearing all of it per frame.  Otherwise returns 0
 * (*msg's hot fields then mean nothing): proto_decode the frame. */
int proto_decode_hot(const uint8_t *buf, size_t len, struct proto_msg *msg, size_t *used);

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
