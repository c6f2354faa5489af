/* log.h - scoped's leveled logging, to stderr, a file or syslog. */
#ifndef DAEMON_LOG_H
#define DAEMON_LOG_H

#include <stddef.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN = 1, LOG_LVL_INFO = 2, LOG_LVL_DEBUG = 3 };

/* Sets the threshold and the sink (to_syslog: syslog(3) as "scoped", else
 * stderr; a log file once opened wins over both).  Lines on stderr or in the
 * file read "<UTC time> scoped[pid]: <level>: <message>". */
void log_setup(enum log_level level, int to_syslog);

/* Sends every later line to path (appended, created 0640), each with its
 * UTC time, instead of stderr or syslog.  Returns 0, or -1 with a sentence
 * in err. */
int log_open_file(const char *path, char *err, size_t errlen);

/* Parses "error", "warn", "info" or "debug"; -1 for anything else. */
int log_level_parse(const char *name);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
