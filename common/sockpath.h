/* sockpath.h - where scoped's sockets live, shared by the agent, the daemon
 * and the clients so that all of them agree without configuration. */
#ifndef PROTO_SOCKPATH_H
#define PROTO_SOCKPATH_H

#include <stddef.h>

#define SCOPED_AGENT_SOCK "agent.sock"
#define SCOPED_CONTROL_SOCK "control.sock"

/* Fills dir, agent and control with the socket directory and the two socket
 * paths.  override (a --socket option; NULL or "" for none) wins over
 * $SCOPED_SOCKET, which wins over the default $XDG_RUNTIME_DIR/scoped/ or,
 * without XDG_RUNTIME_DIR, /tmp/scoped-$UID/.  An override names the agent
 * socket; the control socket is control.sock in the same directory.  Any
 * output pointer may be NULL.  Returns 0, or -ENAMETOOLONG. */
int scoped_socket_paths(const char *override, char *dir, size_t dirlen, char *agent,
			size_t agentlen, char *control, size_t controllen);

#endif
