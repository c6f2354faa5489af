/* agent_exit.c - how the daemon learns that the process ended: PROCESS_EXIT
 * from an on_exit() handler (normal exit) or straight from a fatal-signal
 * handler (crash), which must not block and may only use async-signal-safe
 * calls. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define FINAL_FLUSH_MS 100 /* how long exit() may wait for the last events */
#define CLAIM_TRIES 200	   /* x 100 us: how long a crash waits for the socket */
#define CRASH_FRAMES 128   /* frames of the crashing thread sent */

_Atomic int sc_exit_fd = -1;
_Atomic int sc_sock_owner;
const uint8_t *_Atomic sc_exit_rest;
_Atomic size_t sc_exit_rest_len;

static const int fatal_signals[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE};

static void on_process_exit(int status, void *arg)
{
	(void)arg;
	(void)sc_agent_final(1, status, FINAL_FLUSH_MS);
}

/* write() until done, waiting for room at most ~50 ms in all. */
static void write_all(int fd, const uint8_t *p, size_t n)
{
	int waits = 0;
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && waits++ < 5) {
			struct pollfd pfd = {fd, POLLOUT, 0};
			(void)poll(&pfd, 1, 10);
			continue;
		}
		return;
	}
}

/* The PROCESS_EXIT frame, laid out by hand: proto_encode would do, but this
 * path should depend on as little as possible. */
static size_t exit_frame(uint8_t *b, int sig)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	uint32_t len = PROTO_HDR_SIZE + 16 + 8, tid = (uint32_t)syscall(SYS_gettid), how = 2,
		 zero = 0;
	uint16_t type = PROTO_EV_PROCESS_EXIT, flags = 0;
	int32_t code = sig;
	memcpy(b, &len, 4);
	memcpy(b + 4, &type, 2);
	memcpy(b + 6, &flags, 2);
	memcpy(b + 8, &now, 8);
	memcpy(b + 16, &tid, 4);
	memcpy(b + 20, &zero, 4);
	memcpy(b + 24, &how, 4);
	memcpy(b + 28, &code, 4);
	return len;
}

/* The crashing thread's stack as an unsolicited STACK_REPLY (req 0), sent
 * just before PROCESS_EXIT, which names the same thread.  Static: only the
 * one crashing thread that owns the socket writes it. */
static size_t crash_stack_frame(uint8_t *b, void *uctx)
{
	static uint64_t addr[CRASH_FRAMES];
	uint16_t n = sc_stack_unwind_here(uctx, addr, CRASH_FRAMES);
	uint32_t len = PROTO_HDR_SIZE + 32 + 8u * n, tid = (uint32_t)syscall(SYS_gettid);
	uint16_t type = PROTO_STACK_REPLY, flags = 0;
	memset(b, 0, PROTO_HDR_SIZE + 32);
	memcpy(b, &len, 4);
	memcpy(b + 4, &type, 2);
	memcpy(b + 6, &flags, 2);
	/* req 0: no request asked for it; error 0 and pause 0 */
	memcpy(b + 16, &tid, 4);
	memcpy(b + 32, &n, 2);
	memcpy(b + PROTO_HDR_SIZE + 32, addr, 8u * n); /* little-endian, as the wire */
	return len;
}

/* CRASH: the signal, its si_code and, for the signals that have one, the
 * faulting address.  Sent between the stack and PROCESS_EXIT. */
static size_t crash_frame(uint8_t *b, int sig, const siginfo_t *si)
{
	uint32_t len = PROTO_FIXED(crash), tid = (uint32_t)syscall(SYS_gettid);
	uint16_t type = PROTO_CRASH, flags = 0;
	int32_t code = sig, si_code = si ? si->si_code : 0;
	/* si_addr means something for faults; SIGABRT's siginfo holds a pid there. */
	bool fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
	uint64_t addr = si && fault ? (uint64_t)(uintptr_t)si->si_addr : 0;
	memset(b, 0, len);
	memcpy(b, &len, 4);
	memcpy(b + 4, &type, 2);
	memcpy(b + 6, &flags, 2);
	memcpy(b + PROTO_OFF(crash, tid), &tid, 4);
	memcpy(b + PROTO_OFF(crash, code), &code, 4);
	memcpy(b + PROTO_OFF(crash, si_code), &si_code, 4);
	memcpy(b + PROTO_OFF(crash, fault_addr), &addr, 8);
	return len;
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uctx)
{
	int saved = errno;
	int fd = atomic_load(&sc_exit_fd);

	if (fd >= 0) {
		/* Take the socket from the agent thread between two of its writes;
		 * a second crashing thread finds it taken and stays silent. */
		int got = 0;
		for (int i = 0; i < CLAIM_TRIES && !got; i++) {
			int idle = 0;
			if (atomic_compare_exchange_strong(&sc_sock_owner, &idle, 2)) {
				got = 1;
			} else if (atomic_load(&sc_sock_owner) == 2) {
				break;
			} else {
				struct timespec ts = {0, 100000};
				nanosleep(&ts, NULL);
			}
		}
		if (got) {
			uint8_t frame[64];
			size_t rest = atomic_load(&sc_exit_rest_len);
			static uint8_t stack[PROTO_HDR_SIZE + 32 + 8 * CRASH_FRAMES];
			if (rest)
				write_all(fd, atomic_load(&sc_exit_rest), rest);
			write_all(fd, stack, crash_stack_frame(stack, uctx));
			write_all(fd, frame, crash_frame(frame, sig, si));
			write_all(fd, frame, exit_frame(frame, sig));
		}
	}
	/* SA_RESETHAND restored the default action; the signal is blocked while
	 * we run, so it lands (and ends the process) as soon as we return. */
	raise(sig);
	errno = saved;
}

void sc_exit_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	(void)on_exit(on_process_exit, NULL);
	for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
		struct sigaction old, sa;
		/* An application that handles the signal itself keeps its handler. */
		if (sigaction(fatal_signals[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_fatal_signal;
		/* SA_ONSTACK: a thread that overflowed its stack has no room left
		 * on it for the handler; on its alternate stack the handler runs. */
		sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(fatal_signals[i], &sa, NULL) == 0 && fatal_signals[i] == SIGSEGV)
			sc_altstack_enable(); /* a stack overflow arrives as SIGSEGV */
	}
}
