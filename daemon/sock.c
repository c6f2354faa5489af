/* sock.c - listening Unix sockets for scoped, created safely and removed only when ours. */
#include "sock.h"

#include "sockcheck.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int sock_prepare_dir(const char *dir, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the socket directory %s: %s", dir,
			 strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen,
			 "%s is not a directory; remove it or choose --socket elsewhere", dir);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		char o[160], us[160];
		scoped_uid_name(st.st_uid, true, o, sizeof o);
		scoped_uid_name(geteuid(), true, us, sizeof us);
		snprintf(
		    err, errlen,
		    "the socket directory %s belongs to %s, not to us (%s): another user may "
		    "be posing as scoped there; remove it, or choose --socket elsewhere (or set "
		    "XDG_RUNTIME_DIR)",
		    dir, o, us);
		return -1;
	}
	/* A sticky shared directory (as /tmp) stays as it is: there only a
	 * socket's owner can replace it, and clients check the socket's. */
	if ((st.st_mode & 022) && (st.st_mode & S_ISVTX))
		return 0;
	if ((st.st_mode & 0777) != 0700 && chmod(dir, 0700) < 0) {
		snprintf(err, errlen, "cannot make %s private (mode 0700): %s", dir,
			 strerror(errno));
		return -1;
	}
	return 0;
}

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof sa->sun_path)
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* Who answers on path: 1 with *pid when a daemon listens, 0 when nothing
 * does (stale or absent), -errno when path is something we must not touch. */
static int probe(const char *path, pid_t *pid, uid_t *uid)
{
	struct sockaddr_un sa;
	fill_addr(&sa, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	int e = errno;
	if (rc == 0) {
		struct ucred cred = {0};
		socklen_t len = sizeof cred;
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
		*pid = cred.pid;
		*uid = cred.uid;
		close(fd);
		return 1;
	}
	close(fd);
	if (e == ENOENT || e == ECONNREFUSED)
		return 0;
	return -e;
}

int sock_listen(const char *path, pid_t *other_pid, ino_t *ino, char *err, size_t errlen)
{
	struct sockaddr_un sa;
	if (fill_addr(&sa, path) < 0) {
		snprintf(err, errlen,
			 "socket path %s is too long for a Unix socket (max %zu bytes)", path,
			 sizeof sa.sun_path - 1);
		return -ENAMETOOLONG;
	}
	*other_pid = 0;
	uid_t other_uid = 0;
	int rc = probe(path, other_pid, &other_uid);
	if (rc == 1) {
		if (!scoped_uid_trusted(other_uid)) {
			char o[160];
			scoped_uid_name(other_uid, true, o, sizeof o);
			snprintf(
			    err, errlen,
			    "another user's process (%s, pid %d) listens on %s: it is no daemon "
			    "of ours; remove it, or choose --socket elsewhere",
			    o, (int)*other_pid, path);
			return -EPERM;
		}
		snprintf(err, errlen, "a daemon already listens on %s (pid %d)", path,
			 (int)*other_pid);
		return -EADDRINUSE;
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot check %s: %s", path, strerror(-rc));
		return rc;
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket; remove it", path);
			return -EEXIST;
		}
		unlink(path); /* stale: nobody answered */
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a socket: %s", strerror(errno));
		return -errno;
	}
	/* The umask makes the socket 0600 from birth: no window where others connect. */
	mode_t old = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	int e = errno;
	umask(old);
	if (rc < 0 || listen(fd, SOCK_BACKLOG) < 0) {
		if (rc == 0)
			e = errno;
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	chmod(path, 0600);
	*ino = lstat(path, &st) == 0 ? st.st_ino : 0;
	return fd;
}

void sock_remove(const char *path, ino_t ino)
{
	struct stat st;
	/* A newer daemon may have replaced our socket: remove only our own. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino)
		unlink(path);
}

int sock_relisten(int fd)
{
	return listen(fd, SOCK_BACKLOG) < 0 ? -errno : 0;
}
