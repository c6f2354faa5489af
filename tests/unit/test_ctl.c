/* test_ctl.c - the control client against a scripted fake daemon on a
 * private socket: id matching, queued deltas, timeouts, bad lines, resets. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/ctl.h"
#include "../../common/jv.h"

struct fake {
	char dir[64];
	char agent[128];
	int lfd;
	pthread_t th;
	void (*script)(int fd);
};

/* Reads one request line; returns its id or -1. */
static long read_request(int fd, char *cmd, size_t cmdlen)
{
	char line[4096];
	size_t n = 0;
	while (n + 1 < sizeof line) {
		ssize_t r = read(fd, line + n, 1);
		if (r <= 0)
			return -1;
		if (line[n] == '\n')
			break;
		n++;
	}
	line[n] = 0;
	json_t *j = json_loads(line, 0, NULL);
	long id = (long)json_integer_value(json_object_get(j, "id"));
	if (cmd)
		snprintf(cmd, cmdlen, "%s", json_string_value(json_object_get(j, "cmd")) ?: "");
	json_decref(j);
	return id;
}

static void say(int fd, const char *fmt, ...)
{
	char *buf = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&buf, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	size_t done = 0;
	while (done < (size_t)n) {
		ssize_t w = write(fd, buf + done, (size_t)n - done);
		assert_true(w > 0);
		done += (size_t)w;
	}
	free(buf);
}

/* Keeps the connection open until the client closes its end (or 10 s
 * pass): a script that closed after a fixed sleep would race a slow client,
 * which would then see the hang-up where the test expects quiet. */
static void wait_hangup(int fd)
{
	char b[256];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	while (poll(&p, 1, 10000) == 1 && read(fd, b, sizeof b) > 0)
		;
}

static void *serve(void *arg)
{
	struct fake *f = arg;
	int fd = accept(f->lfd, NULL, NULL);
	if (fd >= 0) {
		f->script(fd);
		close(fd);
	}
	return NULL;
}

static struct fake *fake_start(void (*script)(int fd))
{
	struct fake *f = calloc(1, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "/tmp/test_ctl.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->agent, sizeof f->agent, "%s/agent.sock", f->dir);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control.sock", f->dir);
	f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
	f->script = script;
	pthread_create(&f->th, NULL, serve, f);
	return f;
}

static void fake_stop(struct fake *f)
{
	char p[128];
	pthread_join(f->th, NULL);
	close(f->lfd);
	snprintf(p, sizeof p, "%s/control.sock", f->dir);
	unlink(p);
	rmdir(f->dir);
	free(f);
}

/* One client connected to a scripted fake daemon. */
struct session {
	struct fake *f;
	struct ctl *c;
	char err[256];
};

static void session_open(struct session *s, void (*script)(int fd))
{
	s->f = fake_start(script);
	assert_int_equal(ctl_connect(&s->c, s->f->agent, s->err, sizeof s->err), 0);
}

static void session_close(struct session *s)
{
	ctl_close(s->c);
	fake_stop(s->f);
}

/* Sends {"cmd": cmd}; ctl_request's result, with *reply new or NULL. */
static int session_request(struct session *s, const char *cmd, int timeout_ms, json_t **reply)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd);
	*reply = NULL;
	int rc = ctl_request(s->c, req, reply, timeout_ms, s->err, sizeof s->err);
	json_decref(req);
	return rc;
}

/* The next queued message is there and, when key is given, its string
 * member key equals want. */
static void expect_queued(struct ctl *c, const char *key, const char *want)
{
	json_t *m;
	assert_int_equal(ctl_read(c, &m), 1);
	if (key)
		assert_string_equal(json_string_value(json_object_get(m, key)), want);
	json_decref(m);
}

/* A delta and a reply to someone else arrive before our reply, split in
 * pieces across writes. */
static void script_interleaved(int fd)
{
	char cmd[32];
	long id = read_request(fd, cmd, sizeof cmd);
	assert_string_equal(cmd, "status");
	say(fd, "{\"type\":\"delta\",\"gen\":2}\n{\"id\":%ld,\"ok\":true,\"ver", id + 1000);
	usleep(20000);
	say(fd, "sion\":\"x\"}\n{\"id\":%ld,\"ok\":true,\"version\":\"0.1.0\"}\n", id);
	wait_hangup(fd);
}

static void test_reply_matched_and_others_queued(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_interleaved);
	json_t *req = json_pack("{s:s}", "cmd", "status");
	json_t *reply;
	assert_int_equal(ctl_request(s.c, req, &reply, 2000, s.err, sizeof s.err), 0);
	assert_string_equal(json_string_value(json_object_get(reply, "version")), "0.1.0");
	/* The caller's request is borrowed: no id was added to it. */
	assert_null(json_object_get(req, "id"));
	json_decref(reply);
	json_decref(req);
	expect_queued(s.c, "type", "delta");
	expect_queued(s.c, "version", "x");
	json_t *m;
	assert_int_equal(ctl_read(s.c, &m), 0);
	session_close(&s);
}

/* The fast-reader path: the same interleaving, the reply as a jv doc, the
 * other messages still queued for ctl_read(). */
static void test_request_doc(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_interleaved);
	json_t *req = json_pack("{s:s}", "cmd", "status");
	struct jv_doc *doc = NULL;
	assert_int_equal(ctl_request_doc(s.c, req, &doc, 2000, s.err, sizeof s.err), 0);
	assert_string_equal(jv_string(jv_get(jv_root(doc), "version")), "0.1.0");
	jv_free(doc);
	json_decref(req);
	expect_queued(s.c, "type", "delta");
	expect_queued(s.c, NULL, NULL);
	json_t *m;
	assert_int_equal(ctl_read(s.c, &m), 0);
	session_close(&s);
}

static void script_silent(int fd)
{
	read_request(fd, NULL, 0);
	wait_hangup(fd);
}

static void script_garbage(int fd)
{
	read_request(fd, NULL, 0);
	say(fd, "this is not json\n");
	wait_hangup(fd);
}

/* Daemons whose answer is no reply: the error code and what err names. */
static const struct {
	const char *what;
	void (*script)(int fd);
	int timeout_ms;
	int rc;
	const char *err;
} failing[] = {
    {"a daemon that never answers", script_silent, 100, -ETIMEDOUT, "'list'"},
    {"a line that is not JSON", script_garbage, 2000, -EPROTO, "not a JSON object"},
};

/* A reply (and a delta) with ids past INT64_MAX, which jansson's parser
 * refuses: read all the same, each id as an integer of its u64 bits, the
 * other members as they were. */
static void script_big_ids(int fd)
{
	char cmd[32];
	long id = read_request(fd, cmd, sizeof cmd);
	say(fd,
	    "{\"type\":\"delta\",\"scopes\":[{\"id\":18446744073709551615}]}\n"
	    "{\"type\":\"delta\",\"name\":\"a\xff\xc3"
	    "b\",\"k\xfe\":1}\n"
	    "{\"id\":%ld,\"ok\":true,\"scopes\":[{\"id\":9223372036854775809,"
	    "\"name\":\"x\\u001by\",\"ms\":1.5,\"n\":null,\"t\":true}]}\n",
	    id);
	wait_hangup(fd);
}

static void test_big_ids(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_big_ids);
	json_t *reply;
	assert_int_equal(session_request(&s, "tree", 2000, &reply), 0);
	json_t *sc = json_array_get(json_object_get(reply, "scopes"), 0);
	assert_true(json_is_integer(json_object_get(sc, "id")));
	assert_true((uint64_t)json_integer_value(json_object_get(sc, "id")) ==
		    ((uint64_t)1 << 63) + 1);
	assert_string_equal(json_string_value(json_object_get(sc, "name")), "x\x1by");
	assert_true(json_real_value(json_object_get(sc, "ms")) == 1.5);
	assert_true(json_is_null(json_object_get(sc, "n")));
	assert_true(json_is_true(json_object_get(sc, "t")));
	json_decref(reply);
	json_t *m;
	assert_int_equal(ctl_read(s.c, &m), 1);
	sc = json_array_get(json_object_get(m, "scopes"), 0);
	assert_true((uint64_t)json_integer_value(json_object_get(sc, "id")) == UINT64_MAX);
	json_decref(m);
	/* Bytes that are not UTF-8 (a daemon of an older version): U+FFFD for
	 * each, not a misleading "out of memory". */
	assert_int_equal(ctl_read(s.c, &m), 1);
	assert_string_equal(json_string_value(json_object_get(m, "name")),
			    "a\xef\xbf\xbd\xef\xbf\xbd"
			    "b");
	assert_true(json_is_integer(json_object_get(m, "k\xef\xbf\xbd")));
	json_decref(m);
	session_close(&s);
}

static void test_failed_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof failing / sizeof failing[0]; i++) {
		print_message("%s\n", failing[i].what);
		struct session s;
		session_open(&s, failing[i].script);
		json_t *reply;
		assert_int_equal(session_request(&s, "list", failing[i].timeout_ms, &reply),
				 failing[i].rc);
		assert_null(reply);
		assert_non_null(strstr(s.err, failing[i].err));
		session_close(&s);
	}
}

static void script_hangup(int fd)
{
	read_request(fd, NULL, 0);
	say(fd, "{\"id\":99,\"ok\":true}\n");
}

static void test_reset(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_hangup);
	json_t *reply;
	assert_int_equal(session_request(&s, "list", 2000, &reply), -ECONNRESET);
	/* The unrelated reply stays readable, then the reset shows. */
	expect_queued(s.c, NULL, NULL);
	json_t *m;
	assert_int_equal(ctl_read(s.c, &m), -ECONNRESET);
	session_close(&s);
}

/* A reply of several megabytes (a large dump) arrives whole. */
static void script_big(int fd)
{
	long id = read_request(fd, NULL, 0);
	size_t n = 3u << 20;
	char *s = malloc(n + 64);
	int h = sprintf(s, "{\"id\":%ld,\"ok\":true,\"blob\":\"", id);
	memset(s + h, 'a', n);
	strcpy(s + h + n, "\"}\n");
	size_t len = strlen(s), off = 0;
	while (off < len) {
		ssize_t w = write(fd, s + off, len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	free(s);
}

static void test_big_reply(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_big);
	json_t *reply;
	assert_int_equal(session_request(&s, "dump", 5000, &reply), 0);
	assert_int_equal(strlen(json_string_value(json_object_get(reply, "blob"))), 3u << 20);
	json_decref(reply);
	session_close(&s);
}

/* Text that follows a reply line ("text_bytes"): bytes of every value,
 * newlines among them, so nothing in it can pass for a line. */
#define TEXT_LEN ((3u << 20) + 123)

static char *text_pattern(size_t n)
{
	char *t = malloc(n);
	for (size_t i = 0; i < n; i++)
		t[i] = (char)((i * 7 + i / 4096) % 256);
	return t;
}

static void write_whole(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Lines before the text longer than one of ctl_request_text's reads (a
 * page): a pad member of this many bytes in the delta and the reply line
 * (0: none). */
static size_t text_pad;

/* A delta, the reply line announcing the text, the text in three pieces
 * with pauses, and another delta after it. */
static void script_text(int fd)
{
	long id = read_request(fd, NULL, 0);
	char *t = text_pattern(TEXT_LEN);
	char *pad = malloc(text_pad + 1);
	memset(pad, 'p', text_pad);
	pad[text_pad] = '\0';
	say(fd,
	    "{\"type\":\"delta\",\"gen\":1,\"pad\":\"%s\"}\n{\"id\":%ld,\"ok\":true,\"pad\":\"%s\","
	    "\"text_bytes\":%u}\n",
	    pad, id, pad, TEXT_LEN);
	free(pad);
	write_whole(fd, t, 1000);
	usleep(20000);
	write_whole(fd, t + 1000, TEXT_LEN / 2);
	usleep(20000);
	write_whole(fd, t + 1000 + TEXT_LEN / 2, TEXT_LEN - 1000 - TEXT_LEN / 2);
	say(fd, "{\"type\":\"delta\",\"gen\":2}\n");
	free(t);
	wait_hangup(fd);
}

static size_t request_text(struct session *s, int timeout_ms, int want_rc)
{
	json_t *req = json_pack("{s:s,s:s}", "cmd", "dump", "render", "jdk_json");
	struct jv_doc *doc = NULL;
	size_t pending = 99;
	assert_int_equal(
	    ctl_request_text(s->c, req, &doc, &pending, timeout_ms, s->err, sizeof s->err),
	    want_rc);
	json_decref(req);
	if (want_rc == 0)
		assert_true(jv_is_true(jv_get(jv_root(doc), "ok")));
	else
		assert_null(doc);
	jv_free(doc);
	return pending;
}

/* The text copied to a file (through the kernel) and read into memory is
 * the text sent, and the messages around it are read as before. */
static void test_text(void **state)
{
	(void)state;
	char *want = text_pattern(TEXT_LEN);
	/* 0: into memory; 1: into a file; 2: into a file opened to append,
	 * which splice refuses (the bytes go through memory then); 3: into a
	 * file, after lines of 20 KB. */
	for (int to_file = 0; to_file < 4; to_file++) {
		text_pad = to_file == 3 ? 20000 : 0;
		struct session s;
		session_open(&s, script_text);
		size_t n = request_text(&s, 5000, 0);
		assert_int_equal(n, TEXT_LEN);
		char *got = NULL;
		if (to_file) {
			char path[] = "/tmp/test_ctl_text.XXXXXX";
			int fd = mkstemp(path);
			assert_true(fd >= 0);
			if (to_file == 2)
				assert_int_equal(fcntl(fd, F_SETFL, O_APPEND), 0);
			unlink(path);
			assert_int_equal(ctl_text_copy(s.c, n, fd, 5000, s.err, sizeof s.err), 0);
			got = malloc(n + 1);
			assert_int_equal(pread(fd, got, n + 1, 0), (ssize_t)n);
			close(fd);
		} else {
			assert_int_equal(ctl_text_read(s.c, n, &got, 5000, s.err, sizeof s.err), 0);
			assert_int_equal(got[n], '\0');
		}
		assert_memory_equal(got, want, n);
		free(got);
		expect_queued(s.c, "type", "delta");
		json_t *m = NULL;
		for (int i = 0; i < 200 && ctl_read(s.c, &m) == 0; i++)
			usleep(10000);
		assert_int_equal(json_integer_value(json_object_get(m, "gen")), 2);
		json_decref(m);
		session_close(&s);
	}
	free(want);
}

/* A daemon without "render" answers with the whole reply: no text. */
static void script_plain_reply(int fd)
{
	long id = read_request(fd, NULL, 0);
	say(fd, "{\"id\":%ld,\"ok\":true,\"stacks\":[]}\n", id);
	wait_hangup(fd);
}

static void script_bad_count(int fd)
{
	long id = read_request(fd, NULL, 0);
	say(fd, "{\"id\":%ld,\"ok\":true,\"text_bytes\":-1}\n", id);
	wait_hangup(fd);
}

/* 10 of the 1,000 bytes announced, then the daemon goes away, or stalls. */
static void script_cut(int fd)
{
	long id = read_request(fd, NULL, 0);
	say(fd, "{\"id\":%ld,\"ok\":true,\"text_bytes\":1000}\n0123456789", id);
}

static void script_stall(int fd)
{
	script_cut(fd);
	wait_hangup(fd);
}

static void test_text_failures(void **state)
{
	(void)state;
	struct session s;
	session_open(&s, script_plain_reply);
	assert_int_equal(request_text(&s, 2000, 0), 0);
	session_close(&s);

	session_open(&s, script_bad_count);
	request_text(&s, 2000, -EPROTO);
	assert_non_null(strstr(s.err, "bytes of text"));
	session_close(&s);

	for (int stall = 0; stall < 2; stall++) {
		for (int to_file = 0; to_file < 2; to_file++) {
			session_open(&s, stall ? script_stall : script_cut);
			size_t n = request_text(&s, 2000, 0);
			assert_int_equal(n, 1000);
			int rc;
			if (to_file) {
				FILE *f = tmpfile();
				rc = ctl_text_copy(s.c, n, fileno(f), 100, s.err, sizeof s.err);
				fclose(f);
			} else {
				char *t = (char *)1;
				rc = ctl_text_read(s.c, n, &t, 100, s.err, sizeof s.err);
				assert_null(t);
			}
			assert_int_equal(rc, stall ? -ETIMEDOUT : -ECONNRESET);
			assert_non_null(strstr(s.err, "10 of 1000 bytes"));
			session_close(&s);
		}
	}
}

static void test_no_daemon(void **state)
{
	(void)state;
	struct ctl *c = (struct ctl *)1;
	char err[256];
	int rc = ctl_connect(&c, "/tmp/test_ctl-nonexistent-dir/agent.sock", err, sizeof err);
	assert_true(rc < 0);
	assert_null(c);
	assert_non_null(
	    strstr(err, "no scoped daemon answers on /tmp/test_ctl-nonexistent-dir/control.sock"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reply_matched_and_others_queued),
	    cmocka_unit_test(test_request_doc),
	    cmocka_unit_test(test_big_ids),
	    cmocka_unit_test(test_failed_requests),
	    cmocka_unit_test(test_reset),
	    cmocka_unit_test(test_big_reply),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_text_failures),
	    cmocka_unit_test(test_no_daemon),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
