/* test_dumpfile.c - where scopecmd writes a dump: never a set-id file through
 * a symlink, never over a device, FIFO or socket, never through another
 * user's symlink in a sticky shared directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../dump/jdkdump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct dir {
	char path[64];
};

static void mkdir_tmp(struct dir *d)
{
	snprintf(d->path, sizeof d->path, "/tmp/test_dumpfile.XXXXXX");
	assert_non_null(mkdtemp(d->path));
}

static void rm_tmp(struct dir *d)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
	assert_int_equal(system(cmd), 0);
}

/* -overwrite through a symlink to a 4755 file: a plain file replaces the
 * link, the set-id file is untouched, and nothing is set-id. */
static void test_setid_target(void **state)
{
	(void)state;
	struct dir d;
	mkdir_tmp(&d);
	char target[96], link[96], err[256];
	snprintf(target, sizeof target, "%s/suid", d.path);
	snprintf(link, sizeof link, "%s/d.json", d.path);
	int fd = open(target, O_WRONLY | O_CREAT, 0755);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "bin", 3), 3);
	close(fd);
	assert_int_equal(chmod(target, 04755), 0);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(jdkdump_write_file(link, "{}", 2, true, err, sizeof err), 0);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07000, 0);
	assert_int_equal(st.st_mode & 0111, 0);
	assert_int_equal(stat(target, &st), 0);
	assert_int_equal(st.st_mode & 07777, 04755);
	assert_int_equal(st.st_size, 3);
	/* A file of our own that was executable loses only the special bits. */
	assert_int_equal(chmod(link, 06750), 0);
	assert_int_equal(jdkdump_write_file(link, "{}", 2, true, err, sizeof err), 0);
	assert_int_equal(stat(link, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	rm_tmp(&d);
}

/* Only a regular file is overwritten, as jcmd does. */
static void test_not_regular(void **state)
{
	(void)state;
	struct dir d;
	mkdir_tmp(&d);
	char fifo[96], sock[96], link[96], err[256];
	snprintf(fifo, sizeof fifo, "%s/fifo", d.path);
	snprintf(sock, sizeof sock, "%s/sock", d.path);
	snprintf(link, sizeof link, "%s/full", d.path);
	assert_int_equal(mkfifo(fifo, 0644), 0);
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(symlink("/dev/full", link), 0);
	const char *paths[] = {fifo, sock, link, "/dev/full", d.path};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		err[0] = '\0';
		int rc = jdkdump_write_file(paths[i], "{}", 2, true, err, sizeof err);
		if (rc >= 0)
			fail_msg("%s was overwritten", paths[i]);
		if (!strstr(err, "not a regular file") && !strstr(err, "directory"))
			fail_msg("%s: %s", paths[i], err);
	}
	struct stat st;
	assert_int_equal(lstat(fifo, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	assert_int_equal(stat("/dev/full", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	close(s);
	rm_tmp(&d);
}

/* As root in a sticky world-writable directory: another user's symlink in
 * a path component is not followed (whatever fs.protected_symlinks says). */
static void test_foreign_link(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip(); /* a symlink of another owner needs root to make */
		return;
	}
	struct dir d;
	mkdir_tmp(&d);
	char shared[96], victim[96], link[128], path[160], err[256];
	snprintf(shared, sizeof shared, "%s/shared", d.path);
	snprintf(victim, sizeof victim, "%s/victim", d.path);
	assert_int_equal(mkdir(shared, 01777), 0);
	assert_int_equal(chmod(shared, 01777), 0);
	assert_int_equal(mkdir(victim, 0700), 0);
	snprintf(link, sizeof link, "%s/evil", shared);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(lchown(link, 65534, 65534), 0);
	snprintf(path, sizeof path, "%s/d.json", link);
	assert_int_equal(jdkdump_write_file(path, "{}", 2, false, err, sizeof err), -EPERM);
	assert_non_null(strstr(err, "symlink another user made"));
	assert_int_equal(jdkdump_write_file(path, "{}", 2, true, err, sizeof err), -EPERM);
	snprintf(path, sizeof path, "%s/d.json", victim);
	assert_int_equal(access(path, F_OK), -1);
	/* Our own link there is followed. */
	assert_int_equal(lchown(link, 0, 0), 0);
	snprintf(path, sizeof path, "%s/d.json", link);
	assert_int_equal(jdkdump_write_file(path, "{}", 2, false, err, sizeof err), 0);
	rm_tmp(&d);
}

static void test_plain_and_relative(void **state)
{
	(void)state;
	struct dir d;
	mkdir_tmp(&d);
	char cwd[4096], err[256];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(d.path), 0);
	mode_t old = umask(027);
	assert_int_equal(jdkdump_write_file("d.json", "{}", 2, false, err, sizeof err), 0);
	assert_int_equal(jdkdump_write_file("n.json", "{}", 2, true, err, sizeof err), 0);
	umask(old);
	struct stat st;
	assert_int_equal(stat("d.json", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(stat("n.json", &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(mkdir("sub", 0700), 0);
	assert_int_equal(jdkdump_write_file("sub/", "{}", 2, false, err, sizeof err), -EISDIR);
	assert_int_equal(chdir(cwd), 0);
	rm_tmp(&d);
}

/* Overwriting a regular file (swapped in, then the old one removed): the
 * new contents under the name, the old file's mode kept, an open reader of
 * the old file still reads it whole, and no temporary file left behind. */
static void test_overwrite_regular(void **state)
{
	(void)state;
	struct dir d;
	mkdir_tmp(&d);
	char path[128], err[256], buf[64] = "";
	snprintf(path, sizeof path, "%s/d.json", d.path);
	assert_int_equal(jdkdump_write_file(path, "old dump", 8, false, err, sizeof err), 0);
	assert_int_equal(chmod(path, 0604), 0);
	int reader = open(path, O_RDONLY);
	assert_true(reader >= 0);
	assert_int_equal(jdkdump_write_file(path, "new", 3, true, err, sizeof err), 0);
	assert_int_equal(read(reader, buf, sizeof buf), 8);
	assert_memory_equal(buf, "old dump", 8);
	close(reader);
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof buf), 3);
	assert_memory_equal(buf, "new", 3);
	close(fd);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	char cmd[192];
	snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s')\" = d.json", d.path);
	assert_int_equal(system(cmd), 0);
	rm_tmp(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_setid_target),      cmocka_unit_test(test_not_regular),
	    cmocka_unit_test(test_foreign_link),      cmocka_unit_test(test_plain_and_relative),
	    cmocka_unit_test(test_overwrite_regular),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
