/* symbolize.c - libdw (dwfl) symbolization with a cache keyed by module
 * build-id (or path) and offset, shared by every process mapping the module;
 * and each module file's debug information read once for all of them. */
#include "symbolize.h"

#include "loop.h"
#include "strtab.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sym_module {
	uint64_t start, end;
	const char *key;  /* interned build-id hex, or the path */
	const char *path; /* interned */
	bool by_id;	  /* key is a build-id */
};

/* A module's file opened once, by build-id, for every process that maps it:
 * the DWARF its addresses are looked up in (compile units, line tables,
 * inlined calls).  libdw reads a module's debug information, and inflates
 * its compressed sections, once per Dwfl: per process, that was libc's
 * debug file (libc6-dbg, 2.3 MB of compressed .debug_info) read again for
 * every new process whose stacks held a libc address the cache had not
 * seen, 80-90 ms each time here. */
struct sym_file {
	const char *key; /* interned build-id hex; NULL: free */
	Dwfl *dwfl;	 /* offline; NULL: the file could not be opened as that module */
	Dwfl_Module *mod;
	Dwarf_Addr low; /* the module's first address in dwfl */
	uint64_t used;	/* the lookup clock when last used */
};

/* Module files kept open (least recently used dropped first): more than
 * one process maps (this daemon's test binaries map 45). */
#define SYM_FILES 128

/* The daemon's own libc read ahead on a thread of its own (sym_prewarm): the
 * module most stacks hold, and with libc6-dbg installed the one whose DWARF
 * costs most to read.  The thread writes dwfl, mod and low, then done; the
 * event loop's thread takes them into the files once done (pthread_join).
 * libdw is used on both threads meanwhile, each on handles of its own. */
struct prewarm {
	int state; /* PW_*: the event loop's thread's own */
	pthread_t thread;
	char key[2 * 64 + 1]; /* libc's build-id (hex), read from memory at the start */
	char path[4096];
	_Atomic int done;
	Dwfl *dwfl; /* NULL: the file could not be read as that module */
	Dwfl_Module *mod;
	Dwarf_Addr low;
};

enum { PW_NONE, PW_RUNNING, PW_JOINED };

struct sym_proc {
	struct sym_proc *next;
	pid_t pid;
	unsigned long long starttime;
	Dwfl *dwfl; /* NULL once the process exited */
	struct sym_module *mods;
	size_t nmods;
	int64_t refreshed_ns;
	uint64_t gen; /* the symbolizer's gen when its modules last changed */
};

/* An inlined function at an address: its name and where in it the code is. */
struct sym_inl {
	const char *func, *file;
	int line;
};

struct cache_ent {
	const char *key; /* NULL: free slot */
	uint64_t off;
	const char *func, *file; /* the physical frame */
	int line;
	unsigned ninl;
	struct sym_inl *inl; /* innermost first; owned */
};

struct symbolizer {
	struct sym_proc *procs;
	struct strtab keys;  /* module keys and paths: few, kept */
	struct strtab names; /* functions and files: flushed with the cache */
	struct cache_ent *tab;
	size_t cap, n, max;
	uint64_t hits, misses;
	/* Counts every change that can make an address resolve otherwise: a
	 * process's modules read again or gone, the cache dropped (an exited
	 * process's addresses then resolve no more). */
	uint64_t gen, flushed_gen;
	struct sym_file files[SYM_FILES];
	uint64_t file_clock, files_opened;
	struct prewarm pw;
	bool prewarm_used; /* the prewarm's file was taken into the files */
};

static void cache_flush(struct symbolizer *s);

static const Dwfl_Callbacks proc_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
};

static const Dwfl_Callbacks file_callbacks = {
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

struct symbolizer *sym_new(size_t max_entries)
{
	struct symbolizer *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->max = max_entries ? max_entries : 256 * 1024;
	s->keys.max_bytes = 16u << 20;
	s->names.max_bytes = 64u << 20;
	return s;
}

static void proc_release(struct sym_proc *p)
{
	if (p->dwfl)
		dwfl_end(p->dwfl);
	free(p->mods);
	free(p);
}

static void prewarm_take(struct symbolizer *s);

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	prewarm_take(s);
	while (s->procs) {
		struct sym_proc *p = s->procs;
		s->procs = p->next;
		proc_release(p);
	}
	for (size_t i = 0; i < SYM_FILES; i++)
		if (s->files[i].dwfl)
			dwfl_end(s->files[i].dwfl);
	strtab_free(&s->keys);
	cache_flush(s);
	strtab_free(&s->names);
	free(s);
}

static struct sym_proc *find_proc(struct symbolizer *s, pid_t pid, unsigned long long st)
{
	for (struct sym_proc *p = s->procs; p; p = p->next)
		if (p->pid == pid && p->starttime == st)
			return p;
	return NULL;
}

struct collect {
	struct symbolizer *s;
	struct sym_module *mods;
	size_t n, cap;
};

/* A build-id's n bytes as lowercase hex into out (2n + 1 bytes). */
static void build_id_hex(const unsigned char *bits, size_t n, char *out)
{
	static const char digit[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digit[bits[i] >> 4];
		out[2 * i + 1] = digit[bits[i] & 15];
	}
	out[2 * n] = '\0';
}

static void warm_up(struct symbolizer *s, const struct sym_module *m, Dwfl_Module *pmod);

static int collect_module(Dwfl_Module *mod, void **user, const char *name, Dwarf_Addr start,
			  void *arg)
{
	(void)user;
	(void)start;
	struct collect *c = arg;
	Dwarf_Addr low = 0, high = 0;
	dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
	/* The file, for its build-id (not its symbols: warm_up). */
	Dwarf_Addr bias;
	(void)dwfl_module_getelf(mod, &bias);
	const unsigned char *bits;
	GElf_Addr vaddr;
	int nbits = dwfl_module_build_id(mod, &bits, &vaddr);
	char hex[2 * 64 + 1];
	const char *key = name ? name : "?";
	bool by_id = nbits > 0 && nbits <= 64;
	if (by_id) {
		build_id_hex(bits, (size_t)nbits, hex);
		key = hex;
	}
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 32;
		struct sym_module *m = realloc(c->mods, cap * sizeof *m);
		if (!m)
			return DWARF_CB_ABORT;
		c->mods = m;
		c->cap = cap;
	}
	const char *path = name ? name : "?";
	c->mods[c->n++] =
	    (struct sym_module){low, high, strtab_intern(&c->s->keys, key, strlen(key)),
				strtab_intern(&c->s->keys, path, strlen(path)), by_id};
	warm_up(c->s, &c->mods[c->n - 1], mod);
	return DWARF_CB_OK;
}

static int report(struct symbolizer *s, struct sym_proc *p)
{
	dwfl_report_begin(p->dwfl);
	int rc = dwfl_linux_proc_report(p->dwfl, p->pid);
	dwfl_report_end(p->dwfl, NULL, NULL);
	if (rc != 0)
		return rc > 0 ? -rc : -ESRCH;
	struct collect c = {s, NULL, 0, 0};
	dwfl_getmodules(p->dwfl, collect_module, &c, 0);
	free(p->mods);
	p->mods = c.mods;
	p->nmods = c.n;
	p->refreshed_ns = loop_now_ns();
	p->gen = ++s->gen;
	return 0;
}

int sym_attach(struct symbolizer *s, pid_t pid, unsigned long long starttime)
{
	struct sym_proc *p = find_proc(s, pid, starttime);
	if (p)
		return p->dwfl ? report(s, p) : -ESRCH;
	p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->starttime = starttime;
	p->dwfl = dwfl_begin(&proc_callbacks);
	if (!p->dwfl) {
		free(p);
		return -ENOMEM;
	}
	int rc = report(s, p);
	if (rc < 0) {
		proc_release(p);
		return rc;
	}
	p->next = s->procs;
	s->procs = p;
	return 0;
}

void sym_process_exited(struct symbolizer *s, pid_t pid, unsigned long long starttime)
{
	struct sym_proc *p = find_proc(s, pid, starttime);
	if (p && p->dwfl) {
		dwfl_end(p->dwfl);
		p->dwfl = NULL;
		p->gen = ++s->gen;
	}
}

uint64_t sym_generation(const struct symbolizer *s, pid_t pid, unsigned long long starttime)
{
	const struct sym_proc *p = s ? find_proc((struct symbolizer *)s, pid, starttime) : NULL;
	if (!p)
		return 0;
	return p->gen > s->flushed_gen ? p->gen : s->flushed_gen;
}

void sym_forget(struct symbolizer *s, pid_t pid, unsigned long long starttime)
{
	for (struct sym_proc **pp = &s->procs; *pp; pp = &(*pp)->next)
		if ((*pp)->pid == pid && (*pp)->starttime == starttime) {
			struct sym_proc *p = *pp;
			*pp = p->next;
			proc_release(p);
			return;
		}
}

static size_t slot_of(const struct symbolizer *s, const char *key, uint64_t off)
{
	uint64_t h =
	    ((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull) ^ (off * 0xC2B2AE3D27D4EB4Full);
	return (size_t)(h >> 20) & (s->cap - 1);
}

static struct cache_ent *cache_find(struct symbolizer *s, const char *key, uint64_t off)
{
	if (!s->cap)
		return NULL;
	for (size_t i = slot_of(s, key, off);; i = (i + 1) & (s->cap - 1)) {
		struct cache_ent *e = &s->tab[i];
		if (!e->key)
			return NULL;
		if (e->key == key && e->off == off)
			return e;
	}
}

static void cache_flush(struct symbolizer *s)
{
	for (size_t i = 0; i < s->cap; i++)
		free(s->tab[i].inl);
	free(s->tab);
	s->tab = NULL;
	s->cap = s->n = 0;
	s->flushed_gen = ++s->gen;
	strtab_free(&s->names);
	s->names.max_bytes = 64u << 20;
}

/* Inserts a resolution; drops the whole cache when it reaches its cap, which
 * is simpler than LRU and costs only re-resolution. */
static const char *intern(struct symbolizer *s, const char *str)
{
	return str ? strtab_intern(&s->names, str, strlen(str)) : NULL;
}

static void cache_put(struct symbolizer *s, const char *key, uint64_t off, const char *func,
		      const char *file, int line, const struct sym_inl *inl, unsigned ninl)
{
	if (s->n >= s->max)
		cache_flush(s);
	if ((s->n + 1) * 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		struct cache_ent *t = calloc(cap, sizeof *t);
		if (!t)
			return;
		struct cache_ent *old = s->tab;
		size_t oldcap = s->cap;
		s->tab = t;
		s->cap = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].key) {
				size_t j = slot_of(s, old[i].key, old[i].off);
				while (t[j].key)
					j = (j + 1) & (cap - 1);
				t[j] = old[i];
			}
		free(old);
	}
	struct sym_inl *copy = ninl ? malloc(ninl * sizeof *copy) : NULL;
	if (ninl && !copy)
		ninl = 0; /* the physical frame still resolves */
	for (unsigned i = 0; i < ninl; i++)
		copy[i] =
		    (struct sym_inl){intern(s, inl[i].func), intern(s, inl[i].file), inl[i].line};
	size_t j = slot_of(s, key, off);
	while (s->tab[j].key)
		j = (j + 1) & (s->cap - 1);
	s->tab[j] =
	    (struct cache_ent){key, off, intern(s, func), intern(s, file), line, ninl, copy};
	s->n++;
}

static const struct sym_module *find_module(const struct sym_proc *p, uint64_t addr)
{
	for (size_t i = 0; i < p->nmods; i++)
		if (addr >= p->mods[i].start && addr < p->mods[i].end)
			return &p->mods[i];
	return NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	return slash ? slash + 1 : path;
}

/* The name of a function DIE, following an inlined instance to its
 * abstract origin (which is where the name is). */
static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &at));
	return name;
}

/* Where an inlined call is: DW_AT_call_file/line of the inlined instance. */
static void call_site(Dwarf_Die *die, Dwarf_Files *files, size_t nfiles, const char **file,
		      int *line)
{
	Dwarf_Attribute at;
	Dwarf_Word v;
	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &at), &v) == 0 && v <= INT32_MAX)
		*line = (int)v;
	if (files && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &at), &v) == 0 && v < nfiles)
		*file = base_name(dwarf_filesrc(files, v, NULL, NULL));
}

/* The compile unit holding a, and the module's bias into *bias.  libdw
 * finds it through .debug_aranges, which clang writes only when asked
 * (-gdwarf-aranges); without them dwfl_module_addrdie and
 * dwfl_module_getsrc find nothing, so the CUs' own ranges are walked. */
static Dwarf_Die *cu_of(Dwfl_Module *mod, Dwarf_Addr a, Dwarf_Addr *bias)
{
	Dwarf_Die *cu = dwfl_module_addrdie(mod, a, bias);
	if (cu)
		return cu;
	while ((cu = dwfl_module_nextcu(mod, cu, bias)) != NULL)
		if (dwarf_haspc(cu, a - *bias) > 0)
			return cu;
	return NULL;
}

/* Fills inl[] (innermost first, at most SYM_MAX_INLINE) with the functions
 * inlined at a, in compile unit cu (module bias bias), and returns how
 * many; *file and *line come in as the line table's position of a and go
 * out as the physical frame's: the call site of the outermost inlined
 * function. */
static unsigned inline_chain(Dwarf_Die *cu, Dwarf_Addr bias, Dwarf_Addr a, struct sym_inl *inl,
			     const char **file, int *line)
{
	Dwarf_Die *scopes = NULL;
	int n = cu ? dwarf_getscopes(cu, a - bias, &scopes) : -1;
	if (n <= 0) {
		free(scopes);
		return 0;
	}
	/* dwarf_getscopes mixes in the abstract origin's scopes; the
	 * containment of the concrete innermost DIE is what a stack is. */
	Dwarf_Die inner = scopes[0];
	free(scopes);
	scopes = NULL;
	n = dwarf_getscopes_die(&inner, &scopes);
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
		files = NULL;
	unsigned k = 0;
	for (int i = 0; i < n; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag == DW_TAG_subprogram || tag == DW_TAG_entry_point)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue;
		/* Past the cap the innermost are kept, and the physical frame
		 * still gets the outermost call's line. */
		if (k < SYM_MAX_INLINE)
			inl[k++] = (struct sym_inl){die_name(&scopes[i]), *file, *line};
		call_site(&scopes[i], files, nfiles, file, line);
	}
	free(scopes);
	return k;
}

/* Whether mod's build-id is key (hex). */
static bool build_id_is(Dwfl_Module *mod, const char *key)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	char hex[2 * 64 + 1];
	int n = dwfl_module_build_id(mod, &bits, &vaddr);
	if (n <= 0 || n > 64)
		return false;
	build_id_hex(bits, (size_t)n, hex);
	return !strcmp(hex, key);
}

/* path opened on its own as module name (an offline Dwfl) when its
 * build-id is key: the Dwfl, its module and first address; 0 or -1. */
static int open_offline(const char *name, const char *path, const char *key, Dwfl **dwfl,
			Dwfl_Module **mod, Dwarf_Addr *low)
{
	Dwfl *d = dwfl_begin(&file_callbacks);
	if (!d)
		return -1;
	dwfl_report_begin(d);
	Dwfl_Module *md = dwfl_report_offline(d, name, path, -1);
	dwfl_report_end(d, NULL, NULL);
	if (!md || !build_id_is(md, key)) {
		dwfl_end(d);
		return -1;
	}
	dwfl_module_info(md, NULL, low, NULL, NULL, NULL, NULL, NULL);
	*dwfl = d;
	*mod = md;
	return 0;
}

/* The files' least recently used slot (a free one first), emptied. */
static struct sym_file *file_slot(struct symbolizer *s)
{
	struct sym_file *f = &s->files[0];
	for (size_t i = 1; i < SYM_FILES; i++)
		if (s->files[i].used < f->used)
			f = &s->files[i];
	if (f->dwfl)
		dwfl_end(f->dwfl);
	*f = (struct sym_file){0};
	return f;
}

/* Opens the file libdw found for pmod (module m of a process) on its own,
 * into f; f->dwfl stays NULL when that fails or the file is not the one
 * mapped (another build-id: replaced on disk since). */
static void file_open(struct sym_file *f, const struct sym_module *m, Dwfl_Module *pmod)
{
	const char *mainfile = NULL;
	dwfl_module_info(pmod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
	if (mainfile && mainfile[0] == '/')
		(void)open_offline(m->path, mainfile, m->key, &f->dwfl, &f->mod, &f->low);
}

static void prewarm_adopt(struct symbolizer *s, const char *wait_for);

/* The shared file of module m (pmod in the process), opened on first use;
 * NULL when m has no build-id or its file cannot be opened on its own (the
 * process's own module answers then). */
static struct sym_file *shared_file(struct symbolizer *s, const struct sym_module *m,
				    Dwfl_Module *pmod)
{
	struct sym_file *f = NULL;
	if (!m->by_id || !m->key)
		return NULL;
	prewarm_adopt(s, m->key);
	for (size_t i = 0; i < SYM_FILES && !f; i++)
		if (s->files[i].key == m->key)
			f = &s->files[i];
	if (!f) {
		f = file_slot(s);
		f->key = m->key;
		file_open(f, m, pmod);
		s->files_opened += f->dwfl != NULL;
	}
	f->used = ++s->file_clock;
	return f->dwfl ? f : NULL;
}

/* When a process's modules are reported: each one's symbol table loaded,
 * so that the first lookup is cheap.  A module with a build-id is named
 * through its shared file, whose table is loaded once for every process
 * that maps it (python3's modules took 5-30 ms to load and sort for each
 * new process); the prewarm's file loads its own (not waited for here). */
static void warm_up(struct symbolizer *s, const struct sym_module *m, Dwfl_Module *pmod)
{
	if (m->by_id && m->key && s->pw.state == PW_RUNNING && !strcmp(s->pw.key, m->key))
		return;
	struct sym_file *f = shared_file(s, m, pmod);
	dwfl_module_getsymtab(f ? f->mod : pmod);
}

/* The prewarm thread: libc's file read as the shared files are, and its
 * DWARF loaded (libdw inflates every compressed debug section when it
 * opens a module's DWARF), by looking up one of its functions. */
static void *prewarm_main(void *arg)
{
	struct prewarm *pw = arg;
	Dwfl *d;
	Dwfl_Module *mod;
	if (open_offline(pw->path, pw->path, pw->key, &d, &mod, &pw->low) == 0) {
		int n = dwfl_module_getsymtab(mod);
		for (int i = 1; i < n; i++) {
			GElf_Sym sym;
			GElf_Addr addr;
			const char *name =
			    dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
			if (!name || GELF_ST_TYPE(sym.st_info) != STT_FUNC || !sym.st_size)
				continue;
			Dwarf_Addr bias;
			Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
			(void)dwfl_module_getsrc(mod, addr);
			Dwarf_Files *files;
			size_t nfiles;
			if (cu)
				(void)dwarf_getsrcfiles(cu, &files, &nfiles);
			break;
		}
		pw->dwfl = d;
		pw->mod = mod;
	}
	atomic_store_explicit(&pw->done, 1, memory_order_release);
	return NULL;
}

/* Takes the prewarm's file into the shared files once its thread ended
 * (waiting for it when wait_for names its file); at the end, sym_free. */
static void prewarm_adopt(struct symbolizer *s, const char *wait_for)
{
	struct prewarm *pw = &s->pw;
	if (pw->state != PW_RUNNING)
		return;
	if (!atomic_load_explicit(&pw->done, memory_order_acquire) &&
	    !(wait_for && !strcmp(wait_for, pw->key)))
		return;
	pthread_join(pw->thread, NULL);
	pw->state = PW_JOINED;
	const char *key = pw->dwfl ? strtab_intern(&s->keys, pw->key, strlen(pw->key)) : NULL;
	if (!key) {
		if (pw->dwfl)
			dwfl_end(pw->dwfl);
		pw->dwfl = NULL;
		return;
	}
	*file_slot(s) = (struct sym_file){key, pw->dwfl, pw->mod, pw->low, ++s->file_clock};
	s->prewarm_used = true;
	pw->dwfl = NULL;
}

static void prewarm_take(struct symbolizer *s)
{
	if (s->pw.state == PW_RUNNING) {
		pthread_join(s->pw.thread, NULL);
		s->pw.state = PW_JOINED;
		if (s->pw.dwfl)
			dwfl_end(s->pw.dwfl);
		s->pw.dwfl = NULL;
	}
}

/* The loaded libc's path and build-id, from the dynamic loader's list and
 * the build-id note in memory. */
static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct prewarm *pw = arg;
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	if (!slash || strncmp(slash + 1, "libc.so.", 8) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		const unsigned char *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
			size_t name_sz = (nh->n_namesz + 3) & ~3u,
			       desc_sz = (nh->n_descsz + 3) & ~3u;
			const unsigned char *desc = p + sizeof *nh + name_sz;
			if (desc + desc_sz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(p + sizeof *nh, "GNU", 4) && nh->n_descsz > 0 &&
			    nh->n_descsz <= 64 && strlen(info->dlpi_name) < sizeof pw->path) {
				build_id_hex(desc, nh->n_descsz, pw->key);
				strcpy(pw->path, info->dlpi_name);
				return 1;
			}
			p = desc + desc_sz;
		}
	}
	return 0;
}

int sym_prewarm(struct symbolizer *s)
{
	struct prewarm *pw = &s->pw;
	if (pw->state != PW_NONE)
		return 0;
	if (!dl_iterate_phdr(find_libc, pw))
		return -ENOENT;
	int rc = pthread_create(&pw->thread, NULL, prewarm_main, pw);
	if (rc)
		return -rc;
	pw->state = PW_RUNNING;
	return 0;
}

/* The cache entry for addr, resolved now on a miss; NULL when the address
 * is in no module or could not be resolved.  *m gets the module. */
static const struct cache_ent *resolve(struct symbolizer *s, pid_t pid,
				       unsigned long long starttime, uint64_t a,
				       const struct sym_module **mp)
{
	struct sym_proc *p = find_proc(s, pid, starttime);
	*mp = NULL;
	if (!p) {
		if (sym_attach(s, pid, starttime) < 0)
			return NULL;
		p = find_proc(s, pid, starttime);
		if (!p)
			return NULL;
	}
	const struct sym_module *m = find_module(p, a);
	/* A module loaded after the warm-up (dlopen): look again, once a second. */
	if (!m && p->dwfl && loop_now_ns() - p->refreshed_ns > 1000000000) {
		report(s, p);
		m = find_module(p, a);
	}
	if (!m)
		return NULL;
	*mp = m;
	uint64_t off = a - m->start;
	struct cache_ent *e = m->key ? cache_find(s, m->key, off) : NULL;
	if (e) {
		s->hits++;
		return e;
	}
	s->misses++;
	if (!p->dwfl || !m->key)
		return NULL; /* exited: only what the cache held */
	Dwfl_Module *mod = dwfl_addrmodule(p->dwfl, a);
	if (!mod)
		return NULL;
	/* The module's shared file answers, at the same offset: its name and,
	 * from its DWARF, file:line and inlined calls. */
	struct sym_file *sf = shared_file(s, m, mod);
	if (sf) {
		mod = sf->mod;
		a = off + sf->low;
	}
	GElf_Off symoff;
	GElf_Sym sym;
	const char *func = dwfl_module_addrinfo(mod, a, &symoff, &sym, NULL, NULL, NULL);
	/* "__libc_start_main@@GLIBC_2.34": the version is noise in a stack. */
	char plain[256];
	const char *at = func ? strchr(func, '@') : NULL;
	if (at && at > func && (size_t)(at - func) < sizeof plain) {
		memcpy(plain, func, (size_t)(at - func));
		plain[at - func] = '\0';
		func = plain;
	}
	const char *file = NULL;
	int line = 0;
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = cu_of(mod, a, &bias);
	Dwfl_Line *dl = dwfl_module_getsrc(mod, a);
	Dwarf_Line *l = !dl && cu ? dwarf_getsrc_die(cu, a - bias) : NULL;
	if (dl) {
		file = base_name(dwfl_lineinfo(dl, NULL, &line, NULL, NULL, NULL));
	} else if (l) { /* no .debug_aranges: the CU's own line table */
		const char *src = dwarf_linesrc(l, NULL, NULL);
		file = src ? base_name(src) : NULL;
		if (dwarf_lineno(l, &line) != 0)
			line = 0;
	}
	struct sym_inl inl[SYM_MAX_INLINE];
	unsigned ninl = cu ? inline_chain(cu, bias, a, inl, &file, &line) : 0;
	cache_put(s, m->key, off, func, file, line, inl, ninl);
	return cache_find(s, m->key, off);
}

size_t sym_lookup_inline(struct symbolizer *s, pid_t pid, unsigned long long starttime,
			 uint64_t addr, bool is_return, struct sym_frame *out, size_t max,
			 bool *found)
{
	uint64_t a = is_return && addr ? addr - 1 : addr;
	const struct sym_module *m = NULL;
	const struct cache_ent *e = max ? resolve(s, pid, starttime, a, &m) : NULL;
	size_t n = 0;
	if (found)
		*found = max && m;
	if (!max)
		return 0;
	/* Inlined frames past max drop from the innermost end: the frame
	 * that owns the code and its callers' view stay right. */
	unsigned ninl = e ? e->ninl : 0;
	unsigned skip = ninl + 1 > max ? ninl + 1 - (unsigned)max : 0;
	for (unsigned i = skip; i < ninl; i++)
		out[n++] = (struct sym_frame){e->inl[i].func, e->inl[i].file,  m->path,
					      e->inl[i].line, addr - m->start, true};
	out[n] = (struct sym_frame){0};
	if (m) {
		out[n].module = m->path;
		out[n].offset = addr - m->start;
	}
	if (e) {
		out[n].func = e->func;
		out[n].file = e->file;
		out[n].line = e->line;
	}
	return n + 1;
}

bool sym_lookup(struct symbolizer *s, pid_t pid, unsigned long long starttime, uint64_t addr,
		bool is_return, struct sym_frame *out)
{
	bool found;
	struct sym_frame all[SYM_MAX_INLINE + 1];
	size_t n =
	    sym_lookup_inline(s, pid, starttime, addr, is_return, all, SYM_MAX_INLINE + 1, &found);
	*out = all[n - 1];
	return found;
}

void sym_stats(const struct symbolizer *s, uint64_t *hits, uint64_t *misses, size_t *entries)
{
	*hits = s->hits;
	*misses = s->misses;
	*entries = s->n;
}

uint64_t sym_files_opened(const struct symbolizer *s)
{
	return s->files_opened;
}

bool sym_prewarm_used(const struct symbolizer *s)
{
	return s->prewarm_used;
}
