/* sockcheck.c - trust checks on scoped's sockets and their peers (see sockcheck.h). */
#include "sockcheck.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

bool scoped_uid_trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* The name comes from the passwd file itself, not through NSS: scopecmd is
 * linked statically, where NSS would need the very glibc it was built with
 * at run time.  A user known only to a directory service is named by uid. */
void scoped_uid_name(uid_t uid, bool names, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	FILE *f = names ? fopen("/etc/passwd", "re") : NULL;
	while (f && fgetpwent_r(f, &pw, tmp, sizeof tmp, &res) == 0 && res->pw_uid != uid)
		res = NULL;
	if (f)
		fclose(f);
	if (res && res->pw_name)
		snprintf(buf, len, "uid %u (%s)", (unsigned)uid, res->pw_name);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

static void who_we_are(bool names, char *buf, size_t len)
{
	char me[160];
	scoped_uid_name(geteuid(), names, me, sizeof me);
	if (geteuid() == 0)
		snprintf(buf, len, "you (%s)", me);
	else
		snprintf(buf, len, "you (%s) or root", me);
}

static int refuse(char *err, size_t errlen, const char *what, const char *path, uid_t owner,
		  const char *problem, bool names)
{
	char o[160], us[200];
	scoped_uid_name(owner, names, o, sizeof o);
	who_we_are(names, us, sizeof us);
	if (err && errlen)
		snprintf(
		    err, errlen,
		    "refusing %s %s: it belongs to %s%s, not to %s; another user may be posing "
		    "as scoped there: remove it, or use a private --socket (or SCOPED_SOCKET, "
		    "XDG_RUNTIME_DIR)",
		    what, path, o, problem, us);
	return -EPERM;
}

int scoped_socket_check(const char *path, bool names, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == path)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);

	struct stat ld, st;
	if (lstat(dir, &ld) < 0)
		return 0; /* absent: connect reports it */
	/* A symlink's owner is who made it: it must be trusted as well as
	 * the directory it leads to. */
	if (S_ISLNK(ld.st_mode) && !scoped_uid_trusted(ld.st_uid))
		return refuse(err, errlen, "the socket directory (a symlink)", dir, ld.st_uid, "",
			      names);
	if (stat(dir, &st) < 0)
		return 0;
	if (!scoped_uid_trusted(st.st_uid))
		return refuse(err, errlen, "the socket directory", dir, st.st_uid, "", names);
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
		return refuse(err, errlen, "the socket directory", dir, st.st_uid,
			      " and others may write in it", names);

	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISSOCK(st.st_mode)) {
		if (err && errlen)
			snprintf(err, errlen, "refusing %s: it is not a socket", path);
		return -EPERM;
	}
	if (!scoped_uid_trusted(st.st_uid))
		return refuse(err, errlen, "the socket", path, st.st_uid, "", names);
	/* Root may open its daemon to others on purpose; another owner's
	 * socket that others may use is not one a daemon of ours made. */
	if (st.st_uid != 0 && (st.st_mode & 022))
		return refuse(err, errlen, "the socket", path, st.st_uid,
			      " and others may write to it", names);
	return 0;
}

int scoped_peer_check(int fd, const char *path, bool names, char *err, size_t errlen)
{
	struct ucred cred;
	socklen_t len = sizeof cred;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		int e = errno;
		if (err && errlen)
			snprintf(err, errlen, "cannot tell who answers on %s: %s", path,
				 strerror(e));
		return -e;
	}
	if (scoped_uid_trusted(cred.uid))
		return 0;
	char o[160], us[200];
	scoped_uid_name(cred.uid, names, o, sizeof o);
	who_we_are(names, us, sizeof us);
	if (err && errlen)
		snprintf(
		    err, errlen,
		    "refusing the daemon on %s: it runs as %s (pid %d), not as %s; another user "
		    "may be posing as scoped there",
		    path, o, (int)cred.pid, us);
	return -EPERM;
}
