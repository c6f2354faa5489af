#!/bin/sh
# scopecmd_jcmd.sh - scopecmd where jcmd's habits expect it: <pid> alone,
# <key>=<value> flags, help -all, a wrong command after "<pid>:" with status
# 1, a forgotten pid, a full disk, an exited-only name; and the jstack text
# layout read by a parser written to HotSpot's published layout (checked on
# a real JVM's `jcmd Thread.print` too when a JDK is installed); the dump
# the daemon renders, on the raw control socket.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scope-demo" "$TOP/$BUILD/tests/helpers/dump_known"
private_dir scopecmd-jcmd
dpid= hpid= jpid=
trap 'stop_all $dpid $hpid $jpid' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Every dump the daemon re-makes from the last one is checked against a
# fresh render of the same reply (an error reply when they differ).
export SCOPED_CHECK_REMADE=1
scoped_start "$D/log" || { echo "FAIL: scoped did not start"; exit 1; }
"$TOP/$BUILD/tests/helpers/dump_known" >"$D/known" &
hpid=$!
poll 100 is_listed $hpid || { echo "FAIL: dump_known did not register"; exit 1; }
S="$BIN/scopecmd --no-start"

# run NAME command... : stdout to D/NAME.out, stderr to D/NAME.err, sets rc.
run() {
	_n=$1; shift
	"$@" >"$D/$_n.out" 2>"$D/$_n.err"
	rc=$?
}

# <pid> alone: "<pid>:" then the command list, status 0 (jcmd prints its help).
run alone $S $hpid
[ $rc -eq 0 ] || bad "'scopecmd <pid>' exited $rc"
[ "$(head -1 "$D/alone.out")" = "$hpid:" ] || bad "'scopecmd <pid>' lacks the '<pid>:' line"
grep -q '^The following commands are available:$' "$D/alone.out" || bad "'scopecmd <pid>' lists no commands"

# help -all, with and without a target: every command and its summary.
for t in "" $hpid; do
	run helpall $S $t help -all
	[ $rc -eq 0 ] || bad "help -all ($t) exited $rc: $(cat "$D/helpall.err")"
	for c in Thread.print Thread.dump_to_file Scope.tree Runtime.info help; do
		grep -q "^$c\$" "$D/helpall.out" || bad "help -all ($t) lacks $c"
	done
	grep -q '^	Print every thread' "$D/helpall.out" || bad "help -all ($t) lacks the summaries"
done

# <key>=<value> flags print what the bare flags print.
run kv $S $hpid Thread.print -l=true -e=TRUE
[ $rc -eq 0 ] || bad "Thread.print -l=true -e=TRUE exited $rc: $(cat "$D/kv.err")"
run bare $S $hpid Thread.print -l -e
# Two dumps of a live process differ in which threads are blocked at that
# moment, so compare what each flag adds, not the counts of lines.
for f in bare kv; do
	grep -q 'blocked in' "$D/$f.out" && grep -q 'scoped values' "$D/$f.out" ||
		bad "Thread.print ($f form of -l -e) lacks 'blocked in' or 'scoped values'"
done
run kvf $S $hpid Thread.print -l=false
grep -q 'blocked in' "$D/kvf.out" && bad "-l=false still printed what -l adds"
cd "$D" || exit 1
: >exists.json
run ow $S $hpid Thread.dump_to_file -overwrite=true -format=json exists.json
[ $rc -eq 0 ] && [ -s exists.json ] || bad "-overwrite=true did not overwrite: $(cat "$D/ow.err")"
grep -qx "Created $D/exists.json" "$D/ow.out" || bad "Created does not name the absolute path: $(cat "$D/ow.out")"
# An existing file: the absolute path in the message, status 1 (as the JDK).
run ex $S $hpid Thread.dump_to_file exists.json
[ $rc -eq 1 ] || bad "an existing file gave status $rc"
grep -qx "scopecmd: $D/exists.json exists, use -overwrite to overwrite" "$D/ex.err" ||
	bad "the existing-file message lacks the absolute path: $(cat "$D/ex.err")"
cd "$TOP" || exit 1

# A wrong command or option for a live target: "<pid>:" on standard output,
# the error on standard error, status 1 -- jcmd's behaviour.
for args in "Thread.prnt" "Thread.print -x" "Thread.print -l=yes"; do
	# shellcheck disable=SC2086
	run wrong $S $hpid $args
	[ $rc -eq 1 ] || bad "'$args' exited $rc, not 1"
	[ "$(cat "$D/wrong.out")" = "$hpid:" ] || bad "'$args' did not print '$hpid:' first"
	[ -s "$D/wrong.err" ] || bad "'$args' printed no error"
done
grep -q "option '-l' is true or false, not 'yes'" "$D/wrong.err" || bad "-l=yes: $(cat "$D/wrong.err")"

# The pid forgotten: say where it goes.
run nopid $S Thread.print
[ $rc -eq 2 ] && grep -q "give the process first, as in 'scopecmd <pid | name> Thread.print'" "$D/nopid.err" ||
	bad "a forgotten pid: status $rc, $(cat "$D/nopid.err")"

# A full disk loses the output: an error and status 1, never 0.
if [ -w /dev/full ]; then
	for args in "$hpid Thread.print" "$hpid Thread.print -format=jstack" "-l" "$hpid Scope.tree"; do
		# shellcheck disable=SC2086
		$S $args >/dev/full 2>"$D/full.err"
		rc=$?
		[ $rc -eq 1 ] || bad "'$args' to /dev/full exited $rc"
		grep -q 'writing to standard output failed: ' "$D/full.err" ||
			bad "'$args' to /dev/full: $(cat "$D/full.err")"
	done
else
	echo "note: full-disk cases not run (no writable /dev/full)"
fi

# The jstack layout, read by a parser written to HotSpot's published layout.
run js $S $hpid Thread.print -format=jstack
[ $rc -eq 0 ] || bad "Thread.print -format=jstack exited $rc: $(cat "$D/js.err")"
# -l: a thread's "Locked ownable synchronizers" are the scopes it owns.
run jsl $S $hpid Thread.print -format=jstack -l
[ $rc -eq 0 ] || bad "Thread.print -format=jstack -l exited $rc"
awk '/^"known-main"/ { on = 1 } on && /^\t- <0x[0-9a-f]+> \(a scope outer@[0-9]+, all_successful, / { found = 1 }
	on && /^$/ && found { exit } END { exit !found }' "$D/jsl.out" ||
	bad "-l does not list outer as known-main's ownable synchronizer"
grep -q 'Locked ownable synchronizers' "$D/js.out" && bad "without -l the jstack layout lists synchronizers"
run jsf $S $hpid Thread.dump_to_file -format=jstack "$D/dump.jstack"
[ $rc -eq 0 ] && [ -s "$D/dump.jstack" ] || bad "dump_to_file -format=jstack: $(cat "$D/jsf.err")"
run json $S $hpid Thread.dump_to_file -format=json -
# Into a pipe (the daemon's bytes go there in the kernel): the same dump.
$S $hpid Thread.dump_to_file -format=json - 2>/dev/null | $PY -c '
import json, sys
td = json.load(sys.stdin)["threadDump"]
assert str(td["processId"]) == sys.argv[1], td["processId"]' "$hpid" || bad "dump_to_file -format=json - into a pipe is not the dump"
run txt $S $hpid Thread.print -l -e
$PY "$TOP/tests/e2e/jstack_parse.py" --compare "$D/json.out" "$D/js.out" || bad "the jstack dump does not parse as HotSpot's"
$PY "$TOP/tests/e2e/jstack_parse.py" --compare "$D/json.out" "$D/jsl.out" || bad "the jstack -l dump does not parse as HotSpot's"
$PY "$TOP/tests/e2e/jstack_parse.py" --compare "$D/json.out" "$D/dump.jstack" || bad "the jstack dump file does not parse"
# The dump the daemon renders (what Thread.dump_to_file -format=json asks
# for): a line with text_bytes, exactly that many bytes of the JDK's JSON
# text, and the connection goes on; "render" anywhere else is refused.
$PY - "$(control_sock)" "$hpid" <<'PYEOF' || bad "the daemon's rendered dump (see above)"
import json, os, socket, sys
pid = int(sys.argv[2])
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rb")
def ask(req):
    s.sendall((json.dumps(req) + "\n").encode())
    return json.loads(f.readline())
h = ask({"cmd": "dump", "pid": pid, "id": 1, "render": "jdk_json"})
assert h.get("ok") is True and h.get("id") == 1 and isinstance(h.get("text_bytes"), int), h
text = f.read(h["text_bytes"])
assert len(text) == h["text_bytes"] and text.endswith(b"}\n"), len(text)
td = json.loads(text)["threadDump"]
assert td["formatVersion"] == 2 and str(td["processId"]) == str(pid), td.get("processId")
assert any(c["container"].startswith("outer@") for c in td["threadContainers"])
assert ask({"cmd": "status", "id": 2}).get("ok") is True
# Dumps in a row of a process that does not move: the daemon re-makes the
# text from the last one's ("reused"), which must be that text but for the
# dump's time, captureNs and maxPauseNs and threads' state and blockedIn (a
# thread that ran or waits elsewhere; byte for byte a fresh render in
# test_jdkdump), and valid JSON of its exact length.  A dump of another
# process between makes the next one afresh.
import re
def norm(t):
    t = re.sub(rb'"time": "[^"]*"', b'"time": T', t)
    t = re.sub(rb'"state": "[A-Z_]+"', b'"state": S', t)
    t = re.sub(rb'"blockedIn": (null|"(\\.|[^"\\])*")', b'"blockedIn": B', t)
    return re.sub(rb'"(captureNs|maxPauseNs)": (\d+|null)', rb'"\1": N', t)
def render(rid, target):
    h = ask({"cmd": "dump", "pid": target, "id": rid, "render": "jdk_json"})
    assert h.get("ok") is True and h.get("reused") in (None, True), h
    t = f.read(h["text_bytes"])
    assert len(t) == h["text_bytes"] and t.endswith(b"}\n"), (len(t), t[-40:])
    json.loads(t)
    return h, t
# Their thread entries are not written afresh either ("entries_reused"):
# the third dump in a row of threads that did not move takes them from the
# last reply.
prev, reused, entries = text, 0, 0
for i in range(80):
    h, t = render(100 + i, pid)
    if h.get("reused"):
        assert norm(t) == norm(prev), "a reused dump differs from the one before"
        reused += 1
    entries += h.get("entries_reused") is True
    prev = t
    if reused >= 8:
        break
assert reused >= 3, "of 80 dumps in a row, %d were re-made from the one before" % reused
assert entries >= 3, "of %d dumps in a row, %d took their thread entries from the last" % (i + 1, entries)
render(200, os.getpid())
h, t = render(201, pid)
assert not h.get("reused"), "the dump after another process's was not made afresh"
# The same for a process without libscope, whose first dump reads its
# modules: from the third dump in a row on, its entries are re-used.
import subprocess
sl = subprocess.Popen(["sleep", "60"])
try:
    # Asleep in clock_nanosleep (230) at last, its modules all mapped.
    import time
    for _ in range(500):
        with open("/proc/%d/syscall" % sl.pid) as sf:
            if sf.read().split()[0] == "230":
                break
        time.sleep(0.01)
    hs = [render(300 + i, sl.pid)[0] for i in range(5)]
finally:
    sl.kill()
    sl.wait()
assert [h.get("entries_reused") is True for h in hs[2:]] == [True] * 3, \
    "dumps in a row of a sleeping plain process: %r" % [(h.get("reused"), h.get("entries_reused")) for h in hs]
for req in ({"cmd": "stacks", "pid": pid, "id": 3, "render": "jdk_json"},
            {"cmd": "dump", "pid": pid, "id": 4, "render": "xml"}):
    r = ask(req)
    assert r.get("ok") is False and r["error"]["code"] == "bad_request", r
PYEOF
# The plain text form: every thread line carries its Thread.State, as the
# JDK 25 text format does, so parsers of that format find the states.
$PY "$TOP/tests/e2e/jstack_parse.py" --plain "$D/json.out" "$D/txt.out" || bad "the text dump's thread lines lack their states"

# The parser itself must read a real JVM's jcmd output, or it proves nothing.
if command -v java >/dev/null && command -v jcmd >/dev/null; then
	mkdir "$D/j"
	# main holds o and sleeps; "waiter" blocks on o.
	printf '%s\n' 'public class Idle { public static void main(String[] a) throws Exception {' \
		'Object o = new Object(); synchronized (o) {' \
		'Thread t = new Thread(() -> { synchronized (o) { } }, "waiter");' \
		't.setDaemon(true); t.start(); Thread.sleep(60000); } } }' >"$D/j/Idle.java"
	java -Xshare:auto -XX:TieredStopAtLevel=1 "$D/j/Idle.java" &
	jpid=$!
	jok() {
		jcmd $jpid Thread.print >"$D/j/real" 2>/dev/null && grep -q 'Idle.main' "$D/j/real" &&
			grep -q 'waiting to lock' "$D/j/real"
	}
	# A thread's nid, in decimal.
	jnid() { printf '%d' "$(awk -v n="\"$1\" " 'index($0, n) == 1 { sub(/.* nid=/, ""); sub(/ .*/, ""); print; exit }' "$D/j/real")"; }
	if poll 400 jok; then
		$PY "$TOP/tests/e2e/jstack_parse.py" --real "$D/j/real" || bad "the parser does not read a real jcmd dump"
		# The lock lines it reads in ours are HotSpot's: it links the JVM's
		# blocked thread to the monitor's holder the same way.
		a=$(sed -n 's/^\t- waiting to lock <\(0x[0-9a-f]*\)>.*/\1/p' "$D/j/real" | head -1)
		$PY "$TOP/tests/e2e/jstack_parse.py" --locks "$D/j/real" "$(jnid waiter)" "$(jnid main)" "$a" ||
			bad "the parser does not link a real JVM's blocked thread to the monitor's owner"
	else
		bad "no jcmd dump of the JVM within 20 s"
	fi
	kill $jpid
	jpid=
else
	echo "note: real-JVM parser check not run (no java/jcmd: openjdk-17-jdk-headless is optional)"
fi

# A name that matches only an exited process: say so, and how to dump it.
"$BIN/scope-demo" --duration 0.3 --quiet &
p=$!
poll 100 is_listed $p scope-demo || bad "scope-demo did not register"
wait $p
exited() { $S -l | grep -qx "$p scope-demo (exited)"; }
if poll 100 exited; then
	run gone $S scope-demo Thread.print
	[ $rc -eq 1 ] || bad "an exited-only match exited $rc"
	grep -q "matches no live process, only process $p (scope-demo), which exited;.*'scopecmd $p Thread.print' prints its post-mortem dump" "$D/gone.err" ||
		bad "exited-only match: $(cat "$D/gone.err")"
else
	bad "the daemon never marked scope-demo exited"
fi

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "jcmd compatibility ok"
