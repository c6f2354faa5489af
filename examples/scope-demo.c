/* scope-demo.c - a small service built on libscope, for the demo and the
 * dumps: a request loop whose handlers fan out, race mirrors, nest scopes
 * three deep and hit deadlines, all on a named bounded pool. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scope.h"

#define MS (1000LL * 1000)
/* Keeps a function's frame on the stack (no tail call), so that dumps show
 * which backend call a thread waits in. */
#define KEEP_FRAME(rc)                                                                             \
	(__extension__({                                                                           \
		__asm__ volatile("" ::: "memory");                                                 \
		(rc);                                                                              \
	}))

struct config {
	double duration_s; /* 0: until SIGTERM or SIGINT */
	int per_batch;	   /* requests accepted per batch */
	int deadline_ms;   /* per request */
	int quiet;
};

static volatile sig_atomic_t stopping;
static scope_pool_t *io_pool;
static struct config conf = {.per_batch = 4, .deadline_ms = 900};
static atomic_long served, failed, timed_out, next_request = 1;

/* Latencies vary per thread without a shared lock. */
static int64_t jitter_ms(int lo, int hi)
{
	static _Thread_local unsigned seed;
	if (!seed)
		seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
	return lo + rand_r(&seed) % (hi - lo + 1);
}

/* A backend call: waits like network I/O does, and gives up when the
 * request's scope is cancelled. */
#if defined(__GNUC__) && !defined(__clang__)
#define NOCLONE __attribute__((noinline, noclone))
#else
#define NOCLONE __attribute__((noinline))
#endif

static int NOCLONE backend_call(const char *what, int lo, int hi)
{
	(void)what;
	int rc = scope_sleep(jitter_ms(lo, hi) * MS);
	return KEEP_FRAME(rc);
}

static int __attribute__((noinline)) fetch_user(void *arg, void **res)
{
	(void)arg, (void)res;
	int rc = backend_call("users", 20, 120);
	return KEEP_FRAME(rc);
}

/* A scope's settings on the io pool (timeout_ns 0: none).  Each caller
 * opens its scope itself, so that dumps name it as the opener. */
static struct scope_config io_config(const char *name, scope_joiner_kind_t joiner,
				     int64_t timeout_ns)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	cfg.name = name;
	cfg.joiner = joiner;
	cfg.pool = io_pool;
	cfg.timeout_ns = timeout_ns;
	return cfg;
}

/* Joins s and closes it: the join's result. */
static int join_close(scope_t *s)
{
	int rc = scope_join(s);
	scope_close(s);
	return rc;
}

/* One shard of the order store; shard 3 is the slow one that now and then
 * blows the request's deadline. */
static int __attribute__((noinline)) fetch_shard(void *arg, void **res)
{
	(void)res;
	long shard = (long)arg;
	int rc;
	if (shard == 3 && jitter_ms(0, 9) == 0)
		rc = backend_call("orders-slow", 1500, 2500);
	else
		rc = backend_call("orders", 40, 250);
	return KEEP_FRAME(rc);
}

/* Orders live on four shards: fan out, all must answer. */
static int fetch_orders(void *arg, void **res)
{
	(void)arg, (void)res;
	struct scope_config cfg = io_config("orders", SCOPE_JOIN_ALL_SUCCESSFUL, 0);
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	for (long shard = 0; shard < 4 && rc == 0; shard++)
		rc = scope_fork(s, fetch_shard, (void *)shard, NULL);
	if (rc == 0)
		rc = scope_join(s);
	scope_close(s);
	return rc;
}

/* A mirror that never answers on its socket: its reader waits in poll()
 * until the race is decided. */
static int dead_mirror(void *arg, void **res)
{
	(void)arg, (void)res;
	int fds[2];
	if (pipe(fds) < 0)
		return -errno;
	int rc = KEEP_FRAME(scope_wait_fd(fds[0], POLLIN, scope_now() + 5000 * MS));
	close(fds[0]);
	close(fds[1]);
	return rc < 0 ? rc : -EIO;
}

static int __attribute__((noinline)) query_mirror(void *arg, void **res)
{
	(void)arg, (void)res;
	int rc = backend_call("mirror", 30, 300);
	return KEEP_FRAME(rc);
}

/* Recommendations come from whichever mirror answers first. */
static int fetch_recommendations(void *arg, void **res)
{
	(void)arg, (void)res;
	struct scope_config cfg = io_config("mirrors", SCOPE_JOIN_ANY_SUCCESSFUL, 0);
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	scope_fork(s, query_mirror, NULL, NULL);
	scope_fork(s, query_mirror, NULL, NULL);
	scope_fork(s, dead_mirror, NULL, NULL);
	return join_close(s);
}

/* One request: user, orders and recommendations at once, all needed,
 * within the request's deadline. */
static int handle_request(void *arg, void **res)
{
	(void)res;
	long id = (long)arg;
	char rid[32];
	struct scope_config cfg =
	    io_config("handle", SCOPE_JOIN_ALL_SUCCESSFUL, conf.deadline_ms * MS);
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	snprintf(rid, sizeof rid, "r-%ld", id);
	scope_value_bind(s, "request_id", rid);
	scope_fork(s, fetch_user, NULL, NULL);
	scope_fork(s, fetch_orders, NULL, NULL);
	scope_fork(s, fetch_recommendations, NULL, NULL);
	rc = join_close(s);
	if (rc == 0)
		served++;
	else if (rc == -ETIMEDOUT)
		timed_out++;
	else
		failed++;
	return 0;
}

/* Accepts a batch of requests as they "arrive", each handled in its own
 * subtask, and waits for all of them. */
static int serve_batch(void)
{
	struct scope_config cfg = io_config("batch", SCOPE_JOIN_AWAIT_ALL, 0);
	scope_t *s;
	int rc = scope_open(&s, &cfg);
	if (rc < 0)
		return rc;
	for (int i = 0; i < conf.per_batch && !stopping; i++) {
		scope_fork(s, handle_request, (void *)(long)next_request++, NULL);
		scope_sleep(jitter_ms(20, 120) * MS);
	}
	return join_close(s);
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: scope-demo [--duration SECONDS] [--batch N] [--deadline MS] [--quiet]\n"
		"A request loop on libscope: each request fans out to users, four order shards\n"
		"(all must answer) and three recommendation mirrors (first answer wins), within\n"
		"a deadline that a slow shard sometimes misses; on the bounded pool 'io'.\n"
		"Runs until SIGTERM or SIGINT, or for --duration seconds.  Look at it with\n"
		"'scopecmd <pid> Thread.print' or 'scopetop'.\n\n"
		"  --duration SECONDS  stop after this long (default: run until stopped)\n"
		"  --batch N           requests accepted per batch, 1..64 (default 4)\n"
		"  --deadline MS       per-request deadline, 10..60000 (default 900)\n"
		"  --quiet             no start and stop lines\n");
}

static int parse(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--quiet")) {
			conf.quiet = 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "scope-demo: %s needs a value; see --help\n", a);
			return -1;
		}
		double d = strtod(v, &end);
		if (end == v || *end) {
			fprintf(stderr, "scope-demo: %s takes a number, not '%s'\n", a, v);
			return -1;
		}
		if (!strcmp(a, "--duration") && d >= 0 && d <= 86400 * 365)
			conf.duration_s = d;
		else if (!strcmp(a, "--batch") && d >= 1 && d <= 64)
			conf.per_batch = (int)d;
		else if (!strcmp(a, "--deadline") && d >= 10 && d <= 60000)
			conf.deadline_ms = (int)d;
		else {
			fprintf(stderr, "scope-demo: bad option or value '%s %s'; see --help\n", a,
				v);
			return -1;
		}
		i++;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (parse(argc, argv) < 0)
		return 2;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	scope_thread_name("acceptor");

	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	pc.name = "io";
	pc.core_size = 8;
	pc.max_size = 48;
	pc.queue = SCOPE_QUEUE_BOUNDED;
	pc.queue_capacity = 16;
	pc.policy = SCOPE_POLICY_CALLER_RUNS;
	pc.keep_alive_ns = 5000 * MS;
	int rc = scope_pool_create(&io_pool, &pc);
	if (rc < 0) {
		fprintf(stderr, "scope-demo: cannot create the io pool: %s\n", scope_strerror(rc));
		return 1;
	}
	if (!conf.quiet)
		printf("scope-demo: pid %d serving; stop with kill %d (or Ctrl-C)\n", (int)getpid(),
		       (int)getpid());
	fflush(stdout);
	int64_t end = conf.duration_s > 0 ? scope_now() + (int64_t)(conf.duration_s * 1e9) : 0;
	while (!stopping && (!end || scope_now() < end))
		serve_batch();
	scope_pool_destroy(io_pool);
	if (!conf.quiet)
		printf("scope-demo: %ld served, %ld timed out, %ld failed\n", (long)served,
		       (long)timed_out, (long)failed);
	return 0;
}
