#!/bin/sh
# plain_stacks.sh - processes that never linked libscope are dumped too:
# tests/helpers/plain_threads (named threads parked in a sleep, a read, a
# mutex main holds, a condition variable, plus a busy loop), a `sleep` and
# a `python3`.  Each dump validates (schema and tests/validate_dump.py, the
# jstack reader), has its threads in <root> and no other container, says
# "instrumented": false and which stack source it used, gives each parked
# thread its state and what it is blocked in, and the functions of the
# helper's frames (with their lines) as `eu-stack -i -s` shows them on the
# same threads.  Sources: /proc (scoped without BPF), BPF when it loads,
# and /proc again with scoped and the target running as a real unprivileged
# user made for the test, who is refused another user's process with the
# reason.  The user part needs root (useradd), else it is skipped.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/plain_threads
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
command -v eu-stack >/dev/null || { echo "skip: eu-stack missing (elfutils; make deps)"; exit 77; }
# Sanitizer builds run threads of their own and intercept the waits: the
# frame-by-frame comparison holds for plain builds only.
COMPARE=1
case $BUILD in
*asan* | *tsan*)
	COMPARE=0
	echo "skip: the eu-stack comparison in a sanitizer build (its runtime adds frames and threads)"
	;;
esac
export COMPARE

private_dir plain-stacks
dpid= kpid= hpid= hpid2= stpid= spid= ppid= upid= udpid= U= writers=
cleanup() {
	stop_all $kpid $hpid $hpid2 $stpid $spid $ppid $dpid $upid $udpid $writers
	[ -n "$U" ] && userdel "$U" 2>/dev/null
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

# start_helper OUT [RUNAS...]: plain_threads -s 3 (ARGS: other
# arguments), kept alive by a writer on its standard input; sets pid.
start_helper() {
	out=$1
	shift
	rm -f "$out.in"
	mkfifo "$out.in" && chmod 666 "$out.in"
	: >"$out" && chmod 666 "$out"
	"$@" sh -c 'exec "$0" $2 <"$1.in" >"$1"' "$HELPER" "$out" "${ARGS:--s 3}" &
	sleep 600 >"$out.in" &
	writers="$writers $!"
	says_ready() { grep -q '^ready$' "$out" 2>/dev/null; }
	poll 200 says_ready || fail "plain_threads did not get ready: $(cat "$out")"
	pid=$(awk '$1 == "main" { print $2 }' "$out")
}

# check NAME PID SOURCE [SCOPECMD-PREFIX...]: dumps PID as JSON, text and
# jstack, validates, and compares with eu-stack.
check() {
	name=$1 tpid=$2 source=$3
	shift 3
	"$@" "$BIN/scopecmd" --no-start "$tpid" Thread.dump_to_file -format=json - \
		>"$D/$name.json" 2>"$D/err" || fail "$name: dump failed: $(cat "$D/err")"
	"$@" "$BIN/scopecmd" --no-start "$tpid" Thread.print -l >"$D/$name.txt" 2>"$D/err" ||
		fail "$name: Thread.print failed: $(cat "$D/err")"
	"$@" "$BIN/scopecmd" --no-start "$tpid" Thread.print -format=jstack >"$D/$name.jstack" \
		2>"$D/err" || fail "$name: the jstack form failed: $(cat "$D/err")"
	$PY "$TOP/tests/validate_dump.py" --pid "$tpid" "$D/$name.json" ||
		fail "$name: the dump does not validate"
	# The reader wants more than one thread, and threads that stay where
	# they are between the two dumps; and frame names without spaces,
	# which the sanitizers' C++ runtime frames have
	# ("cond_wait<...::<lambda()> >"), so not in their builds.
	[ "$name" != still ] || [ "$COMPARE" != 1 ] || $PY "$TOP/tests/e2e/jstack_parse.py" --compare "$D/$name.json" \
		"$D/$name.jstack" || fail "$name: the jstack form does not read back"
	grep -q "not instrumented (no libscope: threads only), stacks from $source" "$D/$name.txt" ||
		fail "$name: the text dump's header: $(sed -n 2p "$D/$name.txt")"
	eu-stack -i -s -p "$tpid" >"$D/eu.txt" 2>"$D/eu.err" || fail "eu-stack failed: $(cat "$D/eu.err")"
	$PY - "$D/$name.json" "$D/eu.txt" "$source" "$name" "$D/t.out" <<'PYEOF' || fail "$name: wrong dump"
import json, os, re, sys
dump, eu_path, source, name, roles_path = sys.argv[1:6]
td = json.load(open(dump))["threadDump"]
assert td["stackSource"] == source, td["stackSource"]
assert td["instrumented"] is False and td["runtimeName"] is None, td
conts = td["threadContainers"]
assert [c["container"] for c in conts] == ["<root>"], [c["container"] for c in conts]
threads = {t["tid"]: t for t in conts[0]["threads"]}
assert len(threads) == len(conts[0]["threads"]) == conts[0]["threadCount"]

def fn(frame):
	return frame.split(" (")[0]

def norm(n):
	return n.split(".")[0] if n else n

if name == "still":
	print("%s: %d threads, the jstack form reads back" % (name, len(threads)))
	sys.exit(0)
if name != "helper":
	# A sleep or a python3: its main thread sits in a sleep, with a stack.
	main = threads[td["processId"]]
	assert main["state"] == "TIMED_WAITING" and main["blockedIn"] == "sleep", main
	assert main["stack"] and "stackError" not in main, main
	print("%s: %d threads, main in %s" % (name, len(threads), fn(main["stack"][0])))
	sys.exit(0)

roles = dict(l.split() for l in open(roles_path) if len(l.split()) == 2)
want = {"sleeper": ("TIMED_WAITING", "sleep", "plain_park_sleep"),
	"reader": ("WAITING", "read", "plain_park_read"),
	"locker": ("BLOCKED", "mutex", "plain_park_mutex"),
	"waiter": ("WAITING", "futex", "plain_park_cond")}
for role, (state, blocked, func) in want.items():
	t = threads[int(roles[role])]
	assert t["name"] == role, t
	assert t["state"] == state and t["blockedIn"] == blocked, (role, t)
	assert "stackError" not in t, (role, t)
	if os.environ.get("COMPARE") == "1":
		assert func in [fn(f) for f in t["stack"]], (role, t["stack"])
		assert "approximate" not in t, (role, t)
	else:
		# The sanitizer's interceptors need the frame pointer for their
		# CFI, and the link found on the stack past them can be stale
		# (a known limit of the /proc tier in sanitizer builds): only a
		# stack is asked for.
		assert t["stack"], (role, t)
spin = threads[int(roles["spinner"])]
assert spin["state"] == "RUNNABLE", spin
# A thread on a CPU: a perf sample's stack, or no stack and the reason.
assert ("plain_spin" in [fn(f) for f in spin["stack"]]) or "running" in spin.get("stackError", ""), spin
main = threads[td["processId"]]
whole = lambda t, f: f in [fn(x) for x in t["stack"]] or (os.environ.get("COMPARE") != "1" and t["stack"])
assert main["blockedIn"] == "read" and whole(main, "main"), main
idle = [t for t in threads.values() if t["name"].startswith("idle-")]
assert len(idle) == 3 and all(whole(t, "plain_park_cond") for t in idle), idle

if os.environ.get("COMPARE") != "1":
	print("%s/%s: %d threads, states and blockers right" % (name, source, len(threads)))
	sys.exit(0)
# eu-stack -i -s: "#N 0xADDR func" then "    file:line".
eu, tid, cur = {}, None, None
for line in open(eu_path):
	m = re.match(r"^TID (\d+):", line)
	if m:
		tid = int(m.group(1))
		eu[tid] = []
		continue
	m = re.match(r"^#\d+\s+0x[0-9a-f]+\s+(\S+)", line)
	if m and tid is not None:
		cur = [norm(m.group(1)), None, None]
		eu[tid].append(cur)
		continue
	m = re.match(r"^\s+(\S+?):(\d+)(:\d+)?$", line)
	if m and cur is not None:
		cur[1], cur[2] = m.group(1).rsplit("/", 1)[-1], int(m.group(2))
compared = 0
for tid, t in threads.items():
	if tid == int(roles["spinner"]) or tid not in eu:
		continue  # it moves between the two tools
	theirs = [(f[0], f[2]) for f in eu[tid] if f[1] == "plain_threads.c"]
	ours = []
	for f in t["stack"]:
		m = re.match(r"^(\S+) \(plain_threads\.c:(\d+)\)$", f)
		if m:
			ours.append((norm(m.group(1)), int(m.group(2))))
	assert theirs and ours == theirs, "tid %d (%s):\n  eu-stack: %s\n  ours:     %s" % (tid, t["name"], theirs, ours)
	compared += 1
assert compared >= 8, compared
print("%s/%s: %d threads as eu-stack -i shows them, states and blockers right" % (name, source, compared))
PYEOF
}

# 1. scoped without BPF: the /proc tier.
start_helper "$D/t.out"
hpid=$pid
scoped_start "$D/log" --stacks=signal || fail "scoped did not start"
# scopetop watches it too: its thread view, from the stacks alone (before
# eu-stack stops the helper: see the BPF case).
if command -v tmux >/dev/null; then
	sess=plain$$
	tmux new-session -d -s $sess -x 160 -y 24 \
		"SCOPED_SOCKET='$SCOPED_SOCKET' '$BIN/scopetop' $hpid; sleep 60"
	pane_ok() {
		tmux capture-pane -p -t $sess >"$D/pane" 2>/dev/null &&
			grep -Eq ' locker +other +- +BLOCKED +mutex ' "$D/pane" &&
			grep -Eq ' sleeper +other +- +TIMED_WAITING +sleep ' "$D/pane"
	}
	poll 200 pane_ok || { tmux kill-session -t $sess; fail "scopetop's thread view: $(cat "$D/pane")"; }
	tmux kill-session -t $sess
	echo "scopetop shows the threads"
else
	echo "note: the scopetop case not run (no tmux)"
fi
check helper "$hpid" proc
# The daemon's reply lists a stack once for alike threads when asked
# ("share_stacks"): the three idle threads name the first.
$PY - "$(control_sock)" "$hpid" >"$D/reply.json" <<'PYEOF' || fail "the raw dump request failed"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall((json.dumps({"id": 1, "cmd": "dump", "pid": int(sys.argv[2]), "share_stacks": True}) + "\n").encode())
buf = b""
while not buf.endswith(b"\n"):
	b = s.recv(1 << 16)
	if not b:
		break
	buf += b
sys.stdout.write(buf.decode())
PYEOF
$PY "$TOP/tests/validate_json.py" control-reply.schema.json "$D/reply.json" || fail "the dump reply does not validate"
$PY -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["process"]["instrumented"] is False, r.get("error")
shared = [t for t in r["stacks"] if "same_stack_as" in t]
assert len(shared) >= 2 and all(not t["frames"] for t in shared), shared
' "$D/reply.json" || fail "alike threads do not share their stack in the reply"
"$BIN/scopecmd" --no-start -l -a >"$D/list" 2>&1 || fail "scopecmd -l -a failed: $(cat "$D/list")"
grep -q "^$hpid plain_threads (no libscope)\$" "$D/list" || fail "-l -a does not list the helper: $(head "$D/list")"
"$BIN/scopecmd" --no-start -l >"$D/list" 2>&1
grep -q "^$hpid " "$D/list" && fail "-l without -a lists a process without libscope"
"$BIN/scopecmd" --no-start -l -a --json >"$D/list.json" || fail "scopecmd -l -a --json failed"
$PY "$TOP/tests/validate_json.py" process-list.schema.json "$D/list.json" || fail "the list does not validate"
# A name finds it with -a.
"$BIN/scopecmd" --no-start -a plain_threads Thread.print >"$D/byname.txt" 2>&1 ||
	fail "-a plain_threads Thread.print failed: $(cat "$D/byname.txt")"
ARGS=2 start_helper "$D/still.out"
stpid=$pid
check still "$stpid" proc
# in_sleep PID: the process's main thread sits in nanosleep/clock_nanosleep.
in_sleep() { grep -Eq '^(35|230) ' "/proc/$1/syscall" 2>/dev/null; }
sleep 600 &
spid=$!
poll 200 in_sleep $spid || fail "sleep did not get to its sleep"
check sleep "$spid" proc
if command -v python3 >/dev/null; then
	python3 -c 'import time; print("ready", flush=True); time.sleep(600)' >"$D/py.out" &
	ppid=$!
	py_ready() { grep -q ready "$D/py.out"; }
	poll 200 py_ready || fail "python3 did not start"
	poll 200 in_sleep $ppid || fail "python3 did not get to its sleep"
	check python3 "$ppid" proc
else
	echo "note: the python3 case not run (no python3)"
fi
scoped_stop

# An instrumented process with --stacks=proc: its scopes, and stacks from
# /proc (no signal reaches it).
KNOWN=$TOP/$BUILD/tests/helpers/dump_known
if [ -x "$KNOWN" ]; then
	scoped_start "$D/log" --stacks=proc || fail "scoped --stacks=proc did not start"
	"$KNOWN" >"$D/known" &
	kpid=$!
	poll 200 is_listed $kpid || fail "dump_known never registered"
	known_ready() { [ -s "$D/known" ]; }
	poll 200 known_ready || fail "dump_known did not say where its threads are"
	"$BIN/scopecmd" --no-start $kpid Thread.dump_to_file -format=json "$D/known.json" >/dev/null 2>"$D/err" ||
		fail "the dump of dump_known failed: $(cat "$D/err")"
	$PY "$TOP/tests/validate_dump.py" --pid $kpid "$D/known.json" || fail "dump_known's dump does not validate"
	$PY -c '
import json, sys
td = json.load(open(sys.argv[1]))["threadDump"]
assert td["stackSource"] == "proc" and "instrumented" not in td, td["stackSource"]
names = [c["container"] for c in td["threadContainers"]]
assert len(names) > 1, names  # its scopes are there
frames = [f for c in td["threadContainers"] for t in c["threads"] for f in t["stack"]]
assert any(f.startswith("known_") or "dump_known.c" in f for f in frames), frames[:20]
' "$D/known.json" || fail "dump_known from /proc: wrong dump"
	kill $kpid
	kpid=
	scoped_stop
	echo "an instrumented process dumps from /proc too"
else
	echo "note: the --stacks=proc case for an instrumented process not run (dump_known not built)"
fi
# Each helper spins a thread: one at a time on a small machine.
kill $hpid $stpid $spid $ppid 2>/dev/null
hpid= stpid= spid= ppid=

# 2. scoped with BPF, when it loads here; a fresh helper, since eu-stack
# stopped the first one, and a sleep it interrupts comes back as
# restart_syscall, which says nothing of what it waits for.
start_helper "$D/t.out"
hpid2=$pid
scoped_start "$D/log" --stacks=bpf
case $? in
0) check helper "$hpid2" bpf ;;
*) echo "skip: the BPF case (scoped --stacks=bpf does not start here: $(tail -1 "$D/log"))" ;;
esac
scoped_stop
kill $hpid2 2>/dev/null
hpid2=

# 3. As a real unprivileged user: scoped without BPF reads that user's own
# process, and refuses root's with the reason.
if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v setpriv >/dev/null; then
	echo "skip: the unprivileged-user part (needs root, useradd and setpriv)"
	echo "plain processes dump"
	exit 0
fi
U=scp$$
useradd -r -M -N -s /usr/sbin/nologin "$U" || fail "useradd $U"
uid=$(id -u "$U") gid=$(id -g "$U")
UD=$D/u
mkdir -p "$UD" && chown "$U" "$UD" && chmod 755 "$D"
as_user() { env -u XDG_RUNTIME_DIR SCOPED_SOCKET="$UD/agent.sock" HOME=/ setpriv --reuid "$uid" --regid "$gid" --clear-groups "$@"; }
start_helper "$D/ut.out" as_user
upid=$pid
cp "$D/ut.out" "$D/t.out" # the roles of the user's helper
# Not through the function: in the background that would be a subshell,
# and $! its pid, not scoped's.
env -u XDG_RUNTIME_DIR SCOPED_SOCKET="$UD/agent.sock" HOME=/ setpriv --reuid "$uid" --regid "$gid" \
	--clear-groups "$BIN/scoped" --foreground --socket "$UD/agent.sock" >>"$D/ulog" 2>&1 &
udpid=$!
u_up() { [ -S "$UD/control.sock" ]; }
poll 100 u_up || fail "scoped as $U did not start: $(cat "$D/ulog")"
check helper "$upid" proc as_user
as_user "$BIN/scopecmd" --no-start 1 Thread.print >"$D/refused" 2>&1 &&
	fail "the user dumped root's process: $(head -3 "$D/refused")"
grep -q "permission denied: process 1 belongs to uid 0 and you are uid $uid" "$D/refused" ||
	fail "the refusal does not say why: $(cat "$D/refused")"
grep -q "SCOPED_SOCKET" "$D/refused" && fail "the refusal gives the SCOPED_SOCKET hint: $(cat "$D/refused")"
echo "plain processes dump, as root and as $U"
