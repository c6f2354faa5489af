/* log.c - leveled logging for scoped: one line per message, stderr or syslog. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

static enum log_level threshold = LOG_LVL_INFO;
static int use_syslog;

static const struct {
	const char *name;
	int syslog_prio;
} levels[] = {
	[LOG_LVL_ERROR] = {"error", LOG_ERR},
	[LOG_LVL_WARN] = {"warn", LOG_WARNING},
	[LOG_LVL_INFO] = {"info", LOG_INFO},
	[LOG_LVL_DEBUG] = {"debug", LOG_DEBUG},
};

void log_setup(enum log_level level, int to_syslog)
{
	threshold = level;
	if (to_syslog && !use_syslog)
		openlog("scoped", LOG_PID | LOG_NDELAY, LOG_DAEMON);
	use_syslog = to_syslog;
}

int log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++)
		if (name && strcmp(name, levels[i].name) == 0)
			return (int)i;
	return -1;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	if (level > threshold)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (use_syslog)
		syslog(levels[level].syslog_prio, "%s", line);
	else
		fprintf(stderr, "scoped: %s: %s\n", levels[level].name, line);
}
