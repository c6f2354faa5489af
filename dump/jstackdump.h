/* jstackdump.h - the thread dump in HotSpot's jstack / `jcmd Thread.print`
 * text layout, the one existing thread-dump analysers parse, with the scope
 * hierarchy written where those parsers look past it. */
#ifndef DUMP_JSTACKDUMP_H
#define DUMP_JSTACKDUMP_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* Prints dump (borrowed; what jdkdump_build() returns) to out:
 *
 *   "name" #tid prio=0 tid=0x<tid> nid=0x<tid> waiting on condition
 *      java.lang.Thread.State: WAITING (parking)
 *   <TAB>at func(file.c:42)
 *
 * a block per thread, the scope containers listed before the first thread
 * (where parsers skip HotSpot's "Threads class SMR info") and each thread's
 * own container chain after its frames.  Tolerates any shape of input.
 * Returns 0, -EIO when writing failed, or -ENOMEM. */
enum {
	/* -l: each thread's "Locked ownable synchronizers", the scopes it owns
	 * (opened and not yet closed), "- <0xID> (a scope NAME@ID, joiner,
	 * state)", or "- None". */
	JSTACKDUMP_LOCKS = 0x1,
};

int jstackdump_write(FILE *out, const json_t *dump, unsigned flags);

/* The same into a new string (free()), or NULL when out of memory. */
char *jstackdump_string(const json_t *dump, unsigned flags);

/* Writes frame, a dump frame string ("func (file.c:42)", "0x7f00"), as a
 * HotSpot frame's text ("func(file.c:42)", "0x7f00(Unknown Source)") into
 * buf.  Returns buf. */
char *jstackdump_frame(const char *frame, char *buf, size_t len);

#endif
