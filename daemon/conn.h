/* conn.h - what agent connections and control clients share: accepting with
 * the peer's credentials, writing queued output without blocking, and read
 * buffers that grow under a cap and shrink back after a burst. */
#ifndef DAEMON_CONN_H
#define DAEMON_CONN_H

#include "jbuf.h"

#include <stddef.h>
#include <sys/socket.h>

/* Accepts the connections waiting on listen_fd, up to 64 (then the other
 * peers get a turn), non-blocking and close-on-exec, and hands each to take
 * with its peer's pid and uid from SO_PEERCRED; take owns the fd.  A failed
 * accept is logged, naming who ("a client", "an agent") and path; when
 * nothing can be done about it (out of descriptors with no reserve left to
 * shed the connection with), listen_fd is not watched in l for 100 ms, so
 * that the loop does not spin on a backlog it cannot take. */
struct loop;
void conn_accept_each(struct loop *l, int listen_fd, const char *who, const char *path,
		      void (*take)(void *ctx, int fd, const struct ucred *cred), void *ctx);

/* Raises the soft limit on open descriptors to the hard one and keeps one
 * descriptor in reserve: when accept fails for want of descriptors, the
 * reserve is closed for a moment so that the connection can be accepted and
 * closed at once, instead of staying queued and waking the loop forever.
 * Returns the soft limit in force. */
long conn_fds_setup(void);

/* A warning said at most once every 10 s; the next one says how many were
 * held back.  Zero-initialised. */
struct conn_ratelog {
	long long last_ns;
	unsigned long held;
};
void conn_warn_limited(struct conn_ratelog *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Sends what out holds without blocking and consumes what went.  Returns 0
 * (all sent, or the socket is full), or a negative errno when the peer is
 * gone. */
int conn_write(int fd, struct jbuf *out);

/* Doubles *cap (to first from 0), not past limit, and moves buf to that size.
 * Returns the buffer, with *cap updated; NULL when out of memory, with buf
 * and *cap untouched. */
void *conn_grow(void *buf, size_t *cap, size_t first, size_t limit);

/* Shrinks buf back to keep bytes when it is larger and holds no more than
 * that.  Returns the buffer to use (the old one if realloc failed). */
void *conn_shrink(void *buf, size_t *cap, size_t len, size_t keep);

/* Frees an empty output buffer whose memory grew past keep. */
void conn_out_trim(struct jbuf *out, size_t keep);

#endif
