/* sockcheck.h - whether a scoped socket can be trusted before anything is
 * sent on it: its directory and the socket belong to the caller or to root
 * and nobody else could have put them there, and the process that answers
 * runs as the caller or as root.  Shared by the agent, the daemon's start
 * and the clients, so that another user who creates the socket directory
 * first (/tmp/scoped-$UID) and runs a fake daemon there is refused. */
#ifndef PROTO_SOCKCHECK_H
#define PROTO_SOCKCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Whether uid may own a scoped socket (or run the daemon) the caller uses:
 * the caller's effective uid, or root. */
bool scoped_uid_trusted(uid_t uid);

/* Checks the socket at path and its directory before connecting: both
 * belong to a trusted uid; the directory is writable by nobody else unless
 * it is sticky (as /tmp is: then only the socket's owner can replace the
 * socket); a socket of the caller's own (not root's) is writable by nobody
 * else.  A path that does not exist passes (connect will say so).  With
 * names, err names the owner by user name too (read from /etc/passwd: not
 * in the agent).
 * Returns 0, or -EPERM with a sentence in err naming the owner. */
int scoped_socket_check(const char *path, bool names, char *err, size_t errlen);

/* Checks the peer of a connected fd (SO_PEERCRED): it must run as a trusted
 * uid.  Returns 0, -EPERM with a sentence in err naming the peer's owner
 * and pid, or -errno when the credentials cannot be read. */
int scoped_peer_check(int fd, const char *path, bool names, char *err, size_t errlen);

/* "uid N" or, with names and a user in /etc/passwd, "uid N (name)". */
void scoped_uid_name(uid_t uid, bool names, char *buf, size_t len);

#endif
