/* sockpath.c - resolution of scoped's socket paths (see sockpath.h). */
#include "sockpath.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int put(char *dst, size_t len, const char *fmt, const char *a, const char *b)
{
	if (!dst)
		return 0;
	int n = snprintf(dst, len, fmt, a, b);
	return (n < 0 || (size_t)n >= len) ? -ENAMETOOLONG : 0;
}

int scoped_socket_paths(const char *override, char *dir, size_t dirlen, char *agent,
			size_t agentlen, char *control, size_t controllen)
{
	char d[4096];
	const char *path = (override && *override) ? override : getenv("SCOPED_SOCKET");

	if (path && *path) {
		const char *slash = strrchr(path, '/');
		if (!slash)
			snprintf(d, sizeof d, ".");
		else if (slash == path)
			snprintf(d, sizeof d, "/");
		else if ((size_t)(slash - path) >= sizeof d)
			return -ENAMETOOLONG;
		else
			snprintf(d, sizeof d, "%.*s", (int)(slash - path), path);
		if (strlen(path) >= sizeof d)
			return -ENAMETOOLONG;
		int rc = put(dir, dirlen, "%s%s", d, "");
		if (!rc)
			rc = put(agent, agentlen, "%s%s", path, "");
		if (!rc)
			rc = put(control, controllen, "%s/%s", d, SCOPED_CONTROL_SOCK);
		return rc;
	}
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg) {
		if (snprintf(d, sizeof d, "%s/scoped", xdg) >= (int)sizeof d)
			return -ENAMETOOLONG;
	} else {
		snprintf(d, sizeof d, "/tmp/scoped-%u", (unsigned)getuid());
	}
	int rc = put(dir, dirlen, "%s%s", d, "");
	if (!rc)
		rc = put(agent, agentlen, "%s/%s", d, SCOPED_AGENT_SOCK);
	if (!rc)
		rc = put(control, controllen, "%s/%s", d, SCOPED_CONTROL_SOCK);
	return rc;
}
