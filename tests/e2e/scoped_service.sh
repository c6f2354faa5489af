#!/bin/sh
# scoped_service.sh - scoped as a service: -h and -V, log lines with their
# time in --log-file, --idle-exit, the systemd unit's command line, and (as
# root) --socket-group letting another user connect while each uid still
# sees only its own processes.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scope-demo" "$TOP/$BUILD/tests/helpers/dump_known"
private_dir scoped-svc
chmod 755 "$D"
dpid= ipid= hpid= npid=
trap 'stop_all $dpid $ipid $hpid $npid' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$BIN/scoped" -h >"$D/h" 2>&1 && grep -q -- '--log-file PATH' "$D/h" || bad "scoped -h: $(head -2 "$D/h")"
"$BIN/scoped" -V >"$D/v" 2>&1 && grep -Eq '^scoped [0-9]+\.[0-9]+\.[0-9]+ \(protocol [0-9]+\)$' "$D/v" ||
	bad "scoped -V: $(cat "$D/v")"
"$BIN/scoped" -x >/dev/null 2>&1 && bad "scoped -x was accepted"

# --log-file: every line with its UTC time, pid and level.
export SCOPED_SOCKET=$D/a/agent.sock
scoped_start "$D/fg" --log-file "$D/scoped.log" || bad "scoped --log-file did not start: $(cat "$D/fg")"
# The line comes once the loop runs, a moment after the socket exists.
stamped() { grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z scoped\['"$dpid"'\]: info: listening on ' "$D/scoped.log"; }
poll 100 stamped || bad "the log file lacks a stamped 'listening' line: $(cat "$D/scoped.log")"
[ -s "$D/fg" ] && bad "with --log-file, scoped still wrote to stderr: $(cat "$D/fg")"
[ "$(stat -c %a "$D/scoped.log")" = 640 ] || bad "the log file is mode $(stat -c %a "$D/scoped.log"), not 640"
scoped_stop
# On stderr the lines carry their time too.
scoped_start "$D/fg2" || bad "scoped did not start"
listening() { grep -q 'info: listening on' "$D/fg2"; }
poll 100 listening || bad "scoped on stderr never said it listens"
scoped_stop
grep -Eq '^[0-9-]{10}T[0-9:.]{12}Z scoped\[[0-9]+\]: info: ' "$D/fg2" || bad "stderr lines lack their time: $(cat "$D/fg2")"
"$BIN/scoped" --foreground --socket "$D/x/agent.sock" --log-file "$D/nodir/l" >"$D/e" 2>&1 &&
	bad "an unwritable --log-file was accepted"
grep -q "cannot open the log file $D/nodir/l" "$D/e" || bad "unwritable log file: $(cat "$D/e")"

# --idle-exit: nobody connected, the daemon goes; a connected program keeps it.
export SCOPED_SOCKET=$D/i/agent.sock
"$BIN/scoped" --foreground --socket "$SCOPED_SOCKET" --idle-exit 1 >"$D/idle" 2>&1 &
ipid=$!
"$TOP/$BUILD/tests/helpers/dump_known" >/dev/null &
hpid=$!
sleep 2
kill -0 $ipid 2>/dev/null || bad "--idle-exit 1 ended the daemon while a program was connected"
kill $hpid; wait $hpid 2>/dev/null; hpid=
gone() { ! kill -0 $ipid 2>/dev/null; }
poll 100 gone || bad "--idle-exit 1: the daemon still runs 5 s after the program left"
wait $ipid 2>/dev/null
ipid=
grep -q 'no program and no client for 1 s (--idle-exit): exiting' "$D/idle" || bad "no idle-exit line: $(cat "$D/idle")"

# The unit's command line is one scoped accepts (paths aside).
unit=$TOP/dist/systemd/scoped.service
args=$(sed -n 's|^ExecStart=[^ ]*/scoped ||p' "$unit")
[ -n "$args" ] || bad "no ExecStart in $unit"
# shellcheck disable=SC2086
"$BIN/scoped" $args --version >/dev/null 2>"$D/u" || bad "scoped refuses the unit's options '$args': $(cat "$D/u")"
if command -v systemd-analyze >/dev/null; then
	sed "s|^ExecStart=[^ ]*/scoped|ExecStart=$BIN/scoped|" "$unit" >"$D/scoped.service"
	systemd-analyze verify --man=no "$D/scoped.service" >"$D/sa" 2>&1 || bad "systemd-analyze verify: $(cat "$D/sa")"
else
	echo "note: the unit was not verified (no systemd-analyze)"
fi

# --socket-group: a root daemon serves another user, each sees their own.
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1 ||
	! getent group nogroup >/dev/null; then
	echo "note: --socket-group cases not run (need root, setpriv, user nobody, group nogroup)"
else
	export SCOPED_SOCKET=$D/g/agent.sock
	as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
	# Without the option another user cannot even connect.
	scoped_start "$D/g0" || bad "scoped did not start"
	as_nobody "$BIN/scopecmd" --no-start -l >"$D/n0" 2>&1 && bad "nobody connected to a private daemon"
	scoped_stop
	scoped_start "$D/g1" --socket-group nogroup || bad "scoped --socket-group did not start: $(cat "$D/g1")"
	[ "$(stat -c '%a %G' "$D/g")" = "710 nogroup" ] || bad "socket directory is $(stat -c '%a %G' "$D/g")"
	[ "$(stat -c '%a %G' "$D/g/agent.sock")" = "660 nogroup" ] || bad "agent.sock is $(stat -c '%a %G' "$D/g/agent.sock")"
	[ "$(stat -c '%a %G' "$D/g/control.sock")" = "660 nogroup" ] || bad "control.sock is $(stat -c '%a %G' "$D/g/control.sock")"
	"$TOP/$BUILD/tests/helpers/dump_known" >/dev/null &
	hpid=$!
	# Not through the function: $! must be the program's pid, not a subshell's.
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$BIN/scope-demo" --duration 30 --quiet &
	npid=$!
	poll 100 is_listed $hpid || bad "root's program did not register"
	poll 100 is_listed $npid || bad "nobody's program did not register"
	as_nobody "$BIN/scopecmd" --no-start -l >"$D/nl" 2>&1 || bad "nobody cannot list: $(cat "$D/nl")"
	grep -q "^$npid scope-demo" "$D/nl" || bad "nobody does not see their own program: $(cat "$D/nl")"
	grep -q "^$hpid " "$D/nl" && bad "nobody sees root's program"
	as_nobody "$BIN/scopecmd" --no-start $npid Thread.print >"$D/nt" 2>&1 || bad "nobody cannot dump their program: $(cat "$D/nt")"
	as_nobody "$BIN/scopecmd" --no-start $hpid Thread.print >"$D/nr" 2>&1 && bad "nobody dumped root's program"
	"$BIN/scopecmd" --no-start -l | grep -q "^$npid scope-demo" || bad "root does not see nobody's program"
	scoped_stop
fi

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "service ok"
