/* procstat.c - /proc/PID/stat, parsed once for the agent and the daemon. */
#include "procstat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int proc_stat_read(pid_t pid, uint32_t tid, struct proc_stat *st)
{
	char path[64], buf[1024];
	char who[24] = "self";

	st->state = 0;
	st->starttime = 0;
	st->exit_code = -1;
	if (pid)
		snprintf(who, sizeof who, "%d", (int)pid);
	if (tid)
		snprintf(path, sizeof path, "/proc/%s/task/%u/stat", who, tid);
	else
		snprintf(path, sizeof path, "/proc/%s/stat", who);
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return -EINVAL;
	p += 2;
	st->state = *p;
	/* Field 3 is the state; count the remaining fields by spaces. */
	int field = 3;
	for (char *tok = p; tok && *tok; field++) {
		if (field == 22)
			st->starttime = strtoull(tok, NULL, 10);
		else if (field == 52)
			st->exit_code = (int)strtol(tok, NULL, 10);
		tok = strchr(tok, ' ');
		if (tok)
			tok++;
	}
	return 0;
}
