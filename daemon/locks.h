/* locks.h - which thread holds the lock a thread waits for: the futex word
 * the waiter sleeps on is read from the target and checked against glibc's
 * pthread_mutex_t, so that a dump can say what jstack -l says of Java locks,
 * "waiting to lock <0x…> (a pthread_mutex_t)" and who owns it. */
#ifndef DAEMON_LOCKS_H
#define DAEMON_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct jbuf;
struct stack_thread;

/* Fills lock_owner and lock_class of the threads t[0..n) of pid that wait
 * for a lock whose owner is a thread of pid.  from_proc: the stack source
 * gave no syscalls (signal mode), so each thread's is read from /proc first;
 * a thread found waiting for a lock that way also gets its state (BLOCKED)
 * and blocked_in ("mutex").  A word that does not look like a held lock is
 * left alone: a futex that is not a mutex is never shown as one. */
void locks_resolve(pid_t pid, struct stack_thread *t, size_t n, bool from_proc);

/* Whether tid is a live thread of pid; its name (control characters as
 * '?') into comm when it is. */
bool locks_thread_comm(pid_t pid, uint32_t tid, char comm[16]);

/* The owners of the locks the waiters in t[0..n) wait for, for
 * locks_held_json (one index per reply). */
struct locks_index {
	const struct stack_thread **w; /* waiters by owner, then lock */
	size_t n;
};

/* 0, or -ENOMEM (the index is then empty: no "locks_held" is written). */
int locks_index_build(struct locks_index *ix, const struct stack_thread *t, size_t n);
void locks_index_free(struct locks_index *ix);

/* Writes "waiting_to_lock": {"addr", "class", "owner", "owner_name"} when t
 * waits for a lock with a known owner (owner_name may be NULL). */
void locks_waiting_json(struct jbuf *b, const struct stack_thread *t, const char *owner_name);

/* Writes "locks_held": [{"addr", "class", "waiters": [tid…]}…] when t owns
 * locks that threads of the index wait for. */
void locks_held_json(struct jbuf *b, const struct locks_index *ix, const struct stack_thread *t);

#endif
