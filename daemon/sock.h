/* sock.h - scoped's listening sockets: the private directory, refusing a
 * second daemon, removing a stale socket, and removal at exit. */
#ifndef DAEMON_SOCK_H
#define DAEMON_SOCK_H

#define SOCK_BACKLOG 128 /* pending connections a listening socket holds */

#include <stddef.h>
#include <sys/types.h>

/* Creates dir with mode 0700 when missing; refuses a directory that another
 * user owns or others can write.  0 or -1 with the reason in err. */
int sock_prepare_dir(const char *dir, char *err, size_t errlen);

/* Listens on path (mode 0600, non-blocking).  A daemon already answering
 * there is refused (*other_pid set, -EADDRINUSE); a stale socket is removed.
 * Returns the fd (and the socket file's inode in *ino) or a negative errno
 * with the reason in err. */
int sock_listen(const char *path, pid_t *other_pid, ino_t *ino, char *err, size_t errlen);

/* listen() again on a socket sock_listen() made: after fork() the listening
 * socket still names its maker as every peer's SO_PEERCRED pid, and this
 * makes it name the caller.  0 or -errno. */
int sock_relisten(int fd);

/* Removes path if it is still the socket this process created (not one a
 * newer daemon put there). */
void sock_remove(const char *path, ino_t ino);

#endif
