/* ctl.c - client side of scoped's control protocol: one connection, JSON
 * lines out, JSON lines in, replies matched to requests by id. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jtext.h"
#include "jv.h"
#include "termtext.h"
#include "writeall.h"
#include "sockcheck.h"
#include "sockpath.h"

/* A whole dump of a large process is one line; anything past this is a
 * daemon gone wrong, and we refuse to grow without bound because of it. */
#define CTL_MAX_LINE (256u << 20)
#define CTL_MAX_QUEUED 100000u
#define CTL_READ_CHUNK 65536u
#define CTL_DOC_BUF (1u << 20)
/* A read's size while a reply that text follows is awaited. */
#define CTL_TEXT_READ 4096u

struct ctl {
	int fd;
	char *buf; /* bytes received, not yet parsed into messages */
	size_t len, cap;
	size_t scanned; /* prefix of buf known to hold no newline */
	json_t *queue;	/* messages that arrived while waiting for a reply */
	json_int_t next_id;
	int dead; /* the daemon closed the connection */
	/* Bytes one read takes at most (0: as many as there is room for):
	 * while a reply that text follows is awaited (ctl_request_text). */
	size_t read_max;
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int ctl_connect(struct ctl **out, const char *override, char *err, size_t errlen)
{
	char path[4096];
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	*out = NULL;
	if (scoped_socket_paths(override, NULL, 0, NULL, 0, path, sizeof path) < 0 ||
	    strlen(path) >= sizeof sa.sun_path) {
		seterr(err, errlen,
		       "control socket path too long (%.60s...); use a shorter --socket", path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	/* Nothing is sent to a daemon we cannot trust: not even the request
	 * that names what we look at. */
	char why[768];
	int rc = scoped_socket_check(path, true, why, sizeof why);
	if (rc < 0) {
		seterr(err, errlen, "%s", why);
		return rc;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int e = errno;
		seterr(err, errlen, "cannot create a Unix socket: %s", strerror(e));
		return -e;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		close(fd);
		if (e == EACCES || e == EPERM)
			seterr(err, errlen,
			       "permission denied on %s; is the daemon another user's?", path);
		else
			seterr(err, errlen, "no scoped daemon answers on %s (%s)", path,
			       strerror(e));
		return -e;
	}
	if ((rc = scoped_peer_check(fd, path, true, why, sizeof why)) < 0) {
		close(fd);
		seterr(err, errlen, "%s", why);
		return rc;
	}
	struct ctl *c = calloc(1, sizeof *c);
	json_t *q = json_array();
	if (!c || !q) {
		free(c);
		json_decref(q);
		close(fd);
		seterr(err, errlen, "out of memory connecting to %s", path);
		return -ENOMEM;
	}
	c->fd = fd;
	c->queue = q;
	c->next_id = 1;
	*out = c;
	return 0;
}

void ctl_close(struct ctl *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c->buf);
	json_decref(c->queue);
	free(c);
}

int ctl_fd(const struct ctl *c)
{
	return c->fd;
}

int ctl_send(struct ctl *c, json_t *req)
{
	if (!c || !json_is_object(req))
		return -EINVAL;
	size_t n;
	char *line = jtext_dump(req, JSON_COMPACT, true, &n);
	if (!line)
		return -ENOMEM;
	int rc = write_all(c->fd, line, n, true);
	free(line);
	return rc;
}

/* Finds the first whole line in the buffer: 1 with its length (newline
 * excluded), or 0.  The caller parses it, then drops it with consume(). */
static int peek_line(struct ctl *c, size_t *linelen)
{
	char *nl =
	    c->len > c->scanned ? memchr(c->buf + c->scanned, '\n', c->len - c->scanned) : NULL;
	if (!nl) {
		c->scanned = c->len;
		return 0;
	}
	*linelen = (size_t)(nl - c->buf);
	return 1;
}

static void consume(struct ctl *c, size_t linelen)
{
	memmove(c->buf, c->buf + linelen + 1, c->len - linelen - 1);
	c->len -= linelen + 1;
	c->scanned = 0;
}

/* Whether json_loadb failed on text for want of memory.  jansson reports
 * some failed allocations with no error at all and others as syntax errors,
 * so a line is malformed only when the strict reader of jv.h refuses it too
 * (which says when memory ran out). */
static bool jansson_ran_out(const char *text, size_t len, const json_error_t *jerr)
{
	if (json_error_code(jerr) == json_error_out_of_memory || !jerr->text[0])
		return true;
	struct jv_doc *d = NULL;
	char perr[128];
	int rc = jv_parse(text, len, &d, perr, sizeof perr);
	jv_free(d);
	return rc != -EINVAL;
}

/* v as a new jansson value.  An integer past INT64_MAX (an id: u64 on the
 * wire) becomes a jansson integer of the same bits, which the tools print
 * as unsigned; jansson's own parser refuses such a line whole. */
static json_t *from_jv(const jv *v)
{
	json_t *out;
	switch (v->type) {
	case JV_NULL:
		return json_null();
	case JV_FALSE:
		return json_false();
	case JV_TRUE:
		return json_true();
	case JV_INT:
		return json_integer((json_int_t)jv_integer(v));
	case JV_REAL:
		return json_real(jv_number(v));
	case JV_STRING: {
		/* What jansson refused may be ill-formed UTF-8: U+FFFD for it. */
		char *s = tt_utf8_fix(jv_string(v), v->n);
		out = s ? json_stringn(s, strlen(s)) : NULL;
		free(s);
		return out;
	}
	case JV_ARRAY:
		out = json_array();
		for (size_t i = 0; out && i < jv_size(v); i++)
			if (json_array_append_new(out, from_jv(jv_at(v, i))) < 0) {
				json_decref(out);
				return NULL;
			}
		return out;
	default:
		out = json_object();
		for (size_t i = 0; out && i < jv_size(v); i++) {
			const jv *m = jv_at(v, i);
			char *k = tt_utf8_fix(m->key, strlen(m->key));
			if (!k || json_object_set_new(out, k, from_jv(m)) < 0) {
				free(k);
				json_decref(out);
				return NULL;
			}
			free(k);
		}
		return out;
	}
}

/* The line as jansson reads it; when jansson refuses it only for an
 * integer past its range or for bytes that are not UTF-8, as common/jv.h
 * reads it (see from_jv): a daemon's reply is not "out of memory" for it. */
static json_t *load_line(const char *text, size_t len, json_error_t *jerr)
{
	json_t *j = json_loadb(text, len, 0, jerr);
	if (j || (json_error_code(jerr) != json_error_numeric_overflow &&
		  json_error_code(jerr) != json_error_invalid_utf8))
		return j;
	struct jv_doc *d = NULL;
	char perr[128];
	if (jv_parse(text, len, &d, perr, sizeof perr) == 0)
		j = from_jv(jv_root(d));
	jv_free(d);
	if (!j)
		jerr->text[0] = 0; /* out of memory: jansson_ran_out() says so */
	return j;
}

/* Takes one whole line off the buffer: 1 with *msg new, 0 when no whole
 * line is buffered, -EPROTO for a line that is not a JSON object. */
static int take_line(struct ctl *c, json_t **msg)
{
	size_t linelen;
	if (!peek_line(c, &linelen))
		return 0;
	json_error_t jerr;
	json_t *j = load_line(c->buf, linelen, &jerr);
	/* Out of memory says nothing about the line: leave it for a retry. */
	if (!j && jansson_ran_out(c->buf, linelen, &jerr))
		return -ENOMEM;
	consume(c, linelen);
	if (!json_is_object(j)) {
		json_decref(j);
		return -EPROTO;
	}
	*msg = j;
	return 1;
}

/* Reads whatever the socket holds now without blocking.  Returns bytes
 * read (0 when nothing is there), -ECONNRESET on end of stream, -EMSGSIZE
 * when a line outgrows CTL_MAX_LINE, or -errno. */
static int fill(struct ctl *c)
{
	if (c->dead)
		return -ECONNRESET;
	if (c->cap - c->len < CTL_READ_CHUNK) {
		if (c->len >= CTL_MAX_LINE)
			return -EMSGSIZE;
		size_t ncap = c->cap ? c->cap * 2 : 2 * CTL_READ_CHUNK;
		char *nb = realloc(c->buf, ncap);
		if (!nb)
			return -ENOMEM;
		c->buf = nb;
		c->cap = ncap;
	}
	size_t room = c->cap - c->len;
	if (c->read_max && room > c->read_max)
		room = c->read_max;
	for (;;) {
		ssize_t r = recv(c->fd, c->buf + c->len, room, MSG_DONTWAIT);
		if (r > 0) {
			c->len += (size_t)r;
			return (int)r;
		}
		if (r == 0) {
			c->dead = 1;
			return -ECONNRESET;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return errno == ECONNRESET ? -ECONNRESET : -errno;
	}
}

/* Next message from the wire only (the queue is the caller's business). */
static int next_wire(struct ctl *c, json_t **msg)
{
	for (;;) {
		int rc = take_line(c, msg);
		if (rc)
			return rc;
		rc = fill(c);
		if (rc <= 0)
			return rc;
	}
}

int ctl_read(struct ctl *c, json_t **msg)
{
	*msg = NULL;
	if (json_array_size(c->queue)) {
		*msg = json_incref(json_array_get(c->queue, 0));
		json_array_remove(c->queue, 0);
		return 1;
	}
	return next_wire(c, msg);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *what(int rc)
{
	switch (rc) {
	case -ECONNRESET:
		return "the daemon closed the connection";
	case -EPROTO:
		return "the daemon sent a line that is not a JSON object";
	case -EMSGSIZE:
		return "the daemon sent a line larger than 256 MiB";
	default:
		return strerror(-rc);
	}
}

/* Sends req (borrowed) with a fresh id; *cmd points into req. */
static int send_request(struct ctl *c, json_t *req, json_int_t *idp, const char **cmdp, char *err,
			size_t errlen)
{
	if (!c || !json_is_object(req)) {
		seterr(err, errlen, "bad control request (not a JSON object)");
		return -EINVAL;
	}
	/* The caller's request is borrowed, so the id goes on a shallow copy. */
	json_t *copy = json_copy(req);
	if (!copy) {
		seterr(err, errlen, "out of memory building a control request");
		return -ENOMEM;
	}
	json_int_t id = c->next_id++;
	/* Without its id the reply could never be matched: a lost wait. */
	if (json_object_set_new(copy, "id", json_integer(id)) != 0) {
		json_decref(copy);
		seterr(err, errlen, "out of memory building a control request");
		return -ENOMEM;
	}
	const char *cmd = json_string_value(json_object_get(req, "cmd"));
	if (!cmd)
		cmd = "?";
	int rc = ctl_send(c, copy);
	json_decref(copy);
	*idp = id;
	*cmdp = cmd;
	if (rc < 0) {
		seterr(err, errlen, "sending '%s' to the daemon failed: %s", cmd, what(rc));
		return rc == -EPIPE ? -ECONNRESET : rc;
	}
	return 0;
}

/* Waits for the reply to id: parsed with jansson into *reply, or, when doc
 * is not NULL, with the fast reader into *doc. */
static int await_reply(struct ctl *c, json_int_t id, const char *cmd, json_t **reply,
		       struct jv_doc **doc, int timeout_ms, char *err, size_t errlen);

int ctl_request(struct ctl *c, json_t *req, json_t **reply, int timeout_ms, char *err,
		size_t errlen)
{
	*reply = NULL;
	json_int_t id;
	const char *cmd;
	int rc = send_request(c, req, &id, &cmd, err, errlen);
	return rc < 0 ? rc : await_reply(c, id, cmd, reply, NULL, timeout_ms, err, errlen);
}

int ctl_request_doc(struct ctl *c, json_t *req, struct jv_doc **doc, int timeout_ms, char *err,
		    size_t errlen)
{
	*doc = NULL;
	json_int_t id;
	const char *cmd;
	int rc = send_request(c, req, &id, &cmd, err, errlen);
	/* Replies read this way are the large ones (dumps): room for a
	 * thousand threads' worth up front, rather than copied at each
	 * doubling.  Only what arrives is touched. */
	if (rc >= 0 && c->cap < CTL_DOC_BUF) {
		char *nb = realloc(c->buf, CTL_DOC_BUF);
		if (nb) {
			c->buf = nb;
			c->cap = CTL_DOC_BUF;
		}
	}
	return rc < 0 ? rc : await_reply(c, id, cmd, NULL, doc, timeout_ms, err, errlen);
}

/* Waits until the socket has bytes or the deadline passes: 0, or -errno
 * (-ETIMEDOUT). */
static int wait_readable(struct ctl *c, int64_t deadline)
{
	int64_t left = deadline - now_ms();
	if (left <= 0)
		return -ETIMEDOUT;
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (poll(&p, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR)
		return -errno;
	return 0;
}

/* Takes up to n of the bytes already buffered: their count. */
static size_t take_buffered(struct ctl *c, char *dst, size_t n)
{
	size_t have = c->len < n ? c->len : n;
	if (dst)
		memcpy(dst, c->buf, have);
	memmove(c->buf, c->buf + have, c->len - have);
	c->len -= have;
	c->scanned = 0;
	return have;
}

static int text_failed(struct ctl *c, int rc, size_t have, size_t n, char *err, size_t errlen)
{
	if (rc == -ECONNRESET)
		c->dead = 1;
	seterr(err, errlen, "reading the dump's text from the daemon (%zu of %zu bytes): %s", have,
	       n, rc == -ETIMEDOUT ? "timed out" : what(rc));
	return rc;
}

int ctl_text_read(struct ctl *c, size_t n, char **text, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	char *t = malloc(n + 1);
	*text = NULL;
	if (!t) {
		seterr(err, errlen, "out of memory for the dump's text (%zu bytes)", n);
		return -ENOMEM;
	}
	size_t have = take_buffered(c, t, n);
	while (have < n) {
		ssize_t r = c->dead ? 0 : recv(c->fd, t + have, n - have, MSG_DONTWAIT);
		int rc = r > 0 ? 0 : r == 0 ? -ECONNRESET : errno == EINTR ? 0 : -errno;
		if (rc == -EAGAIN || rc == -EWOULDBLOCK)
			rc = wait_readable(c, deadline);
		if (rc < 0) {
			free(t);
			return text_failed(c, rc, have, n, err, errlen);
		}
		have += r > 0 ? (size_t)r : 0;
	}
	t[n] = '\0';
	*text = t;
	return 0;
}

/* Moves what the pipe holds (len bytes) into fd. */
static int drain_pipe(int from, int fd, size_t len)
{
	while (len) {
		ssize_t w = splice(from, NULL, fd, NULL, len, SPLICE_F_MOVE);
		if (w <= 0 && !(w < 0 && errno == EINTR))
			return w == 0 ? -EIO : -errno;
		len -= w > 0 ? (size_t)w : 0;
	}
	return 0;
}

/* Moves len bytes from the pipe to fd through memory. */
static int copy_pipe(int from, int fd, size_t len)
{
	char buf[16384];
	while (len) {
		ssize_t r = read(from, buf, len < sizeof buf ? len : sizeof buf);
		if (r <= 0 && !(r < 0 && errno == EINTR))
			return r == 0 ? -EIO : -errno;
		int rc = r > 0 ? write_all(fd, buf, (size_t)r, false) : 0;
		if (rc < 0)
			return rc;
		len -= r > 0 ? (size_t)r : 0;
	}
	return 0;
}

int ctl_text_copy(struct ctl *c, size_t n, int fd, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	size_t have = c->len < n ? c->len : n;
	int rc = write_all(fd, c->buf, have, false);
	if (rc < 0)
		return rc; /* the file's error: the caller names the file */
	take_buffered(c, NULL, have);
	/* The rest goes from the socket to the file through a pipe, in the
	 * kernel: no page of ours is touched for it.  Where splice cannot
	 * serve the file, the bytes come through memory. */
	int p[2] = {-1, -1};
	size_t pipesz = 64u << 10, spliced = 0;
	if (have < n && pipe2(p, O_CLOEXEC) == 0) {
		int sz = fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
		pipesz = sz > 0 ? (size_t)sz : pipesz;
	}
	while (have < n && p[0] >= 0) {
		size_t want = n - have < pipesz ? n - have : pipesz;
		ssize_t r = c->dead ? 0
				    : splice(c->fd, NULL, p[1], NULL, want,
					     SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (r > 0) {
			rc = drain_pipe(p[0], fd, (size_t)r);
			/* A file splice cannot write (one opened to append, a
			 * file system without it): what the pipe holds goes
			 * through memory, and so does the rest. */
			if (rc == -EINVAL && !spliced &&
			    (rc = copy_pipe(p[0], fd, (size_t)r)) == 0) {
				have += (size_t)r;
				break;
			}
			if (rc < 0)
				break; /* the file's error */
			have += (size_t)r;
			spliced += (size_t)r;
			continue;
		}
		rc = r == 0 ? -ECONNRESET : errno == EINTR ? 0 : -errno;
		if (rc == -EINVAL && !spliced) { /* no splice here */
			rc = 0;
			break;
		}
		if (rc == -EAGAIN || rc == -EWOULDBLOCK)
			rc = wait_readable(c, deadline);
		if (rc < 0) {
			close(p[0]);
			close(p[1]);
			return text_failed(c, rc, have, n, err, errlen);
		}
	}
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	if (rc < 0 || have == n)
		return rc;
	char *t;
	if ((rc = ctl_text_read(c, n - have, &t, timeout_ms, err, errlen)) < 0)
		return rc;
	rc = write_all(fd, t, n - have, false);
	free(t);
	return rc;
}

int ctl_request_text(struct ctl *c, json_t *req, struct jv_doc **doc, size_t *pending,
		     int timeout_ms, char *err, size_t errlen)
{
	*doc = NULL;
	*pending = 0;
	json_int_t id;
	const char *cmd;
	int rc = send_request(c, req, &id, &cmd, err, errlen);
	/* The reply line is short and the text after it long: read a page at
	 * a time, so that the text goes from the socket to its file in the
	 * kernel (ctl_text_copy) rather than through this buffer (a first
	 * read of 128 KiB cost its page faults, a copy out of the socket, a
	 * move to the buffer's start and a copy back into the kernel). */
	c->read_max = CTL_TEXT_READ;
	if (rc >= 0)
		rc = await_reply(c, id, cmd, NULL, doc, timeout_ms, err, errlen);
	c->read_max = 0;
	const jv *n = rc < 0 ? NULL : jv_get(jv_root(*doc), "text_bytes");
	if (!n)
		return rc;
	if (jv_is_integer(n) && jv_integer(n) >= 0 && jv_integer(n) <= CTL_MAX_LINE) {
		*pending = (size_t)jv_integer(n);
		return 0;
	}
	seterr(err, errlen, "the daemon's reply to '%s' announces %s bytes of text", cmd,
	       jv_is_integer(n) ? "too many" : "a non-integer number of");
	jv_free(*doc);
	*doc = NULL;
	return -EPROTO;
}

/* The next whole line as the caller wants it: 1 when it is the reply to id
 * (stored in *reply or *doc), 0 when it was queued or nothing whole is
 * buffered yet (*more says which), or -errno. */
static int take_for(struct ctl *c, json_int_t id, json_t **reply, struct jv_doc **doc, bool *more)
{
	size_t linelen;
	*more = false;
	if (!peek_line(c, &linelen))
		return 0;
	*more = true;
	if (doc) {
		char perr[128];
		struct jv_doc *d = NULL;
		int rc = jv_parse(c->buf, linelen, &d, perr, sizeof perr);
		if (rc == -ENOMEM) /* the line stays for a retry */
			return rc;
		if (rc < 0) {
			consume(c, linelen);
			return -EPROTO;
		}
		const jv *mid = jv_get(jv_root(d), "id");
		if (!jv_is_object(jv_root(d))) {
			jv_free(d);
			consume(c, linelen);
			return -EPROTO;
		}
		if (jv_is_integer(mid) && jv_integer(mid) == id) {
			consume(c, linelen);
			*doc = d;
			return 1;
		}
		jv_free(d);
	}
	json_t *m = NULL;
	int rc = take_line(c, &m);
	if (rc <= 0)
		return rc;
	json_t *mid = json_object_get(m, "id");
	if (!doc && json_is_integer(mid) && json_integer_value(mid) == id) {
		*reply = m;
		return 1;
	}
	/* Deltas and replies to ctl_send() requests wait for ctl_read(). */
	if (json_array_size(c->queue) < CTL_MAX_QUEUED)
		json_array_append_new(c->queue, m);
	else
		json_decref(m);
	return 0;
}

static int await_reply(struct ctl *c, json_int_t id, const char *cmd, json_t **reply,
		       struct jv_doc **doc, int timeout_ms, char *err, size_t errlen)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	for (;;) {
		bool more;
		int rc = take_for(c, id, reply, doc, &more);
		if (rc == 1)
			return 0;
		if (rc == 0 && more)
			continue;
		if (rc == 0)
			rc = fill(c);
		if (rc > 0)
			continue;
		if (rc < 0) {
			seterr(err, errlen, "waiting for the reply to '%s': %s", cmd, what(rc));
			return rc;
		}
		int64_t left = deadline - now_ms();
		if (left <= 0) {
			seterr(err, errlen,
			       "the daemon did not answer '%s' within %d ms; is it overloaded or "
			       "stopped?",
			       cmd, timeout_ms);
			return -ETIMEDOUT;
		}
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		int pr = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (pr < 0 && errno != EINTR) {
			int e = errno;
			seterr(err, errlen, "waiting for the daemon: %s", strerror(e));
			return -e;
		}
	}
}
