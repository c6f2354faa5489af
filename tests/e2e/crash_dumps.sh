#!/bin/sh
# crash_dumps.sh - a post-mortem dump of a crashed process names what
# crashed it: for each kind of crash (tests/helpers/crasher: segv, abort,
# fpe, ill, bus, stack overflow, each in a subtask), the JSON's crash member
# has the signal, the thread, the task it ran, that task's scope's
# container, and a stack whose frames name the faulting function; the
# thread itself carries that stack; the text dump starts with a CRASHED
# section; the dump validates.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/crasher
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
case $BUILD in
*asan* | *tsan*) echo "skip: the sanitizers take the fatal signals before libscope's handler"; exit 77 ;;
esac

private_dir crash-dumps
dpid= cpid=
trap 'exec 7>&- 2>/dev/null; stop_all $cpid $dpid' EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

scoped_start "$D/log" || fail "scoped did not start"
ulimit -c 0 # no core files: they are slow to write and not what is tested

exited() { "$BIN/scopecmd" --no-start -l 2>/dev/null | grep -q "^$cpid .*exited"; }
for kind in segv:SIGSEGV:crash_segv abort:SIGABRT:crash_abort fpe:SIGFPE:crash_fpe \
	ill:SIGILL:crash_ill bus:SIGBUS:crash_bus overflow:SIGSEGV:crash_overflow; do
	IFS=: read -r k sig fn <<EOF
$kind
EOF
	rm -f "$D/in"
	mkfifo "$D/in"
	"$HELPER" "$k" <"$D/in" >"$D/$k.out" 2>&1 &
	cpid=$!
	exec 7>"$D/in"
	says_ready() { grep -q '^ready ' "$D/$k.out" 2>/dev/null; }
	poll 200 says_ready || fail "$k: crasher did not get ready"
	registered() { is_listed "$cpid"; }
	poll 200 registered || fail "$k: crasher never registered"
	# A dump while it lives: its stacks are the last known ones after.
	"$BIN/scopecmd" --no-start "$cpid" Thread.print >/dev/null 2>&1 || fail "$k: live dump failed"
	echo go >&7
	exec 7>&-
	wait "$cpid"
	poll 200 exited || fail "$k: the daemon did not see the crash"
	"$BIN/scopecmd" --no-start "$cpid" Thread.dump_to_file -format=json "$D/$k.json" >/dev/null \
		2>"$D/err" || fail "$k: post-mortem dump failed: $(cat "$D/err")"
	"$BIN/scopecmd" --no-start "$cpid" Thread.print -e >"$D/$k.txt" 2>"$D/err" ||
		fail "$k: Thread.print failed: $(cat "$D/err")"
	tid=$(sed -n 's/^ready //p' "$D/$k.out")
	$PY - "$D/$k.json" "$D/$k.txt" "$tid" "$sig" "$fn" "$cpid" <<'PYEOF' || fail "$k: the crash is not told"
import json, re, sys
dump, text, tid, sig, fn = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
pid = int(sys.argv[6])
td = json.load(open(dump))["threadDump"]
c = td.get("crash")
assert c, "no crash member"
assert c["tid"] == tid and c["signalName"] == sig, c
assert c["exitCause"] == "signal", c
# The faulting function near the top (a clone of it may carry a suffix
# such as .isra.0); below it the task's body, unless a stack overflow's
# recursion fills every frame the handler sends.
named = [f for f in c["stack"][:8] if re.match(re.escape(fn) + r"(\.\w+)* \(crasher\.c:\d+\)$", f)]
assert named, c["stack"][:8]
assert fn == "crash_overflow" or any(f.startswith("crash_task") for f in c["stack"]), c["stack"]
assert re.match(r"^doomed@\d+$", c["container"] or ""), c
th = [t for ct in td["threadContainers"] for t in ct["threads"] if t["tid"] == tid]
assert len(th) == 1 and th[0].get("crashed") and th[0]["stack"] == c["stack"], th
assert th[0]["task"]["id"] == c["task"] and th[0]["task"].get("crashed"), th[0]["task"]
# The other threads: TERMINATED, with the stack the last capture found.
main = [t for ct in td["threadContainers"] for t in ct["threads"] if t["tid"] == pid]
assert main and main[0]["state"] == "TERMINATED", main
assert any(f.startswith("scope_join ") for f in main[0].get("lastStack", [])), main[0]
assert td.get("lastStacksAt"), "no lastStacksAt"
head = open(text).read().split("\n<root>")[0]
assert re.search(r"\nCRASHED: thread #%d, %s, running task %d of doomed@\d+\n\s+at " %
                 (tid, sig, c["task"]), head), head
print("%-6s %s in %s, task %d: %d frames" % (sig, fn, c["container"], c["task"], len(c["stack"])))
PYEOF
	cpid=
done
$PY "$TOP/tests/validate_dump.py" "$D"/*.json >"$D/v.out" 2>&1 ||
	fail "a crash dump does not validate: $(grep -v ': valid$' "$D/v.out" | head -5)"
echo "ok"
