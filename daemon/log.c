/* log.c - leveled logging for scoped: one line per message, to stderr or a
 * file (each line with its UTC time) or to syslog. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static enum log_level threshold = LOG_LVL_INFO;
static int use_syslog;
static FILE *log_file; /* --log-file, or NULL for stderr */

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
	if (log_file)
		to_syslog = 0;
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

int log_open_file(const char *path, char *err, size_t errlen)
{
	/* Appending keeps a rotation by copy-and-truncate working; 0640 keeps
	 * other users out of what the daemon says about their processes. */
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0640);
	FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
	if (!f) {
		snprintf(err, errlen, "cannot open the log file %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	if (log_file)
		fclose(log_file);
	log_file = f;
	use_syslog = 0;
	return 0;
}

/* "2026-12-01T19:58:01.123Z ": the UTC time a line is written, except on a
 * stderr that systemd's journal reads (it stamps lines itself). */
static void stamp(FILE *out, char *buf, size_t len)
{
	buf[0] = '\0';
	if (out == stderr && getenv("JOURNAL_STREAM"))
		return;
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03ldZ ", ts.tv_nsec / 1000000);
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
	if (use_syslog) {
		syslog(levels[level].syslog_prio, "%s", line);
		return;
	}
	FILE *out = log_file ? log_file : stderr;
	char when[40];
	stamp(out, when, sizeof when);
	fprintf(out, "%sscoped[%d]: %s: %s\n", when, (int)getpid(), levels[level].name, line);
}
