/* symbolize.h - turns return addresses of an instrumented process into
 * function, file:line and module, with libdw and a cache by module and offset. */
#ifndef DAEMON_SYMBOLIZE_H
#define DAEMON_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;

/* One resolved frame.  Strings are borrowed from the symbolizer and stay
 * valid until the next sym_lookup() that misses the cache, or sym_free(). */
struct sym_frame {
	const char *func, *file, *module; /* NULL when unknown */
	int line;                         /* 0 when unknown */
	uint64_t offset;                  /* address - module start */
};

/* New symbolizer (NULL on out of memory).  max_entries caps the cache (0: 256k). */
struct symbolizer *sym_new(size_t max_entries);
void sym_free(struct symbolizer *s);

/* Reports the modules of a live process (through /proc/PID/maps) and loads
 * their symbol tables, so the first stacks request is fast.  starttime tells a
 * reused pid apart.  0 or a negative errno. */
int sym_attach(struct symbolizer *s, pid_t pid, unsigned long long starttime);

/* The process is gone: release its libdw state, keep its module map so
 * addresses already captured still resolve from the cache. */
void sym_process_exited(struct symbolizer *s, pid_t pid, unsigned long long starttime);

/* Forget the process entirely. */
void sym_forget(struct symbolizer *s, pid_t pid, unsigned long long starttime);

/* Resolves addr in pid.  is_return: addr is a return address (every frame
 * but the top), so the call site is looked up at addr - 1.  Always fills
 * *out (all-unknown when nothing matched); returns true when a module was found. */
bool sym_lookup(struct symbolizer *s, pid_t pid, unsigned long long starttime, uint64_t addr,
		bool is_return, struct sym_frame *out);

/* Cache statistics, for tests and status. */
void sym_stats(const struct symbolizer *s, uint64_t *hits, uint64_t *misses, size_t *entries);

#endif
