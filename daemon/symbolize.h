/* symbolize.h - turns return addresses of an instrumented process into
 * function, file:line and module, with libdw and a cache by module and offset. */
#ifndef DAEMON_SYMBOLIZE_H
#define DAEMON_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;

/* One resolved frame.  Strings are borrowed from the symbolizer and stay
 * valid until the next lookup that misses the cache, or sym_free(). */
struct sym_frame {
	const char *func, *file, *module; /* NULL when unknown */
	int line;			  /* 0 when unknown */
	uint64_t offset;		  /* address - module start */
	bool inlined; /* a function inlined into the next frame (same address) */
};

/* Inline frames kept per address; deeper inlining keeps the innermost. */
#define SYM_MAX_INLINE 16

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

/* Resolves addr in pid to its physical frame: the function that holds the
 * code (ELF symbol) and, when code of other functions is inlined there, the
 * line of the outermost inlined call.  is_return: addr is a return address
 * (every frame but the top), so the call site is looked up at addr - 1.
 * Always fills *out (all-unknown when nothing matched); returns true when a
 * module was found. */
bool sym_lookup(struct symbolizer *s, pid_t pid, unsigned long long starttime, uint64_t addr,
		bool is_return, struct sym_frame *out);

/* The same address as the frames a debugger shows: the innermost inlined
 * function first (its own file:line), each enclosing inlined function at the
 * line of the call it inlines, and last the physical frame (what sym_lookup
 * gives); all but the last have `inlined` set.  Writes at most max (>= 1)
 * frames to out and returns how many (always >= 1); the return value of
 * sym_lookup goes to *found when found is not NULL. */
size_t sym_lookup_inline(struct symbolizer *s, pid_t pid, unsigned long long starttime,
			 uint64_t addr, bool is_return, struct sym_frame *out, size_t max,
			 bool *found);

/* Changes whenever an address of the process may resolve otherwise than
 * before (its modules read again, the process gone, the cache dropped);
 * 0 when the symbolizer does not know the process.  A dump written from
 * the same frames at the same generation says the same. */
uint64_t sym_generation(const struct symbolizer *s, pid_t pid, unsigned long long starttime);

/* Cache statistics, for tests and status. */
void sym_stats(const struct symbolizer *s, uint64_t *hits, uint64_t *misses, size_t *entries);

/* Module files opened so far, for their symbols and DWARF, when a process's
 * modules were reported or looked up (not sym_prewarm's).  Each is opened
 * once, by build-id, for every process that maps it, and kept while it is
 * among the 128 used last; a module without a build-id is read through each
 * process's own view. */
uint64_t sym_files_opened(const struct symbolizer *s);

/* Starts reading the DWARF of the daemon's own libc on a thread of its own,
 * the module file most stacks hold (with libc's debug file installed, 80-90
 * ms of inflating here): a lookup that needs it takes it when the thread is
 * done, or waits for it.  0, -ENOENT (no libc with a build-id loaded), or
 * the error of starting the thread. */
int sym_prewarm(struct symbolizer *s);
/* Whether a lookup took the file sym_prewarm read. */
bool sym_prewarm_used(const struct symbolizer *s);

#endif
