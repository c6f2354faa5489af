#!/bin/sh
# sec_squat.sh - another user cannot pose as scoped: two real unprivileged
# users made for the test, a victim without XDG_RUNTIME_DIR and a squatter
# who creates the victim's default socket directory /tmp/scoped-$UID first
# and runs a fake daemon there.  The victim's scoped refuses to start, and
# its scopecmd, scopetop and libscope programs send the fake daemon nothing,
# each refusing with a message naming the squatter.  Then a daemon that runs
# as the squatter behind a socket and directory the victim owns (the
# SO_PEERCRED check alone): still nothing is sent.  Root only (it makes the
# users), skipped otherwise.
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scopetop" "$TOP/$BUILD/tests/helpers/daemon_tree"
[ "$(id -u)" = 0 ] || { echo "skip: the test makes two users (useradd): run it as root"; exit 77; }
for c in useradd userdel setpriv; do
	command -v $c >/dev/null || { echo "skip: $c is missing"; exit 77; }
done

V=scv$$ A=sca$$
fake= prog=
cleanup() {
	[ -n "$fake" ] && kill "$fake" 2>/dev/null
	[ -n "$prog" ] && kill "$prog" 2>/dev/null
	wait 2>/dev/null
	[ -n "$VD" ] && rm -rf "$VD"
	rm -rf "$T"
	userdel "$V" 2>/dev/null
	userdel "$A" 2>/dev/null
}
trap cleanup EXIT
useradd -r -M -N -s /usr/sbin/nologin "$V" || { echo "FAIL: useradd $V"; exit 1; }
useradd -r -M -N -s /usr/sbin/nologin "$A" || { echo "FAIL: useradd $A"; exit 1; }
vuid=$(id -u "$V") auid=$(id -u "$A") agid=$(id -g "$A")
T=$(mktemp -d /tmp/scoped-sq.XXXXXX)
chmod 755 "$T"
chown "$A" "$T"
VD=/tmp/scoped-$vuid
rm -rf "$VD"
fails=0
check() { # DESCRIPTION COMMAND...
	_d=$1
	shift
	if "$@"; then echo "ok - $_d"; else echo "FAIL: $_d"; fails=$((fails + 1)); fi
}

# The fake daemon: listens on agent.sock and control.sock in DIR (binding as
# root first when asked, then dropping to the squatter before listen(), so
# SO_PEERCRED names the squatter), and logs every connection and every byte.
fake_daemon() { # DIR BIND_AS_ROOT(0|1) CHOWN_UID
	$PY - "$1" "$2" "$3" "$auid" "$agid" "$T/fake.log" <<'EOF' &
import os, select, socket, sys
d, as_root, chown_uid, uid, gid, log = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
if not as_root:
    os.setgid(gid); os.setuid(uid)
    os.makedirs(d, exist_ok=True); os.chmod(d, 0o755)
ls = []
for name in ("agent.sock", "control.sock"):
    p = os.path.join(d, name)
    s = socket.socket(socket.AF_UNIX); s.bind(p)
    os.chmod(p, 0o666 if not as_root else 0o600)
    if as_root: os.chown(p, chown_uid, -1)
    ls.append(s)
if as_root:
    os.setgid(gid); os.setuid(uid)
for s in ls: s.listen(16)
out = open(log, "a", buffering=1); out.write("listening\n")
conns = []
while True:
    r, _, _ = select.select(ls + conns, [], [])
    for s in r:
        if s in ls:
            c, _ = s.accept(); conns.append(c); out.write("connection\n")
        else:
            b = s.recv(65536)
            if not b: conns.remove(s); s.close(); continue
            out.write("bytes %d %r\n" % (len(b), b[:60]))
EOF
	fake=$!
	poll 100 grep -qs listening "$T/fake.log" || { echo "FAIL: the fake daemon did not start"; exit 1; }
}

as_victim() {
	env -u XDG_RUNTIME_DIR -u SCOPED_SOCKET HOME=/ setpriv --reuid "$vuid" --regid "$(id -g "$V")" \
		--clear-groups "$@"
}
nothing_sent() { ! grep -q '^bytes' "$T/fake.log"; }
names_squatter() { grep -q "uid $auid ($A)" "$T/out"; }

# 1. The squatted default directory.
fake_daemon "$VD" 0 0
as_victim "$BIN/scoped" --foreground >"$T/out" 2>&1
check "the victim's scoped refuses to start (exit $?)" [ $? -eq 1 ]
check "scoped names the squatter" names_squatter
sed 's/^/  scoped: /' "$T/out"
as_victim "$BIN/scopecmd" --no-start -l >"$T/out" 2>&1
check "scopecmd -l fails (exit $?)" [ $? -ne 0 ]
check "scopecmd names the squatter" names_squatter
sed 's/^/  scopecmd: /' "$T/out"
as_victim "$BIN/scopecmd" -l >"$T/out" 2>&1
check "scopecmd -l starting a daemon fails too" [ $? -ne 0 ]
as_victim "$BIN/scopetop" --once >"$T/out" 2>&1
check "scopetop --once fails (exit $?)" [ $? -ne 0 ]
check "scopetop names the squatter" names_squatter
sed 's/^/  scopetop: /' "$T/out"
# Not through the function: in the background it would run in a subshell,
# and $! (what is killed below) would be that subshell, not the program.
env -u XDG_RUNTIME_DIR -u SCOPED_SOCKET HOME=/ setpriv --reuid "$vuid" --regid "$(id -g "$V")" \
	--clear-groups "$TOP/$BUILD/tests/helpers/daemon_tree" hold >"$T/prog.out" 2>&1 &
prog=$!
poll 100 grep -q ready "$T/prog.out" || echo "note: daemon_tree did not say ready"
sleep 0.3 # the agent dials at once and retries every 50 ms at first
kill "$prog" 2>/dev/null
wait "$prog" 2>/dev/null
prog=
check "a libscope program sent the squatter nothing" nothing_sent
check "nor even connected" eval '! grep -q connection "$T/fake.log"'
kill "$fake"
wait "$fake" 2>/dev/null
fake=
rm -rf "$VD"

# 2. The victim's own directory and sockets, a squatter's process behind them.
: >"$T/fake.log"
D2=$T/own
mkdir -m 700 "$D2"
chown "$vuid" "$D2"
fake_daemon "$D2" 1 "$vuid"
env SCOPED_SOCKET="$D2/agent.sock" setpriv --reuid "$vuid" --regid "$(id -g "$V")" --clear-groups \
	"$BIN/scopecmd" --no-start -l >"$T/out" 2>&1
check "scopecmd refuses a daemon that runs as another user (exit $?)" [ $? -ne 0 ]
check "and names it" names_squatter
sed 's/^/  scopecmd: /' "$T/out"
env SCOPED_SOCKET="$D2/agent.sock" setpriv --reuid "$vuid" --regid "$(id -g "$V")" --clear-groups \
	"$TOP/$BUILD/tests/helpers/daemon_tree" hold >"$T/prog.out" 2>&1 &
prog=$!
poll 100 grep -q ready "$T/prog.out" || echo "note: daemon_tree did not say ready"
sleep 0.3
kill "$prog" 2>/dev/null
wait "$prog" 2>/dev/null
prog=
check "the program's agent and scopecmd sent that daemon nothing" nothing_sent
[ $fails -eq 0 ]
