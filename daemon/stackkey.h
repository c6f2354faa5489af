/* stackkey.h - what a dump's thread entries were written from, kept so
 * that the next dump can tell whether it would write them the same. */
#ifndef DAEMON_STACKKEY_H
#define DAEMON_STACKKEY_H

#include "daemon.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Of one thread, all that its entry is written from but its state and
 * blocked_in (the dump's text marks those, and re-makes them alone). */
struct stack_key_thread {
	uint32_t tid;
	char comm[16];
	int error;
	const char *error_why, *approximate_why, *lock_class; /* static */
	bool approximate;
	int lock_how;
	uint64_t lock_addr;
	uint32_t lock_owner;
	char lock_owner_comm[16];
	uint16_t nframes;
};

struct stack_key {
	bool valid;
	size_t n, cap;
	struct stack_key_thread *t;
	uint64_t *frames; /* every thread's, one after the other */
	size_t nframes, frames_cap;
};

/* Makes k that of the n threads t; false (k not valid) when memory ran
 * out. */
bool stack_key_set(struct stack_key *k, const struct stack_thread *t, size_t n);

/* Whether k is valid and the threads t (n) are those it was made of, in
 * the same order, in all but their state and blocked_in. */
bool stack_key_same(const struct stack_key *k, const struct stack_thread *t, size_t n);

void stack_key_free(struct stack_key *k);

#endif
