/* dumpfile.c - writes a dump to a file as the calling user: exclusive
 * creation, or a temporary file renamed over the target when overwriting. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jdkdump.h"
#include "../common/writeall.h"

/* Writes and closes fd in every case.  No fsync: a dump is a diagnostic
 * that is read right away, and waiting for the disk would be most of the
 * time a dump takes. */
static int finish(int fd, const char *data, size_t len)
{
	int rc = write_all(fd, data, len, false);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

static int create_new(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		if (e == EEXIST)
			snprintf(err, errlen, "%s exists, use -overwrite to overwrite", path);
		else
			snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
		return -e;
	}
	int rc = finish(fd, data, len);
	if (rc < 0) {
		unlink(path);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(-rc));
	}
	return rc;
}

static int replace(const char *path, const char *data, size_t len, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path) + 1 : 0;
	if (snprintf(tmp, sizeof tmp, "%.*s.%s.XXXXXX", dirlen, path, slash ? slash + 1 : path) >=
	    (int)sizeof tmp) {
		snprintf(err, errlen, "path too long: %s", path);
		return -ENAMETOOLONG;
	}
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create a temporary file beside %s: %s", path,
			 strerror(e));
		return -e;
	}
	/* mkostemp makes it 0600; the replacement keeps the old file's mode. */
	struct stat st;
	fchmod(fd, stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644);
	int rc = finish(fd, data, len);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(-rc));
	}
	return rc;
}

int jdkdump_write_file(const char *path, const char *data, size_t len, bool overwrite, char *err,
		       size_t errlen)
{
	if (!path || !*path) {
		snprintf(err, errlen, "no file name given");
		return -EINVAL;
	}
	return overwrite ? replace(path, data, len, err, errlen)
			 : create_new(path, data, len, err, errlen);
}
