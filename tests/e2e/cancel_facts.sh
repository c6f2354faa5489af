#!/bin/sh
# cancel_facts.sh - what a scope's cancellation came from, the shield over
# it and its cancellation handlers reach the daemon and show in the JSON
# dump and the text dump (tests/helpers/shield_known): once from the live
# event stream, once from the snapshot a restarted daemon gets.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/shield_known
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
private_dir cancel-facts
dpid= hpid=
trap 'stop_all $hpid $dpid' EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$D/log" ] && tail -5 "$D/log"
	[ -f "$D/d.json" ] && cat "$D/d.json"
	exit 1
}

reported() { grep -q pid "$D/known" 2>/dev/null; }
# The inner scope is in the model with its handler's run counted.
has_facts() {
	rm -f "$D/probe.json" # scopecmd writes no file that exists
	"$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json "$D/probe.json" >/dev/null 2>&1 &&
		grep -q '"ran": *1' "$D/probe.json" && grep -q '"shield": *{' "$D/probe.json"
}

check() {
	poll 100 has_facts || fail "$1: the cancellation facts never showed up"
	rm -f "$D/d.json"
	"$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json "$D/d.json" >/dev/null ||
		fail "$1: dump_to_file failed"
	$PY "$TOP/tests/validate_dump.py" --pid "$hpid" "$D/d.json" || fail "$1: the dump does not validate"
	$PY - "$D/known" "$D/d.json" <<'PYEOF' || fail "$1: the dump does not say what happened"
import json, sys
ids = json.load(open(sys.argv[1]))
cs = json.load(open(sys.argv[2]))["threadDump"]["threadContainers"]
by = {c.get("scopeId"): c for c in cs if c.get("kind") == "scope"}
outer, cleanup, mid, inner = (by[ids[k]] for k in ("outer", "cleanup", "mid", "inner"))
# inner: cancelled by its parent; the cancellation began at mid, explicitly.
assert inner["cancelReason"] == "parent", inner
assert inner["cancelCause"] == "explicit" and inner["cancelOrigin"] == ids["mid"], inner
# ...under the shield, whose deadline bounds its cleanup.
assert inner["shield"]["scopeId"] == ids["cleanup"] and inner["shield"]["deadline"], inner
assert inner["cancelHandlers"] == {"armed": 0, "ran": 1}, inner
assert mid["cancelReason"] == "explicit" and mid["cancelCause"] == "explicit", mid
assert mid["cancelOrigin"] == ids["mid"], mid
assert cleanup["flags"] == ["shield"] and cleanup["cancelReason"] is None, cleanup
assert cleanup["shield"]["scopeId"] == ids["cleanup"], cleanup
assert cleanup["cancelHandlers"] == {"armed": 1, "ran": 0}, cleanup
assert cleanup["deadline"] and cleanup["deadline"] == inner["shield"]["deadline"], cleanup
# outer is above the shield: cancelled, its handler ran, no shield over it.
assert outer["cancelReason"] == "explicit" and outer["shield"] is None, outer
assert outer["cancelHandlers"] == {"armed": 0, "ran": 1} and outer["flags"] == [], outer
PYEOF
	"$BIN/scopecmd" --no-start "$hpid" Thread.print >"$D/t.txt" || fail "$1: Thread.print failed"
	grep -q "inner@.*cancelled (parent) by explicit at scope #$(mid_id), shielded by scope #$(cleanup_id) until .*cancel handlers 0 armed, 1 ran" "$D/t.txt" ||
		{ cat "$D/t.txt"; fail "$1: the text dump does not say it"; }
	echo "$1: cause, origin, shield and handlers in both dumps"
}
mid_id() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["mid"])' "$D/known"; }
cleanup_id() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["cleanup"])' "$D/known"; }

scoped_start "$D/log" || fail "scoped did not start"
"$HELPER" >"$D/known" &
hpid=$!
poll 100 reported || fail "shield_known did not report"
check "live events"
scoped_stop
scoped_start "$D/log" || fail "scoped did not restart"
poll 300 is_listed "$hpid" || fail "shield_known did not register again"
check "snapshot"
