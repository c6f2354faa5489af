#!/bin/sh
# lock_owners.sh - a thread that waits for a pthread mutex is shown waiting
# to lock it, with the thread that owns it, and the owner lists it among its
# locked synchronizers: in the JSON dump (waitingToLock, locksHeld, checked
# against the schema), in the jstack form (read back by tests/e2e/
# jstack_parse.py, which links waiter and holder as analysers do) and in the
# text form with -l.  tests/helpers/plain_locks (no libscope) and
# lock_tasks (the same with the holder, the waiter and a condition waiter as
# libscope tasks) hold a normal, a priority-inheritance and a robust mutex,
# each with a waiter, and wait on a condition variable, a semaphore and a
# futex word with a lock's value but no owner: none of those may show a
# lock.  Every stack source that runs here: /proc, the agent's signals (the
# instrumented helper), BPF when it loads; and scopetop's detail pane of the
# waiting task (tmux).
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
PLAIN=$TOP/$BUILD/tests/helpers/plain_locks
TASKS=$TOP/$BUILD/tests/helpers/lock_tasks
need_built "$BIN/scoped" "$BIN/scopecmd" "$PLAIN" "$TASKS"
need_jsonschema

private_dir lock-owners
dpid= hpid= writers=
cleanup() { stop_all $hpid $dpid $writers; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

# start_helper PROGRAM: runs it, its standard input held open; sets hpid.
start_helper() {
	rm -f "$D/h.in" "$D/h.out"
	mkfifo "$D/h.in"
	"$1" <"$D/h.in" >"$D/h.out" &
	hpid=$!
	sleep 600 >"$D/h.in" &
	writers="$writers $!"
	ready() { grep -q '^ready$' "$D/h.out"; }
	poll 200 ready || fail "$(basename "$1") did not get ready: $(cat "$D/h.out")"
}
stop_helper() {
	kill "$hpid" 2>/dev/null
	wait "$hpid" 2>/dev/null
	hpid=
}
val() { awk -v k="$1" '$1 == k { print $2 }' "$D/h.out"; }

# The waiters are asleep in their futex calls once a dump shows all three.
all_waiting() {
	"$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json - >"$D/d.json" 2>"$D/err" &&
		[ "$(grep -o '"waitingToLock"' "$D/d.json" | wc -l)" -ge 3 ]
}

# check NAME SOURCE: the dumps of the running helper.
check() {
	name=$1 source=$2
	poll 100 all_waiting || fail "$name: three waiters with their owners never showed: $(cat "$D/err")
$(grep -o '"name":"[^"]*","state":"[A-Z_]*"' "$D/d.json")"
	$PY "$TOP/tests/validate_dump.py" --pid "$hpid" "$D/d.json" ||
		fail "$name: the dump does not validate"
	$PY - "$D/d.json" "$D/h.out" "$source" <<'EOF' || fail "$name: wrong locks in the JSON dump"
import json, sys
td = json.load(open(sys.argv[1]))["threadDump"]
out = dict(l.split() for l in open(sys.argv[2]) if len(l.split()) == 2)
if td["stackSource"] != sys.argv[3]:
    sys.exit("stacks from %s, not %s" % (td["stackSource"], sys.argv[3]))
th = {t["tid"]: t for c in td["threadContainers"] for t in c["threads"]}
def t(name):
    return th[int(out[name])]
held_by = {}
for pre, key in (("", "mutex"), ("pi-", "pi"), ("rb-", "robust")):
    w, h, addr = t(pre + "waiter"), t(pre + "holder"), out[key]
    want = {"lock": addr, "class": "pthread_mutex_t", "ownerTid": h["tid"],
            "ownerName": h["name"]}
    if w.get("waitingToLock") != want:
        sys.exit("%swaiter: %r, not %r" % (pre, w.get("waitingToLock"), want))
    if w["state"] != "BLOCKED" or w.get("blockedIn") != "mutex":
        sys.exit("%swaiter is %s in %s" % (pre, w["state"], w.get("blockedIn")))
    if h.get("locksHeld") != [{"lock": addr, "class": "pthread_mutex_t",
                               "waiters": [w["tid"]]}]:
        sys.exit("%sholder holds %r" % (pre, h.get("locksHeld")))
    held_by[h["tid"]] = w["tid"]
for name in ("condwait", "semwait", "rawfutex"):
    if "waitingToLock" in t(name):
        sys.exit("%s (no mutex) shown waiting to lock %r" % (name, t(name)["waitingToLock"]))
# Signal mode knows no kernel waits: only the lock waits it was told of.
for name in ("condwait", "semwait"):
    if t(name).get("blockedIn") != ("futex" if sys.argv[3] != "signal" else None):
        sys.exit("%s: blocked in %s" % (name, t(name).get("blockedIn")))
extra = [x["tid"] for x in th.values() if ("locksHeld" in x) != (x["tid"] in held_by)]
if extra:
    sys.exit("threads %r hold locks, or do not, unlike the helper" % extra)
EOF
	"$BIN/scopecmd" --no-start "$hpid" Thread.print -l -format=jstack >"$D/j.txt" 2>"$D/err" ||
		fail "$name: Thread.print -format=jstack failed: $(cat "$D/err")"
	"$BIN/scopecmd" --no-start "$hpid" Thread.print -l >"$D/t.txt" 2>"$D/err" ||
		fail "$name: Thread.print -l failed: $(cat "$D/err")"
	for pre in "" pi- rb-; do
		case $pre in "") key=mutex ;; pi-) key=pi ;; rb-) key=robust ;; esac
		w=$(val "${pre}waiter") h=$(val "${pre}holder") a=$(val $key)
		$PY "$TOP/tests/e2e/jstack_parse.py" --locks "$D/j.txt" "$w" "$h" "$a" ||
			fail "$name: the jstack form does not link ${pre}waiter to ${pre}holder"
		grep -q "^ *- waiting to lock <$a> (a pthread_mutex_t) owned by tid $h \"" "$D/t.txt" ||
			fail "$name: no '- waiting to lock <$a> … owned by tid $h' in the text form"
		grep -q "^ *- holds <$a> (a pthread_mutex_t)\$" "$D/t.txt" ||
			fail "$name: no '- holds <$a>' in the text form"
	done
	echo "$name: every lock with its owner, from $source"
}

# 1. Without BPF: /proc for both, the agent's signals for the instrumented one.
scoped_start "$D/log" --stacks=proc || fail "scoped did not start: $(tail -3 "$D/log")"
start_helper "$PLAIN"
check plain proc
stop_helper
start_helper "$TASKS"
poll 100 is_listed "$hpid" || fail "lock_tasks's agent did not connect"
check instrumented proc
# scopetop's detail pane of the waiting task says whose mutex it waits for.
if command -v tmux >/dev/null; then
	T="tmux -L lock-owners-$$ -f /dev/null"
	$T new-session -d -s m -x 120 -y 40 \
		"LANG=C.UTF-8 SCOPED_SOCKET=$SCOPED_SOCKET $BIN/scopetop $hpid; sleep 30"
	sleep 1
	$T send-keys -t m / t a s k _ w a i t e r Enter
	sleep 0.5
	$T send-keys -t m j j
	pane() {
		$T capture-pane -p -t m >"$D/screen"
		grep -q "waiting to lock <$(val mutex)> owned by tid $(val holder) " "$D/screen"
	}
	poll 100 pane || { $T kill-server; fail "scopetop's pane lacks the owner: $(cat "$D/screen")"; }
	$T kill-server
	echo "scopetop: the waiting task's owner shown"
else
	echo "skip: the scopetop part (no tmux)"
fi
stop_helper
scoped_stop

scoped_start "$D/log" --stacks=signal || fail "scoped did not start: $(tail -3 "$D/log")"
start_helper "$TASKS"
poll 100 is_listed "$hpid" || fail "lock_tasks's agent did not connect"
check instrumented signal
stop_helper
scoped_stop

# 2. BPF, when it loads here.
if scoped_start "$D/log" --stacks=bpf; then
	start_helper "$PLAIN"
	check plain bpf
	stop_helper
	start_helper "$TASKS"
	poll 100 is_listed "$hpid" || fail "lock_tasks's agent did not connect"
	check instrumented bpf
	stop_helper
else
	echo "skip: the BPF case (scoped --stacks=bpf does not start here: $(tail -1 "$D/log"))"
fi
echo "lock owners shown"
