#!/bin/sh
# scopecmd_errors.sh - every error path of scopecmd's command line: each
# fails with its own message and a non-zero status (2 for usage, 1 else),
# and starting a daemon when none answers.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd"
private_dir scopecmd-err
chmod 755 "$D"
export SCOPED_SOCKET=$D/s/agent.sock
spid= npid= hpid= nspid= stpid=
trap 'stop_all $spid $npid $hpid $nspid $stpid' EXIT
fails=0

# The pid of the daemon answering on a control socket (its status reply).
daemon_pid() {
	$PY - "$1" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b'{"id":1,"cmd":"status"}\n'); buf = b""
while not buf.endswith(b"\n"):
    buf += s.recv(65536)
print(json.loads(buf)["pid"])
PYEOF
}

# expect STATUS PATTERN command... : runs it, checks the status and that
# stderr (or stdout) matches PATTERN (grep -E).
expect() {
	want=$1 pat=$2; shift 2
	"$@" >"$D/out" 2>"$D/err"
	rc=$?
	if [ $rc -ne "$want" ] || ! grep -Eq -- "$pat" "$D/err" "$D/out"; then
		echo "FAIL: '$*' exited $rc (want $want), output:"; cat "$D/out" "$D/err"
		echo "      wanted /$pat/"
		fails=$((fails + 1))
	else
		echo "ok: $* -> $rc: $(head -1 "$D/err")"
	fi
}

# No daemon, and told not to start one.
expect 1 "no scoped daemon answers on $D/s/control.sock" "$BIN/scopecmd" --no-start -l

# No daemon: scopecmd starts one in the background and says so.
expect 0 'starting .*/scoped in the background' "$BIN/scopecmd" -l
grep -q 'waiting up to 2000 ms for programs to register' "$D/err" || { echo "FAIL: no wait notice"; fails=$((fails + 1)); }
[ -S "$D/s/control.sock" ] || { echo "FAIL: the started daemon has no control socket"; fails=$((fails + 1)); }
spid=$(daemon_pid "$D/s/control.sock")
[ -n "$spid" ] && [ -d "/proc/$spid" ] || { echo "FAIL: the started daemon is not running"; fails=$((fails + 1)); }
# Sockets left by a daemon that died (nothing listens): one is started too.
mkdir -m 700 "$D/st"
$PY -c '
import socket, sys
for n in ("agent.sock", "control.sock"):
    socket.socket(socket.AF_UNIX).bind(sys.argv[1] + "/" + n)' "$D/st"
expect 0 'starting .*/scoped in the background' env SCOPED_SOCKET="$D/st/agent.sock" "$BIN/scopecmd" -l
stpid=$(daemon_pid "$D/st/control.sock")
[ -n "$stpid" ] || { echo "FAIL: no daemon answers on the stale socket's path"; fails=$((fails + 1)); }
# From here on the first daemon answers.

# Usage errors before any target: exit 2.
expect 2 "unknown option '--bogus'; see scopecmd --help" "$BIN/scopecmd" --bogus
expect 2 "--timeout takes milliseconds from 100 to 600000, not '5'" "$BIN/scopecmd" --timeout 5 -l
expect 2 "--socket needs a value" "$BIN/scopecmd" --socket
expect 2 "'Thread.print' is a command, not a target: give the process first" "$BIN/scopecmd" Thread.print
# A wrong command or argument for a target is that target's failure, after
# its "<pid>:" line, as jcmd: exit 1.
expect 1 "unknown command 'Thread.prnt'; did you mean 'Thread.print'\\?" "$BIN/scopecmd" 1 Thread.prnt
expect 1 "unknown command 'scope.tre'; did you mean 'Scope.tree'\\?" "$BIN/scopecmd" 1 scope.tre
expect 1 "Thread.print: unknown option '-x'" "$BIN/scopecmd" 1 Thread.print -x
expect 0 "The following commands are available" "$BIN/scopecmd" 1
expect 1 "Thread.dump_to_file: no file given" "$BIN/scopecmd" 1 Thread.dump_to_file
expect 1 "-format takes json, text or jstack, not 'xml'" "$BIN/scopecmd" 1 Thread.dump_to_file -format=xml "$D/x"
expect 1 "one file only" "$BIN/scopecmd" 1 Thread.dump_to_file "$D/x" "$D/y"
expect 1 "Scope.tree takes only -format=text or -format=json" "$BIN/scopecmd" 1 Scope.tree extra
expect 1 "unknown command 'Thread.dmp'; did you mean 'Thread.print'\\?" "$BIN/scopecmd" help Thread.dmp

# Targets that are no instrumented process of ours: exit 1.
gone=4194303
while [ -d /proc/$gone ]; do gone=$((gone - 1)); done
expect 1 "process $gone does not exist" "$BIN/scopecmd" $gone Thread.print
expect 1 "process 99999999999 does not exist" "$BIN/scopecmd" 99999999999 Thread.print
sleep 60 &
npid=$!
# A process without libscope: its threads dump; what needs scopes says why
# it has none, without the SCOPED_SOCKET hint (only true of libscope users).
expect 0 "not instrumented \\(no libscope: threads only\\)" "$BIN/scopecmd" $npid Thread.print
expect 1 "process $npid does not use libscope, so it has no scopes or tasks" \
	"$BIN/scopecmd" $npid Scope.tree
expect 1 "no instrumented process matches 'no-such-name'" "$BIN/scopecmd" no-such-name Thread.print
expect 1 "no instrumented process is registered" "$BIN/scopecmd" 0 Thread.print

# pid 1 as seen by a user who does not own it.
if [ "$(id -u)" -ne 0 ]; then
	expect 1 "permission denied: process 1 belongs to uid 0" "$BIN/scopecmd" 1 Thread.print
elif command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
	mkdir -p "$D/n" && chown nobody "$D/n"
	expect 1 "permission denied: process 1 belongs to uid 0 and you are uid $(id -u nobody)" \
		setpriv --reuid=nobody --regid=nogroup --clear-groups \
		env SCOPED_SOCKET="$D/n/agent.sock" "$BIN/scopecmd" 1 Thread.print
	# The daemon that command started runs as nobody; stop it by its pid.
	nspid=$(daemon_pid "$D/n/control.sock")
else
	echo "note: pid-1-as-another-user case not run (needs setpriv and user nobody)"
fi

# A file that exists is refused without -overwrite; the check never
# needs the daemon's dump, so a helper-less case uses a fake target below.
if [ -x "$TOP/$BUILD/tests/helpers/dump_known" ]; then
	"$TOP/$BUILD/tests/helpers/dump_known" >"$D/known" &
	hpid=$!
	poll 100 is_listed $hpid
	: >"$D/exists.json"
	expect 1 "^scopecmd: $D/exists.json exists, use -overwrite to overwrite\$" \
		"$BIN/scopecmd" $hpid Thread.dump_to_file -format=json "$D/exists.json"
	[ -s "$D/exists.json" ] && { echo "FAIL: the existing file was written"; fails=$((fails + 1)); }
	expect 0 "^Created $D/exists.json\$" \
		"$BIN/scopecmd" $hpid Thread.dump_to_file -overwrite -format=json "$D/exists.json"
	$PY "$TOP/tests/validate_dump.py" --pid $hpid "$D/exists.json" ||
		{ echo "FAIL: the overwritten dump does not validate"; fails=$((fails + 1)); }
	expect 1 "cannot create $D/nodir/x.json" \
		"$BIN/scopecmd" $hpid Thread.dump_to_file "$D/nodir/x.json"
	kill $hpid
	hpid=
else
	echo "note: existing-file cases not run (dump_known not built)"
fi

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "all error paths ok"
