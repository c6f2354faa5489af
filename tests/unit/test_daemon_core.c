/* test_daemon_core.c - scoped's building blocks: options table, id map, JSON
 * writer, event loop, and the listening-socket rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../../daemon/conn.h"
#include "../../daemon/idmap.h"
#include "../../daemon/jbuf.h"
#include "../../daemon/loop.h"
#include "../../daemon/options.h"
#include "../../daemon/sock.h"
#include "../../daemon/strtab.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int parse(struct options *o, char *err, size_t n, ...)
{
	char *argv[16] = {"scoped"};
	int argc = 1;
	va_list ap;
	va_start(ap, n);
	for (char *a; (a = va_arg(ap, char *)) && argc < 15;)
		argv[argc++] = a;
	va_end(ap);
	return options_parse(o, argc, argv, err, n);
}

/* Command lines that are refused, and what the error must name (if anything). */
static const struct {
	char *args[2];
	const char *err;
} bad_options[] = {
    {{"--retain", "-1"}, "--retain"},
    {{"--max-processes", "12x"}, NULL},
    {{"--stacks", "magic"}, "auto, bpf, signal"},
    {{"--bogus"}, "--bogus"},
    {{"--socket"}, NULL},
    {{"--help=1"}, NULL},
};

static void test_options(void **state)
{
	(void)state;
	struct options o;
	char err[256];
	assert_int_equal(parse(&o, err, sizeof err, NULL), 0);
	assert_int_equal(o.retain_s, 5);
	assert_int_equal(o.max_processes, 1024);
	assert_int_equal(o.stacks, STACKS_AUTO);
	assert_null(o.socket);
	assert_int_equal(parse(&o, err, sizeof err, "--retain", "9", "--stacks=signal", "--socket",
			       "/x/a.sock", "--foreground", "--log-level=debug", NULL),
			 0);
	assert_int_equal(o.retain_s, 9);
	assert_int_equal(o.stacks, STACKS_SIGNAL);
	assert_string_equal(o.socket, "/x/a.sock");
	assert_int_equal(o.foreground, 1);
	assert_int_equal(o.log_level, 3);
	for (size_t i = 0; i < sizeof bad_options / sizeof bad_options[0]; i++) {
		err[0] = '\0';
		assert_int_equal(parse(&o, err, sizeof err, bad_options[i].args[0],
				       bad_options[i].args[1], NULL),
				 -1);
		if (bad_options[i].err && !strstr(err, bad_options[i].err))
			fail_msg("%s %s: error '%s' does not name '%s'", bad_options[i].args[0],
				 bad_options[i].args[1] ? bad_options[i].args[1] : "", err,
				 bad_options[i].err);
	}
	/* --help lists every option with its default. */
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	options_usage(f);
	fclose(f);
	assert_non_null(strstr(text, "--max-processes N"));
	assert_non_null(strstr(text, "default 5"));
	free(text);
}

struct ent {
	uint64_t id;
	int value;
};

static void test_idmap(void **state)
{
	(void)state;
	enum { N = 5000 };
	struct idmap m = {0};
	struct ent *e = calloc(N, sizeof *e);
	for (int i = 0; i < N; i++) {
		e[i].id = (uint64_t)i * 7919 + 1;
		e[i].value = i;
		assert_int_equal(idmap_put(&m, &e[i]), 0);
	}
	assert_int_equal(m.n, N);
	/* Delete every third entry, then check every lookup. */
	for (int i = 0; i < N; i += 3)
		assert_ptr_equal(idmap_del(&m, e[i].id), &e[i]);
	for (int i = 0; i < N; i++) {
		struct ent *got = idmap_get(&m, e[i].id);
		if (i % 3 == 0)
			assert_null(got);
		else
			assert_ptr_equal(got, &e[i]);
	}
	assert_null(idmap_del(&m, 999999999));
	idmap_free(&m);

	/* The same through idmap_get_slot and idmap_put_at, from an empty
	 * map (growing on the way) and into the holes of the deletes. */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			if (round && i % 3)
				continue;
			size_t slot;
			assert_null(idmap_get_slot(&m, e[i].id, &slot));
			assert_int_equal(idmap_put_at(&m, &e[i], slot), 0);
			assert_ptr_equal(idmap_get_slot(&m, e[i].id, &slot), &e[i]);
		}
		assert_int_equal(m.n, N);
		for (int i = 0; i < N; i++)
			assert_ptr_equal(idmap_get(&m, e[i].id), &e[i]);
		for (int i = 0; i < N; i += 3)
			assert_ptr_equal(idmap_del(&m, e[i].id), &e[i]);
	}
	idmap_free(&m);
	free(e);
}

static void test_strtab(void **state)
{
	(void)state;
	struct strtab t = {.max_bytes = 32};
	const char *a = strtab_intern(&t, "hello.c", 7), *b = strtab_intern(&t, "hello.cxx", 7);
	assert_ptr_equal(a, b);
	assert_string_equal(a, "hello.c");
	assert_non_null(strtab_intern(&t, "other", 5));
	assert_null(strtab_intern(&t, "a-long-string-past-the-cap-of-32", 32));
	strtab_free(&t);
}

static void test_jbuf(void **state)
{
	(void)state;
	struct jbuf b;
	jb_init(&b);
	jb_obj(&b);
	jb_key(&b, "s");
	jb_str(&b, "q\"\\\n\x01é");
	jb_key(&b, "n");
	jb_i64(&b, -42);
	jb_key(&b, "big");
	jb_u64(&b, 9223372036854775807ull);
	jb_key(&b, "ms");
	jb_ms(&b, 1500000);
	jb_key(&b, "whole");
	jb_ms(&b, 2000000);
	jb_key(&b, "a");
	jb_arr(&b);
	jb_null(&b);
	jb_bool(&b, true);
	jb_obj(&b);
	jb_obj_end(&b);
	jb_arr_end(&b);
	jb_obj_end(&b);
	jb_raw(&b, "", 1);
	json_error_t err;
	json_t *j = json_loads(b.p, 0, &err);
	if (!j)
		fail_msg("%s: %s", b.p, err.text);
	assert_string_equal(json_string_value(json_object_get(j, "s")), "q\"\\\n\x01é");
	assert_int_equal(json_integer_value(json_object_get(j, "n")), -42);
	assert_true(json_integer_value(json_object_get(j, "big")) == 9223372036854775807ll);
	assert_true(json_real_value(json_object_get(j, "ms")) == 1.5);
	assert_int_equal(json_integer_value(json_object_get(j, "whole")), 2);
	assert_int_equal(json_array_size(json_object_get(j, "a")), 3);
	json_decref(j);
	jb_free(&b);
}

/* Read buffers double from their first size up to the cap, and shrink back
 * only when what they hold fits the smaller size. */
static void test_conn_buffers(void **state)
{
	(void)state;
	size_t cap = 0;
	char *b = conn_grow(NULL, &cap, 4096, 10000);
	assert_non_null(b);
	assert_int_equal(cap, 4096);
	b = conn_grow(b, &cap, 4096, 10000);
	assert_int_equal(cap, 8192);
	b = conn_grow(b, &cap, 4096, 10000);
	assert_int_equal(cap, 10000);
	memset(b, 'x', cap); /* all of it is usable */
	assert_ptr_equal(conn_shrink(b, &cap, 5000, 4096), b);
	assert_int_equal(cap, 10000);
	b = conn_shrink(b, &cap, 4096, 4096);
	assert_int_equal(cap, 4096);
	assert_int_equal(b[4095], 'x');
	free(b);

	struct jbuf out;
	jb_init(&out);
	for (int i = 0; i < 1000; i++)
		jb_raw(&out, "0123456789", 10);
	conn_out_trim(&out, 1024); /* unsent output is never dropped */
	assert_int_equal(out.len, 10000);
	jb_consume(&out, out.len);
	conn_out_trim(&out, 1u << 20); /* small enough to keep */
	assert_non_null(out.p);
	conn_out_trim(&out, 1024);
	assert_null(out.p);
	jb_free(&out);
}

static int fired;
static int64_t timer_cb(struct loop *l, void *ctx)
{
	(void)ctx;
	if (++fired == 3)
		loop_stop(l);
	return 1;
}

static void fd_cb(struct loop *l, int fd, unsigned ev, void *ctx)
{
	char c;
	assert_true(ev & LOOP_READ);
	assert_int_equal(read(fd, &c, 1), 1);
	*(char *)ctx = c;
	loop_del(l, fd);
}

static void test_loop(void **state)
{
	(void)state;
	struct loop *l = loop_new();
	int p[2];
	assert_int_equal(pipe(p), 0);
	char got = 0;
	assert_int_equal(loop_add(l, p[0], LOOP_READ, fd_cb, &got), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	int64_t gone = loop_timer_add(l, 0, timer_cb, NULL);
	loop_timer_del(l, gone);
	fired = 0;
	assert_true(loop_timer_add(l, 1, timer_cb, NULL) > 0);
	assert_int_equal(loop_run(l), 0);
	assert_int_equal(fired, 3);
	assert_int_equal(got, 'x');
	close(p[0]);
	close(p[1]);
	loop_free(l);
}

static void test_sockets(void **state)
{
	(void)state;
	char dir[] = "/tmp/scoped-test-XXXXXX", path[128], err[256];
	assert_non_null(mkdtemp(dir));
	chmod(dir, 0755);
	assert_int_equal(sock_prepare_dir(dir, err, sizeof err), 0);
	struct stat st;
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	snprintf(path, sizeof path, "%s/agent.sock", dir);
	pid_t other;
	ino_t ino, ino2;
	int fd = sock_listen(path, &other, &ino, err, sizeof err);
	assert_true(fd >= 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* A second listener is refused and told who holds the socket. */
	assert_int_equal(sock_listen(path, &other, &ino2, err, sizeof err), -EADDRINUSE);
	assert_int_equal(other, getpid());
	assert_non_null(strstr(err, "already listens"));
	/* Once the first is gone the socket is stale and is replaced. */
	close(fd);
	fd = sock_listen(path, &other, &ino2, err, sizeof err);
	assert_true(fd >= 0);
	sock_remove(path, ino2 + 1); /* another inode: not ours, stays */
	assert_int_equal(access(path, F_OK), 0);
	sock_remove(path, ino2);
	assert_int_equal(access(path, F_OK), -1);
	close(fd);
	/* A regular file in the way is never removed. */
	FILE *f = fopen(path, "w");
	fclose(f);
	assert_true(sock_listen(path, &other, &ino, err, sizeof err) < 0);
	assert_non_null(strstr(err, "not a socket"));
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_options),	 cmocka_unit_test(test_idmap),
	    cmocka_unit_test(test_strtab),	 cmocka_unit_test(test_jbuf),
	    cmocka_unit_test(test_loop),	 cmocka_unit_test(test_sockets),
	    cmocka_unit_test(test_conn_buffers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
