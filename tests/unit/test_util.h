/* test_util.h - what unit tests share: a per-test watchdog, so that a broken
 * behaviour that makes a test wait (a cancellation that never arrives, a
 * joiner that never stops the others) fails in seconds rather than after the
 * test's own long sleeps or the runner's TEST_TIMEOUT.
 *
 * Use: test_watchdog(5) in a setup function (or at the top of a test) and
 * test_watchdog(0) in the teardown.  The limit is multiplied by
 * TEST_WATCHDOG_SCALE (default 1; 3 under a sanitizer) and the watchdog is
 * off with TEST_WATCHDOG_SCALE=0 (for a debugger).
 *
 * And test_without_agent(argv) first thing in main: for tests that observe
 * the runtime themselves or count its threads. */
#ifndef SCOPE_TEST_UTIL_H
#define SCOPE_TEST_UTIL_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_WATCHDOG_SLOWER 3
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TEST_WATCHDOG_SLOWER 3
#endif
#endif
#ifndef TEST_WATCHDOG_SLOWER
#define TEST_WATCHDOG_SLOWER 1
#endif

static unsigned test_watchdog_limit;

static void test_watchdog_fired(int sig)
{
	char msg[128] = "watchdog: the test still runs after ";
	char num[16];
	int n = 0;
	unsigned v = test_watchdog_limit;

	(void)sig;
	do
		num[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < (int)sizeof num);
	size_t len = strlen(msg);
	while (n > 0)
		msg[len++] = num[--n];
	const char *tail = " s: a behaviour that should end it did not (a hang)\n";
	memcpy(msg + len, tail, strlen(tail));
	len += strlen(tail);
	/* Only async-signal-safe calls from here on. */
	if (write(2, msg, len) < 0)
		_exit(124);
	_exit(124);
}

/* Arms (seconds > 0) or disarms (0) the watchdog of the running test. */
static inline void test_watchdog(unsigned seconds)
{
	const char *env = getenv("TEST_WATCHDOG_SCALE");
	unsigned scale = env && *env ? (unsigned)strtoul(env, NULL, 10) : TEST_WATCHDOG_SLOWER;

	if (seconds == 0 || scale == 0) {
		alarm(0);
		return;
	}
	test_watchdog_limit = seconds * scale;
	signal(SIGALRM, test_watchdog_fired);
	alarm(test_watchdog_limit);
}

/* Runs this binary again with SCOPED_DISABLE=1 unless it is set: libscope's
 * constructor, which runs before main, then starts no agent (which would
 * dial the user's daemon, and add a thread and events of its own). */
static inline void test_without_agent(char **argv)
{
	if (getenv("SCOPED_DISABLE"))
		return;
	setenv("SCOPED_DISABLE", "1", 1);
	execv("/proc/self/exe", argv);
	fprintf(stderr, "cannot re-execute /proc/self/exe: %s\n", strerror(errno));
	exit(1);
}

#endif
