/* stackkey.c - the inputs of a dump's thread entries, copied and compared. */
#include "stackkey.h"

#include <stdlib.h>
#include <string.h>

static struct stack_key_thread key_of(const struct stack_thread *t)
{
	struct stack_key_thread k = {0};
	k.tid = t->tid;
	memcpy(k.comm, t->comm, sizeof k.comm);
	k.error = t->error;
	k.error_why = t->error_why;
	k.approximate_why = t->approximate_why;
	k.lock_class = t->lock_class;
	k.approximate = t->approximate;
	k.lock_how = t->lock_how;
	k.lock_addr = t->lock_addr;
	k.lock_owner = t->lock_owner;
	memcpy(k.lock_owner_comm, t->lock_owner_comm, sizeof k.lock_owner_comm);
	k.nframes = t->nframes;
	return k;
}

static bool key_same(const struct stack_key_thread *k, const struct stack_thread *t)
{
	return k->tid == t->tid && memcmp(k->comm, t->comm, sizeof k->comm) == 0 &&
	       k->error == t->error && k->error_why == t->error_why &&
	       k->approximate_why == t->approximate_why && k->lock_class == t->lock_class &&
	       k->approximate == t->approximate && k->lock_how == t->lock_how &&
	       k->lock_addr == t->lock_addr && k->lock_owner == t->lock_owner &&
	       memcmp(k->lock_owner_comm, t->lock_owner_comm, sizeof k->lock_owner_comm) == 0 &&
	       k->nframes == t->nframes;
}

static bool grow(void **p, size_t *cap, size_t want, size_t size)
{
	if (want <= *cap)
		return true;
	size_t ncap = *cap ? *cap : 64;
	while (ncap < want)
		ncap *= 2;
	void *np = realloc(*p, ncap * size);
	if (!np)
		return false;
	*p = np;
	*cap = ncap;
	return true;
}

bool stack_key_set(struct stack_key *k, const struct stack_thread *t, size_t n)
{
	size_t nf = 0;
	k->valid = false;
	for (size_t i = 0; i < n; i++)
		nf += t[i].nframes;
	if (!grow((void **)&k->t, &k->cap, n, sizeof *k->t) ||
	    !grow((void **)&k->frames, &k->frames_cap, nf, sizeof *k->frames))
		return false;
	nf = 0;
	for (size_t i = 0; i < n; i++) {
		k->t[i] = key_of(&t[i]);
		if (t[i].nframes)
			memcpy(k->frames + nf, t[i].frames, t[i].nframes * sizeof *k->frames);
		nf += t[i].nframes;
	}
	k->n = n;
	k->nframes = nf;
	k->valid = true;
	return true;
}

bool stack_key_same(const struct stack_key *k, const struct stack_thread *t, size_t n)
{
	if (!k->valid || k->n != n)
		return false;
	size_t nf = 0;
	for (size_t i = 0; i < n; i++) {
		if (!key_same(&k->t[i], &t[i]) || nf + t[i].nframes > k->nframes ||
		    (t[i].nframes &&
		     memcmp(k->frames + nf, t[i].frames, t[i].nframes * sizeof *t[i].frames) != 0))
			return false;
		nf += t[i].nframes;
	}
	return nf == k->nframes;
}

void stack_key_free(struct stack_key *k)
{
	free(k->t);
	free(k->frames);
	memset(k, 0, sizeof *k);
}
