/* watch.c - tells the parts that hold pointers to processes and clients
 * (subscriptions, stack requests) that one is about to go, and hands the
 * agents' replies to the part that asked, through the list they registered
 * in: the owners of processes, clients and agent connections depend on
 * none of them. */
#include "daemon.h"
#include "log.h"

#include <stdlib.h>

void daemon_watch(struct daemon *d, const struct watcher *w)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i] == w)
			return;
	if (d->nwatch == DAEMON_MAX_WATCHES) {
		/* A part more than the list has room for: a build error in
		 * effect, and continuing would leave dangling pointers. */
		log_error("internal: more than %d watchers; raise DAEMON_MAX_WATCHES",
			  DAEMON_MAX_WATCHES);
		abort();
	}
	d->watch[d->nwatch++] = w;
}

void daemon_proc_ended(struct daemon *d, struct proc *p)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i]->proc_ended)
			d->watch[i]->proc_ended(d, p);
}

void daemon_proc_freed(struct daemon *d, struct proc *p)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i]->proc_freed)
			d->watch[i]->proc_freed(d, p);
}

void daemon_client_gone(struct daemon *d, struct client *c)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i]->client_gone)
			d->watch[i]->client_gone(d, c);
}

void daemon_agent_msg(struct daemon *d, const struct proto_msg *m, struct proc *p)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i]->agent_msg)
			d->watch[i]->agent_msg(d, m, p);
}

void daemon_reply_done(struct daemon *d, struct client *c)
{
	for (size_t i = 0; i < d->nwatch; i++)
		if (d->watch[i]->reply_done)
			d->watch[i]->reply_done(d, c);
}
