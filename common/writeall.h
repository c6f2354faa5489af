/* writeall.h - writes a whole buffer to a file or a socket, across short
 * writes and interrupted calls; shared by the control client and the dump
 * file writer. */
#ifndef COMMON_WRITEALL_H
#define COMMON_WRITEALL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

/* Returns 0, or a negative errno.  On a socket, a peer that went away is
 * -EPIPE rather than SIGPIPE. */
static inline int write_all(int fd, const void *buf, size_t n, bool is_socket)
{
	const char *p = buf;
	while (n) {
		ssize_t w = is_socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

#endif
