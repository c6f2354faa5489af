/* conn.c - accept, non-blocking output and buffer sizing for both kinds of
 * peer the daemon serves (agents in ingest.c, control clients in client.c). */
#include "conn.h"

#include "log.h"
#include "loop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int reserve_fd = -1;

long conn_fds_setup(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = {rl.rlim_max, rl.rlim_max};
		/* select() is not used: a limit past FD_SETSIZE is fine. */
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return rl.rlim_cur > (rlim_t)LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
}

void conn_warn_limited(struct conn_ratelog *r, const char *fmt, ...)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	long long now = (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
	if (r->last_ns && now - r->last_ns < 10000000000ll) {
		r->held++;
		return;
	}
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (r->held)
		log_warn("%s (and %lu more like it in the last 10 s)", line, r->held);
	else
		log_warn("%s", line);
	r->last_ns = now;
	r->held = 0;
}

/* Out of descriptors: accepts one connection on the reserve's slot and
 * closes it, so the backlog drains.  1 when one was shed, 0 when none was
 * waiting (accept fails for want of a descriptor before it looks), -1 when
 * the reserve is gone. */
static int shed_one(int listen_fd)
{
	/* Lost when another thread took its slot between its close and the
	 * accept below (the capture's helper, a sanitizer's own thread): taken
	 * back once a descriptor is free again. */
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (reserve_fd < 0)
		return -1;
	close(reserve_fd);
	int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	int e = errno;
	if (fd >= 0)
		close(fd);
	reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? 1 : (e == EAGAIN || e == EINTR) ? 0 : -1;
}

/* A listening socket not watched for a while: accept failed and nothing
 * could be done about it (out of descriptors with no reserve to shed with,
 * or out of memory in the kernel).  Its connections wait in the backlog,
 * where the loop, level-triggered, would otherwise find them at every turn
 * and spin.  No state: an unwatched socket gets no events, so it cannot be
 * paused twice; the timer's context is the descriptor. */
#define PAUSE_MS 100

static int64_t resume_listen(struct loop *l, void *ctx)
{
	(void)loop_mod(l, (int)(intptr_t)ctx, LOOP_READ);
	return -1;
}

static void pause_listen(struct loop *l, int fd)
{
	if (loop_mod(l, fd, 0) < 0)
		return;
	if (loop_timer_add(l, PAUSE_MS, resume_listen, (void *)(intptr_t)fd) < 0)
		(void)loop_mod(l, fd, LOOP_READ); /* better a busy loop than a deaf one */
}

void conn_accept_each(struct loop *l, int listen_fd, const char *who, const char *path,
		      void (*take)(void *ctx, int fd, const struct ucred *cred), void *ctx)
{
	static struct conn_ratelog out_of_fds, failed;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			if (e == EAGAIN || e == EINTR)
				return;
			int shed = e == EMFILE || e == ENFILE ? shed_one(listen_fd) : -1;
			if (shed == 0)
				return;
			if (shed == 1) {
				conn_warn_limited(
				    &out_of_fds,
				    "out of file descriptors: closing new connections "
				    "from %s on %s at once (raise the limit: ulimit -n)",
				    who, path);
				continue;
			}
			conn_warn_limited(&failed, "accepting %s on %s failed: %s", who, path,
					  strerror(e));
			pause_listen(l, listen_fd);
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
