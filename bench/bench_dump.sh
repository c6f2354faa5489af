#!/bin/sh
# bench_dump.sh - dump latency of a process with ~1,000 threads blocked in
# nested scopes (tests/helpers/dump_many): `scopecmd Thread.dump_to_file
# -format=json` against `eu-stack -p` and gdb's `thread apply all bt` on the
# same process in the same run; prints medians, ratios and the target's
# longest per-thread pause.  The daemon runs three times: with its default
# stack source (auto: BPF when it loads), the /proc source (--stacks=proc)
# and forced to signal mode.  Fails when
# scopecmd with the default source is not at least 10x faster than eu-stack.
# Also where a dump goes (the capture the dump reports, the daemon's reply
# alone on its control socket, rendered as scopecmd asks for it and plain,
# scopecmd's own start, CPU of the daemon and of scopecmd), the cold first
# dump against the warm ones, and the issue's targets, met or not.
# BENCH_RUNS (15): warm runs per stack source, and dumps of the busy process.
# Fifteen, not seven: on a shared host one or two slow runs in seven moved
# the median by half a millisecond (3.84 ms with 7, 2.90 ms with 21 on the
# same host within minutes).
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/dump_many
RUNS=${BENCH_RUNS:-15}
for f in "$BIN/scoped" "$BIN/scopecmd" "$HELPER"; do
	[ -x "$f" ] || { echo "bench_dump: $f is not built; skipped"; exit 0; }
done
private_dir bench-dump
dpid= hpid=
trap 'stop_all $hpid $dpid' EXIT

now_ns() { date +%s%N; }
# median of the numbers on stdin
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# time_runs RUNS command... : prints each run's wall time in ms, one a line
time_runs() {
	n=$1; shift
	i=0
	while [ $i -lt "$n" ]; do
		t0=$(now_ns)
		"$@" >/dev/null 2>&1 || return 1
		t1=$(now_ns)
		echo "$t1 $t0" | awk '{printf "%.2f\n", ($1-$2)/1e6}'
		i=$((i + 1))
	done
}

# The target is registered, or the daemon is gone (checked after).
registered() { is_listed "$hpid" || ! kill -0 "$dpid" 2>/dev/null; }
# The whole tree (1,010 tasks) is in the model.
tree_loaded() {
	[ "$("$BIN/scopecmd" --no-start "$hpid" Scope.tree 2>/dev/null | grep -c 'leaf@')" -ge 100 ]
}
start_daemon() { # stack mode
	if ! scoped_start "$D/scoped-$1.log" --stacks "$1" || ! poll 200 registered ||
		! kill -0 "$dpid" 2>/dev/null; then
		echo "  (stacks=$1: daemon did not come up or the process did not register; $(tail -1 "$D/scoped-$1.log"))"
		scoped_stop
		return 1
	fi
	poll 200 tree_loaded
	return 0
}

"$HELPER" >"$D/many" &
hpid=$!
many_ready() { grep -q ready "$D/many" 2>/dev/null; }
poll 600 many_ready || { echo "bench_dump: dump_many did not start its threads"; exit 1; }
nthreads=$(ls /proc/$hpid/task | wc -l)
echo "target: dump_many pid $hpid, $nthreads threads in 111 nested scopes (10 x 10 x 9 tasks); load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Peers first, against the same process: ptrace may be refused.
eu_ms= gdb_ms=
if ! command -v eu-stack >/dev/null; then
	echo "eu-stack: skipped (not installed; apt-get install elfutils)"
elif ! eu-stack -p $hpid >/dev/null 2>"$D/eu.err"; then
	echo "eu-stack: skipped (ptrace not permitted: $(head -1 "$D/eu.err"))"
else
	eu_ms=$(time_runs 3 eu-stack -p $hpid | median)
	# eu-stack must have seen the process's own functions, or it measured nothing.
	eu-stack -p $hpid 2>/dev/null | grep -q many_leaf_wait || echo "eu-stack: note: no many_leaf_wait frame in its output"
fi
if ! command -v gdb >/dev/null; then
	echo "gdb: skipped (not installed)"
else
	t0=$(now_ns)
	if timeout 300 gdb -nx -batch -ex 'set pagination off' -ex 'thread apply all bt' -p $hpid >"$D/gdb.out" 2>&1 &&
		grep -q 'many_leaf_wait' "$D/gdb.out"; then
		gdb_ms=$(echo "$(now_ns) $t0" | awk '{printf "%.2f\n", ($1-$2)/1e6}')
	else
		echo "gdb: skipped (attach failed or took over 300 s: $(grep -m1 -i 'ptrace\|denied\|error' "$D/gdb.out"))"
	fi
fi

# What both measuring programs below share: a process's CPU time, and the
# daemon's reply to a dump alone, from the request to its last byte (the
# plain reply, or with render the JDK text it renders for scopecmd).
cat >"$D/dumpreply.py" <<'PYEOF'
import re, socket, time
def oncpu(p):
	return int(open("/proc/%d/schedstat" % p).read().split()[0])
# (ms, whether the text was re-made from the last one, bytes)
def reply(ctl, pid, render):
	s = socket.socket(socket.AF_UNIX)
	s.connect(ctl)
	t0 = time.perf_counter()
	s.sendall(b'{"cmd":"dump","pid":%d,"id":1,"share_stacks":true%s}\n' %
		  (pid, b',"render":"jdk_json"' if render else b""))
	buf, want = b"", None
	while want is None or len(buf) < want:
		b = s.recv(1 << 20)
		if not b:
			break
		buf += b
		if want is None and b"\n" in buf:
			m = re.match(rb'[^\n]*"text_bytes":(\d+)', buf)
			want = buf.index(b"\n") + 1 + (int(m.group(1)) if m else 0)
	s.close()
	head = buf[:buf.index(b"\n") + 1] if b"\n" in buf else buf
	return (time.perf_counter() - t0) * 1e3, b'"reused":true' in head, len(buf)
PYEOF

rc=0
printf '\n%-40s %10s %6s %16s %12s\n' "tool" "median ms" "runs" "vs scopecmd" "max pause"
for mode in auto proc signal; do
	start_daemon $mode || continue
	# The first run is the cold one (the daemon's symbol cache, the page
	# cache; for BPF, nothing to reuse yet), not counted in the median.
	# Each run: wall time, the daemon's CPU (its schedstat), scopecmd's
	# CPU (rusage) and the capture the dump reports; then the daemon's own
	# reply alone, timed on the control socket.
	$PY - "$BIN/scopecmd" "$hpid" "$dpid" "$RUNS" "$D/dump.json" "$(control_sock)" >"$D/runs-$mode" <<'PYEOF' ||
import json, os, re, statistics, subprocess, sys, time
scopecmd, pid, dpid, runs, path, ctl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
sys.path.insert(0, os.path.dirname(path))
from dumpreply import oncpu, reply as reply_of
def dump():
	c0, t0 = oncpu(dpid), time.perf_counter()
	p = subprocess.Popen([scopecmd, "--no-start", str(pid), "Thread.dump_to_file", "-overwrite",
			      "-format=json", path], stdout=subprocess.DEVNULL)
	_, st, ru = os.wait4(p.pid, 0)
	ms = (time.perf_counter() - t0) * 1e3
	if st:
		sys.exit(1)
	m = re.search(rb'"captureNs": (\d+)', open(path, "rb").read())
	return ms, (oncpu(dpid) - c0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1e3, int(m.group(1)) / 1e6 if m else -1
def reply(render):
	return reply_of(ctl, pid, render)[:2]
# scopecmd's own start and exit, with no daemon asked (--version).
def start():
	t0 = time.perf_counter()
	subprocess.run([scopecmd, "--version"], stdout=subprocess.DEVNULL)
	return (time.perf_counter() - t0) * 1e3
cold = dump()
warm = [dump() for _ in range(runs)]
med = lambda i: statistics.median(x[i] for x in warm)
rep = statistics.median(reply(False)[0] for _ in range(runs))
# Rendered replies in a row: those the daemon re-made from the one before
# (nothing moved) apart, with the daemon's CPU for each.
rr = []
for _ in range(runs):
	c0 = oncpu(dpid)
	ms, reused = reply(True)
	rr.append((ms, reused, (oncpu(dpid) - c0) / 1e6))
rend = statistics.median(x[0] for x in rr)
reu = [x for x in rr if x[1]]
ren = [x for x in rr if not x[1]]
mid = lambda xs, i: "%.2f" % statistics.median(x[i] for x in xs) if xs else "-"

st = statistics.median(start() for _ in range(runs))
print("%.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f %.2f" % (med(0), min(x[0] for x in warm), max(x[0] for x in warm),
      cold[0], med(3), rep, med(1), med(2), cold[3], rend, st))
print("runs, ms: " + " ".join("%.2f" % x[0] for x in sorted(warm)))
print("%d %s %s %s %s" % (len(reu), mid(reu, 0), mid(reu, 2), mid(ren, 0), mid(ren, 2)))
PYEOF
		{ echo "scopecmd failed"; rc=1; scoped_stop; continue; }
	set -- $(sed -n 3p "$D/runs-$mode")
	echo "  daemon's rendered reply, $RUNS in a row ($mode): $1 re-made from the one before (nothing moved but threads' state or blocked-in):" \
		"$2 ms wall, $3 ms daemon CPU; rendered afresh: $4 ms wall, $5 ms daemon CPU" >>"$D/breakdown"
	eval "reused_$mode=$1 reused_ms_$mode=$2 reused_cpu_$mode=$3"
	set -- $(head -1 "$D/runs-$mode")
	med=$1
	echo "  scopecmd ($mode) $(sed -n 2p "$D/runs-$mode")" >>"$D/detail"
	echo "  scopecmd ($mode): warm $1 ms [$2-$3], cold (first) $4 ms; capture $5 ms warm, $9 ms cold (captureNs);" \
		"the daemon's reply alone ${10} ms rendered (what scopecmd waits for), $6 ms plain;" \
		"scopecmd's own start and exit ${11} ms; CPU per warm dump: daemon $7 ms + scopecmd $8 ms" >>"$D/breakdown"
	eval "cap_$mode=$5"
	pause=$($PY -c '
import json, sys
td = json.load(open(sys.argv[1]))["threadDump"]
n = sum(c["threadCount"] for c in td["threadContainers"])
p = td.get("maxPauseNs")
print("%s %d %s" % ("%.1f us" % (p / 1e3) if p is not None else "n/a", n, td.get("stackSource")))
' "$D/dump.json")
	set -- $pause
	printf '%-40s %10s %6s %16s %12s\n' "scopecmd ($mode: $4, $3 threads)" "$med" "$RUNS" "-" "$1 $2"
	eval "med_$mode=$med src_$mode=$4"
	scoped_stop
done
# A busy process: the same tree, and a task forked and joined every 2 ms
# (dump_many -b), so that no two dumps see the same tree: each is rendered
# afresh, and the reply carries the tasks and scopes that ended in the
# last seconds (the daemon's --retain), which the JDK's text does not show.
"$HELPER" -b >"$D/busy" &
bpid=$!
trap 'stop_all $hpid $dpid $bpid' EXIT
busy_ready() { grep -q ready "$D/busy" 2>/dev/null; }
if poll 600 busy_ready && { keep=$hpid; hpid=$bpid; start_daemon auto; }; then
	hpid=$keep
	sleep 2 # the retained tasks and scopes of two seconds
	$PY - "$BIN/scopecmd" "$bpid" "$dpid" "$RUNS" "$D/busy.json" "$(control_sock)" >"$D/busy-runs" <<'PYEOF' ||
import os, statistics, subprocess, sys, time
scopecmd, pid, dpid, runs, path, ctl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
sys.path.insert(0, os.path.dirname(path))
from dumpreply import oncpu, reply as reply_of
def dump():
	t0 = time.perf_counter()
	if subprocess.run([scopecmd, "--no-start", str(pid), "Thread.dump_to_file", "-overwrite",
			   "-format=json", path], stdout=subprocess.DEVNULL).returncode:
		sys.exit(1)
	return (time.perf_counter() - t0) * 1e3
def reply(render):
	c0 = oncpu(dpid)
	ms, reused, n = reply_of(ctl, pid, render)
	return ms, (oncpu(dpid) - c0) / 1e6, n, reused
dump()
e2e = statistics.median(dump() for _ in range(runs))
rr = [reply(True) for _ in range(runs)]
plain = statistics.median(reply(False)[2] for _ in range(3))
print("%.2f %.2f %.2f %d %d %d" % (e2e, statistics.median(x[0] for x in rr), statistics.median(x[1] for x in rr),
      sum(x[3] for x in rr), len(rr), plain))
PYEOF
		echo "busy process: scopecmd failed"
	scoped_stop
	set -- $(cat "$D/busy-runs" 2>/dev/null)
	[ $# -eq 6 ] && echo "  busy (dump_many -b, a task forked and joined every 2 ms): end to end $1 ms median;" \
		"the daemon's rendered reply $2 ms wall, $3 ms CPU, re-made from the last one in $4 of $5;" \
		"the plain reply $6 bytes (the tree's ended tasks and closed scopes included)" >>"$D/breakdown"
else
	hpid=${keep:-$hpid}
	echo "busy process: skipped (dump_many -b or the daemon did not come up)"
fi
kill $bpid 2>/dev/null
wait $bpid 2>/dev/null
bpid=

for peer in eu gdb; do
	eval "v=\$${peer}_ms"
	[ -n "$v" ] || continue
	name=$([ $peer = eu ] && echo "eu-stack -p" || echo "gdb thread apply all bt")
	best=${med_auto:-$med_signal}
	printf '%-40s %10s %6s %16s %12s\n' "$name" "$v" "$([ $peer = eu ] && echo 3 || echo 1)" \
		"$(echo "$v $best" | awk '{printf "%.1fx slower", $1/$2}')" "all stopped"
done
if [ -n "$eu_ms" ]; then
	for mode in auto proc signal; do
		eval "m=\${med_$mode:-}"
		[ -n "$m" ] || continue
		ratio=$(echo "$eu_ms $m" | awk '{printf "%.1f", $1/$2}')
		if echo "$ratio" | awk '{exit !($1 >= 10)}'; then
			echo "stacks=$mode: scopecmd is ${ratio}x faster than eu-stack (target >= 10x: met)"
		elif [ $mode = auto ]; then
			echo "stacks=$mode: scopecmd is only ${ratio}x faster than eu-stack (target >= 10x: MISSED)"
			rc=1
		else
			echo "stacks=$mode: scopecmd is ${ratio}x faster than eu-stack (informative; the target is for the default source)"
		fi
	done
fi
echo
echo "where a dump goes (medians of $RUNS warm runs; the first run is the cold one):"
cat "$D/breakdown"
[ -f "$D/detail" ] && cat "$D/detail"
# The issue's targets for 1,000 threads, said as met or not (informative:
# the host's load moves wall times; the 10x check above is the gate).
if [ -n "${med_auto:-}" ]; then
	verdict() { echo "$1 $2" | awk '{print ($1 <= $2) ? "met" : "NOT MET"}'; }
	capmax=$([ "${src_auto:-}" = bpf ] && echo 2 || echo 5)
	echo "targets (stacks=auto, ${src_auto:-?}): end to end <= 10 ms: $(verdict "$med_auto" 10);" \
		"warm dump <= 3 ms: $(verdict "$med_auto" 3) end to end, the daemon's reply when nothing moved" \
		"${reused_ms_auto:--} ms wall, ${reused_cpu_auto:--} ms CPU ($(
			[ "${reused_auto:-0}" -gt 0 ] && verdict "$reused_ms_auto" 3 || echo "n/a: none re-made")); capture <= $capmax ms: $(verdict "$cap_auto" "$capmax")" \
		"(${cap_auto} ms); >= 60x eu-stack: $([ -n "$eu_ms" ] && echo "$eu_ms $med_auto" |
			awk '{print ($1 / $2 >= 60) ? "met" : "NOT MET"}' || echo "n/a (no eu-stack)")"
fi
if [ -s "$D/busy-runs" ]; then
	set -- $(cat "$D/busy-runs")
	echo "target for the busy process (every dump rendered afresh): end to end <= 10 ms:" \
		"$(echo "$1" | awk '{print ($1 <= 10) ? "met" : "NOT MET"}') ($1 ms)"
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $rc
