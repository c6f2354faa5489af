/* ctl.h - client side of scoped's control protocol (schemas/control.md):
 * connect, send a JSON request, read JSON lines.  Used by scopecmd, scopetop
 * and the tests. */
#ifndef COMMON_CTL_H
#define COMMON_CTL_H

#include <jansson.h>
#include <stddef.h>

struct ctl;

/* Connects to the control socket (override: a --socket value naming the
 * agent socket, or NULL for $SCOPED_SOCKET / the default; see
 * common/sockpath.h).  *out is new (ctl_close()).  Returns 0, or a negative
 * errno with a sentence in err ("no scoped daemon answers on PATH"); -EPERM
 * when the socket, its directory or the daemon answering belongs to another
 * user than the caller or root (sockcheck.h): nothing was sent. */
int ctl_connect(struct ctl **out, const char *override, char *err, size_t errlen);

/* Sends req (borrowed), waits up to timeout_ms for the reply with the same
 * id, skipping subscription messages, which stay queued for ctl_read().
 * *reply is new (json_decref()).  A reply with "ok":false is returned as 0
 * with *reply set: the caller reads its error.  Returns 0, -ETIMEDOUT,
 * -ECONNRESET, -EPROTO (a line that is not JSON) or -errno, with err set. */
int ctl_request(struct ctl *c, json_t *req, json_t **reply, int timeout_ms, char *err,
		size_t errlen);

struct jv_doc;

/* As ctl_request(), but the reply is read with the fast reader of
 * common/jv.h: *doc is new (jv_free()).  For large replies (dump, stacks),
 * where jansson's parse would dominate. */
int ctl_request_doc(struct ctl *c, json_t *req, struct jv_doc **doc, int timeout_ms, char *err,
		    size_t errlen);

/* As ctl_request_doc(), for a request the daemon may answer with text (a
 * dump with "render"): when the reply line holds "text_bytes": N, *pending
 * is N and *doc the line, and the caller takes the N bytes that follow with
 * ctl_text_read() or ctl_text_copy() before anything else; otherwise
 * *pending is 0 and *doc the whole reply.  Returns as ctl_request_doc();
 * -EPROTO for a bad count. */
int ctl_request_text(struct ctl *c, json_t *req, struct jv_doc **doc, size_t *pending,
		     int timeout_ms, char *err, size_t errlen);

/* Reads the n bytes of text into *text (new, free(); NUL-terminated).
 * Returns 0 or -errno with err set. */
int ctl_text_read(struct ctl *c, size_t n, char **text, int timeout_ms, char *err, size_t errlen);

/* Copies the n bytes of text to fd (a file), in the kernel where it can.
 * Returns 0, -errno with err set when the daemon's side failed, or -errno
 * with err untouched when writing fd failed. */
int ctl_text_copy(struct ctl *c, size_t n, int fd, int timeout_ms, char *err, size_t errlen);

/* Sends req (borrowed) without waiting.  0 or -errno. */
int ctl_send(struct ctl *c, json_t *req);

/* The socket, for poll(): readable means ctl_read() has something. */
int ctl_fd(const struct ctl *c);

/* Reads one queued or arriving message without blocking.  Returns 1 with
 * *msg new, 0 when nothing whole has arrived, or -errno (-ECONNRESET when the
 * daemon went away). */
int ctl_read(struct ctl *c, json_t **msg);

void ctl_close(struct ctl *c);

#endif
