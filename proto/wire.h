/* wire.h - the one declaration of every message and every value of the scoped
 * wire protocol, as X-macro lists (in the manner of libuv's
 * UV_HANDLE_TYPE_MAP).  The message type numbers (proto.h), the decoder's
 * layout table and its hot path (proto.c), the runtime's event kinds
 * (runtime/event.h), the agent's encoder (runtime/agent/agent_enc.c), the
 * TASK_RAN composition (runtime/agent/agent_ring.c), the daemon's handler
 * table and name tables (daemon/model.c, daemon/model_json.c), scopetop's
 * names and the tests' lists of types are all expanded from here.
 * schemas/protocol.md documents the bytes; docs/protocol.md says how to add
 * a message.
 *
 * Include proto.h, not this file. */
#ifndef PROTO_WIRE_H
#define PROTO_WIRE_H

/* The lists are laid out by hand, a row per message or value: clang-format
 * would reflow them into runs. */
/* clang-format off */

/* ---- messages ------------------------------------------------------------
 *
 * PROTO_MESSAGES(X) calls X(NAME, name, number, class, array) once per
 * message:
 *   NAME    enum proto_type's PROTO_NAME (events spell it EV_<what>)
 *   name    the lower-case name: PROTO_FIELDS_name and PROTO_STRS_name list
 *           its fixed payload and its strings, struct proto_wire_name is its
 *           packed fixed payload, and the daemon's handler is ev_<name>
 *           (without the ev_ prefix of NAME)
 *   number  the type on the wire, in its class's numbered range
 *   class   SESSION  handshake, agent <-> daemon, not applied to the model
 *           MARK     stream markers the model applies (0x0010-0x00ff)
 *           EVENT    lifecycle events the runtime emits as struct sc_ev
 *                    (same number as enum sc_ev_kind), common part first
 *           DERIVED  lifecycle events the agent composes from others,
 *                    common part first; no sc_ev kind
 *           STACK    stack capture, answered by the daemon's stacks.c
 *   array   NONE, or TIDS / ADDRS: a counted array after the fixed payload
 *
 * PROTO_FIELDS_name(F) calls F(kind, member, source) per fixed field, in wire
 * order, after the common part of EVENT and DERIVED messages
 * (PROTO_COMMON below):
 *   kind    VER (u16 protocol version, checked before the layout), U16, U32,
 *           I32, I32W (i32 on the wire, int64_t in struct proto_msg), U64,
 *           I64, PAD16, PAD32 (reserved: written 0, not read), POOL (the
 *           pool block, PROTO_POOL_FIELDS)
 *   member  the field of struct proto_msg (and of struct proto_wire_name)
 *   source  for EVENT messages, what the agent writes, from struct sc_ev:
 *           A, B, C, D (ev->a..d), I (ev->i), U (ev->u), LINE
 *           (ev->site.line), SITE (the call site's number, see SITE), POOL
 *           (*ev->pool); NA for reserved fields and other classes
 *
 * PROTO_STRS_name(S) calls S(member, source) per string, in wire order:
 * source S1, S2 (ev->s1, ev->s2) for EVENT messages, NA otherwise. */
#define PROTO_MESSAGES(X)                                              \
	X(HELLO, hello, 0x0001, SESSION, NONE)                         \
	X(HELLO_ACK, hello_ack, 0x0002, SESSION, NONE)                 \
	X(ERROR, error, 0x0003, SESSION, NONE)                         \
	X(SNAPSHOT_BEGIN, snapshot_begin, 0x0010, MARK, NONE)          \
	X(SNAPSHOT_END, snapshot_end, 0x0011, MARK, NONE)              \
	X(LOST, lost, 0x0012, MARK, NONE)                              \
	X(SITE, site, 0x0013, MARK, NONE)                              \
	X(EV_THREAD_START, thread_start, 0x0100, EVENT, NONE)          \
	X(EV_THREAD_EXIT, thread_exit, 0x0101, EVENT, NONE)            \
	X(EV_THREAD_NAME, thread_name, 0x0102, EVENT, NONE)            \
	X(EV_PROCESS_EXIT, process_exit, 0x0103, EVENT, NONE)          \
	X(EV_SCOPE_OPEN, scope_open, 0x0110, EVENT, NONE)              \
	X(EV_JOIN_BEGIN, join_begin, 0x0111, EVENT, NONE)              \
	X(EV_JOIN_END, join_end, 0x0112, EVENT, NONE)                  \
	X(EV_SCOPE_CANCEL, scope_cancel, 0x0113, EVENT, NONE)          \
	X(EV_SCOPE_CLOSE, scope_close, 0x0114, EVENT, NONE)            \
	X(EV_SCOPE_FLAGS, scope_flags, 0x0115, EVENT, NONE)            \
	X(EV_SCOPE_HANDLERS, scope_handlers, 0x0116, EVENT, NONE)      \
	X(EV_TASK_FORK, task_fork, 0x0120, EVENT, NONE)                \
	X(EV_TASK_START, task_start, 0x0121, EVENT, NONE)              \
	X(EV_TASK_END, task_end, 0x0122, EVENT, NONE)                  \
	X(EV_TASK_RAN, task_ran, 0x0123, DERIVED, NONE)                \
	X(EV_TASK_DONE, task_done, 0x0124, DERIVED, NONE)              \
	X(EV_VIOLATION, violation, 0x0130, EVENT, NONE)                \
	X(EV_VALUE_BIND, value_bind, 0x0131, EVENT, NONE)              \
	X(EV_WARNING, warning, 0x0132, EVENT, NONE)                    \
	X(EV_POOL_CREATE, pool_create, 0x0140, EVENT, NONE)            \
	X(EV_POOL_STATS, pool_stats, 0x0141, EVENT, NONE)              \
	X(EV_POOL_DESTROY, pool_destroy, 0x0142, EVENT, NONE)          \
	X(EV_POOL_LIMIT, pool_limit, 0x0143, EVENT, NONE)              \
	X(STACK_REQUEST, stack_request, 0x0200, STACK, TIDS)           \
	X(STACK_REPLY, stack_reply, 0x0201, STACK, ADDRS)              \
	X(STACK_DONE, stack_done, 0x0202, STACK, NONE)                 \
	X(CRASH, crash, 0x0203, STACK, NONE)

/* The common part of every lifecycle event: i64 ts, u32 tid, u32 reserved. */
#define PROTO_COMMON(F) F(I64, ts, NA) F(U32, tid, NA) F(PAD32, reserved_c, NA)

/* The pool block of POOL_CREATE and POOL_STATS: P(kind, member of struct
 * proto_pool, which is also struct sc_pool_info's). */
#define PROTO_POOL_FIELDS(P)                                                               \
	P(U32, core) P(U32, max) P(U32, size) P(U32, active) P(U32, largest) P(U32, queue_kind) \
	P(U32, policy) P(PAD32, reserved) P(U64, queue_capacity) P(U64, queued)                \
	P(U64, completed) P(U64, rejected) P(I64, keep_alive_ns)

/* HELLO, agent -> daemon.  pid is informative only (the daemon uses
 * SO_PEERCRED); ref_mono_ns and ref_realtime_ns are the same instant on both
 * clocks. */
#define PROTO_FIELDS_hello(F)                                                          \
	F(VER, version, NA) F(PAD16, reserved0, NA) F(U32, pid, NA)                     \
	F(I64, start_realtime_ns, NA) F(I64, ref_mono_ns, NA) F(I64, ref_realtime_ns, NA)
#define PROTO_STRS_hello(S) S(runtime_version, NA) S(program, NA) S(exe, NA)
/* HELLO_ACK, daemon -> agent: the session's version. */
#define PROTO_FIELDS_hello_ack(F) F(VER, version, NA) F(PAD16, reserved0, NA) F(PAD32, reserved1, NA)
#define PROTO_STRS_hello_ack(S)
/* ERROR, daemon -> agent, before it closes. */
#define PROTO_FIELDS_error(F) F(I32, code, NA) F(PAD32, reserved0, NA)
#define PROTO_STRS_error(S) S(message, NA)

#define PROTO_FIELDS_snapshot_begin(F) F(U64, seq, NA) F(I64, ts, NA)
#define PROTO_STRS_snapshot_begin(S)
/* count: the events in the snapshot. */
#define PROTO_FIELDS_snapshot_end(F) F(U64, seq, NA) F(I64, ts, NA) F(U64, count, NA)
#define PROTO_STRS_snapshot_end(S)
/* total lost so far, lost since the last LOST. */
#define PROTO_FIELDS_lost(F) F(U64, total_lost, NA) F(U64, lost_since, NA) F(I64, ts, NA)
#define PROTO_STRS_lost(S)
/* A call site that SCOPE_OPEN and TASK_FORK refer to by number (>= 1): sent
 * before the first event that uses it, and again for every known site right
 * after SNAPSHOT_BEGIN (with PROTO_F_SNAPSHOT).  Numbers are the process's,
 * for its lifetime; a new definition of a number replaces the old. */
#define PROTO_FIELDS_site(F) F(U32, site, NA) F(I32, line, NA)
#define PROTO_STRS_site(S) S(file, NA) S(func, NA)

/* role: enum proto_role; pool_id 0: not a pool's worker. */
#define PROTO_FIELDS_thread_start(F) F(U64, pool_id, A) F(U32, role, I) F(PAD32, reserved0, NA)
#define PROTO_STRS_thread_start(S) S(name, S1)
#define PROTO_FIELDS_thread_exit(F)
#define PROTO_STRS_thread_exit(S)
#define PROTO_FIELDS_thread_name(F)
#define PROTO_STRS_thread_name(S) S(name, S1)
/* how: enum proto_exit_how; code: the exit status or the signal number.
 * Sent by the agent from on_exit() or its fatal-signal handler. */
#define PROTO_FIELDS_process_exit(F) F(U32, how, U) F(I32, code, I)
#define PROTO_STRS_process_exit(S)
/* parent, parent_task: 0 for none; deadline 0: none; joiner: enum
 * proto_joiner; site: the open site (0 none); tid is the owner. */
#define PROTO_FIELDS_scope_open(F)                                                  \
	F(U64, scope, A) F(U64, parent, B) F(U64, parent_task, C) F(U64, pool_id, D) \
	F(I64, deadline, I) F(U32, joiner, U) F(U32, site, SITE)
#define PROTO_STRS_scope_open(S) S(name, S1)
#define PROTO_FIELDS_join_begin(F) F(U64, scope, A)
#define PROTO_STRS_join_begin(S)
/* result: what scope_join returned. */
#define PROTO_FIELDS_join_end(F) F(U64, scope, A) F(I64, result, I)
#define PROTO_STRS_join_end(S)
/* reason: enum proto_cancel_reason; cause: where the cancellation began,
 * the reason itself or, for PARENT, the ancestor's cause (a field that was
 * reserved, so 0 from agents older than it: the daemon then takes the
 * origin's reason). */
#define PROTO_FIELDS_scope_cancel(F) F(U64, scope, A) F(U32, reason, U) F(U32, cause, B)
#define PROTO_STRS_scope_cancel(S)
/* result: what scope_close returned. */
#define PROTO_FIELDS_scope_close(F) F(U64, scope, A) F(I64, result, I)
#define PROTO_STRS_scope_close(S)
/* After SCOPE_OPEN (and its snapshot repeat) of a scope opened with flags:
 * scope_flags is a set of PROTO_SCOPE_FLAGS (a shield's cleanup deadline is
 * the scope's deadline). */
#define PROTO_FIELDS_scope_flags(F) F(U64, scope, A) F(U32, scope_flags, U) F(PAD32, reserved0, NA)
#define PROTO_STRS_scope_flags(S)
/* A scope's cancellation handlers changed: armed now, ran (by its
 * cancellation) so far. */
#define PROTO_FIELDS_scope_handlers(F) F(U64, scope, A) F(U32, armed, U) F(U32, ran, B)
#define PROTO_STRS_scope_handlers(S)
/* fn: the body's address in the target (0 unknown); state: the initial
 * enum proto_task_state; site: the fork site (0 none); tid: the forker. */
#define PROTO_FIELDS_task_fork(F) \
	F(U64, task, A) F(U64, scope, B) F(U64, fn, D) F(U32, state, U) F(U32, site, SITE)
#define PROTO_STRS_task_fork(S)
/* tid: the worker. */
#define PROTO_FIELDS_task_start(F) F(U64, task, A) F(U64, scope, B)
#define PROTO_STRS_task_start(S)
/* state: enum proto_task_state; error: the body's return value. */
#define PROTO_FIELDS_task_end(F) \
	F(U64, task, A) F(U64, scope, B) F(I64, error, I) F(U32, state, U) F(PAD32, reserved0, NA)
#define PROTO_STRS_task_end(S)
/* A TASK_START (its common part) and its TASK_END (end_ts, then the rest)
 * in one frame, from version 3: the agent composes it from the two in one
 * ring.  Its fields up to scope are TASK_START's, error and state
 * TASK_END's, at the same offsets. */
#define PROTO_FIELDS_task_ran(F)                                                    \
	F(U64, task, NA) F(U64, scope, NA) F(I64, error, NA) F(U32, state, NA)       \
	F(PAD32, reserved0, NA) F(I64, end_ts, NA)
#define PROTO_STRS_task_ran(S)
/* A TASK_FORK (its common part: the fork's ts, the forker's tid) and the
 * same task's TASK_RAN in one frame, from version 4: the agent composes it
 * when both are due in one batch and the fork's state was FORKED.  worker
 * and start_ts are the TASK_START's tid and ts, end_ts the TASK_END's ts,
 * error and state the TASK_END's. */
#define PROTO_FIELDS_task_done(F)                                                   \
	F(U64, task, NA) F(U64, scope, NA) F(U64, fn, NA) F(I64, error, NA)          \
	F(U32, state, NA) F(U32, site, NA) F(U32, worker, NA) F(PAD32, reserved0, NA) \
	F(I64, start_ts, NA) F(I64, end_ts, NA)
#define PROTO_STRS_task_done(S)
/* scope: 0 when none; kind: enum proto_violation. */
#define PROTO_FIELDS_violation(F) \
	F(U64, scope, A) F(I64, error, I) F(U32, kind, U) F(PAD32, reserved0, NA)
#define PROTO_STRS_violation(S)
#define PROTO_FIELDS_value_bind(F) F(U64, scope, A)
#define PROTO_STRS_value_bind(S) S(key, S1) S(value, S2)
/* Something past a limit: kind is enum proto_warning, which says what
 * subject, amount and limit are. */
#define PROTO_FIELDS_warning(F) \
	F(U64, subject, A) F(I64, amount, I) F(U64, limit, B) F(U32, kind, U) F(PAD32, reserved0, NA)
#define PROTO_STRS_warning(S)
#define PROTO_FIELDS_pool_create(F) F(U64, pool_id, A) F(POOL, pool, POOL)
#define PROTO_STRS_pool_create(S) S(name, S1)
#define PROTO_FIELDS_pool_stats(F) F(U64, pool_id, A) F(POOL, pool, POOL)
#define PROTO_STRS_pool_stats(S)
#define PROTO_FIELDS_pool_destroy(F) F(U64, pool_id, A)
#define PROTO_STRS_pool_destroy(S)
/* A resource each task of the pool holds one of while it runs, and how many
 * there are (limit 0: none declared any more): the advisor's ceiling. */
#define PROTO_FIELDS_pool_limit(F) F(U64, pool_id, A) F(U64, limit, B)
#define PROTO_STRS_pool_limit(S) S(name, S1)

/* STACK_REQUEST, daemon -> agent: then ntids x u32 tid (none: all threads). */
#define PROTO_FIELDS_stack_request(F) \
	F(U64, req, NA) F(U16, max_frames, NA) F(U16, ntids, NA) F(PAD32, reserved0, NA)
#define PROTO_STRS_stack_request(S)
/* STACK_REPLY, agent -> daemon, one per thread: then nframes x u64 address,
 * the top first. */
#define PROTO_FIELDS_stack_reply(F)                                             \
	F(U64, req, NA) F(U32, tid, NA) F(I32W, error, NA) F(I64, pause_ns, NA)  \
	F(U16, nframes, NA) F(PAD16, reserved0, NA) F(PAD32, reserved1, NA)
#define PROTO_STRS_stack_reply(S)
/* STACK_DONE, agent -> daemon, after the replies of one request. */
#define PROTO_FIELDS_stack_done(F)                                                 \
	F(U64, req, NA) F(U32, nthreads, NA) F(PAD32, reserved0, NA) F(I64, total_ns, NA) \
	F(I64, max_pause_ns, NA)
#define PROTO_STRS_stack_done(S)
/* CRASH, agent -> daemon, unasked, from the fatal-signal handler: the
 * crashing thread (tid), the signal (code), the siginfo's si_code and si_addr
 * (0 for signals without one).  Sent after that thread's stack (a
 * STACK_REPLY with req 0) and before PROCESS_EXIT. */
#define PROTO_FIELDS_crash(F) \
	F(U32, tid, NA) F(I32, code, NA) F(I32, si_code, NA) F(PAD32, reserved0, NA) F(U64, fault_addr, NA)
#define PROTO_STRS_crash(S)

/* ---- values ----------------------------------------------------------------
 *
 * Each list calls X(NAME, value, "name in the daemon's JSON") per value; the
 * lists of values that equal a public enum of scope.h add that enumerator
 * (libscope checks they agree at build time). */

/* TASK_FORK's and TASK_END's state: finer than scope_task_state_t. */
#define PROTO_TASK_STATES(X)                                             \
	X(FORKED, 0, "forked")           /* queued, not started */       \
	X(RUNNING, 1, "running")                                         \
	X(SUCCESS, 2, "success")                                         \
	X(FAILED, 3, "failed")                                           \
	X(CANCELLED, 4, "cancelled")     /* ended: its scope was cancelled */ \
	X(UNAVAILABLE, 5, "unavailable") /* never started */

/* SCOPE_CANCEL's reason. */
#define PROTO_CANCEL_REASONS(X)                                                  \
	X(JOINER, 1, "joiner")       /* the joiner decided (failure, winner, predicate) */ \
	X(TIMEOUT, 2, "timeout")     /* the deadline passed */                          \
	X(EXPLICIT, 3, "explicit")   /* scope_cancel() */                               \
	X(PARENT, 4, "parent")       /* an ancestor was cancelled */                    \
	X(VIOLATION, 5, "violation") /* closed because of a structure violation */      \
	X(CLOSE, 6, "close")         /* closed with subtasks still running */ \
	X(SHUTDOWN, 7, "shutdown")   /* its pool's shutdown_now stopped a subtask of it */

/* SCOPE_FLAGS' bits: scope.h's SCOPE_F_* values. */
#define PROTO_SCOPE_FLAGS(X)                                                    \
	X(NO_INTERRUPT, 0x1, "no_interrupt", SCOPE_F_NO_INTERRUPT)             \
	X(SHIELD, 0x2, "shield", SCOPE_F_SHIELD)

/* VIOLATION's kind. */
#define PROTO_VIOLATIONS(X)                                                          \
	X(NOT_OWNER, 1, "not_owner") /* fork/join/close from a thread not the owner */ \
	X(DOUBLE_JOIN, 2, "double_join")                                              \
	X(FORK_AFTER_JOIN, 3, "fork_after_join")                                      \
	X(INNER_OPEN, 4, "inner_open")   /* closing a scope while an inner one is open */ \
	X(THREAD_EXIT, 5, "thread_exit") /* thread exited with scopes open */          \
	X(NO_JOIN, 6, "no_join")         /* closed with forks but without a join */

/* WARNING's kind. */
#define PROTO_WARNINGS(X)                                                        \
	X(POOL_OVER_MAX, 1, "pool_over_max") /* subject: a pool; amount: its threads \
					      * now; limit: its maximum size */

/* THREAD_START's role. */
#define PROTO_ROLES(X) \
	X(OTHER, 0, "other") X(MAIN, 1, "main") X(WORKER, 2, "worker") X(AGENT, 3, "agent")

/* PROCESS_EXIT's how. */
#define PROTO_EXIT_HOWS(X) X(EXIT, 1, "exit") X(SIGNAL, 2, "signal")

/* SCOPE_OPEN's joiner: scope_joiner_kind_t's values. */
#define PROTO_JOINERS(X)                                                       \
	X(ALL_SUCCESSFUL, 0, "all_successful", SCOPE_JOIN_ALL_SUCCESSFUL)      \
	X(ANY_SUCCESSFUL, 1, "any_successful", SCOPE_JOIN_ANY_SUCCESSFUL)      \
	X(AWAIT_ALL, 2, "await_all", SCOPE_JOIN_AWAIT_ALL)                     \
	X(UNTIL, 3, "until", SCOPE_JOIN_UNTIL)                                 \
	X(CUSTOM, 4, "custom", SCOPE_JOIN_CUSTOM)

/* The pool block's queue_kind: scope_queue_kind_t's values. */
#define PROTO_QUEUE_KINDS(X)                                  \
	X(UNBOUNDED, 0, "unbounded", SCOPE_QUEUE_UNBOUNDED)   \
	X(BOUNDED, 1, "bounded", SCOPE_QUEUE_BOUNDED)         \
	X(DIRECT, 2, "direct", SCOPE_QUEUE_DIRECT)

/* The pool block's policy: scope_policy_t's values. */
#define PROTO_POLICIES(X)                                                    \
	X(ABORT, 0, "abort", SCOPE_POLICY_ABORT)                             \
	X(CALLER_RUNS, 1, "caller_runs", SCOPE_POLICY_CALLER_RUNS)           \
	X(DISCARD, 2, "discard", SCOPE_POLICY_DISCARD)                       \
	X(DISCARD_OLDEST, 3, "discard_oldest", SCOPE_POLICY_DISCARD_OLDEST)  \
	X(BLOCK, 4, "block", SCOPE_POLICY_BLOCK)

/* clang-format on */

#endif /* PROTO_WIRE_H */
