/* lock_tasks.c - plain_locks.c built with libscope: the holder, the waiter
 * and the condition waiter run as tasks of one scope on pool workers, so
 * that the agent's signal-mode capture sees them too. */
#define LOCKS_SCOPE 1
#include "plain_locks.c"
