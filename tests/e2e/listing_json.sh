#!/bin/sh
# listing_json.sh - every listing in JSON, each checked against its schema
# in schemas/: scopecmd -l --json, Scope.tree and Runtime.info with
# -format=json, scopetop --once --json (the tree and the list); and
# scopetop taking a process name as scopecmd does.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scopetop" "$TOP/$BUILD/tests/helpers/dump_known"
need_jsonschema
private_dir listing-json
dpid= hpid=
trap 'stop_all $dpid $hpid' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
valid() { $PY "$TOP/tests/validate_json.py" "$1" "$2" >"$D/v" 2>&1 || bad "$2 against $1: $(cat "$D/v")"; }

scoped_start "$D/log" || { echo "FAIL: scoped did not start"; exit 1; }
"$TOP/$BUILD/tests/helpers/dump_known" >"$D/known" &
hpid=$!
poll 100 is_listed $hpid || { echo "FAIL: dump_known did not register"; exit 1; }
# The nesting checked below is the whole tree, which the model holds a
# drain or a few after the program registered.
poll 200 known_tree $hpid || {
	echo "FAIL: dump_known's tree never showed up; the last Scope.tree:"
	cat "$D/known-tree"
	echo "dump_known said: $(cat "$D/known")"
	tail -5 "$D/log"
	exit 1
}
S="$BIN/scopecmd --no-start"

$S -l --json >"$D/list.json" || bad "-l --json failed"
valid process-list.schema.json "$D/list.json"
grep -q "\"pid\": $hpid," "$D/list.json" || bad "-l --json lacks $hpid"

# JSON on standard output alone: the "<pid>:" line goes to standard error.
$S $hpid Scope.tree -format=json >"$D/tree.json" 2>"$D/tree.err" || bad "Scope.tree -format=json failed"
valid scope-tree.schema.json "$D/tree.json"
grep -qx "$hpid:" "$D/tree.err" || bad "Scope.tree -format=json: no '<pid>:' on standard error"
# The nesting the text shows: outer > task 2 > middle > task 3 > inner.
$PY - "$D/tree.json" <<'PYEOF' || bad "Scope.tree JSON does not nest as dump_known does"
import json, sys
t = json.load(open(sys.argv[1]))
outer = [s for s in t["scopes"] if s["name"] == "outer"][0]
b = [k for k in outer["tasks"] if k["function"] == "known_task_b"][0]
middle = b["scopes"][0]
c = [k for k in middle["tasks"] if k["function"] == "known_task_c"][0]
assert middle["name"] == "middle" and c["scopes"][0]["name"] == "inner", t
PYEOF

$S $hpid Runtime.info -format=json >"$D/info.json" 2>/dev/null || bad "Runtime.info -format=json failed"
valid runtime-info.schema.json "$D/info.json"
grep -q '"name": "kp"' "$D/info.json" || bad "Runtime.info JSON lacks the pool"
$S $hpid Runtime.info -format=xml >/dev/null 2>"$D/e" && bad "Runtime.info -format=xml was accepted"

"$BIN/scopetop" --once --json $hpid >"$D/top.json" || bad "scopetop --once --json failed"
valid scopetop-once.schema.json "$D/top.json"
grep -q '"name": "▾ known_task_b\|"name": ".*known_task_b' "$D/top.json" || bad "scopetop JSON lacks known_task_b"
"$BIN/scopetop" --once --json >"$D/toplist.json" || bad "scopetop --once --json (list) failed"
valid process-list.schema.json "$D/toplist.json"
"$BIN/scopetop" --json $hpid >/dev/null 2>"$D/e" && bad "--json without --once was accepted"

# A process name, as scopecmd takes it.
"$BIN/scopetop" --once dump_kno >"$D/byname" 2>"$D/e" || bad "scopetop --once dump_kno: $(cat "$D/e")"
head -1 "$D/byname" | grep -q "^process $hpid dump_known live" || bad "scopetop by name: $(head -1 "$D/byname")"
"$BIN/scopetop" --once no-such-program >/dev/null 2>"$D/e" && bad "an unknown name was accepted"
grep -q "no live instrumented process matches 'no-such-program'" "$D/e" || bad "unknown name: $(cat "$D/e")"

[ $fails -eq 0 ] || { echo "$fails failures"; exit 1; }
echo "JSON listings ok"
