#!/bin/sh
# scopecmd_postmortem.sh - a process that exited is still listed and dumped
# from its last model: threads TERMINATED, a valid JSON dump, its exit code
# in Runtime.info.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=$TOP/$BUILD/bin
for f in scoped scopecmd scope-demo; do
	[ -x "$BIN/$f" ] || { echo "skip: $BIN/$f is not built"; exit 77; }
done
/usr/bin/python3 -c 'import jsonschema' 2>/dev/null || { echo "skip: python3-jsonschema missing (make deps)"; exit 77; }
D=$(mktemp -d /tmp/scopecmd-pm.XXXXXX)
export SCOPED_SOCKET=$D/agent.sock
dpid=
trap '[ -n "$dpid" ] && kill $dpid 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$BIN/scoped" --foreground --socket "$SCOPED_SOCKET" 2>"$D/log" &
dpid=$!
i=0
until [ -S "$D/control.sock" ]; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "scoped did not start"
	sleep 0.05
done
"$BIN/scope-demo" --duration 0.5 --quiet &
p=$!
i=0
until "$BIN/scopecmd" --no-start -l 2>/dev/null | grep -q "^$p scope-demo"; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "scope-demo did not register"
	sleep 0.05
done
wait $p || fail "scope-demo exited with $?"
i=0
until "$BIN/scopecmd" --no-start -l | grep -qx "$p scope-demo (exited)"; do
	i=$((i + 1)); [ $i -gt 100 ] && fail "the daemon never marked $p exited"
	sleep 0.05
done
"$BIN/scopecmd" --no-start $p Thread.print >"$D/t" || fail "Thread.print of an exited process failed"
grep -q "process exited (post-mortem)" "$D/t" || fail "the text dump does not say post-mortem"
grep -Eq "^  #$p \"acceptor\" TERMINATED\$" "$D/t" || fail "the main thread is not TERMINATED"
"$BIN/scopecmd" --no-start $p Thread.dump_to_file -format=json "$D/pm.json" >/dev/null || fail "JSON dump failed"
/usr/bin/python3 "$TOP/tests/validate_dump.py" --pid $p "$D/pm.json" || fail "the post-mortem dump does not validate"
grep -q '"processState": "exited"' "$D/pm.json" || fail "processState is not exited"
"$BIN/scopecmd" --no-start $p Runtime.info | grep -q 'exited (code 0)' || fail "Runtime.info lacks the exit code"
# 0 means every live process: the exited one is not a target.
"$BIN/scopecmd" --no-start 0 Thread.print >/dev/null 2>&1 && fail "target 0 included an exited process"
echo "post-mortem ok"
