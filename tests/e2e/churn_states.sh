#!/bin/sh
# churn_states.sh - 100 dumps from each stack source of a process whose threads start and exit all
# the time (tests/helpers/churn): every thread has a java.lang.Thread.State
# (never UNKNOWN), a thread that exited during the capture says so, and
# every dump validates against the schema.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/churn
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
# 100 per stack source; fewer under the sanitizers, which are slow.
case $BUILD in *asan* | *tsan*) N=10 ;; *) N=100 ;; esac

private_dir churn-states
dpid= tpid=
trap 'stop_all $tpid $dpid' EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

"$HELPER" >"$D/t.out" 2>&1 &
tpid=$!
registered() { is_listed "$tpid"; }
DUMPS=0
dumps() { # mode
	i=0
	while [ $i -lt $N ]; do
		"$BIN/scopecmd" --no-start "$tpid" Thread.dump_to_file -format=json "$D/d$1$i.json" \
			>/dev/null 2>"$D/err" || fail "$1 dump $i failed: $(cat "$D/err")"
		i=$((i + 1))
		# Longer than a task lives (a nap of at most 3 ms): a warm dump
		# takes about 3 ms, and two in a row could show the same task
		# still asleep, which is no stale tree.
		sleep 0.01
	done
	DUMPS=$((DUMPS + N))
}
# Every dump the daemon re-makes from the last one is checked against a
# fresh render of the same reply (an error reply when they differ).
export SCOPED_CHECK_REMADE=1
scoped_start "$D/log" --stacks=signal || fail "scoped did not start"
poll 200 registered || fail "churn never registered"
dumps signal
scoped_stop
if scoped_start "$D/log" --stacks=bpf; then
	poll 200 registered || fail "churn never registered again"
	dumps bpf
else
	echo "bpf: not tried, scoped --stacks=bpf cannot start here"
fi
$PY "$TOP/tests/validate_dump.py" --pid "$tpid" "$D"/d*.json >"$D/v.out" 2>&1 ||
	fail "a dump does not validate: $(grep -v ': valid$' "$D/v.out" | head -5)"
$PY - "$D" "$DUMPS" <<'PYEOF' || fail "a thread state is not a java.lang.Thread.State, or dumps in a row do not move with the tree (see above)"
import glob, json, sys
jdk = {"NEW", "RUNNABLE", "BLOCKED", "WAITING", "TIMED_WAITING", "TERMINATED"}
threads = unknown = exited = 0
for p in glob.glob(sys.argv[1] + "/d*.json"):
	td = json.load(open(p))["threadDump"]
	assert td["eventsDuringCapture"] >= 0, "a live dump says how far the tree moved"
	for c in td["threadContainers"]:
		for t in c["threads"]:
			threads += 1
			assert t["state"] in jdk, (p, t)
			unknown += t.get("stateKnown") is False
			if t.get("exitedDuringCapture"):
				exited += 1
				assert t["state"] == "TERMINATED", t
print("%s dumps, %d threads: %d exited during the capture, %d with no state known" %
      (sys.argv[2], threads, exited, unknown))
# The tree moves all the time: dumps in a row, 10 ms apart, show other
# tasks (a daemon that served an old tree again, as if nothing had moved,
# would not).
for mode in ("signal", "bpf"):
	paths = sorted(glob.glob(sys.argv[1] + "/d%s*.json" % mode),
		       key=lambda p: int(p.rsplit(mode, 1)[1][:-5]))
	tasks = []
	for p in paths:
		td = json.load(open(p))["threadDump"]
		tasks.append(sorted(t["task"]["id"] for c in td["threadContainers"]
				    for t in c["threads"] if t.get("task")))
	# Two dumps in a row that both caught no thread in a task say nothing
	# (a slow build's dumps often do): only pairs with tasks count.
	pairs = [(a, b) for a, b in zip(tasks, tasks[1:]) if a or b]
	same = sum(a == b for a, b in pairs)
	print("%s: %d of %d pairs of dumps in a row with tasks show the same ones" % (mode, same, len(pairs)))
	assert same <= len(pairs) // 2, "%s: %d of %d pairs of dumps in a row with tasks show the tasks of the one before" % (mode, same, len(pairs))
PYEOF
echo "ok"
