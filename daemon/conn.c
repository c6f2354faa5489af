/* conn.c - accept, non-blocking output and buffer sizing for both kinds of
 * peer the daemon serves (agents in ingest.c, control clients in client.c). */
#include "conn.h"

#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void conn_accept_each(int listen_fd, const char *who, const char *path,
		      void (*take)(void *ctx, int fd, const struct ucred *cred), void *ctx)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("accepting %s on %s failed: %s", who, path,
					 strerror(errno));
			return;
		}
		struct ucred cred;
		socklen_t clen = sizeof cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
			close(fd);
			continue;
		}
		take(ctx, fd, &cred);
	}
}

int conn_write(int fd, struct jbuf *out)
{
	while (out->len) {
		ssize_t n = send(fd, out->p, out->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		jb_consume(out, (size_t)n);
	}
	return 0;
}

void *conn_grow(void *buf, size_t *cap, size_t first, size_t limit)
{
	size_t want = *cap ? *cap * 2 : first;
	if (want > limit)
		want = limit;
	void *b = realloc(buf, want);
	if (b)
		*cap = want;
	return b;
}

void *conn_shrink(void *buf, size_t *cap, size_t len, size_t keep)
{
	if (*cap <= keep || len > keep)
		return buf;
	void *b = realloc(buf, keep);
	if (!b)
		return buf;
	*cap = keep;
	return b;
}

void conn_out_trim(struct jbuf *out, size_t keep)
{
	if (!out->len && out->cap > keep)
		jb_free(out);
}
