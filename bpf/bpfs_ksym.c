/* bpfs_ksym.c - kernel text symbols from /proc/kallsyms, read once and
 * searched by address, to name the frames of captured kernel stacks. */
#include "bpfs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Caps on what a (possibly odd) kallsyms can make us hold. */
#define KSYMS_MAX 4000000
#define KSYM_NAME_MAX 256

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset into names */
};

struct bpfs_ksyms {
	struct ksym *syms;
	size_t n;
	char *names;
	size_t names_len, names_cap;
};

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

static int add_name(struct bpfs_ksyms *ks, const char *name, size_t len, uint32_t *off)
{
	if (ks->names_len + len + 1 > ks->names_cap) {
		size_t cap = ks->names_cap ? ks->names_cap * 2 : 1 << 20;
		char *p;

		while (cap < ks->names_len + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX)
			return -E2BIG;
		p = realloc(ks->names, cap);
		if (!p)
			return -ENOMEM;
		ks->names = p;
		ks->names_cap = cap;
	}
	*off = (uint32_t)ks->names_len;
	memcpy(ks->names + ks->names_len, name, len);
	ks->names[ks->names_len + len] = '\0';
	ks->names_len += len + 1;
	return 0;
}

/* Parses "ffffffff81000000 T name [module]"; returns 1 for a text symbol,
 * 0 for a line to skip. */
static int parse_line(char *line, uint64_t *addr, char **name, size_t *len)
{
	char *end, *type;

	*addr = strtoull(line, &end, 16);
	if (end == line || *end != ' ')
		return 0;
	type = end + 1;
	if (!strchr("tTwW", *type) || type[1] != ' ')
		return 0;
	*name = type + 2;
	*len = strcspn(*name, " \t\n");
	return *len > 0 && *len < KSYM_NAME_MAX;
}

int bpfs_ksyms_load(struct bpfs_ksyms **out, const char *path, char *err, size_t errlen)
{
	struct bpfs_ksyms *ks;
	size_t cap = 0, nonzero = 0;
	char line[512];
	FILE *f;
	int rc = 0;

	*out = NULL;
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		snprintf(err, errlen, "cannot read kernel symbols from %s: %s", path,
			 strerror(errno));
		return rc;
	}
	ks = calloc(1, sizeof(*ks));
	if (!ks) {
		fclose(f);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		uint64_t addr;
		size_t len;
		char *name;

		if (!parse_line(line, &addr, &name, &len))
			continue;
		if (ks->n == KSYMS_MAX)
			break;
		if (ks->n == cap) {
			size_t ncap = cap ? cap * 2 : 1 << 16;
			struct ksym *p = realloc(ks->syms, ncap * sizeof(*p));

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			ks->syms = p;
			cap = ncap;
		}
		rc = add_name(ks, name, len, &ks->syms[ks->n].name);
		if (rc)
			break;
		ks->syms[ks->n++].addr = addr;
		nonzero += addr != 0;
	}
	fclose(f);
	if (!rc && nonzero == 0) {
		rc = -EPERM;
		snprintf(err, errlen,
			 "%s shows no addresses (kptr_restrict); kernel frames stay unnamed", path);
	}
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory reading %s", path);
		bpfs_ksyms_free(ks);
		return rc;
	}
	if (ks->n > 1)
		qsort(ks->syms, ks->n, sizeof(*ks->syms), ksym_cmp);
	*out = ks;
	return 0;
}

const char *bpfs_ksyms_find(const struct bpfs_ksyms *ks, uint64_t addr)
{
	size_t lo = 0, hi;

	if (!ks || ks->n == 0 || addr < ks->syms[0].addr)
		return NULL;
	hi = ks->n;
	/* Last symbol whose address is <= addr. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	/* The last symbol has no known end: only trust it within a page. */
	if (lo + 1 == ks->n && addr - ks->syms[lo].addr >= 4096)
		return NULL;
	return ks->names + ks->syms[lo].name;
}

size_t bpfs_ksyms_count(const struct bpfs_ksyms *ks)
{
	return ks ? ks->n : 0;
}

void bpfs_ksyms_free(struct bpfs_ksyms *ks)
{
	if (!ks)
		return;
	free(ks->syms);
	free(ks->names);
	free(ks);
}
