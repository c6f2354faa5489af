/* dumplocks.h - the locks of a thread in the dump: the pthread mutex it
 * waits for with its owner ("waitingToLock") and those it holds that others
 * wait for ("locksHeld"), from the daemon's stack entries, and their lines
 * in the text and jstack forms. */
#ifndef DUMP_DUMPLOCKS_H
#define DUMP_DUMPLOCKS_H

#include <jansson.h>
#include <stdio.h>

#include "../common/jv.h"

struct jw;

/* Writes a thread's members "waitingToLock" {"lock", "class", "ownerTid",
 * "ownerName"} and "locksHeld" [{"lock", "class", "waiters"}] from the
 * stack entry st (the daemon's "waiting_to_lock" and "locks_held"), each
 * only when st has it in a valid shape. */
void dumplocks_write(struct jw *w, const jv *st);

/* "waiting to lock <0x7f…> (a pthread_mutex_t) owned by tid 42 "name"" for
 * dump thread t, or nothing (returns 0) when it waits for no known lock.
 * prefix goes first ("\t- ", "  - "). */
int dumplocks_waiting_line(FILE *out, const json_t *t, const char *prefix);

/* One "<prefix><0x7f…> (a pthread_mutex_t)<suffix>" line per lock t holds
 * that others wait for; returns how many. */
int dumplocks_held_lines(FILE *out, const json_t *t, const char *prefix, const char *suffix);

#endif
