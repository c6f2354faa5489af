#!/bin/sh
# scopetop_pool_warn.sh - scopetop's header warns about pools in trouble, as
# the daemon's pool advisor sees them, in tmux: a queue that grows while
# nothing ends ("queue stuck": tests/helpers/pool_trouble stuck) and CPUs
# saturated by a pool's threads (pool_trouble saturate).  Each wait polls
# the screen against a deadline; a missing warning fails within it.
set -u
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
. "$TOP/tests/lib/tmux.sh"
HELPER=$TOP/$BUILD/tests/helpers/pool_trouble
for f in "$BIN/scoped" "$BIN/scopetop" "$HELPER"; do
	[ -x "$f" ] || { echo "FAIL: $f is not built"; exit 1; }
done

private_dir scopetop-warn
SOCK=$SCOPED_SOCKET
tmux_setup scopetop-warn
S=
dpid= HPID=
cleanup() {
	$T kill-server 2>/dev/null
	[ -n "$HPID" ] && kill -KILL "$HPID" 2>/dev/null
	stop_all "$dpid"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*"
	echo "--- screen:"; tmux_screen
	echo "--- helper:"; cat "$D/helper.out" 2>/dev/null
	echo "--- scoped log:"; tail -5 "$D/scoped.log" 2>/dev/null
	exit 1
}


scoped_start "$D/scoped.log" || fail "scoped did not create $(control_sock)"

# start MODE POOL : runs the helper in MODE and scopetop on it in session MODE.
start() {
	[ -n "$HPID" ] && { kill -KILL "$HPID" 2>/dev/null; wait "$HPID" 2>/dev/null; }
	SCOPED_SOCKET=$SOCK "$HELPER" "$1" >"$D/helper.out" 2>&1 &
	HPID=$!
	poll 100 grep -qs "ready $2" "$D/helper.out" || fail "pool_trouble $1 did not start"
	poll 100 is_listed "$HPID" || fail "pool_trouble $1 did not register with scoped"
	S=$1
	$T new-session -d -s "$S" -x 200 -y 30 \
		"LANG=C.UTF-8 SCOPED_SOCKET=$SOCK $BIN/scopetop $HPID; sleep 30" ||
		fail "tmux did not start"
	wait_for "scopetop +pool_trouble \[$HPID\]" 100 || fail "scopetop did not show pool_trouble"
}

# A queue that grows with nothing ending: the advisor says so within a
# second, scopetop asks every 3 s.
start stuck jam
wait_for "⚠ pool jam: queue stuck" 200 || fail "no 'queue stuck' warning for pool jam"
grep -q "pool jam: CPU saturated" "$D/screen" && fail "a blocked pool was called CPU-saturated"
$T kill-session -t stuck

# Four threads computing on two CPUs: saturated (by the process's CPU time,
# or by its tasks' time runnable when the host is busy too).
start saturate burn
wait_for "⚠ pool burn: CPU saturated" 250 || fail "no 'CPU saturated' warning for pool burn"
grep -q "pool burn: queue stuck" "$D/screen" && fail "a busy pool was called stuck"
echo "ok: scopetop's header warned 'queue stuck' and 'CPU saturated' for the pools in trouble"
