/* client.c - control connections: newline-delimited JSON requests in, replies
 * out, with caps on line length and unsent output. */
#include "daemon.h"

#include "cmd.h"
#include "conn.h"
#include "log.h"
#include "loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_client(struct loop *l, int fd, unsigned events, void *ctx);
static void client_resume(struct daemon *d, struct client *c);
static const struct watcher client_watch = {.reply_done = client_resume};

void client_close(struct client *c)
{
	struct daemon *d = c->d;
	for (struct client **pp = &d->clients; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	d->nclients--;
	daemon_client_gone(d, c);
	loop_del(d->loop, c->fd);
	close(c->fd);
	jb_free(&c->out);
	free(c->in);
	free(c);
}

void client_trim(struct client *c)
{
	/* A client that asked for a big reply and never reads it would hold
	 * the reply's memory for as long as it stays connected. */
	int64_t now = loop_now_ns();
	if (!c->out.len) {
		c->drained_ns = now;
	} else if (now - c->drained_ns > CLIENT_STALL_NS && !c->dead) {
		log_warn("control client pid %d read nothing of its reply for %lld s (%zu bytes "
			 "unsent); dropping it",
			 (int)c->pid, (long long)(CLIENT_STALL_NS / 1000000000), c->out.len);
		c->dead = true;
		return;
	}
	conn_out_trim(&c->out, 64u << 10);
	if (!c->waiting)
		c->in = conn_shrink(c->in, &c->incap, c->inlen, 4096);
}

/* Takes one accepted control connection (fd is ours to keep or close). */
static void take_client(void *ctx, int fd, const struct ucred *cred)
{
	struct daemon *d = ctx;
	size_t cap = (size_t)d->opt.max_clients, mine = 0;
	for (const struct client *o = d->clients; o; o = o->next)
		mine += o->uid == cred->uid;
	/* Root is always served (a reserve past the cap); another user gets
	 * at most a share of it, so one cannot lock the others out. */
	if (cred->uid == 0 ? d->nclients >= cap + CLIENT_ROOT_RESERVE
			   : (d->nclients >= cap || mine >= per_uid_share(cap))) {
		static const char busy[] =
		    "{\"ok\":false,\"error\":{\"code\":\"too_large\",\"message\":"
		    "\"scoped serves too many clients (--max-clients); try again later\"}}\n";
		ssize_t w = send(fd, busy, sizeof busy - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)w;
		close(fd);
		return;
	}
	struct client *c = calloc(1, sizeof *c);
	if (!c) {
		close(fd);
		return;
	}
	c->d = d;
	daemon_watch(d, &client_watch);
	c->fd = fd;
	c->pid = cred->pid;
	c->uid = cred->uid;
	c->drained_ns = loop_now_ns();
	jb_init(&c->out);
	if (loop_add(d->loop, fd, LOOP_READ, on_client, c) < 0) {
		free(c);
		close(fd);
		return;
	}
	c->next = d->clients;
	d->clients = c;
	d->nclients++;
}

void client_accept(struct daemon *d)
{
	conn_accept_each(d->loop, d->ctl_fd, "a client", d->ctl_path, take_client, d);
}

static void run_line(struct client *c, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!req || !json_is_object(req)) {
		reply_error(c, NULL, "bad_request", "the request is not a JSON object: %s",
			    req ? "another JSON value" : jerr.text);
		json_decref(req);
		return;
	}
	json_t *id = json_object_get(req, "id");
	if (id && !json_is_integer(id)) {
		reply_error(c, NULL, "bad_request", "\"id\" must be an integer");
		json_decref(req);
		return;
	}
	json_t *cmd = json_object_get(req, "cmd");
	const struct cmd_entry *e = json_is_string(cmd) ? cmd_find(json_string_value(cmd)) : NULL;
	if (!json_is_string(cmd))
		reply_error(c, id, "bad_request", "the request needs a string \"cmd\"");
	else if (!e)
		reply_error(c, id, "unknown_command",
			    "no command \"%.64s\"; commands: status, list, tree, stacks, dump, "
			    "subscribe, unsubscribe",
			    json_string_value(cmd));
	else {
		struct cmd_ctx x = {c->d, c, req, id};
		if (e->fn(&x) == CMD_PENDING)
			c->waiting = true;
	}
	json_decref(req);
}

/* Runs complete lines until one goes asynchronous or none is left. */
static void run_lines(struct client *c)
{
	size_t off = 0;
	while (!c->waiting && !c->dead) {
		char *nl = memchr(c->in + off, '\n', c->inlen - off);
		if (!nl)
			break;
		size_t len = (size_t)(nl - (c->in + off));
		if (len)
			run_line(c, c->in + off, len);
		off += len + 1;
	}
	if (off) {
		memmove(c->in, c->in + off, c->inlen - off);
		c->inlen -= off;
	}
}

/* An asynchronous reply to c is written: the lines that waited run. */
static void client_resume(struct daemon *d, struct client *c)
{
	(void)d;
	c->waiting = false;
	run_lines(c);
	client_flush(c);
	if (c->dead)
		client_close(c);
}

/* Makes room for more input; false when the buffer is at its cap. */
static bool grow_input(struct client *c)
{
	if (c->inlen < c->incap)
		return true;
	if (c->incap >= CLIENT_MAX_LINE)
		return false;
	char *in = conn_grow(c->in, &c->incap, 4096, CLIENT_MAX_LINE);
	if (!in) {
		c->dead = true;
		return false;
	}
	c->in = in;
	return true;
}

static void read_input(struct client *c)
{
	if (!grow_input(c)) {
		/* Pipelined requests wait behind an async one: stop reading. */
		if (c->waiting && !c->dead)
			loop_mod(c->d->loop, c->fd, c->out.len ? LOOP_WRITE : 0);
		return;
	}
	ssize_t n = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		c->dead = true;
		return;
	}
	if (n < 0)
		return;
	c->inlen += (size_t)n;
	run_lines(c);
	/* What is left is one unfinished line: at the cap it can never end. */
	if (!c->dead && !c->waiting && c->inlen >= CLIENT_MAX_LINE) {
		reply_error(c, NULL, "too_large", "a request line is over %u bytes; closing",
			    CLIENT_MAX_LINE);
		c->dead = true;
	}
}

static void on_client(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)l;
	(void)fd;
	struct client *c = ctx;
	if (events & LOOP_WRITE)
		client_flush(c);
	if ((events & LOOP_READ) && !c->dead)
		read_input(c);
	if (c->dead)
		client_close(c);
}
