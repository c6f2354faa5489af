# e2e.sh - shell helpers that the end-to-end tests, the dump benchmark and the
# demo share: checks that what they run is built, a private socket
# directory, scoped started and stopped on it, and polling until a condition
# holds.  Source it with TOP and BUILD set; it sets BIN and PY.

BIN=$TOP/$BUILD/bin
# The system interpreter: the one python3-jsonschema is installed for.
PY=/usr/bin/python3

# need_built FILE... : skips the test (exit 77) unless every FILE is executable.
need_built() {
	for f in "$@"; do
		[ -x "$f" ] || { echo "skip: $f is not built"; exit 77; }
	done
}

# need_jsonschema : fails the test unless dumps can be validated: the
# validator is a dependency ('make deps' installs python3-jsonschema), and a
# test that checked less must not pass.
need_jsonschema() {
	$PY -c 'import jsonschema' 2>/dev/null ||
		{ echo "FAIL: python3-jsonschema is missing; run 'make deps' as root"; exit 1; }
}

# private_dir PREFIX : makes D, a fresh directory under /tmp for sockets and
# logs, and points SCOPED_SOCKET into it.
private_dir() {
	D=$(mktemp -d "/tmp/$1.XXXXXX") || { echo "cannot make a directory in /tmp" >&2; exit 1; }
	export SCOPED_SOCKET=$D/agent.sock
}

# poll TRIES COMMAND... : runs COMMAND every 50 ms until it succeeds; returns
# 1 once it has failed TRIES + 1 times.
poll() {
	_tries=$1
	shift
	_i=0
	until "$@"; do
		_i=$((_i + 1))
		[ $_i -gt "$_tries" ] && return 1
		sleep 0.05
	done
	return 0
}

# The control socket beside SCOPED_SOCKET.
control_sock() {
	echo "${SCOPED_SOCKET%/*}/control.sock"
}

# True once scoped listens, or once it has exited (then _scoped_gone=1).
_scoped_up() {
	[ -S "$(control_sock)" ] && return 0
	kill -0 "$dpid" 2>/dev/null && return 1
	_scoped_gone=1
}

# scoped_start LOG [OPTION...] : runs scoped in the foreground on
# SCOPED_SOCKET, its output appended to LOG, sets dpid, and waits up to 5 s
# for its control socket.  Returns 0 once it listens, 1 when scoped exited
# first, 2 when it did not listen in time.
scoped_start() {
	_log=$1
	shift
	"$BIN/scoped" --foreground --socket "$SCOPED_SOCKET" "$@" >>"$_log" 2>&1 &
	dpid=$!
	_scoped_gone=0
	poll 100 _scoped_up || return 2
	[ $_scoped_gone -eq 0 ] || return 1
}

# scoped_stop : stops the scoped that scoped_start started and waits for it.
scoped_stop() {
	kill "$dpid" 2>/dev/null
	wait "$dpid" 2>/dev/null
	dpid=
	rm -f "$(control_sock)" "$SCOPED_SOCKET"
}

# is_listed PID [NAME] : true when `scopecmd -l` lists PID (as NAME, when given).
is_listed() {
	"$BIN/scopecmd" --no-start -l 2>/dev/null | grep -q "^$1 ${2:-}"
}

# known_tree PID : true once the daemon's model holds the whole tree of
# tests/helpers/dump_known (pid PID): all three scopes and the innermost
# task, running, with its fork site, and every one of the four tasks with
# its fork site.  The model is what the agent last sent, a drain (a
# millisecond or a few) behind the program, and the inner scope's open can
# arrive a drain before its task's fork; a task the agent's snapshot at
# registration caught while its fork site was being defined gets the site
# from a later frame (a suite run on a loaded host once dumped task c
# without it).  Leaves the tree in $D/known-tree.
known_tree() {
	"$BIN/scopecmd" --no-start "$1" Scope.tree 2>/dev/null >"$D/known-tree" &&
		grep -q 'inner@' "$D/known-tree" &&
		grep -Eq 'task [0-9]+ task_d\(\) running on #[0-9]+ +forked at open_fork_join \(dump_known\.c:[0-9]+\)' "$D/known-tree" &&
		[ "$(grep -Ec ' forked at [A-Za-z_]+ \(dump_known\.c:[0-9]+\)' "$D/known-tree")" -eq 4 ]
}

# stop_all PID... : the EXIT trap: kills the PIDs that are set, waits for
# every child, removes D.
stop_all() {
	for _p in "$@"; do
		[ -n "$_p" ] && kill "$_p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$D"
}
