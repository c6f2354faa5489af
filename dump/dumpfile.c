/* dumpfile.c - writes a dump to a file as the calling user: exclusive
 * creation, or a temporary file renamed over the target when overwriting.
 * The directory is opened one component at a time, so that another user's
 * symlink in a sticky world-writable directory (/tmp) is never followed,
 * and everything after is done relative to it; only a regular file is ever
 * replaced, and a dump never takes special mode bits from what it replaces. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jdkdump.h"
#include "../common/writeall.h"

/* Fills and closes fd in every case.  No fsync: a dump is a diagnostic
 * that is read right away, and waiting for the disk would be most of the
 * time a dump takes. */
static int finish(int fd, const struct jdkdump_fill *f)
{
	int rc = f->fill(fd, f->arg);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

/* Whether following the symlink name in the directory dirfd (whose status
 * is dir) could lead where another user chose: it is in a sticky directory
 * that others may write to, and neither we nor the directory's owner made
 * it (the rule of the kernel's fs.protected_symlinks, kept even where that
 * is turned off). */
static bool foreign_link(int dirfd, const struct stat *dir, const char *name)
{
	struct stat ln;
	if (fstatat(dirfd, name, &ln, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(ln.st_mode))
		return false;
	return (dir->st_mode & S_ISVTX) && (dir->st_mode & S_IWOTH) && ln.st_uid != geteuid() &&
	       ln.st_uid != dir->st_uid;
}

/* Opens the directory of path one component at a time; returns its fd and
 * points *base at the file name, or -errno with a sentence in err. */
static int open_dir(const char *path, const char **base, char *err, size_t errlen)
{
	char comp[NAME_MAX + 1];
	const char *p = path;
	int fd = open(*p == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	for (;;) {
		while (*p == '/')
			p++;
		const char *slash = strchr(p, '/');
		if (!slash)
			break;
		size_t n = (size_t)(slash - p);
		if (n > NAME_MAX) {
			close(fd);
			errno = ENAMETOOLONG;
			goto fail;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		p = slash;
		struct stat dir;
		if (fstat(fd, &dir) < 0)
			goto fail_close;
		if (foreign_link(fd, &dir, comp)) {
			snprintf(
			    err, errlen,
			    "refusing %s: %s is a symlink another user made in a shared sticky "
			    "directory; write the dump elsewhere",
			    path, comp);
			close(fd);
			return -EPERM;
		}
		int next = openat(fd, comp, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (next < 0)
			goto fail_close;
		close(fd);
		fd = next;
	}
	if (!*p) {
		close(fd);
		snprintf(err, errlen, "%s names a directory, not a file", path);
		return -EISDIR;
	}
	*base = p;
	return fd;
fail_close : {
	int e = errno;
	close(fd);
	errno = e;
}
fail : {
	int e = errno;
	snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
	return -e;
}
}

/* The mode of a new dump: 0644 less the umask. */
static mode_t plain_mode(void)
{
	mode_t mask = umask(022);
	umask(mask);
	return 0644 & ~mask;
}

static int create_new(int dirfd, const char *base, const char *path, const struct jdkdump_fill *f,
		      char *err, size_t errlen)
{
	int fd = openat(dirfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		if (e == EEXIST)
			snprintf(err, errlen, "%s exists, use -overwrite to overwrite", path);
		else
			snprintf(err, errlen, "cannot create %s: %s", path, strerror(e));
		return -e;
	}
	int rc = finish(fd, f);
	if (rc < 0) {
		unlinkat(dirfd, base, 0);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(-rc));
	}
	return rc;
}

/* Puts tmp in place of the regular file base by swapping the two names, then
 * removes the old file; false (nothing changed) where the swap is refused
 * (a file system without it, base gone) or base became a directory.  Why
 * not rename(): over an existing file, ext4 first allocates and starts
 * writing the new file's blocks (auto_da_alloc), about as long again as
 * the rest of the replacement; a swap does not, and readers still see the
 * old dump or the new one, whole. */
static bool exchange(int dirfd, const char *tmp, const char *base)
{
	if (renameat2(dirfd, tmp, dirfd, base, RENAME_EXCHANGE) < 0)
		return false;
	if (unlinkat(dirfd, tmp, 0) == 0)
		return true;
	/* Not a file any more (a directory swapped in meanwhile): put it
	 * back, and let rename() refuse it. */
	renameat2(dirfd, tmp, dirfd, base, RENAME_EXCHANGE);
	return false;
}

static int replace(int dirfd, const char *base, const char *path, const struct jdkdump_fill *f,
		   char *err, size_t errlen)
{
	/* As jcmd: only a regular file is replaced; a device, FIFO, socket or
	 * directory (or a symlink to one) is left alone and refused. */
	struct stat st, target;
	bool exists = fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && (!S_ISLNK(st.st_mode)
			   ? !S_ISREG(st.st_mode)
			   : fstatat(dirfd, base, &target, 0) == 0 && !S_ISREG(target.st_mode))) {
		snprintf(err, errlen, "refusing to overwrite %s: it is not a regular file", path);
		return -EPERM;
	}
	/* The permission bits of a regular file of ours that it replaces,
	 * never its set-id, sticky or execute bits; else a plain new file. */
	mode_t mode = plain_mode();
	if (exists && S_ISREG(st.st_mode) && st.st_uid == geteuid())
		mode = st.st_mode & 0666;

	char tmp[NAME_MAX + 1];
	int fd = -1;
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		unsigned long long r = 0;
		if (getrandom(&r, sizeof r, GRND_NONBLOCK) != sizeof r)
			r = (unsigned long long)getpid() * 2654435761u + (unsigned)tries;
		if (snprintf(tmp, sizeof tmp, ".%.200s.%012llx", base, r & 0xffffffffffffull) >=
		    (int)sizeof tmp) {
			snprintf(err, errlen, "path too long: %s", path);
			return -ENAMETOOLONG;
		}
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot create a temporary file beside %s: %s", path,
			 strerror(e));
		return -e;
	}
	fchmod(fd, mode);
	int rc = finish(fd, f);
	if (!rc && !(exists && S_ISREG(st.st_mode) && exchange(dirfd, tmp, base)) &&
	    renameat(dirfd, tmp, dirfd, base) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dirfd, tmp, 0);
		snprintf(err, errlen, "writing %s failed: %s", path, strerror(-rc));
	}
	return rc;
}

int jdkdump_write_file_with(const char *path, const struct jdkdump_fill *f, bool overwrite,
			    char *err, size_t errlen)
{
	if (!path || !*path) {
		snprintf(err, errlen, "no file name given");
		return -EINVAL;
	}
	const char *base;
	int dirfd = open_dir(path, &base, err, errlen);
	if (dirfd < 0)
		return dirfd;
	int rc = overwrite ? replace(dirfd, base, path, f, err, errlen)
			   : create_new(dirfd, base, path, f, err, errlen);
	close(dirfd);
	return rc;
}

struct bytes {
	const char *data;
	size_t len;
};

static int write_bytes(int fd, void *arg)
{
	const struct bytes *b = arg;
	return write_all(fd, b->data, b->len, false);
}

int jdkdump_write_file(const char *path, const char *data, size_t len, bool overwrite, char *err,
		       size_t errlen)
{
	struct bytes b = {data, len};
	struct jdkdump_fill f = {write_bytes, &b};
	return jdkdump_write_file_with(path, &f, overwrite, err, errlen);
}
