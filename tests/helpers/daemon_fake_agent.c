/* daemon_fake_agent.c - a hand-written agent that speaks the wire protocol
 * byte by byte (no libscope encoder), well or badly, to test scoped against
 * good and misbehaving peers.
 *
 *   daemon_fake_agent SOCKET good NTASKS   register, send a known tree, answer
 *                                          stack requests, wait to be killed
 *   daemon_fake_agent SOCKET mute NTASKS   the same tree, never answers stacks
 *   daemon_fake_agent SOCKET random BYTES  random bytes, then wait
 *   daemon_fake_agent SOCKET oversize      a frame header claiming 1 MiB
 *   daemon_fake_agent SOCKET half          HELLO, then half a frame, then silence
 *   daemon_fake_agent SOCKET flood N       N connections held open, saying nothing
 *   daemon_fake_agent SOCKET flood-tasks N register and fork N tasks in one scope
 *   daemon_fake_agent SOCKET churn N       the tree of good, then every 20 ms a task
 *                                          forked, started and ended in scope 1
 *   daemon_fake_agent SOCKET sites         scopes naming a site defined, redefined,
 *                                          never defined, and none
 *   daemon_fake_agent SOCKET bad-site      HELLO, then a SITE numbered 0
 *   daemon_fake_agent SOCKET hostile       a tree whose scope and task ids are past
 *                                          2^63 and whose names, sites and stack
 *                                          (a function whose DWARF file name holds
 *                                          ESC, a newline and C1) carry controls
 *
 * Prints "ready" on stdout once its part is sent. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HDR 8

struct frame {
	uint8_t b[65536];
	size_t len;
};

static void put(struct frame *f, const void *p, size_t n)
{
	if (f->len + n > sizeof f->b) {
		fprintf(stderr, "fake agent: frame overflow\n");
		exit(2);
	}
	memcpy(f->b + f->len, p, n);
	f->len += n;
}

/* Little-endian on the wire; the test machines are little-endian, but say so. */
static void u16(struct frame *f, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	put(f, b, 2);
}
static void u32(struct frame *f, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		uint8_t b = (uint8_t)(v >> (8 * i));
		put(f, &b, 1);
	}
}
static void u64(struct frame *f, uint64_t v)
{
	u32(f, (uint32_t)v);
	u32(f, (uint32_t)(v >> 32));
}
static void str(struct frame *f, const char *s)
{
	size_t n = strlen(s);
	u16(f, (uint16_t)n);
	put(f, s, n);
	put(f, "", 1);
}

static void begin(struct frame *f, uint16_t type)
{
	f->len = 0;
	u32(f, 0);
	u16(f, type);
	u16(f, 0);
}

static void begin_ev(struct frame *f, uint16_t type, int snapshot, uint32_t tid)
{
	begin(f, type);
	f->b[6] = snapshot ? 1 : 0;
	u64(f, 1000000);
	u32(f, tid);
	u32(f, 0);
}

static int sock;
static const char *hello_name = "fake-agent";
void hostile_frame(void);
/* The top frame of every stack this agent reports. */
static void (*top_frame)(void);
static int write_failed; /* set instead of exiting when the daemon drops us on purpose */
static int tolerate_drop;

static void send_frame(struct frame *f)
{
	uint32_t n = (uint32_t)f->len;
	for (int i = 0; i < 4; i++)
		f->b[i] = (uint8_t)(n >> (8 * i));
	size_t off = 0;
	while (off < f->len) {
		ssize_t w = write(sock, f->b + off, f->len - off);
		if (w <= 0) {
			if (w < 0 && errno == EINTR)
				continue;
			if (tolerate_drop) {
				write_failed = 1;
				return;
			}
			fprintf(stderr, "fake agent: write: %s\n", strerror(errno));
			exit(3);
		}
		off += (size_t)w;
	}
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		fprintf(stderr, "fake agent: cannot connect to %s: %s\n", path, strerror(errno));
		exit(4);
	}
	return fd;
}

static void hello(void)
{
	struct frame f;
	begin(&f, 0x0001);
	u16(&f, 2); /* protocol version */
	u16(&f, 0);
	u32(&f, 1); /* a lie: the daemon must use SO_PEERCRED */
	struct timespec rt;
	clock_gettime(CLOCK_REALTIME, &rt);
	int64_t real = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec;
	u64(&f, (uint64_t)real);
	u64(&f, 1000000);
	u64(&f, (uint64_t)real);
	str(&f, "0.1.0");
	str(&f, hello_name);
	str(&f, "/fake/agent");
	send_frame(&f);
}

static void snapshot_mark(uint16_t type, uint64_t seq)
{
	struct frame f;
	begin(&f, type);
	u64(&f, seq);
	u64(&f, 1000000);
	if (type == 0x0011)
		u64(&f, 0);
	send_frame(&f);
}

/* Call sites the tree's events name (SITE: u32 site, i32 line; file, func). */
enum { SITE_MAIN = 1, SITE_TASK = 2 };

static void site(uint32_t id, int32_t line, const char *file, const char *func, int snap)
{
	struct frame f;
	begin(&f, 0x0013);
	f.b[6] = snap ? 1 : 0;
	u32(&f, id);
	u32(&f, (uint32_t)line);
	str(&f, file);
	str(&f, func);
	send_frame(&f);
}

static void scope_open_at(uint64_t id, uint64_t parent, const char *name, uint32_t site_id,
			  int snap)
{
	struct frame f;
	begin_ev(&f, 0x0110, snap, (uint32_t)getpid());
	u64(&f, id);
	u64(&f, parent);
	u64(&f, 0);
	u64(&f, 0);
	u64(&f, 0);
	u32(&f, 0);
	u32(&f, site_id);
	str(&f, name);
	send_frame(&f);
}

static void scope_open(uint64_t id, uint64_t parent, const char *name, int snap)
{
	scope_open_at(id, parent, name, SITE_MAIN, snap);
}

static void task_fork(uint64_t id, uint64_t scope, int snap)
{
	struct frame f;
	begin_ev(&f, 0x0120, snap, (uint32_t)getpid());
	u64(&f, id);
	u64(&f, scope);
	u64(&f, 0); /* fn: unknown */
	u32(&f, 1); /* running */
	u32(&f, SITE_TASK);
	send_frame(&f);
}

/* The sites the events above name, as an agent sends them: before their
 * first use, and again in every snapshot. */
static void sites(int snap)
{
	site(SITE_MAIN, 77, "fake.c", "fake_main", snap);
	site(SITE_TASK, 88, "fake.c", "fake_task", snap);
}

static void thread_start(uint32_t tid, const char *name, int snap)
{
	struct frame f;
	begin_ev(&f, 0x0100, snap, tid);
	u64(&f, 0);
	u32(&f, 1);
	u32(&f, 0);
	str(&f, name);
	send_frame(&f);
}

/* Stands in for a deep frame of the target: its address is sent as a stack. */
__attribute__((noinline)) void fake_stack_frame(void)
{
	__asm__ volatile("" ::: "memory");
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int churn;
static uint64_t churn_next = 100000;

/* One short-lived task: what a busy program shows between two deltas. */
static void churn_once(void)
{
	uint64_t id = churn_next++;
	task_fork(id, 1, 0);
	struct frame f;
	begin_ev(&f, 0x0122, 0, (uint32_t)getpid());
	u64(&f, id);
	u64(&f, 1);
	u64(&f, 0);
	u32(&f, 2); /* success */
	u32(&f, 0);
	send_frame(&f);
}

/* Reads frames; answers STACK_REQUEST with one thread whose top frame is
 * fake_stack_frame, unless mute. */
static void serve(int mute)
{
	uint8_t in[1 << 17];
	size_t len = 0;
	for (;;) {
		if (churn) {
			struct pollfd p = {.fd = sock, .events = POLLIN};
			if (poll(&p, 1, 20) == 0) {
				churn_once();
				continue;
			}
		}
		ssize_t n = read(sock, in + len, sizeof in - len);
		if (n <= 0)
			exit(0);
		len += (size_t)n;
		while (len >= HDR) {
			uint32_t flen = rd32(in);
			if (flen < HDR || flen > sizeof in)
				exit(5);
			if (len < flen)
				break;
			uint16_t type = (uint16_t)(in[4] | in[5] << 8);
			if (type == 0x0200 && !mute) {
				uint64_t req = rd32(in + 8) | (uint64_t)rd32(in + 12) << 32;
				struct frame f;
				begin(&f, 0x0201);
				u64(&f, req);
				u32(&f, (uint32_t)getpid());
				u32(&f, 0);
				u64(&f, 12345);
				u16(&f, 2);
				u16(&f, 0);
				u32(&f, 0);
				u64(&f, (uint64_t)(uintptr_t)top_frame);
				u64(&f, (uint64_t)(uintptr_t)&serve + 16);
				send_frame(&f);
				begin(&f, 0x0202);
				u64(&f, req);
				u32(&f, 1);
				u32(&f, 0);
				u64(&f, 20000);
				u64(&f, 12345);
				send_frame(&f);
			}
			memmove(in, in + flen, len - flen);
			len -= flen;
		}
	}
}

static void ready(void)
{
	printf("ready\n");
	fflush(stdout);
}

static void tree(int ntasks)
{
	hello();
	snapshot_mark(0x0010, 1);
	sites(1);
	thread_start((uint32_t)getpid(), "fake-main", 1);
	scope_open(1, 0, "fake-root", 1);
	scope_open(2, 1, "fake-child", 1);
	for (int i = 0; i < ntasks; i++)
		task_fork((uint64_t)(100 + i), i % 2 ? 2 : 1, 1);
	snapshot_mark(0x0011, 1);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: daemon_fake_agent SOCKET MODE [N]\n");
		return 2;
	}
	const char *mode = argv[2];
	long n = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
	if (strcmp(mode, "flood") == 0) {
		for (long i = 0; i < n; i++)
			connect_to(argv[1]); /* kept open until we exit */
		ready();
		pause();
		return 0;
	}
	sock = connect_to(argv[1]);
	top_frame = fake_stack_frame;
	if (strcmp(mode, "churn") == 0) {
		churn = 1;
		tree((int)n);
		ready();
		serve(0);
	} else if (strcmp(mode, "good") == 0 || strcmp(mode, "mute") == 0) {
		tree((int)n);
		ready();
		serve(strcmp(mode, "mute") == 0);
	} else if (strcmp(mode, "random") == 0) {
		srand((unsigned)getpid());
		struct frame f = {.len = 0};
		for (long i = 0; i < n && i < (long)sizeof f.b; i++)
			f.b[f.len++] = (uint8_t)rand();
		/* send raw: do not patch a length in */
		if (write(sock, f.b, f.len) < 0)
			return 3;
		ready();
		pause();
	} else if (strcmp(mode, "oversize") == 0) {
		hello();
		uint8_t h[HDR] = {0, 0, 0x10, 0, 0x10, 0x01, 0, 0}; /* 1 MiB SCOPE_OPEN */
		if (write(sock, h, sizeof h) < 0)
			return 3;
		ready();
		pause();
	} else if (strcmp(mode, "half") == 0) {
		hello();
		struct frame f;
		begin_ev(&f, 0x0110, 0, (uint32_t)getpid());
		u64(&f, 5);
		uint32_t claimed = 200;
		for (int i = 0; i < 4; i++)
			f.b[i] = (uint8_t)(claimed >> (8 * i));
		if (write(sock, f.b, f.len) < 0)
			return 3;
		ready();
		pause();
	} else if (strcmp(mode, "flood-tasks") == 0) {
		signal(SIGPIPE, SIG_IGN);
		tolerate_drop = 1; /* past a cap the daemon closes on us: expected */
		hello();
		sites(0);
		scope_open(1, 0, "big", 0);
		for (long i = 0; i < n && !write_failed; i++)
			task_fork((uint64_t)(10 + i), 1, 0);
		ready();
		if (write_failed)
			pause();
		serve(0);
	} else if (strcmp(mode, "sites") == 0) {
		hello();
		site(5, 50, "first.c", "first_func", 0);
		scope_open_at(1, 0, "defined", 5, 0);
		site(5, 51, "second.c", "second_func", 0); /* replaces site 5 */
		scope_open_at(2, 1, "redefined", 5, 0);
		scope_open_at(3, 1, "unknown", 6, 0);
		scope_open_at(4, 1, "none", 0, 0);
		ready();
		serve(0);
	} else if (strcmp(mode, "hostile") == 0) {
		const uint64_t big = (uint64_t)1 << 63;
		hello_name = "host\033[2Jile\nname";
		top_frame = hostile_frame;
		hello();
		snapshot_mark(0x0010, 1);
		site(SITE_MAIN, 77, "fake\033[31m.c", "fake\nmain", 1);
		site(SITE_TASK, 88, "fake.c", "fake_task\302\233", 1);
		thread_start((uint32_t)getpid(), "th\033]0;x\007read", 1);
		scope_open(big + 1, 0, "big\033[1mroot", 1);
		scope_open(UINT64_MAX - 1, big + 1, "max", 1);
		task_fork(big + 100, big + 1, 1);
		task_fork(UINT64_MAX - 2, UINT64_MAX - 1, 1);
		snapshot_mark(0x0011, 1);
		ready();
		serve(0);
	} else if (strcmp(mode, "bad-site") == 0) {
		hello();
		site(0, 1, "zero.c", "zero", 0);
		ready();
		pause();
	} else {
		fprintf(stderr, "daemon_fake_agent: unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}

/* Last in the file: the #line below names every line after it. */
#line 7 "ev\033[31mil\n\302\233.c"
__attribute__((noinline)) void hostile_frame(void)
{
	__asm__ volatile("" ::: "memory");
}
