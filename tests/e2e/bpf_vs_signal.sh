#!/bin/sh
# bpf_vs_signal.sh - the daemon's two stack sources against threads blocked
# in known functions (tests/helpers/bpf_target): BPF stacks name the same
# functions in the same order as signal-mode stacks, glibc frames included;
# a BPF capture wakes none of the target's threads while signal mode does;
# a 1,000-thread BPF dump succeeds and validates.  Needs root and BPF.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/bpf_target
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
[ "$(id -u)" -eq 0 ] || { echo "skip: BPF stacks need root (CAP_BPF and CAP_PERFMON)"; exit 77; }
need_jsonschema

private_dir bpf-vs-signal
dpid= apid= bpid=
cleanup() {
	exec 3>&- 4>&- 2>/dev/null
	stop_all $apid $bpid $dpid
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

start_daemon() { # mode
	scoped_start "$D/log" --stacks="$1"
	case $? in
	1) return 1 ;;
	2) fail "scoped did not create $D/control.sock" ;;
	esac
}

start_target() { # fifo, output, args...
	fifo=$1 out=$2
	shift 2
	mkfifo "$fifo"
	"$HELPER" -a "$@" <"$fifo" >"$out" &
	tpid=$!
}

says_ready() { grep -q '^ready$' "$1" 2>/dev/null; }
wait_ready() { # output file
	poll 300 says_ready "$1" || fail "bpf_target did not get ready ($1)"
}

# A stacks request straight on the control socket; prints the reply line.
query() { # pid
	$PY - "$D/control.sock" "$1" <<'PYEOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall((json.dumps({"id": 1, "cmd": "stacks", "pid": int(sys.argv[2])}) + "\n").encode())
buf = b""
while not buf.endswith(b"\n"):
	chunk = s.recv(1 << 20)
	if not chunk:
		break
	buf += chunk
print(buf.decode().strip())
PYEOF
}

answers_ok() { query "$1" | grep -q '"ok": *true'; }
wait_registered() { # pid
	poll 200 answers_ok "$1" || fail "process $1 never registered with the daemon"
}

if ! start_daemon bpf; then
	echo "skip: scoped --stacks=bpf cannot start: $(tail -1 "$D/log")"
	exit 77
fi
start_target "$D/a.in" "$D/a.out"
apid=$tpid
exec 3>"$D/a.in"
start_target "$D/b.in" "$D/b.out" 1000
bpid=$tpid
exec 4>"$D/b.in"
wait_ready "$D/a.out"
wait_ready "$D/b.out"
wait_registered "$apid"
wait_registered "$bpid"
cat "$D/a.out"

# BPF: every role thread's switch counters stay put across the capture.
$PY - "$D/a.out" "$apid" "$D/control.sock" >"$D/bpf.json" <<'PYEOF' || fail "BPF woke it or failed"
import json, socket, sys
roles = dict(l.split() for l in open(sys.argv[1]) if len(l.split()) == 2)
pid = int(sys.argv[2])
def switches():
	out = {}
	for role, tid in roles.items():
		with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
			out[role] = [l for l in f if l.startswith("voluntary_ctxt_switches")][0]
	return out
before = switches()
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[3])
s.sendall((json.dumps({"id": 7, "cmd": "stacks", "pid": pid}) + "\n").encode())
f = s.makefile()
reply = json.loads(f.readline())
after = switches()
assert reply["ok"] and reply["source"] == "bpf", \
	{k: reply.get(k) for k in ("ok", "source", "error")}
assert reply["max_pause_ns"] == 0, reply["max_pause_ns"]
woken = [r for r in roles if before[r] != after[r]]
assert not woken, "BPF capture woke %r" % woken
print(json.dumps(reply))
PYEOF

# A 1,000-thread process dumped through the BPF source.
"$BIN/scopecmd" --no-start "$bpid" Thread.dump_to_file -format=json "$D/big.json" >/dev/null ||
	fail "the 1000-thread dump failed"
$PY "$TOP/tests/validate_dump.py" --pid "$bpid" "$D/big.json" ||
	fail "the 1000-thread dump does not validate"
$PY - "$D/big.json" <<'PYEOF' || fail "the 1000-thread dump is incomplete"
import json, sys
td = json.load(open(sys.argv[1]))["threadDump"]
threads = [t for c in td["threadContainers"] for t in c["threads"]]
assert td["stackSource"] == "bpf", td["stackSource"]
assert len(threads) >= 1006, len(threads)
waiting = [t for t in threads if any(f.startswith("bpf_target_wait_futex ") for f in t["stack"])]
assert len(waiting) >= 1001, len(waiting)
print("1000-thread dump: %d threads, %d in bpf_target_wait_futex, captured in %.1f ms" %
      (len(threads), len(waiting), td["captureNs"] / 1e6))
PYEOF
echo q >&4
exec 4>&-
wait "$bpid"
bpid=

# Signal mode on the same threads.
scoped_stop
start_daemon signal || fail "scoped --stacks=signal did not start"
wait_registered "$apid"
query "$apid" >"$D/sig.json"

# ThreadSanitizer holds signals back while a thread blocks in some of the
# calls it intercepts (read, mutex lock): there, signal mode cannot answer.
case $BUILD in *tsan*) DEFERRED=1 ;; *) DEFERRED=0 ;; esac
export DEFERRED
$PY - "$D/a.out" "$D/bpf.json" "$D/sig.json" <<'PYEOF' || fail "BPF and signal-mode stacks differ"
import json, os, sys
roles = dict(l.split() for l in open(sys.argv[1]) if len(l.split()) == 2)
bpf = {t["tid"]: t for t in json.load(open(sys.argv[2]))["stacks"]}
sig = json.load(open(sys.argv[3]))
assert sig["ok"] and sig["source"] == "signal", sig
sig = {t["tid"]: t for t in sig["stacks"]}
want = {"futex": "bpf_target_wait_futex", "timedwait": "bpf_target_timedwait",
        "sleep": "bpf_target_sleep", "read": "bpf_target_read", "mutex": "bpf_target_lock",
        "epoll": "bpf_target_epoll"}
def funcs(t):
	return [f["func"] or f["addr"] for f in t["frames"]]
bad = compared = 0
for role, fn in want.items():
	tid = int(roles[role])
	b, s = funcs(bpf[tid]), funcs(sig[tid])
	above = bpf[tid]["frames"][:b.index(fn)] if fn in b else []
	libc = [f for f in above if "libc.so" in (f["module"] or "")]
	if not s and os.environ["DEFERRED"] == "1" and libc:
		print("%-9s signal mode got no stack under TSan (error %s); bpf: %s" %
		      (role, sig[tid].get("error"), " <- ".join(b)))
		continue
	compared += 1
	if b != s or not libc:
		bad += 1
		print("%s (tid %d):\n  bpf:    %s\n  signal: %s" % (role, tid, b, s))
	else:
		print("%-9s same %d frames: %s" % (role, len(b), " <- ".join(b)))
	assert bpf[tid]["state"] in ("WAITING", "TIMED_WAITING", "BLOCKED"), bpf[tid]["state"]
sys.exit(1 if bad or compared < 3 else 0)
PYEOF

# The signal-mode capture interrupted the target's sleeps; BPF did not.
echo q >&3
exec 3>&-
wait "$apid"
apid=
cat "$D/a.out" | tail -1
grep -Eq '^signals 0 eintr [1-9]' "$D/a.out" ||
	fail "expected signal mode (only) to interrupt the target's sleeps: $(tail -1 "$D/a.out")"
echo "ok"
