/* errors.c - error messages, version and clock: the small functions every
 * caller of libscope uses. */
#include <string.h>
#include <time.h>

#include "rt.h"

static const char *const scope_messages[] = {
    [-SCOPE_EFAILED - SCOPE_EBASE] = "a subtask failed (scope_failure() tells which and why)",
    [-SCOPE_ENOFORKS - SCOPE_EBASE] = "nothing was forked, so no subtask could succeed",
    [-SCOPE_EREJECTED - SCOPE_EBASE] = "the pool rejected the task (saturated, abort policy)",
    [-SCOPE_EDISCARDED - SCOPE_EBASE] = "the pool discarded the task (saturated, discard policy)",
    [-SCOPE_ESTRUCTURE - SCOPE_EBASE] =
	"structure violation: inner scopes were still open and have been closed",
    [-SCOPE_EJOINED - SCOPE_EBASE] = "the scope was already joined (join once, fork before join)",
    [-SCOPE_ESHUTDOWN - SCOPE_EBASE] = "the pool is shut down and takes no new tasks",
    [-SCOPE_EEXITED - SCOPE_EBASE] =
	"the thread running the subtask exited (pthread_exit) before the subtask returned",
};

const char *scope_strerror(int err)
{
	/* In 64 bits: -INT_MIN, or INT_MAX less the base, overflow an int. */
	int64_t i = -(int64_t)err - SCOPE_EBASE;

	if (err == 0)
		return "success";
	if (i > 0 && (size_t)i < sizeof(scope_messages) / sizeof(scope_messages[0]) &&
	    scope_messages[i])
		return scope_messages[i];
	if (err < 0 && err > -SCOPE_EBASE)
		return strerrordesc_np(-err) ? strerrordesc_np(-err) : "unknown error";
	return "unknown error";
}

const char *scope_version(void)
{
	return SCOPE_VERSION_STRING;
}

int64_t scope_now(void)
{
	struct timespec ts;

	/* CLOCK_MONOTONIC is served by the vDSO: no system call. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
