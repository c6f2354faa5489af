/* conn.h - what agent connections and control clients share: accepting with
 * the peer's credentials, writing queued output without blocking, and read
 * buffers that grow under a cap and shrink back after a burst. */
#ifndef DAEMON_CONN_H
#define DAEMON_CONN_H

#include "jbuf.h"

#include <stddef.h>
#include <sys/socket.h>

#define CONN_DONE (-1) /* nothing more to accept on this wake-up */
#define CONN_SKIP (-2) /* that connection is gone; try the next */

/* Accepts one waiting connection on listen_fd (non-blocking, close-on-exec)
 * and reads its peer's pid and uid from SO_PEERCRED into *cred.  Returns the
 * new fd, CONN_SKIP when the credentials could not be read (the fd is
 * closed), or CONN_DONE when none waits or accept failed (logged, naming
 * who, "a client" or "an agent", and path). */
int conn_accept(int listen_fd, const char *who, const char *path, struct ucred *cred);

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
