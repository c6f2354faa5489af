/* scope.h - libscope: structured concurrency for C, observable by scoped.
 *
 * Conventions (see docs/api.md for the long form):
 *  - Every function that can fail returns 0 (or a non-negative count) on
 *    success and a negative errno, or one of the SCOPE_E* codes below, on
 *    failure.  scope_strerror() turns any of them into a message.
 *  - The library never prints, never exits and never aborts on bad input.
 *  - Ownership is stated on every function: "new" means the caller owns the
 *    result and must release it with the named function; "borrowed" means the
 *    library keeps ownership and says for how long the pointer stays valid;
 *    "copied" means the library keeps its own copy of an argument.
 *  - Times are nanoseconds of CLOCK_MONOTONIC (scope_now()).  Deadlines are
 *    absolute, timeouts relative.
 *  - Cancellation is cooperative and level-triggered: once a scope is
 *    cancelled, every blocking call of the runtime made inside it (or inside
 *    any scope below it) fails with -ECANCELED, and keeps failing.
 */
#ifndef SCOPE_H
#define SCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SCOPE_BUILDING_LIBRARY)
#define SCOPE_API __attribute__((visibility("default")))
#else
#define SCOPE_API
#endif

#define SCOPE_VERSION_MAJOR 0
#define SCOPE_VERSION_MINOR 1
#define SCOPE_VERSION_PATCH 0
#define SCOPE_VERSION_STRING "0.1.0"

/* ---------------------------------------------------------------------------
 * Errors.  Besides negative errno values the runtime returns these codes.
 * They sit far above any errno so the two never collide.
 */
#define SCOPE_EBASE 20000
enum {
	SCOPE_EFAILED = -(SCOPE_EBASE + 1),    /* a subtask failed; see scope_failure() */
	SCOPE_ENOFORKS = -(SCOPE_EBASE + 2),   /* any-successful join: no fork reached the
						* joiner (none made, or every one refused) */
	SCOPE_EREJECTED = -(SCOPE_EBASE + 3),  /* the pool refused the task (abort policy) */
	SCOPE_EDISCARDED = -(SCOPE_EBASE + 4), /* the pool dropped the task (discard policies) */
	SCOPE_ESTRUCTURE = -(SCOPE_EBASE + 5), /* structure violation (see scope_close) */
	SCOPE_EJOINED = -(SCOPE_EBASE + 6),    /* second join, or fork after join */
	SCOPE_ESHUTDOWN = -(SCOPE_EBASE + 7),  /* the pool is shut down */
	SCOPE_EEXITED = -(SCOPE_EBASE + 8),    /* the subtask's thread exited (pthread_exit) */
};

/* Message for any value returned by this library (negative errno included).
 * Borrowed: a static string, valid forever. */
SCOPE_API const char *scope_strerror(int err);

/* The library's version string, such as "0.1.0".  Borrowed, static. */
SCOPE_API const char *scope_version(void);

/* Now, in nanoseconds of CLOCK_MONOTONIC. */
SCOPE_API int64_t scope_now(void);

/* ---------------------------------------------------------------------------
 * Types.  All opaque.
 */
typedef struct scope scope_t;		/* a scope: owns its forks */
typedef struct scope_task scope_task_t; /* a subtask (the handle scope_fork gives) */
typedef struct scope_pool scope_pool_t; /* a thread pool */

/* A subtask body.  Returns 0 and may set *result on success, or a negative
 * error code on failure.  The result pointer is opaque to the runtime. */
typedef int (*scope_fn)(void *arg, void **result);

typedef enum scope_task_state {
	SCOPE_TASK_UNAVAILABLE = 0, /* not finished, or never started (cancelled/rejected) */
	SCOPE_TASK_SUCCESS = 1,
	SCOPE_TASK_FAILED = 2,
} scope_task_state_t;

/* ---------------------------------------------------------------------------
 * Joiners: the policy scope_join() waits by.
 */
typedef enum scope_joiner_kind {
	SCOPE_JOIN_ALL_SUCCESSFUL = 0, /* default: cancel on first failure */
	SCOPE_JOIN_ANY_SUCCESSFUL,     /* first success wins, others cancelled */
	SCOPE_JOIN_AWAIT_ALL,	       /* wait for all, never cancel */
	SCOPE_JOIN_UNTIL,	       /* wait until the predicate says stop */
	SCOPE_JOIN_CUSTOM,	       /* callbacks in scope_joiner_ops */
} scope_joiner_kind_t;

/* Predicate for SCOPE_JOIN_UNTIL: called once per completed subtask, on the
 * thread that completed it, with the scope's lock not held.  The task is
 * borrowed for the call only when it was forked without a handle.  Return true to
 * stop: the scope is cancelled (reason: joiner) and join returns 0. */
typedef bool (*scope_until_fn)(void *ctx, scope_task_t *done);

/* Callbacks of a custom joiner.  All optional.  Caller sets every field;
 * the struct is borrowed and must outlive the scope. */
struct scope_joiner_ops {
	/* Before a fork starts; return <0 to refuse the fork with that error.
	 * Here and in on_complete, a task forked without a handle is borrowed
	 * for the call only. */
	int (*on_fork)(void *ctx, scope_task_t *task);
	/* After a subtask completes (any thread); return true to cancel the
	 * scope and stop waiting. */
	bool (*on_complete)(void *ctx, scope_task_t *task);
	/* Computes scope_join()'s return value once waiting is over (owner
	 * thread).  NULL: 0. */
	int (*result)(void *ctx, scope_t *scope);
	void *ctx;
};

/* Partial results on timeout (JDK 26's Joiner.onTimeout), for any joiner:
 * when the deadline passed before the joiner decided, scope_join() returns
 * what this returns instead of -ETIMEDOUT.  Called once, on the owner, in
 * scope_join(), with the subtasks that completed readable (scope_task_at,
 * scope_next, scope_failure; those still running are cancelled and
 * UNAVAILABLE). */
typedef int (*scope_timeout_fn)(void *ctx, scope_t *scope);

/* Flags of scope_config.flags; any other bit is refused (-EINVAL).  Flags
 * are the scope's own: a scope opened below it (by a subtask) does not
 * inherit them. */
/* Do not signal workers blocked outside the runtime on cancel. */
#define SCOPE_F_NO_INTERRUPT 0x1u
/* A shield (Trio's CancelScope(shield=True)) for cleanup code in a
 * cancelled context: it opens even below a cancelled scope, and no
 * ancestor's cancellation or deadline reaches it or anything below it.
 * Only its own deadline (timeout_ns or deadline_ns, required: -EINVAL
 * without one) and its own cancel end it, so cleanup runs for a bounded
 * time. */
#define SCOPE_F_SHIELD 0x2u

/* Configuration of scope_open().  Zero-initialise (SCOPE_CONFIG_INIT), then
 * set what you need; every field is set by the caller and read once. */
struct scope_config {
	const char *name;		    /* copied; NULL: "scope" */
	scope_joiner_kind_t joiner;	    /* default ALL_SUCCESSFUL */
	scope_until_fn until;		    /* SCOPE_JOIN_UNTIL only */
	void *until_ctx;		    /* passed to until */
	const struct scope_joiner_ops *ops; /* SCOPE_JOIN_CUSTOM only; borrowed */
	int64_t timeout_ns;		    /* relative; 0: none */
	int64_t deadline_ns;		    /* absolute monotonic; 0: none; earliest wins */
	scope_pool_t *pool;		    /* borrowed; NULL: the default pool */
	unsigned flags;			    /* SCOPE_F_* */
	scope_timeout_fn on_timeout;	    /* NULL: join returns -ETIMEDOUT */
	void *on_timeout_ctx;		    /* passed to on_timeout */
};
#ifdef __cplusplus
#define SCOPE_CONFIG_INIT                                                                          \
	{                                                                                          \
	} /* {0} warns in C++ (-Wmissing-field-initializers) */
#else
#define SCOPE_CONFIG_INIT                                                                          \
	{                                                                                          \
		0                                                                                  \
	}
#endif

/* ---------------------------------------------------------------------------
 * Scopes.
 */

/* Opens a scope owned by the calling thread, in the task it runs: a subtask
 * that runs on the owner's thread (caller-runs, or run by its joiner) is not
 * the owner, and gets -EPERM from fork, join, close and bind.  Its parent is the innermost
 * scope open on this thread or, on a worker running a subtask, the scope
 * that forked it.  cfg may be NULL for all defaults.  On success *out is a
 * new scope that must be closed with scope_close() by the same thread.
 * file/line/func are borrowed forever (pass string literals; the macro does).
 * A deadline (timeout_ns or deadline_ns) is kept by the runtime's one
 * timer thread (started with the first such scope, shared by all): when it
 * passes, the scope is cancelled (reason TIMEOUT) at once, whatever its
 * owner is doing.
 * Errors: -EINVAL, -ENOMEM, -ECANCELED (enclosing scope already cancelled:
 * nothing is opened), -EAGAIN (the timer thread could not be started). */
SCOPE_API int scope_open_at(scope_t **out, const struct scope_config *cfg, const char *file,
			    int line, const char *func);
#define scope_open(out, cfg) scope_open_at((out), (cfg), __FILE__, __LINE__, __func__)

/* Forks fn(arg) onto the scope's pool.  *out (if out is non-NULL) receives a
 * borrowed handle valid until scope_close().  With out NULL the runtime
 * keeps the subtask only while it lives (and, after it ends, only if it is
 * the scope's failure or winner): a scope that stays open for days, forking
 * without handles, holds memory for what is live, not for every fork.  A fork into a cancelled
 * scope starts nothing: it returns 0 and the handle stays UNAVAILABLE. Errors: -EINVAL (NULL scope
 * or fn), -EPERM (not the owner), SCOPE_EJOINED (fork after join), -ENOMEM; and, with the handle
 * FAILED with the same error: SCOPE_EREJECTED (the pool's abort policy), SCOPE_ESHUTDOWN (the pool
 * is shut down), -EAGAIN (the pool needed a thread and could not start one: the thread factory or
 * pthread_create failed), a custom joiner's on_fork error; with the handle UNAVAILABLE: -ECANCELED
 * (BLOCK policy: the scope was cancelled, or its deadline passed, while the fork waited for room).
 */
SCOPE_API int scope_fork_at(scope_t *scope, scope_fn fn, void *arg, scope_task_t **out,
			    const char *file, int line, const char *func);
#define scope_fork(scope, fn, arg, out)                                                            \
	scope_fork_at((scope), (fn), (arg), (out), __FILE__, __LINE__, __func__)

/* Options of scope_fork_with(); zero-initialise (SCOPE_FORK_OPTIONS_INIT),
 * then set what you need.  Every field is set by the caller and read once. */
struct scope_fork_options {
	/* In a pool created with priority_queue: a queued subtask with a higher
	 * priority runs before one with a lower (any int; default 0), and
	 * equal priorities run in fork order.  Other pools ignore it. */
	int priority;
};
#ifdef __cplusplus
#define SCOPE_FORK_OPTIONS_INIT                                                                    \
	{                                                                                          \
	}
#else
#define SCOPE_FORK_OPTIONS_INIT                                                                    \
	{                                                                                          \
		0                                                                                  \
	}
#endif

/* scope_fork with options (opts may be NULL: scope_fork's defaults); the
 * same ownership, results and errors as scope_fork_at. */
SCOPE_API int scope_fork_with_at(scope_t *scope, scope_fn fn, void *arg, scope_task_t **out,
				 const struct scope_fork_options *opts, const char *file, int line,
				 const char *func);
#define scope_fork_with(scope, fn, arg, out, opts)                                                 \
	scope_fork_with_at((scope), (fn), (arg), (out), (opts), __FILE__, __LINE__, __func__)

/* Waits as the joiner says.  An all-successful or await-all joiner runs its
 * scope's still-queued subtasks itself rather than wait, and then the
 * queued work its running subtasks forked (on a pool with an unbounded
 * queue), which it waits for anyway: its join then returns when the task
 * it runs returns, so a subtask that never reaches a
 * cancellation point delays such a join past a failure, deadline or
 * cancel.  Any-successful, until and custom joiners never do: their join
 * returns as soon as they decide, whatever the subtasks do.
 * Whatever happened first decides what it returns:
 *  - the joiner's result when the joiner decided (all subtasks ended, a
 *    failure, a winner, the predicate) before any cancellation: 0,
 *    SCOPE_EFAILED (scope_failure() tells which and why), SCOPE_ENOFORKS
 *    (any-successful: no fork reached the joiner), or what a custom
 *    joiner's result() returns;
 *  - -ETIMEDOUT when the effective deadline (its own or an ancestor's)
 *    passed before the joiner decided, as Java's TimeoutException: also
 *    when every subtask had ended in time but join came after the
 *    deadline, and when nothing was forked;
 *  - -ECANCELED for any other cancellation (scope_cancel, an ancestor's
 *    cancel) before the joiner decided;
 *  - -EPERM (not the owner: another thread, or a subtask of this scope
 *    running on the owner's thread, which never waits for itself), -EINVAL
 *    (NULL), SCOPE_EJOINED (second join).
 * Only the owner may join, once. */
SCOPE_API int scope_join(scope_t *scope);

/* Cancels whatever still runs, waits for every subtask, and frees the scope
 * (the scope pointer and its task handles are invalid afterwards).  When
 * scopes opened inside this one (on this thread) are still open, those are
 * closed first and SCOPE_ESTRUCTURE is returned.  -EPERM from a thread that
 * is not the owner (nothing is freed then).  After it returns no thread
 * started for this scope runs its work. */
SCOPE_API int scope_close(scope_t *scope);

/* Cancels the scope (reason: explicit) and, through it, everything below.
 * Any thread may call it.  Idempotent. */
SCOPE_API int scope_cancel(scope_t *scope);

/* Inside a subtask or a scope: -ECANCELED when the enclosing scope or any
 * ancestor is cancelled or past its deadline, else 0. */
SCOPE_API int scope_cancelled(void);

/* Why a scope is cancelled (the values the daemon's dumps show). */
typedef enum scope_cancel_reason {
	SCOPE_CANCEL_NONE = 0,	    /* not cancelled */
	SCOPE_CANCEL_JOINER = 1,    /* the joiner decided (a failure, a winner, the predicate) */
	SCOPE_CANCEL_TIMEOUT = 2,   /* its deadline passed */
	SCOPE_CANCEL_EXPLICIT = 3,  /* scope_cancel() */
	SCOPE_CANCEL_PARENT = 4,    /* an ancestor was cancelled (see cause) */
	SCOPE_CANCEL_VIOLATION = 5, /* closed for a structure violation */
	SCOPE_CANCEL_CLOSE = 6,	    /* scope_close() with subtasks still running */
	SCOPE_CANCEL_SHUTDOWN = 7,  /* scope_pool_shutdown_now() stopped a running subtask */
} scope_cancel_reason_t;

/* Whether scope (NULL: the calling context's innermost scope, the one a
 * subtask was forked into) is cancelled, and why: SCOPE_CANCEL_NONE when
 * it is not.  A deadline that has passed counts (it cancels then).  cause
 * (optional) receives where the cancellation began: the reason itself, or
 * for PARENT the reason of the ancestor it came from (TIMEOUT, EXPLICIT,
 * ...).  Any thread may ask about a scope it knows is open. */
SCOPE_API scope_cancel_reason_t scope_cancel_reason(const scope_t *scope,
						    scope_cancel_reason_t *cause);

/* Cancellation handlers (Swift's withTaskCancellationHandler, Go's
 * context.AfterFunc), for code blocked on what the runtime does not own: a
 * condition variable, a foreign event loop, a connection pool.  The storage
 * is the caller's (often on its stack); its fields are the runtime's. */
typedef struct scope_cancel_handler {
	void *reserved_[8];
} scope_cancel_handler_t;

/* Registers fn(ctx) on the calling context's innermost scope (the one a
 * subtask was forked into, or the last one this code opened) for the
 * duration of an operation.  fn runs at most once: on the thread that
 * cancels that scope or an ancestor (the timer thread for a deadline),
 * promptly, with no runtime lock held; or at once, on this thread, when the
 * context is already cancelled.  fn must not block for long, and must not
 * call scope_cancel_handler_remove on its own handler.  Returns 0 (armed),
 * 1 (already cancelled: fn has run), -EINVAL (NULL, or no scope here). */
SCOPE_API int scope_cancel_handler_add(scope_cancel_handler_t *h, void (*fn)(void *ctx), void *ctx);

/* Ends the operation: disarms h, or, when fn was started, waits until it
 * has returned.  Call it before the context's scope closes (the handler
 * holds no reference to it).  Returns 0 (fn never ran), 1 (fn ran),
 * -EINVAL. */
SCOPE_API int scope_cancel_handler_remove(scope_cancel_handler_t *h);

/* An eventfd that becomes readable (POLLIN) when scope (NULL: the calling
 * context's scope) is cancelled, for programs with a poll loop of their
 * own.  Borrowed: made on first call, closed by scope_close.  Poll it, do
 * not read it (a read would make it unreadable again).  Returns the fd, or
 * -EINVAL (no scope), or eventfd's error. */
SCOPE_API int scope_cancel_fd(scope_t *scope);

/* The reason's name as dumps write it ("timeout", "parent", ...; "none"),
 * or "unknown".  Borrowed, static. */
SCOPE_API const char *scope_cancel_reason_name(scope_cancel_reason_t reason);

/* Sleeps ns nanoseconds.  Returns 0, or -ECANCELED as soon as the context
 * is cancelled (a passing deadline cancels), -EINVAL for ns < 0. */
SCOPE_API int scope_sleep(int64_t ns);

/* Sleeps until an absolute monotonic time; as scope_sleep.  A time already
 * past (0 included) returns at once (0, or -ECANCELED); a negative one is
 * -EINVAL. */
SCOPE_API int scope_sleep_until(int64_t deadline_ns);

/* Waits until fd is ready for events (POLLIN/POLLOUT...) or until the
 * absolute deadline (0: none).  Returns the revents (>0), -ETIMEDOUT when
 * the given deadline passes, -ECANCELED when the context is cancelled,
 * -EBADF when fd is not open, -EINVAL (fd < 0, deadline < 0), -ENOMEM, or
 * poll's error. */
SCOPE_API int scope_wait_fd(int fd, short events, int64_t deadline_ns);

/* The effective deadline of the calling context: the earliest of every
 * enclosing scope's (0: none). */
SCOPE_API int64_t scope_deadline(void);

/* The scope's name (borrowed, valid until close) and 64-bit id (unique for
 * the life of the process). */
SCOPE_API const char *scope_name(const scope_t *scope);
SCOPE_API uint64_t scope_id(const scope_t *scope);

/* The subtasks forked with a handle (out non-NULL), in fork order: count,
 * and the i-th (borrowed, until close).  Handle-less forks are never
 * listed: their memory is reused once they end. */
SCOPE_API size_t scope_task_count(const scope_t *scope);
SCOPE_API scope_task_t *scope_task_at(const scope_t *scope, size_t i);

/* Completion order (Swift's group.next()): the next subtask forked with a
 * handle that has ended, in the order they ended; waits for one when none
 * is ready, whatever the joiner or a cancel did (a pool worker waiting here
 * lends its place).  Owner only, before or after join.  Returns 1
 * with *out (borrowed, until close), 0 when every subtask forked with a
 * handle was given already (*out NULL), -EPERM, -EINVAL.  Forks refused by
 * the pool come out too (FAILED).  Handle-less forks never do. */
SCOPE_API int scope_next(scope_t *scope, scope_task_t **out);

/* After a join: the first subtask that failed (borrowed), or NULL. */
SCOPE_API scope_task_t *scope_failure(const scope_t *scope);

/* After an any-successful join: the subtask that won (borrowed), or NULL. */
SCOPE_API scope_task_t *scope_winner(const scope_t *scope);

/* ---------------------------------------------------------------------------
 * Subtasks.  State, result and error are meaningful after scope_join().
 */
SCOPE_API scope_task_state_t scope_task_state(const scope_task_t *task);
/* The result fn set (borrowed from fn; the runtime never frees it). */
SCOPE_API void *scope_task_result(const scope_task_t *task);
/* The error fn returned (FAILED), or 0. */
SCOPE_API int scope_task_error(const scope_task_t *task);
SCOPE_API uint64_t scope_task_id(const scope_task_t *task);

/* ---------------------------------------------------------------------------
 * Scoped values: string bindings inherited by forks and the scopes they open;
 * read-only below the binder, visible to the observer (a request id in a
 * dump).  Only the owner binds, and only before the scope's first fork:
 * bindings are frozen from then on (as Java fixes them at fork), so no
 * running subtask ever sees a value appear or change.  Lookups reach any
 * nesting depth.
 */

/* Binds key=value in scope (both copied; key 1..256 bytes, value up to
 * 1024).  Rebinding a key in the same scope, before the first fork,
 * replaces it.  Errors: -EINVAL (NULL, empty key, too long), -EPERM (not
 * the owner), -EBUSY (the scope already forked: bindings are frozen),
 * SCOPE_EJOINED (after join), -ENOMEM. */
SCOPE_API int scope_value_bind(scope_t *scope, const char *key, const char *value);

/* Looks key up from the calling context outward.  Borrowed: valid while the
 * binding scope stays open, which structure guarantees for the caller. NULL
 * when unbound. */
SCOPE_API const char *scope_value_get(const char *key);

/* ---------------------------------------------------------------------------
 * Pools, configured like java.util.concurrent.ThreadPoolExecutor.
 */
typedef enum scope_queue_kind {
	SCOPE_QUEUE_UNBOUNDED = 0, /* default */
	SCOPE_QUEUE_BOUNDED,	   /* queue_capacity entries */
	SCOPE_QUEUE_DIRECT,	   /* hand-off: no queue, a thread or a rejection */
} scope_queue_kind_t;

typedef enum scope_policy {
	SCOPE_POLICY_ABORT = 0,	     /* fork fails with SCOPE_EREJECTED */
	SCOPE_POLICY_CALLER_RUNS,    /* the forking thread runs the task itself */
	SCOPE_POLICY_DISCARD,	     /* the task ends FAILED with SCOPE_EDISCARDED */
	SCOPE_POLICY_DISCARD_OLDEST, /* the oldest queued task is discarded instead */
	SCOPE_POLICY_BLOCK,	     /* the forker waits for room (cancellable); a
				      * worker waiting lends its place */
} scope_policy_t;

/* Hooks of a pool; all optional, all run on the named thread. */
struct scope_pool_hooks {
	/* Creates a thread running start(arg) (the thread factory).  Return 0
	 * and store the thread, or a negative errno.  NULL: pthread_create. */
	int (*thread_factory)(void *ctx, pthread_t *thread, void *(*start)(void *), void *arg);
	void (*before)(void *ctx, scope_task_t *task);		 /* worker, before the task */
	void (*after)(void *ctx, scope_task_t *task, int error); /* worker, after it */
	void (*terminated)(void *ctx, scope_pool_t *pool);	 /* last worker, after shutdown */
	void *ctx;
};

/* Configuration of scope_pool_create(); zero-initialise, set, pass. */
struct scope_pool_config {
	const char *name;      /* copied; thread names are "<name>-<n>", cut to 15 bytes */
	unsigned core_size;    /* threads kept even when idle; 0: 1 */
	unsigned max_size;     /* upper bound; < core_size: core_size */
	int64_t keep_alive_ns; /* idle time before a non-core thread exits; 0: 60 s */
	scope_queue_kind_t queue;
	size_t queue_capacity; /* SCOPE_QUEUE_BOUNDED only; 0: 64 */
	scope_policy_t policy;
	bool allow_core_timeout; /* core threads also exit after keep_alive */
	bool prestart;		 /* start core_size threads now */
	struct scope_pool_hooks hooks;
	/* Queued subtasks run highest fork priority first (scope_fork_with's
	 * priority), in fork order among equals: ThreadPoolExecutor over a
	 * PriorityBlockingQueue.  With an unbounded or a bounded queue (the
	 * saturation policies count as without it; DISCARD_OLDEST drops the
	 * queued subtask that would run last, or the new fork when it ranks
	 * below every queued one); -EINVAL with SCOPE_QUEUE_DIRECT. */
	bool priority_queue;
};
#ifdef __cplusplus
#define SCOPE_POOL_CONFIG_INIT                                                                     \
	{                                                                                          \
	}
#else
#define SCOPE_POOL_CONFIG_INIT                                                                     \
	{                                                                                          \
		0                                                                                  \
	}
#endif

/* Statistics, read with scope_pool_stats(). All read-only for the caller. */
struct scope_pool_stats {
	unsigned core_size, max_size;
	unsigned size;	    /* threads now */
	unsigned active;    /* threads running a task */
	unsigned largest;   /* most threads ever */
	size_t queued;	    /* tasks waiting */
	uint64_t completed; /* tasks finished */
	uint64_t rejected;  /* tasks refused or discarded */
	/* Workers parked in a join, a close or a BLOCK fork (in the default
	 * pool: in any runtime wait) lend their place: other workers may run
	 * meanwhile, so size may exceed max_size by up to lent. */
	unsigned lent;		/* workers parked with their place lent, now */
	uint64_t compensations; /* threads ever started to stand in for them */
	/* Tasks the pool took: completed + active + queued (as
	 * ThreadPoolExecutor.getTaskCount); refused ones are in rejected. */
	uint64_t submitted;
};

/* Creates a pool.  *out is new; release with scope_pool_destroy().
 * Errors: -EINVAL, -ENOMEM, or the thread factory's error (prestart). */
SCOPE_API int scope_pool_create(scope_pool_t **out, const struct scope_pool_config *cfg);

/* Stops accepting work; queued and running tasks finish.  Idempotent.
 * -EBUSY (nothing done) for the default pool, which the whole process
 * shares. */
SCOPE_API int scope_pool_shutdown(scope_pool_t *pool);

/* Shuts down, waits for every worker to exit, frees.  -EBUSY (nothing done)
 * if a scope still uses the pool. */
SCOPE_API int scope_pool_destroy(scope_pool_t *pool);

SCOPE_API int scope_pool_stats(const scope_pool_t *pool, struct scope_pool_stats *out);

/* Shuts down (as scope_pool_shutdown), takes every queued subtask off the
 * pool (each ends cancelled: UNAVAILABLE, and its scope's join sees it
 * end), and interrupts the workers as Thread.interrupt does
 * (SC_SIG_INTERRUPT: a subtask blocked in a system call outside the
 * runtime gets EINTR; running subtasks are not cancelled otherwise).
 * Returns how many queued subtasks it took, or -EINVAL, -EBUSY (the
 * default pool).  ThreadPoolExecutor.shutdownNow. */
SCOPE_API int scope_pool_shutdown_now(scope_pool_t *pool);

/* After scope_pool_shutdown (isShutdown), and once every worker has gone
 * after it (isTerminated).  false for NULL. */
SCOPE_API bool scope_pool_is_shutdown(const scope_pool_t *pool);
SCOPE_API bool scope_pool_is_terminated(const scope_pool_t *pool);

/* Waits until the pool is terminated (shut down, every worker gone), at
 * most timeout_ns (awaitTermination).  Not cancellable.  Returns 0,
 * -ETIMEDOUT, -EINVAL (NULL, timeout_ns < 0). */
SCOPE_API int scope_pool_await_termination(scope_pool_t *pool, int64_t timeout_ns);

/* Setters after creation (ThreadPoolExecutor's setKeepAliveTime,
 * allowCoreThreadTimeOut, setRejectedExecutionHandler); idle workers and
 * blocked forkers look again at once.  0, or -EINVAL (NULL, keep_alive_ns
 * <= 0, unknown policy). */
SCOPE_API int scope_pool_set_keep_alive(scope_pool_t *pool, int64_t keep_alive_ns);
SCOPE_API int scope_pool_set_core_timeout(scope_pool_t *pool, bool allow);
SCOPE_API int scope_pool_set_policy(scope_pool_t *pool, scope_policy_t policy);

/* Starts one core thread ahead of work (prestartCoreThread).  Returns 1
 * (started), 0 (core_size threads run already), SCOPE_ESHUTDOWN, -EINVAL,
 * or the thread factory's error. */
SCOPE_API int scope_pool_prestart_core(scope_pool_t *pool);
SCOPE_API int scope_pool_set_size(scope_pool_t *pool, unsigned core_size, unsigned max_size);
SCOPE_API const char *scope_pool_name(const scope_pool_t *pool); /* borrowed */

/* The shared default pool (created on first use; borrowed, lives until
 * exit): Ncpu threads, an unbounded queue (fork never blocks), and a worker
 * parked in any runtime wait (join, close, sleep, fd wait) lends its place. */
SCOPE_API scope_pool_t *scope_pool_default(void);

/* N = Ncpu x Ucpu x (1 + W/C), at least 1.  utilization in (0,1];
 * wait_compute_ratio = W/C >= 0. */
SCOPE_API unsigned scope_pool_size_for(double utilization, double wait_compute_ratio);

/* Names the calling thread for dumps (copied; cut to 15 bytes as Linux does). */
SCOPE_API int scope_thread_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* SCOPE_H */
