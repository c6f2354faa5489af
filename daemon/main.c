/* main.c - scoped: options, sockets, daemonizing, signals, and the event loop's wiring. */
#include "daemon.h"

#include "advisor.h"
#include "conn.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "otlp.h"
#include "sock.h"
#include "sockpath.h"
#include "stacks.h"
#include "symbolize.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define TICK_MS 25

static ino_t agent_ino, ctl_ino;
static int64_t busy_ns; /* when a program or a client was last connected */

static void on_agent_listen(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)l, (void)fd, (void)events;
	agent_accept(ctx);
}

static void on_ctl_listen(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)l, (void)fd, (void)events;
	client_accept(ctx);
}

static void on_signal(struct loop *l, int fd, unsigned events, void *ctx)
{
	(void)events;
	(void)ctx;
	struct signalfd_siginfo si;
	if (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
		log_info("signal %u: shutting down", si.ssi_signo);
		loop_stop(l);
	}
}

/* Everything periodic: subscriptions every tick, the rest less often. */
static int64_t tick(struct loop *l, void *ctx)
{
	struct daemon *d = ctx;
	static unsigned n;
	int64_t now = loop_now_ns();
	subs_tick(d, now);
	for (struct proc *p = d->procs; p; p = p->next)
		if (p->state == PROC_LIVE && p->model.adv)
			advisor_tick(&p->model, p->pid, now);
	if (++n % 4 == 0) {
		stack_reqs_housekeep(d, now);
		agents_housekeep(d, now);
		proc_evict(d, now);
	}
	if (now - d->rate_ns >= 1000000000) {
		d->events_per_sec =
		    (double)(d->events - d->rate_events) * 1e9 / (double)(now - d->rate_ns);
		d->rate_events = d->events;
		d->rate_ns = now;
	}
	for (struct client *c = d->clients, *next; c; c = next) {
		next = c->next;
		if (c->dead)
			client_close(c);
		else if (n % 40 == 0)
			client_trim(c);
	}
	if (d->conns || d->clients)
		busy_ns = now;
	else if (d->opt.idle_exit_s > 0 && now - busy_ns >= d->opt.idle_exit_s * 1000000000LL) {
		log_info("no program and no client for %ld s (--idle-exit): exiting",
			 d->opt.idle_exit_s);
		loop_stop(l);
	}
	return TICK_MS;
}

/* Detaches from the terminal; the parent exits 0 once the sockets listen
 * in the detached process (it writes a byte on *ready when they do), so
 * that a peer connecting as soon as the parent returns names the daemon
 * that stays. */
static int daemonize(int *ready)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char c;
		close(p[1]);
		/* EOF (the daemon failed before it listened) still ends the wait. */
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	*ready = p[1];
	if (setsid() < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	if (chdir("/") < 0)
		return -errno;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return 0;
}

static int setup_signals(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int open_sockets(struct daemon *d)
{
	char err[512];
	if (scoped_socket_paths(d->opt.socket, d->dir, sizeof d->dir, d->agent_path,
				sizeof d->agent_path, d->ctl_path, sizeof d->ctl_path) < 0) {
		fprintf(stderr, "scoped: the socket path is too long; choose a shorter --socket\n");
		return -1;
	}
	if (sock_prepare_dir(d->dir, err, sizeof err) < 0) {
		fprintf(stderr, "scoped: %s\n", err);
		return -1;
	}
	pid_t other;
	d->agent_fd = sock_listen(d->agent_path, &other, &agent_ino, err, sizeof err);
	if (d->agent_fd < 0) {
		fprintf(stderr, "scoped: %s\n", err);
		return -1;
	}
	d->ctl_fd = sock_listen(d->ctl_path, &other, &ctl_ino, err, sizeof err);
	if (d->ctl_fd < 0) {
		fprintf(stderr, "scoped: %s\n", err);
		sock_remove(d->agent_path, agent_ino);
		close(d->agent_fd);
		return -1;
	}
	return 0;
}

/* --socket-group: the group may reach the directory (search only: no
 * listing) and connect to both sockets.  Who sees what is unchanged: the
 * daemon answers each client about its own uid's processes. */
static int share_with_group(struct daemon *d)
{
	char buf[4096];
	struct group gr, *g = NULL;
	int rc = getgrnam_r(d->opt.socket_group, &gr, buf, sizeof buf, &g);
	if (!g) {
		fprintf(stderr, "scoped: --socket-group: no group '%s'%s%s\n", d->opt.socket_group,
			rc ? ": " : "", rc ? strerror(rc) : "");
		return -1;
	}
	const char *paths[] = {d->dir, d->agent_path, d->ctl_path};
	const mode_t modes[] = {0710, 0660, 0660};
	for (int i = 0; i < 3; i++)
		if (chown(paths[i], (uid_t)-1, g->gr_gid) < 0 || chmod(paths[i], modes[i]) < 0) {
			fprintf(stderr, "scoped: cannot give %s to group %s: %s\n", paths[i],
				d->opt.socket_group, strerror(errno));
			return -1;
		}
	return 0;
}

static void shutdown_all(struct daemon *d)
{
	while (d->clients)
		client_close(d->clients);
	while (d->conns)
		aconn_close(d, d->conns);
	while (d->procs)
		proc_free(d, d->procs);
	sock_remove(d->agent_path, agent_ino);
	sock_remove(d->ctl_path, ctl_ino);
	close(d->agent_fd);
	close(d->ctl_fd);
	otlp_stop(d);
	metrics_stop(d);
	stacks_close(d->stacks);
	sym_free(d->sym);
	loop_free(d->loop);
}

int main(int argc, char **argv)
{
	static struct daemon d;
	char err[512];
	if (options_parse(&d.opt, argc, argv, err, sizeof err) < 0) {
		fprintf(stderr, "scoped: %s\n", err);
		return 2;
	}
	if (d.opt.help) {
		options_usage(stdout);
		return 0;
	}
	if (d.opt.version) {
		printf("scoped %s (protocol %d)\n", SCOPED_VERSION, PROTO_VERSION);
		return 0;
	}
	if (d.opt.log_file && log_open_file(d.opt.log_file, err, sizeof err) < 0) {
		fprintf(stderr, "scoped: %s\n", err);
		return 1;
	}
	log_setup(d.opt.log_level, d.opt.syslog);
	if (otlp_check(&d.opt, err, sizeof err) < 0 ||
	    (d.opt.metrics && metrics_open(&d, err, sizeof err) < 0)) {
		fprintf(stderr, "scoped: %s\n", err);
		return 1;
	}
	char why[512];
	if (stacks_open(&d.stacks, d.opt.stacks, why, sizeof why) < 0) {
		fprintf(stderr, "scoped: %s\n", why);
		metrics_stop(&d);
		return 1;
	}
	stacks_attach(&d);
	/* Room for agents: what the descriptor limit leaves after the control
	 * clients' share and the daemon's own files (symbols, BPF, logs). */
	long nofile = conn_fds_setup();
	long for_clients = d.opt.max_clients < nofile / 4 ? d.opt.max_clients : nofile / 4;
	long agents = nofile - for_clients - 64 - nofile / 8;
	d.max_conns = agents > 8 ? (size_t)agents : 8;
	if (open_sockets(&d) < 0) {
		metrics_stop(&d);
		stacks_close(d.stacks);
		return 1;
	}
	if (d.opt.socket_group && share_with_group(&d) < 0) {
		sock_remove(d.agent_path, agent_ino);
		sock_remove(d.ctl_path, ctl_ino);
		stacks_close(d.stacks);
		return 1;
	}
	if (!d.opt.foreground) {
		log_setup(d.opt.log_level, 1);
		int ready = -1;
		int rc = daemonize(&ready);
		if (rc < 0) {
			log_error("cannot daemonize: %s", strerror(-rc));
			return 1;
		}
		/* A peer's SO_PEERCRED is what the listening socket recorded at
		 * listen(): the process that made it, gone now.  Listening again
		 * records this one, whose pid agents read our state by (a
		 * stopped daemon is shed for at once) and a second daemon names. */
		if ((rc = sock_relisten(d.agent_fd)) < 0 || (rc = sock_relisten(d.ctl_fd)) < 0)
			log_warn("cannot listen again after detaching: %s", strerror(-rc));
		if (ready >= 0) {
			ssize_t w = write(ready, "", 1);
			(void)w;
			close(ready);
		}
	}
	log_info("%s", why);
	d.sig_fd = setup_signals();
	d.loop = loop_new();
	d.sym = sym_new(0);
	if (d.sig_fd < 0 || !d.loop || !d.sym) {
		log_error("cannot start the event loop: %s", strerror(errno));
		return 1;
	}
	d.started_ns = d.rate_ns = busy_ns = loop_now_ns();
	int rc;
	if (loop_add(d.loop, d.agent_fd, LOOP_READ, on_agent_listen, &d) < 0 ||
	    loop_add(d.loop, d.ctl_fd, LOOP_READ, on_ctl_listen, &d) < 0 ||
	    loop_add(d.loop, d.sig_fd, LOOP_READ, on_signal, &d) < 0 ||
	    loop_timer_add(d.loop, TICK_MS, tick, &d) < 0) {
		log_error("cannot watch the sockets: %s", strerror(errno));
		return 1;
	}
	if (!d.opt.no_prewarm && (rc = sym_prewarm(d.sym)) < 0 && rc != -ENOENT)
		log_warn("cannot read libc's debug information ahead: %s", strerror(-rc));
	if ((rc = metrics_start(&d)) < 0) {
		log_error("cannot serve metrics: %s", strerror(-rc));
		return 1;
	}
	if ((rc = otlp_start(&d)) < 0) {
		log_error("cannot start the OTLP exporter: %s", strerror(-rc));
		return 1;
	}
	log_info("listening on %s (agents) and %s (clients)%s%s", d.agent_path, d.ctl_path,
		 d.opt.socket_group ? ", open to group " : "",
		 d.opt.socket_group ? d.opt.socket_group : "");
	if (d.opt.idle_exit_s > 0)
		log_info("exits after %ld s with no program and no client (--idle-exit)",
			 d.opt.idle_exit_s);
	rc = loop_run(d.loop);
	if (rc < 0)
		log_error("the event loop failed: %s", strerror(-rc));
	shutdown_all(&d);
	close(d.sig_fd);
	return rc < 0 ? 1 : 0;
}
