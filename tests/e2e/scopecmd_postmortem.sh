#!/bin/sh
# scopecmd_postmortem.sh - a process that exited is still listed and dumped
# from its last model: threads TERMINATED, a valid JSON dump, its exit code
# in Runtime.info.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scope-demo"
need_jsonschema
private_dir scopecmd-pm
dpid=
trap 'stop_all $dpid' EXIT
fail() { echo "FAIL: $*"; exit 1; }

scoped_start "$D/log" || fail "scoped did not start"
"$BIN/scope-demo" --duration 0.5 --quiet &
p=$!
poll 100 is_listed $p scope-demo || fail "scope-demo did not register"
wait $p || fail "scope-demo exited with $?"
marked_exited() { "$BIN/scopecmd" --no-start -l | grep -qx "$p scope-demo (exited)"; }
poll 100 marked_exited || fail "the daemon never marked $p exited"
"$BIN/scopecmd" --no-start $p Thread.print >"$D/t" || fail "Thread.print of an exited process failed"
grep -q "process exited (post-mortem)" "$D/t" || fail "the text dump does not say post-mortem"
grep -Eq "^  #$p \"acceptor\" TERMINATED\$" "$D/t" || fail "the main thread is not TERMINATED"
"$BIN/scopecmd" --no-start $p Thread.dump_to_file -format=json "$D/pm.json" >/dev/null || fail "JSON dump failed"
$PY "$TOP/tests/validate_dump.py" --pid $p "$D/pm.json" || fail "the post-mortem dump does not validate"
grep -q '"processState": "exited"' "$D/pm.json" || fail "processState is not exited"
"$BIN/scopecmd" --no-start $p Runtime.info | grep -q 'exited (code 0)' || fail "Runtime.info lacks the exit code"
# 0 means every live process: the exited one is not a target.
"$BIN/scopecmd" --no-start 0 Thread.print >/dev/null 2>&1 && fail "target 0 included an exited process"
echo "post-mortem ok"
