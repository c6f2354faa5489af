#!/bin/sh
# snapshot_race.sh - a program that forks while its agent connects: the
# daemon must learn of every fork, from the live stream or from the
# agent's snapshot.  tests/helpers/dump_known is started against a running
# scoped again and again; each time its whole tree, with every task's body
# and fork site, must show in Scope.tree.  A fork racing the snapshot was
# once in neither (the runtime stored the task's state, then read that
# nothing observed; the agent installed its observer, then read the state:
# both loads saw the old values) and the inner task showed as
# "task 513 running on #N", with no body and no site, for good: in about
# one start in fifty here.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/dump_known
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
# 100 starts; fewer under the sanitizers, which are slow.
case $BUILD in *asan* | *tsan*) N=20 ;; *) N=100 ;; esac

private_dir snapshot-race
dpid= hpid=
trap 'stop_all $hpid $dpid' EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$D/known-tree" ] && cat "$D/known-tree"
	exit 1
}

scoped_start "$D/log" || fail "scoped did not start"
reported() { grep -q pid "$D/known" 2>/dev/null; }
# The whole tree, and all four tasks with their fork sites.
all_forks() { known_tree "$1" && [ "$(grep -c ' forked at ' "$D/known-tree")" -eq 4 ]; }
i=0
while [ $i -lt $N ]; do
	"$HELPER" >"$D/known" &
	hpid=$!
	poll 100 reported || fail "start $i: dump_known did not report its threads"
	# A drain or a few behind the program; never seconds.
	poll 40 all_forks $hpid || fail "start $i: the daemon never learned of every fork"
	kill $hpid
	wait $hpid 2>/dev/null
	hpid=
	i=$((i + 1))
done
echo "$N starts: every fork known to the daemon"
