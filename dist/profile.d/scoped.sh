# scoped.sh - points libscope programs, scopecmd and scopetop at the
# system-wide scoped (scoped.service) for users allowed to connect to it
# (members of the group "scoped"); others keep their own per-user daemon.
# Install as /etc/profile.d/scoped.sh.
if [ -z "${SCOPED_SOCKET:-}" ] && [ -S /run/scoped/agent.sock ] && [ -w /run/scoped/agent.sock ]; then
	SCOPED_SOCKET=/run/scoped/agent.sock
	export SCOPED_SOCKET
fi
