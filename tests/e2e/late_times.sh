#!/bin/sh
# late_times.sh - times in a dump are the program's own, whenever the daemon
# came: tests/helpers/late_times runs with no daemon and records, on its own
# clock, when it started, opened a scope (one-hour timeout), forked, when
# its task started and its join began; scoped starts more than a second
# later, then restarts.  Both dumps must give those times (and the deadline
# an hour after the open), not the moment the daemon first heard of them.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/late_times
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema

private_dir late-times
dpid= tpid=
trap 'stop_all $tpid $dpid' EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

"$HELPER" >"$D/t.out" 2>&1 &
tpid=$!
recorded() { grep -q '"join"' "$D/t.out" 2>/dev/null; }
poll 200 recorded || fail "late_times did not record its times: $(cat "$D/t.out")"
sleep 1.2 # the daemon arrives well after everything happened

registered() { is_listed "$tpid"; }
check() { # name
	"$BIN/scopecmd" --no-start "$tpid" Thread.dump_to_file -format=json "$D/$1.json" \
		>/dev/null 2>"$D/err" || fail "$1: dump failed: $(cat "$D/err")"
	$PY "$TOP/tests/validate_dump.py" --pid "$tpid" "$D/$1.json" >/dev/null ||
		fail "$1: the dump does not validate"
	$PY - "$D/t.out" "$D/$1.json" "$1" <<'PYEOF' || fail "$1: times differ from the program's record"
import json, sys
from datetime import datetime, timezone
rec = json.loads(open(sys.argv[1]).readline())
td = json.load(open(sys.argv[2]))["threadDump"]
def ms(iso):
	assert iso, "a time is missing"
	return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000
# Dump times have whole milliseconds; the clock reference pairs two reads;
# what happened while no daemon listened was stamped on the coarse clock,
# up to a kernel tick (1-10 ms) early.
TICK = 10.0
def within(what, iso, lo, hi, slack=2.0):
	t = ms(iso)
	if not (lo - slack - TICK <= t <= hi + slack):
		print("%s: %s is %.0f ms off the program's [%.3f, %.3f]" %
		      (what, iso, min(t - lo, t - hi, key=abs), lo, hi))
		sys.exit(1)
scope = [c for c in td["threadContainers"] if c.get("name") == "late"]
assert len(scope) == 1, [c["container"] for c in td["threadContainers"]]
scope = scope[0]
within("openedAt", scope["openedAt"], *rec["open"])
within("deadline", scope["deadline"], rec["open"][0] + 3600e3, rec["open"][1] + 3600e3)
within("joinBeganAt", scope["joinBeganAt"], *rec["join"])
tasks = [t["task"] for t in scope["threads"] if t.get("task")]
assert len(tasks) == 1, scope["threads"]
within("forkedAt", tasks[0]["forkedAt"], *rec["fork"])
within("startedAt", tasks[0]["startedAt"], *rec["start"])
# The kernel's start time (10 ms ticks) up to the program's first line.
within("processStartTime", td["processStartTime"], rec["main"][0] - 5000, rec["main"][0], 20)
print("%s: every time is the program's own (opened %s)" % (sys.argv[3], scope["openedAt"]))
PYEOF
}

scoped_start "$D/log" || fail "scoped did not start"
poll 200 registered || fail "late_times never registered"
check late
scoped_stop
scoped_start "$D/log" || fail "scoped did not restart"
poll 200 registered || fail "late_times never registered again"
check restart
cmp -s "$D/late.json" "$D/restart.json" && fail "two dumps a restart apart are byte-identical (dump time?)"
$PY - "$D/late.json" "$D/restart.json" <<'PYEOF' || fail "the restart changed a time"
import json, sys
def times(p):
	td = json.load(open(p))["threadDump"]
	out = {"start": td["processStartTime"]}
	for c in td["threadContainers"]:
		if c.get("name") == "late":
			out.update(opened=c["openedAt"], join=c["joinBeganAt"], deadline=c["deadline"])
			for t in c["threads"]:
				if t.get("task"):
					out.update(forked=t["task"]["forkedAt"], started=t["task"]["startedAt"])
	return out
a, b = times(sys.argv[1]), times(sys.argv[2])
assert a == b, (a, b)
PYEOF
echo "ok"
