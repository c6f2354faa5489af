/* test_sockcheck.c - the trust checks on scoped's sockets (common/sockcheck.c)
 * and the daemon's socket directory: a table of directory and socket modes
 * with the verdict each must get, and the peer check on a live socket.
 * Other owners are covered by the cross-user e2e test (sec_squat.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/sock.h"
#include "sockcheck.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const struct {
	const char *name;
	mode_t dir_mode;
	int sock_mode; /* -1: no socket, -2: a regular file in its place */
	int want;
} cases[] = {
    {"private directory, private socket", 0700, 0600, 0},
    {"readable directory", 0755, 0600, 0},
    {"no socket yet", 0700, -1, 0},
    {"directory others may write", 0777, 0600, -EPERM},
    {"directory the group may write", 0770, 0600, -EPERM},
    {"sticky shared directory", 01777, 0600, 0},
    {"socket others may write", 0700, 0666, -EPERM},
    {"a file where the socket goes", 0700, -2, -EPERM},
};

static void test_socket_modes(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char dir[64], path[96], err[512] = "";
		snprintf(dir, sizeof dir, "/tmp/scoped-chk-XXXXXX");
		assert_non_null(mkdtemp(dir));
		snprintf(path, sizeof path, "%s/agent.sock", dir);
		int fd = -1;
		if (cases[i].sock_mode >= 0) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
			fd = socket(AF_UNIX, SOCK_STREAM, 0);
			assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
			assert_int_equal(chmod(path, (mode_t)cases[i].sock_mode), 0);
		} else if (cases[i].sock_mode == -2) {
			FILE *f = fopen(path, "w");
			assert_non_null(f);
			fclose(f);
		}
		assert_int_equal(chmod(dir, cases[i].dir_mode), 0);
		int rc = scoped_socket_check(path, true, err, sizeof err);
		/* Root's own socket may be open to others on purpose. */
		int want = cases[i].want;
		if (geteuid() == 0 && cases[i].sock_mode == 0666)
			want = 0;
		if (rc != want)
			fail_msg("%s: got %d (%s), want %d", cases[i].name, rc, err, want);
		if (rc < 0 && cases[i].sock_mode != -2 && !strstr(err, "uid "))
			fail_msg("%s: the error does not name the owner: %s", cases[i].name, err);
		if (fd >= 0)
			close(fd);
		unlink(path);
		rmdir(dir);
	}
}

static void test_peer_is_us(void **state)
{
	(void)state;
	int sv[2];
	char err[256] = "";
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(scoped_peer_check(sv[0], "pair", true, err, sizeof err), 0);
	close(sv[0]);
	close(sv[1]);
	assert_true(scoped_uid_trusted(geteuid()));
	assert_true(scoped_uid_trusted(0));
	assert_false(scoped_uid_trusted(geteuid() == 4242 ? 4243 : 4242));
}

/* The daemon makes its own directory private, but leaves a sticky shared
 * one (as /tmp) as it is: root once turned /tmp into 0700. */
static void test_daemon_dir(void **state)
{
	(void)state;
	char dir[64], err[256] = "";
	struct stat st;
	snprintf(dir, sizeof dir, "/tmp/scoped-chk-XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(sock_prepare_dir(dir, err, sizeof err), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(chmod(dir, 01777), 0);
	assert_int_equal(sock_prepare_dir(dir, err, sizeof err), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_socket_modes),
	    cmocka_unit_test(test_peer_is_us),
	    cmocka_unit_test(test_daemon_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
