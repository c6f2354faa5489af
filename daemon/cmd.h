/* cmd.h - control commands: one per file (cmd_<name>.c), registered in cmd.c's
 * table, plus the reply helpers they share (cmd_reply.c). */
#ifndef DAEMON_CMD_H
#define DAEMON_CMD_H

#include "daemon.h"

#include <jansson.h>

struct cmd_ctx {
	struct daemon *d;
	struct client *c;
	json_t *req; /* borrowed: the request object */
	json_t *id;  /* borrowed: its "id", or NULL */
};

/* Runs a command.  Returns CMD_DONE once the reply is written, or
 * CMD_PENDING when it will be written later (the client's next lines wait). */
enum { CMD_DONE = 0, CMD_PENDING = 1 };
typedef int (*cmd_fn)(struct cmd_ctx *x);

struct cmd_entry {
	const char *name;
	cmd_fn fn;
};

extern const struct cmd_entry cmd_status_entry, cmd_list_entry, cmd_tree_entry, cmd_stacks_entry,
    cmd_dump_entry, cmd_subscribe_entry, cmd_unsubscribe_entry, cmd_advise_entry;

/* The command named name, or NULL. */
const struct cmd_entry *cmd_find(const char *name);

/* Starts a success reply line ({"id":..,"ok":true); the caller adds members
 * with jb_key/... on the returned buffer and calls reply_end(). */
struct jbuf *reply_begin(struct client *c, json_t *id);
void reply_end(struct client *c);
/* How a reply's text was made (reply_text's flags), said in its line. */
enum {
	REPLY_REUSED = 1,	  /* "reused": re-made from the last one's text */
	REPLY_ENTRIES_REUSED = 2, /* "entries_reused": its thread entries not written afresh */
};
/* A successful reply whose payload is text, not members: the line
 * {"id", "ok": true, "text_bytes": len} (with "reused": true and
 * "entries_reused": true as flags say), then len bytes of text (borrowed,
 * copied). */
void reply_text(struct client *c, json_t *id, const char *text, size_t len, unsigned flags);
void reply_error(struct client *c, json_t *id, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether the client may see process p (same uid, or root). */
bool cmd_may_see(const struct client *c, const struct proc *p);

/* The process named by the request's "pid", checked for permission; NULL
 * after writing the error reply. */
struct proc *cmd_proc(struct cmd_ctx *x);

/* Starts a stacks capture for a stacks or dump request; CMD_PENDING or CMD_DONE
 * (stacks.c). */
int stacks_start(struct cmd_ctx *x, struct proc *p, bool dump);

/* Whether the request's "pid" is a running process the daemon has never
 * registered (it does not use libscope, or its agent is elsewhere); sets
 * *pid.  Such a process is dumped by stacks_start_plain(): its threads
 * only, from BPF or from /proc, answered before it returns. */
bool stacks_plain_target(struct cmd_ctx *x, pid_t *pid);
int stacks_start_plain(struct cmd_ctx *x, pid_t pid, bool dump);

#endif
