/* jdkdump.h - turns the daemon's `dump` reply into the JDK's JSON thread
 * dump (format version 2) with scoped's extra members, and writes dump files.
 * Shared by scopecmd and scopetop; docs/scopecmd.md describes the output. */
#ifndef DUMP_JDKDUMP_H
#define DUMP_JDKDUMP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../common/jv.h"

/* Caps on what one dump reply may make us build; past them the dump is
 * marked incomplete rather than refused. */
#define JDKDUMP_MAX_FRAMES 512 /* frames kept per thread */
#define JDKDUMP_MAX_STR 1024   /* bytes kept of any name, site or value */

/* Builds the dump from reply (borrowed): a `dump` reply of the control
 * protocol, {"process":…, "model":…, "source":…, "stacks":[…], …}.  Any
 * member may be missing or malformed: what is usable is used, the rest is
 * left out, nothing crashes.  Returns a new object {"threadDump":{…}}
 * (json_decref()), or NULL with a sentence in err when reply is not an
 * object or memory ran out. */
json_t *jdkdump_build(const json_t *reply, char *err, size_t errlen);

/* The same from a reply read with common/jv.h (what ctl_request_doc()
 * gives), without jansson's parse: the fast path for large dumps. */
json_t *jdkdump_build_doc(const jv *reply, char *err, size_t errlen);

/* The same dump as JSON text, written straight from reply without a tree
 * in between: byte for byte what jansson prints of jdkdump_build_doc()'s
 * result with JSON_INDENT(2), and a final newline.  Returns new text
 * (free()) and its length in *len, or NULL with a sentence in err. */
char *jdkdump_json_doc(const jv *reply, size_t *len, char *err, size_t errlen);

/* Where a dump's text holds what differs between two dumps of a process
 * in which nothing moved: the dump's time (the document's and each
 * thread's), captureNs and maxPauseNs.  Each mark is a value's text (the
 * quotes of a string included), in the order of the text. */
enum jdkdump_mark_kind {
	JDKDUMP_MARK_TIME,
	JDKDUMP_MARK_CAPTURE_NS,
	JDKDUMP_MARK_MAX_PAUSE_NS,
	/* A thread's "state" and "blockedIn", where they are written from its
	 * own stack entry's state and blocked_in alone (tid says whose): a
	 * dump in which only those moved is the last one's text with them
	 * replaced (jdkdump_json_remark()'s moved). */
	JDKDUMP_MARK_STATE,
	JDKDUMP_MARK_BLOCKED_IN,
};
struct jdkdump_mark {
	size_t at, len;
	enum jdkdump_mark_kind kind;
	int64_t tid; /* STATE and BLOCKED_IN: the thread's */
};
/* A thread whose stack entry's state or blocked_in (kind) is now the JSON
 * value raw (rawlen bytes, as the reply has it). */
struct jdkdump_moved {
	int64_t tid;
	enum jdkdump_mark_kind kind;
	const char *raw;
	size_t rawlen;
};
struct jdkdump_marks {
	struct jdkdump_mark *m;
	size_t n, cap;
	bool failed; /* memory ran out: the marks are not all there */
};
void jdkdump_marks_free(struct jdkdump_marks *m);

/* jdkdump_json_doc() that also fills *marks (emptied first). */
char *jdkdump_json_doc_marked(const jv *reply, size_t *len, struct jdkdump_marks *marks, char *err,
			      size_t errlen);

/* The values the marks stand for: the reply's model.now_ms as a number,
 * capture_ns and max_pause_ns (a negative one is written null). */
struct jdkdump_moment {
	double now_ms;
	int64_t capture_ns, max_pause_ns;
};

/* The text of a dump made with jdkdump_json_doc_marked() (len bytes, its
 * marks) with the marked values those of now instead: byte for byte what
 * rendering a reply that differs from the first in those three members
 * only gives.  Returns new text (free()) with its length and, in *out
 * (emptied first), its marks; NULL when memory ran out. */
char *jdkdump_json_remark(const char *text, size_t len, const struct jdkdump_marks *marks,
			  const struct jdkdump_moment *now, size_t *outlen,
			  struct jdkdump_marks *out);

/* The same for a reply that also differs in the stack entries' state or
 * blocked_in values listed in moved (nmoved, each tid and kind at most
 * once): byte for byte what rendering that reply gives.  NULL also when
 * one of them has no mark in text, or its new value is not one the mark
 * can stand for (a state the JDK does not have): render it afresh. */
#define JDKDUMP_MAX_MOVED 16 /* more: a render is as cheap */
char *jdkdump_json_remark_moved(const char *text, size_t len, const struct jdkdump_marks *marks,
				const struct jdkdump_moment *now, const struct jdkdump_moved *moved,
				size_t nmoved, size_t *outlen, struct jdkdump_marks *out);

/* jdkdump_json_remark() in place, when every new value is as long as the
 * one it replaces (the times always are); false, with text untouched, when
 * not. */
bool jdkdump_json_remark_inplace(char *text, size_t len, const struct jdkdump_marks *marks,
				 const struct jdkdump_moment *now);

/* Formats ms since the Unix epoch as ISO-8601 UTC with milliseconds
 * ("2026-11-29T19:35:06.123Z") into buf.  Out-of-range input gives
 * "1970-01-01T00:00:00.000Z".  Returns buf. */
char *jdkdump_iso_time(double ms, char *buf, size_t len);

/* Writes len bytes of data to path as the calling user.  Without overwrite
 * the file is created with O_EXCL (an existing path is -EEXIST); with it the
 * data goes to a temporary file in the same directory that is then renamed
 * over path, so readers never see half a dump.  Returns 0 or a negative errno
 * with a sentence in err. */
int jdkdump_write_file(const char *path, const char *data, size_t len, bool overwrite, char *err,
		       size_t errlen);

/* What fills a dump file: fill(fd, arg) writes the whole dump to fd and
 * returns 0 or a negative errno. */
struct jdkdump_fill {
	int (*fill)(int fd, void *arg);
	void *arg;
};

/* As jdkdump_write_file(), with the contents written by f (a failure
 * leaves no file behind, and replaces nothing). */
int jdkdump_write_file_with(const char *path, const struct jdkdump_fill *f, bool overwrite,
			    char *err, size_t errlen);

#endif
