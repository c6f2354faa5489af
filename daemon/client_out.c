/* client_out.c - a control client's output: written as far as the socket
 * takes it, and a client that lets it pile up past the cap is dropped.  The
 * commands write their replies through here. */
#include "daemon.h"

#include "conn.h"
#include "log.h"
#include "loop.h"

/* Writes what it can without blocking; the rest waits for LOOP_WRITE. */
void client_flush(struct client *c)
{
	if (c->dead)
		return;
	if (c->out.oom) {
		log_warn("control client pid %d: out of memory for its reply; dropping it",
			 (int)c->pid);
		c->dead = true;
		return;
	}
	size_t before = c->out.len;
	if (conn_write(c->fd, &c->out) < 0)
		c->dead = true;
	if (c->out.len < before)
		c->drained_ns = loop_now_ns();
	loop_mod(c->d->loop, c->fd, LOOP_READ | (c->out.len ? LOOP_WRITE : 0));
}

/* One reply may be larger than the cap (a big tree); a client that lets
 * output pile up past it before more is added does not read, and goes.  It is
 * closed by its handler or the housekeeper, never mid-command. */
bool client_room(struct client *c)
{
	if (c->dead)
		return false;
	if (c->out.len <= CLIENT_MAX_UNSENT)
		return true;
	log_warn("control client pid %d does not read its replies (%zu bytes unsent, cap %u); "
		 "dropping it",
		 (int)c->pid, c->out.len, CLIENT_MAX_UNSENT);
	c->dead = true;
	return false;
}
