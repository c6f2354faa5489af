/* cmd_reply.c - what every control command shares: reply lines, errors,
 * and the process a request names, checked against the client's rights. */
#include "cmd.h"

#include "anyproc.h"
#include "loop.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* Each reply is a fresh top-level JSON value on its own line. */
static void line_start(struct jbuf *b)
{
	b->depth = 0;
	b->first[0] = true;
	b->after_key = false;
}

static void id_member(struct jbuf *b, json_t *id)
{
	if (!id)
		return;
	jb_key(b, "id");
	if (json_is_integer(id))
		jb_i64(b, json_integer_value(id));
	else
		jb_null(b);
}

struct jbuf *reply_begin(struct client *c, json_t *id)
{
	struct jbuf *b = &c->out;
	client_room(c);
	line_start(b);
	jb_obj(b);
	id_member(b, id);
	jb_key(b, "ok");
	jb_bool(b, true);
	return b;
}

void reply_end(struct client *c)
{
	jb_obj_end(&c->out);
	jb_raw(&c->out, "\n", 1);
	client_flush(c);
}

void reply_text(struct client *c, json_t *id, const char *text, size_t len, unsigned flags)
{
	struct jbuf *b = reply_begin(c, id);
	jb_key(b, "text_bytes");
	jb_u64(b, len);
	if (flags & REPLY_REUSED) {
		jb_key(b, "reused");
		jb_bool(b, true);
	}
	if (flags & REPLY_ENTRIES_REUSED) {
		jb_key(b, "entries_reused");
		jb_bool(b, true);
	}
	jb_obj_end(b);
	jb_raw(b, "\n", 1);
	/* What is waiting and the text go out together from where they are (a
	 * dump's text is megabytes: copying it into the output first cost as
	 * much again); what the socket does not take is kept, in order. */
	size_t sent = 0;
	if (!c->dead && !b->oom) {
		struct iovec iov[2] = {{b->p, b->len}, {(void *)text, len}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
		ssize_t n;
		do
			n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		sent = n > 0 ? (size_t)n : 0;
	}
	if (sent)
		c->drained_ns = loop_now_ns();
	size_t head = b->len < sent ? b->len : sent;
	jb_consume(b, head);
	if (sent - head < len)
		jb_raw(b, text + (sent - head), len - (sent - head));
	client_flush(c);
}

void reply_error(struct client *c, json_t *id, const char *code, const char *fmt, ...)
{
	char msg[512];
	client_room(c);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct jbuf *b = &c->out;
	line_start(b);
	jb_obj(b);
	id_member(b, id);
	jb_key(b, "ok");
	jb_bool(b, false);
	jb_key(b, "error");
	jb_obj(b);
	jb_key(b, "code");
	jb_str(b, code);
	jb_key(b, "message");
	jb_str(b, msg);
	jb_obj_end(b);
	reply_end(c);
}

bool cmd_may_see(const struct client *c, const struct proc *p)
{
	return c->uid == 0 || c->uid == p->uid;
}

struct proc *cmd_proc(struct cmd_ctx *x)
{
	json_t *pid = json_object_get(x->req, "pid");
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
	    json_integer_value(pid) > 0x7fffffff) {
		reply_error(x->c, x->id, "bad_request", "\"pid\" must be a positive integer");
		return NULL;
	}
	pid_t n = (pid_t)json_integer_value(pid);
	struct proc *p = proc_find(x->d, n);
	if (!p) {
		char path[32];
		snprintf(path, sizeof path, "/proc/%d", (int)n);
		if (access(path, F_OK) == 0 && anyproc_links_libscope(n))
			reply_error(
			    x->c, x->id, "not_instrumented",
			    "process %d is not instrumented (no libscope agent connected); is "
			    "SCOPED_SOCKET the same for both?",
			    (int)n);
		else if (access(path, F_OK) == 0)
			reply_error(
			    x->c, x->id, "not_instrumented",
			    "process %d does not use libscope: it has no scopes or tasks (its "
			    "threads: stacks, dump)",
			    (int)n);
		else
			reply_error(x->c, x->id, "no_such_process",
				    "no process %d is running or remembered by scoped", (int)n);
		return NULL;
	}
	if (!cmd_may_see(x->c, p)) {
		reply_error(x->c, x->id, "permission_denied",
			    "process %d belongs to uid %u; you are uid %u", (int)n,
			    (unsigned)p->uid, (unsigned)x->c->uid);
		return NULL;
	}
	return p;
}
