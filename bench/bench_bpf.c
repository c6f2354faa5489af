/* bench_bpf.c - end-to-end cost of a BPF stack capture of a 1,000-thread
 * process (iterator pass, unwind, symbolize with a warm cache), proof that
 * the target is never paused (none of its blocked threads wakes), and the
 * daemon's BPF source against its signal-mode source on the same target. */
#include <dirent.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "../bpf/bpfstack.h"
#include "../common/ctl.h"
#include "../tests/unit/test_bpf_target.h"

#define RUNS 21
#define WARMUP 3
#define DAEMON_RUNS 11
#define THREADS "1000"
#define SYMCACHE 16384 /* power of two */

/* Address -> function name, the way a daemon keeps its symbolizer warm. */
struct symcache {
	Dwfl *dwfl;
	uint64_t addr[SYMCACHE];
	const char *name[SYMCACHE];
	size_t misses;
};

static const char *symbolize(struct symcache *c, uint64_t addr)
{
	size_t i = (size_t)(addr * 0x9e3779b97f4a7c15ull >> 50) & (SYMCACHE - 1);

	for (size_t probe = 0; probe < SYMCACHE; probe++, i = (i + 1) & (SYMCACHE - 1)) {
		if (c->addr[i] == addr)
			return c->name[i];
		if (c->addr[i] == 0) {
			Dwfl_Module *m = dwfl_addrmodule(c->dwfl, addr);
			const char *n = m ? dwfl_module_addrname(m, addr) : NULL;

			c->misses++;
			c->addr[i] = addr;
			c->name[i] = n ? n : "??";
			return c->name[i];
		}
	}
	return "??";
}

/* Sum of every thread's voluntary switches: a thread blocked forever only
 * adds to it if something (a signal, a stop) woke it. */
static long total_switches(pid_t pid)
{
	char path[96], line[128];
	struct dirent *e;
	long sum = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
				sum += strtol(line + 24, NULL, 10);
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* ---- through the daemon: --stacks=bpf against --stacks=signal ------------ */

struct mode_result {
	int64_t wall[DAEMON_RUNS], capture[DAEMON_RUNS], pause[DAEMON_RUNS];
	size_t threads;
	int ok;
};

static pid_t start_daemon(const char *scoped, const char *sock, const char *mode)
{
	char ctl[PATH_MAX], opt[32];
	pid_t pid;

	snprintf(opt, sizeof(opt), "--stacks=%s", mode);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execl(scoped, "scoped", "--foreground", "--socket", sock, opt, (char *)NULL);
		_exit(127);
	}
	snprintf(ctl, sizeof(ctl), "%.*s/control.sock", (int)(strrchr(sock, '/') - sock), sock);
	for (int i = 0; i < 200 && access(ctl, F_OK) != 0; i++)
		usleep(10000);
	return pid;
}

static void stop_daemon(pid_t pid, const char *sock)
{
	char ctl[PATH_MAX];

	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	snprintf(ctl, sizeof(ctl), "%.*s/control.sock", (int)(strrchr(sock, '/') - sock), sock);
	unlink(ctl);
}

/* One stacks request; fills wall, capture and pause times.  1 on success. */
static int stacks_once(const char *sock, pid_t pid, int64_t *wall, int64_t *capture, int64_t *pause,
		       size_t *threads)
{
	json_t *reply = NULL;
	struct ctl *c;
	char err[256];
	json_t *req;
	int64_t t0;
	int ok = 0;

	if (ctl_connect(&c, sock, err, sizeof(err)) != 0)
		return 0;
	req = json_pack("{s:i, s:s, s:i}", "id", 1, "cmd", "stacks", "pid", (int)pid);
	t0 = bench_now_ns();
	if (ctl_request(c, req, &reply, 30000, err, sizeof(err)) == 0) {
		*wall = bench_now_ns() - t0;
		ok = json_is_true(json_object_get(reply, "ok"));
		*capture = json_integer_value(json_object_get(reply, "capture_ns"));
		*pause = json_integer_value(json_object_get(reply, "max_pause_ns"));
		*threads = json_array_size(json_object_get(reply, "stacks"));
	}
	json_decref(reply);
	json_decref(req);
	ctl_close(c);
	return ok;
}

static void run_mode(const char *scoped, const char *sock, const char *mode, pid_t target,
		     struct mode_result *res)
{
	pid_t d = start_daemon(scoped, sock, mode);
	int64_t w, c, p;
	int i;

	res->ok = 0;
	/* Until the agent has (re)connected and registered the target. */
	for (i = 0; i < 500 && !stacks_once(sock, target, &w, &c, &p, &res->threads); i++)
		usleep(10000);
	if (i == 500) {
		stop_daemon(d, sock);
		return;
	}
	for (int run = -WARMUP; run < DAEMON_RUNS; run++) {
		if (!stacks_once(sock, target, &w, &c, &p, &res->threads)) {
			stop_daemon(d, sock);
			return;
		}
		if (run >= 0) {
			res->wall[run] = w;
			res->capture[run] = c;
			res->pause[run] = p;
		}
	}
	bench_sort_i64(res->wall, DAEMON_RUNS);
	bench_sort_i64(res->capture, DAEMON_RUNS);
	bench_sort_i64(res->pause, DAEMON_RUNS);
	res->ok = 1;
	stop_daemon(d, sock);
}

static void daemon_compare(void)
{
	static struct mode_result bpf, sig;
	const char *args[] = {"-a", THREADS, NULL};
	char scoped[PATH_MAX], dir[] = "/tmp/bench-bpf.XXXXXX", sock[PATH_MAX + 16];
	struct bt_target tg;
	int m = DAEMON_RUNS / 2;

	if (bt_helper_path(scoped, sizeof(scoped), "../../bin/scoped") != 0 || !mkdtemp(dir)) {
		printf("daemon comparison: skipped (scoped is not built)\n");
		return;
	}
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	setenv("SCOPED_SOCKET", sock, 1);
	if (bt_start_agent(&tg, args, 1) != 0) {
		printf("daemon comparison: skipped (bpf_target did not start)\n");
		rmdir(dir);
		return;
	}
	run_mode(scoped, sock, "bpf", tg.pid, &bpf);
	run_mode(scoped, sock, "signal", tg.pid, &sig);
	bt_stop(&tg);
	rmdir(dir);
	printf("Through the daemon, 'stacks' for %zu threads, median of %d after %d warm-up:\n",
	       bpf.threads, DAEMON_RUNS, WARMUP);
	printf("  %-8s %14s %14s %14s\n", "source", "request+parse", "capture_ns", "max_pause_ns");
	if (bpf.ok)
		printf("  %-8s %12.2fms %12.2fms %12.3fms\n", "bpf", bpf.wall[m] / 1e6,
		       bpf.capture[m] / 1e6, bpf.pause[m] / 1e6);
	if (sig.ok)
		printf("  %-8s %12.2fms %12.2fms %12.3fms\n", "signal", sig.wall[m] / 1e6,
		       sig.capture[m] / 1e6, sig.pause[m] / 1e6);
	if (bpf.ok && sig.ok)
		printf("  signal/bpf: request wall %.1fx, capture %.1fx; the target's pause: "
		       "signal %.3f ms per thread (max), bpf 0\n",
		       (double)sig.wall[m] / (double)bpf.wall[m],
		       (double)sig.capture[m] / (double)(bpf.capture[m] ? bpf.capture[m] : 1),
		       sig.pause[m] / 1e6);
	else
		printf("  (a source did not answer: bpf %s, signal %s)\n", bpf.ok ? "ok" : "failed",
		       sig.ok ? "ok" : "failed");
	printf("  target saw %d EINTRs in all (signal mode interrupts its sleeps; BPF never)\n",
	       tg.eintr);
}

/* Times of one series of captures, sorted. */
struct series {
	int64_t capture[RUNS], symb[RUNS], total[RUNS];
	size_t threads, frames, woken;
};

/* Evicts the caches and lets the CPU idle, as the daemon's other work and
 * the gaps between requests do. */
static void go_cold(void)
{
	static volatile unsigned char *junk;
	const size_t size = 64 << 20;

	if (!junk)
		junk = malloc(size);
	if (junk)
		for (size_t k = 0; k < size; k += 64)
			junk[k]++;
	usleep(20000);
}

static int run_series(struct bpfstack *b, pid_t pid, struct symcache *cache, bool cold,
		      struct series *out)
{
	char err[256];

	memset(out, 0, sizeof(*out));
	for (int run = -WARMUP; run < RUNS; run++) {
		struct bpfstack_thread *th;
		size_t n, frames = 0;
		int64_t t0, t1, t2;
		uintptr_t sink = 0;

		if (cold)
			go_cold();
		t0 = bench_now_ns();
		if (bpfstack_capture(b, pid, &th, &n, err, sizeof(err)) != 0) {
			printf("bench_bpf: capture failed: %s\n", err);
			return -1;
		}
		t1 = bench_now_ns();
		for (size_t i = 0; i < n; i++) {
			for (size_t f = 0; f < th[i].nframes; f++)
				sink += (uintptr_t)symbolize(cache, th[i].frames[f] - (f > 0));
			for (size_t k = 0; k < th[i].nkframes; k++)
				sink += (uintptr_t)bpfstack_ksym(b, th[i].kframes[k]);
			frames += th[i].nframes;
		}
		t2 = bench_now_ns();
		if (run >= 0) {
			out->capture[run] = t1 - t0;
			out->symb[run] = t2 - t1;
			out->total[run] = t2 - t0;
			for (size_t i = 0; i < n; i++)
				out->woken += th[i].ran_during_capture;
		}
		out->threads = n;
		out->frames = frames + (sink == 1); /* keep the lookups from being optimised out */
		free(th);
	}
	bench_sort_i64(out->total, RUNS);
	bench_sort_i64(out->capture, RUNS);
	bench_sort_i64(out->symb, RUNS);
	return 0;
}

static void print_row(const char *what, const int64_t *v)
{
	printf("  %-44s %7.2fms %7.2fms %7.2fms\n", what, v[0] / 1e6, v[RUNS / 2] / 1e6,
	       v[RUNS - 1] / 1e6);
}

int main(void)
{
	static char *debuginfo_path;
	static const Dwfl_Callbacks cbs = {
	    .find_elf = dwfl_linux_proc_find_elf,
	    .find_debuginfo = dwfl_standard_find_debuginfo,
	    .debuginfo_path = &debuginfo_path,
	};
	static struct symcache cache;
	static struct series warm, cold;
	const char *args[] = {THREADS, NULL};
	struct bpfstack *b;
	struct bt_target tg;
	char err[256];
	long before, woken;
	int rc;

	if (bpfstack_open(&b, err, sizeof(err)) != 0) {
		printf("bench_bpf: skipped: %s\n", err);
		return 0;
	}
	if (bt_start(&tg, args) != 0) {
		printf("bench_bpf: cannot start tests/helpers/bpf_target (make it first)\n");
		bpfstack_close(b);
		return 1;
	}
	cache.dwfl = dwfl_begin(&cbs);
	dwfl_report_begin(cache.dwfl);
	dwfl_linux_proc_report(cache.dwfl, tg.pid);
	dwfl_report_end(cache.dwfl, NULL, NULL);
	usleep(100000); /* let its main thread settle into its read of stdin */
	before = total_switches(tg.pid);
	rc = run_series(b, tg.pid, &cache, false, &warm);
	if (!rc)
		rc = run_series(b, tg.pid, &cache, true, &cold);
	woken = total_switches(tg.pid) - before;
	dwfl_end(cache.dwfl);
	bt_stop(&tg);
	bpfstack_close(b);
	if (rc)
		return 1;
	printf("BPF stacks of %zu threads (%zu user frames), %d runs after %d warm-up each:\n",
	       warm.threads, warm.frames, RUNS, WARMUP);
	printf("  %-44s %8s %8s %8s\n", "back to back", "min", "median", "max");
	print_row("capture + unwind (bpfstack_capture)", warm.capture);
	print_row("symbolize (warm symbol cache)", warm.symb);
	print_row("end to end", warm.total);
	printf("  %-44s\n", "cold: 64 MiB of other work + 20 ms idle before each");
	print_row("capture + unwind (bpfstack_capture)", cold.capture);
	print_row("end to end", cold.total);
	printf("  end to end median: %.2f ms back to back (%.2f us/thread, %.2fx the 10 ms "
	       "target), %.2f ms cold (%.2fx)\n",
	       warm.total[RUNS / 2] / 1e6, warm.total[RUNS / 2] / 1e3 / (double)warm.threads,
	       warm.total[RUNS / 2] / 1e7, cold.total[RUNS / 2] / 1e6, cold.total[RUNS / 2] / 1e7);
	printf("  target pause: 0 (never stopped or signalled); over %d captures its blocked "
	       "threads made %ld voluntary switches and %zu thread-captures were flagged "
	       "ran_during_capture\n",
	       2 * (RUNS + WARMUP), woken, warm.woken + cold.woken);
	printf("  target saw %d signals and %d EINTRs\n\n", tg.signals, tg.eintr);
	if (tg.signals != 0 || tg.eintr != 0)
		return 1;
	daemon_compare();
	return 0;
}
