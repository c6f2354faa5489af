/* bpfstack.c - placeholder until the BPF stack source lands (issue 7):
 * every call reports that BPF capture is not built, so the daemon falls back
 * to signal mode. */
#include "bpfstack.h"

#include <errno.h>
#include <stdio.h>

int bpfstack_open(struct bpfstack **out, char *err, size_t errlen)
{
	*out = NULL;
	snprintf(err, errlen, "BPF stack capture is not built into this scoped");
	return -ENOTSUP;
}

int bpfstack_capture(struct bpfstack *b, pid_t pid, struct bpfstack_thread **threads, size_t *n,
		     char *err, size_t errlen)
{
	(void)b;
	(void)pid;
	*threads = NULL;
	*n = 0;
	snprintf(err, errlen, "BPF stack capture is not built into this scoped");
	return -ENOTSUP;
}

const char *bpfstack_ksym(struct bpfstack *b, uint64_t addr)
{
	(void)b;
	(void)addr;
	return NULL;
}

void bpfstack_close(struct bpfstack *b)
{
	(void)b;
}
