#!/bin/sh
# bench_plain.sh - dumps of a process that never linked libscope
# (tests/helpers/plain_threads with about 1,000 threads parked), end to end
# (`scopecmd Thread.dump_to_file -format=json`, command start to file
# written) against `eu-stack -p` on the same process, rounds interleaved in
# a random order, medians with the range of the rounds, and each round's
# ratio to eu-stack.  Stack sources: /proc (scoped without BPF) and BPF (when
# it loads).  Also: where a dump's time goes (the capture the daemon reports,
# the daemon's whole reply measured on its control socket, the rest in
# scopecmd), a warm dump against the first, and one dump of a process with
# 10,000 threads (each thread once, the cost per thread).  eu-stack stops
# and resumes every thread between the rounds, so each round's dump is one
# where every thread moved (no thread is unchanged since the last); after
# the rounds, dumps in a row with nothing in between measure the warm dump
# (a process whose threads did not move) end to end and the daemon's reply
# alone, beside scopecmd's own start and exit (scopecmd --version).  Then
# the capture alone, as the daemon
# reports it: cold (its first of the process), every thread moved (the
# rounds), warm (captures in a row of the parked threads), and warm with one
# thread that wakes every millisecond (a second plain_threads, -t).  And
# the /proc capture in its parts, from the daemon's replies (read_ns: the
# threads' files, registers and stack windows; unwind_ns; then symbols_ns,
# naming the frames after the capture) for the same four cases, the cold
# one from a daemon that dumps nothing before it; and the kernel's floor
# under those reads on the same process (tests/helpers/plain_procfloor: one
# pread of each thread's syscall file, and the four reads a thread that ran
# costs), with the all-moved capture as a ratio to it.  Then three new
# python3 programs, each dumped once by every daemon (its first dump of
# that process, after the others), beside eu-stack -i.
# BENCH_THREADS (1000), BENCH_RUNS (9), BENCH_BIG (10000; 0 skips it),
# BENCH_BASE (the bin directory of another build, e.g. main's: its scoped
# runs the /proc source too, as mode "base", in the same rounds and the
# same warm captures, interleaved, with each /proc figure's ratio to it).
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/plain_threads
PROCFLOOR=$TOP/$BUILD/tests/helpers/plain_procfloor
export PROCFLOOR
for f in "$BIN/scoped" "$BIN/scopecmd" "$HELPER"; do
	[ -x "$f" ] || { echo "bench_plain: $f is not built; skipped"; exit 0; }
done
N=${BENCH_THREADS:-1000}
RUNS=${BENCH_RUNS:-9}
BIG=${BENCH_BIG:-10000}
private_dir bench-plain
pids= writers=
trap 'stop_all $pids $writers' EXIT

# helper OUT EXTRA [OPTION]: starts plain_threads with EXTRA idle threads;
# sets hp.
helper() {
	mkfifo "$1.in"
	"$HELPER" "$2" ${3:-} <"$1.in" >"$1" &
	pids="$pids $!"
	hp=$!
	sleep 3600 >"$1.in" &
	writers="$writers $!"
	ready() { grep -q '^ready$' "$1" 2>/dev/null; }
	poll 1200 ready "$1" || { echo "bench_plain: plain_threads $2 did not start"; exit 1; }
}
# daemon NAME OPTION...: a scoped of its own on $D/NAME/agent.sock.
daemon() {
	name=$1
	shift
	mkdir -p "$D/$name"
	"$BIN/scoped" --foreground --socket "$D/$name/agent.sock" "$@" >"$D/$name.log" 2>&1 &
	pids="$pids $!"
	echo $! >"$D/$name.pid"
	up() { [ -S "$D/$name/control.sock" ]; }
	poll 200 up
}

helper "$D/t" "$N"
daemon proc --stacks=signal || { echo "bench_plain: scoped did not start"; exit 1; }
daemon proccold --stacks=signal || { echo "bench_plain: scoped did not start"; exit 1; }
modes=proc
BASE=${BENCH_BASE:-}
if [ -n "$BASE" ]; then
	[ -x "$BASE/scoped" ] && [ -x "$BASE/scopecmd" ] || { echo "bench_plain: no scoped and scopecmd in $BASE"; exit 1; }
	BIN_SAVED=$BIN
	BIN=$BASE
	daemon base --stacks=signal || { echo "bench_plain: $BASE/scoped did not start"; exit 1; }
	BIN=$BIN_SAVED
	modes="proc base"
fi
if daemon bpf --stacks=bpf; then
	modes="$modes bpf"
else
	echo "(BPF: scoped --stacks=bpf does not start here: $(tail -1 "$D/bpf.log"); /proc only)"
fi
# The same with a thread that wakes every millisecond: some thread has
# always run since the last capture.
helper "$D/tk" "$N" -t
tk=$(awk '$1 == "main" { print $2 }' "$D/tk")
big=
if [ "$BIG" -gt 0 ]; then
	helper "$D/big" "$BIG"
	big=$hp
fi
# The first target last started: find the 1,000-thread one again.
hp=$(awk '$1 == "main" { print $2 }' "$D/t")

$PY - "$BIN/scopecmd" "$D" "$hp" "$RUNS" "$modes" "$big" "$BASE" "$tk" <<'PYEOF'
import json, os, random, socket, statistics, subprocess, sys, time
scopecmd, D, pid, runs, modes, big = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(), sys.argv[6]
base_bin, ticking = sys.argv[7], int(sys.argv[8])
have_eu = subprocess.run(["sh", "-c", "command -v eu-stack"], capture_output=True).returncode == 0

cpu = {}  # per mode: (daemon CPU ms, scopecmd CPU ms) of each dump

def oncpu_ns(pid):
	# /proc/PID/schedstat: time on a CPU in ns, all threads.
	return int(open("/proc/%d/schedstat" % pid).read().split()[0])

def dump(mode, target, path):
	env = dict(os.environ, SCOPED_SOCKET="%s/%s/agent.sock" % (D, mode))
	dpid = int(open("%s/%s.pid" % (D, mode)).read())
	c0 = oncpu_ns(dpid)
	t0 = time.perf_counter()
	cmd = os.path.join(base_bin, "scopecmd") if mode == "base" else scopecmd
	p = subprocess.Popen([cmd, "--no-start", str(target), "Thread.dump_to_file", "-overwrite",
			      "-format=json", path], env=env, stdout=subprocess.DEVNULL,
			     stderr=subprocess.PIPE)
	err = p.stderr.read()
	_, status, ru = os.wait4(p.pid, 0)
	ms = (time.perf_counter() - t0) * 1e3
	if status:
		sys.exit("bench_plain: scopecmd (%s) failed: %s" % (mode, err.decode()))
	cpu.setdefault(mode, []).append(((oncpu_ns(dpid) - c0) / 1e6, (ru.ru_utime + ru.ru_stime) * 1e3))
	return ms

def eustack(target):
	t0 = time.perf_counter()
	r = subprocess.run(["eu-stack", "-p", str(target)], capture_output=True)
	ms = (time.perf_counter() - t0) * 1e3
	if r.returncode or b"plain_park_cond" not in r.stdout:
		return None
	return ms

def control(mode, req):
	# The daemon's own reply, without scopecmd: request to last byte.
	s = socket.socket(socket.AF_UNIX)
	s.connect("%s/%s/control.sock" % (D, mode))
	t0 = time.perf_counter()
	s.sendall((json.dumps(req) + "\n").encode())
	buf = b""
	while not buf.endswith(b"\n"):
		b = s.recv(1 << 20)
		if not b:
			break
		buf += b
	ms = (time.perf_counter() - t0) * 1e3
	s.close()
	return ms, json.loads(buf), len(buf)

def check(path, target):
	td = json.load(open(path))["threadDump"]
	tids = [t["tid"] for c in td["threadContainers"] for t in c["threads"]]
	want = sorted(int(t) for t in os.listdir("/proc/%d/task" % target))
	missing = [t for t in tids if "stackError" in t] if False else None
	nostack = sum(1 for c in td["threadContainers"] for t in c["threads"] if not t["stack"])
	approx = sum(1 for c in td["threadContainers"] for t in c["threads"] if t.get("approximate"))
	assert len(tids) == len(set(tids)), "a thread twice"
	assert sorted(tids) == want, "threads differ from /proc: %d vs %d" % (len(tids), len(want))
	return td, len(tids), nostack, approx

nthreads = len(os.listdir("/proc/%d/task" % pid))
print("target: plain_threads pid %d, %d threads (no libscope), %d rounds in a random order" % (pid, nthreads, runs))
cold = {m: dump(m, pid, "%s/cold-%s.json" % (D, m)) for m in modes}
times = {m: [] for m in modes + (["eu"] if have_eu else [])}
capture = {m: [] for m in modes}
for r in range(runs):
	order = list(times)
	random.shuffle(order)
	for m in order:
		if m == "eu":
			v = eustack(pid)
			if v is None:
				times.pop("eu")
				have_eu = False
				print("eu-stack: skipped (it failed or did not see the helper's frames)")
				continue
			times["eu"].append(v)
		else:
			path = "%s/d-%s.json" % (D, m)
			times[m].append(dump(m, pid, path))
			td, n, nostack, approx = check(path, pid)
			capture[m].append(td["captureNs"] / 1e6)

def med(v):
	return statistics.median(v)

print("\n%-34s %10s %16s %14s" % ("dump of %d threads" % nthreads, "median ms", "range ms", "eu-stack / it"))
for m in modes:
	ratios = [e / o for e, o in zip(times.get("eu", []), times[m])]
	print("%-34s %10.2f %16s %14s" % ("scopecmd, stacks from %s" % m, med(times[m]),
		"%.2f-%.2f" % (min(times[m]), max(times[m])),
		"%.1fx [%.1f-%.1f]" % (med(ratios), min(ratios), max(ratios)) if ratios else "-"))
if have_eu:
	print("%-34s %10.2f %16s %14s" % ("eu-stack -p (stops every thread)", med(times["eu"]),
		"%.2f-%.2f" % (min(times["eu"]), max(times["eu"])), "1.0x"))
print()
for m in modes:
	warm = cpu[m][1:]
	dc, sc = med([x[0] for x in warm]), med([x[1] for x in warm])
	print("%s: CPU per warm dump (medians): daemon %.2f ms + scopecmd %.2f ms = %.2f ms; wall %.2f ms "
	      "on this host (load average %.1f)" % (m, dc, sc, dc + sc, med(times[m]), os.getloadavg()[0]))
# scopecmd's own start and exit, the floor of any end-to-end figure.
def version_ms():
	t0 = time.perf_counter()
	subprocess.run([scopecmd, "--version"], stdout=subprocess.DEVNULL, check=True)
	return (time.perf_counter() - t0) * 1e3
start_exit = med([version_ms() for _ in range(2 * runs + 1)])
for m in modes:
	path = "%s/d-%s.json" % (D, m)
	td, n, nostack, approx = check(path, pid)
	# A second dump of a process whose threads did not move: dumps in a
	# row with nothing in between (the rounds' dumps follow eu-stack,
	# which moved every thread).
	dump(m, pid, path)
	warm_e2e = [dump(m, pid, path) for _ in range(max(5, runs))]
	reply = [control(m, {"cmd": "dump", "pid": pid, "id": i, "share_stacks": True}) for i in range(max(3, runs // 2))]
	rms = med([x[0] for x in reply])
	cap = med(capture[m])
	we = med(warm_e2e)
	print("%s: every thread moved (the rounds): capture %.2f ms median (the daemon's captureNs), end to end %.2f ms; "
	      "first dump %.2f ms cold; %d threads without a stack, %d approximate" % (
		m, cap, med(times[m]), cold[m], nostack, approx))
	print("%s: nothing moved (%d dumps in a row): end to end %.2f ms [%.2f-%.2f]; the daemon's whole dump reply "
	      "%.2f ms (%d KB, capture + symbols + JSON + socket); scopecmd's share (start, read, write) %.2f ms, "
	      "of it its own start and exit %.2f ms (scopecmd --version)" % (
		m, len(warm_e2e), we, min(warm_e2e), max(warm_e2e), rms, reply[0][2] // 1024, we - rms, start_exit))
	print("  %s target: end to end <= 10 ms (every thread moved): %s; warm dump <= 3 ms (nothing moved): "
	      "end to end %s, the daemon's reply %s" % (
		m, "met" if med(times[m]) <= 10 else "NOT MET", "met" if we <= 3 else "NOT MET",
		"met" if rms <= 3 else "NOT MET"))
# The capture alone (captureNs): cold is each daemon's first dump of the
# process; moved, the rounds above (eu-stack ran every thread between
# them); warm, dumps in a row with nothing run, each mode in turn.
def capture_of(path):
	return json.load(open(path))["threadDump"]["captureNs"] / 1e6
warm = {m: [] for m in modes}
tick = {m: [] for m in modes}
# One target at a time: a daemon keeps the last process's state only.
for t, into in ((pid, warm), (ticking, tick)):
	for i in range(max(15, 2 * runs) + 1):
		order = list(modes)
		random.shuffle(order)
		for m in order:
			_, rep, _ = control(m, {"cmd": "dump", "pid": t, "id": i})
			if i:  # the first of a target is the change from the other
				into[m].append(rep["capture_ns"] / 1e6)
def spread(v):
	return "%.2f ms [%.2f-%.2f]" % (med(v), min(v), max(v))
print("\ncapture of %d threads alone (the daemon's captureNs; medians [ranges])" % nthreads)
for m in modes:
	fds = len(os.listdir("/proc/%s/fd" % open("%s/%s.pid" % (D, m)).read().strip()))
	line = ("  %-4s warm %s; warm with one thread that ran %s; every thread moved %s; cold (first) "
		"%.2f ms; daemon's open files %d" % (m, spread(warm[m]), spread(tick[m]), spread(capture[m]),
		capture_of("%s/cold-%s.json" % (D, m)), fds))
	if m == "proc" and "base" in modes:
		line += "; base / proc: warm %.2fx, one ran %.2fx, moved %.2fx, cold %.2fx" % (
			med(warm["base"]) / med(warm["proc"]), med(tick["base"]) / med(tick["proc"]),
			med(capture["base"]) / med(capture["proc"]),
			capture_of("%s/cold-base.json" % D) / capture_of("%s/cold-proc.json" % D))
	print(line)
	if m != "base":
		limit = 2 if m == "bpf" else 5
		print("  %s target: capture <= %d ms (warm): %s" % (m, limit, "met" if med(warm[m]) <= limit else "NOT MET"))
# The /proc capture in its parts: read (files, registers, stack windows),
# unwind, the rest of captureNs (threads taken, locks), and the frames'
# symbols after it.
def parts(rep):
	return [rep["capture_ns"] / 1e6, rep["read_ns"] / 1e6, rep["unwind_ns"] / 1e6,
		rep["symbols_ns"] / 1e6]
split = {}
# As scopecmd asks: threads with the same stack name the first.
_, rep, _ = control("proccold", {"cmd": "dump", "pid": pid, "id": 0, "share_stacks": True})
split["cold (first)"] = [parts(rep)]
for t, name in ((pid, "warm, none ran"), (ticking, "warm, one ran")):
	reps = [control("proc", {"cmd": "dump", "pid": t, "id": i, "share_stacks": True})[1]
		for i in range(max(15, 2 * runs) + 1)]
	split[name] = [parts(r) for r in reps[1:]]
if have_eu:
	split["every thread moved"] = []
	for i in range(runs):
		eustack(pid)
		split["every thread moved"].append(parts(control("proc", {"cmd": "dump", "pid": pid, "id": i,
			"share_stacks": True})[1]))
print("\n/proc capture of %d threads in its parts (the daemon's replies; medians [ranges] ms; "
      "load average %.1f)" % (nthreads, os.getloadavg()[0]))
print("  %-20s %22s %22s %22s %22s" % ("", "capture", "of it: read", "of it: unwind", "symbols (after)"))
for name in ("warm, none ran", "warm, one ran", "every thread moved", "cold (first)"):
	if name not in split:
		continue
	cols = list(zip(*split[name]))
	print("  %-20s %22s %22s %22s %22s" % ((name,) + tuple(
		"%.2f [%.2f-%.2f]" % (med(c), min(c), max(c)) for c in cols)))
	print("  %-20s target 5 ms: capture %s, read alone %s" % ("", "met" if med(cols[0]) <= 5 else "NOT MET",
		"met" if med(cols[1]) <= 5 else "NOT MET"))
# The kernel's floor under the reads, on the same process in the same run:
# one pread of each thread's syscall file, and the four a thread that ran
# costs (schedstat, stat, syscall before and after its stack copy), with
# every file open as the daemon keeps them, on one thread and in two halves
# on two as the daemon reads them (tests/helpers/plain_procfloor).
floor = os.environ.get("PROCFLOOR", "")
if floor and os.access(floor, os.X_OK):
	r = subprocess.run([floor, str(pid), "9"], capture_output=True, text=True)
	f = dict(l.split() for l in r.stdout.splitlines() if len(l.split()) == 2)
	if r.returncode == 0 and "moved" in f:
		line = ("  the kernel's floor (%s threads, 9 passes): one pread of each thread's syscall file "
			"%.2f ms; the four reads of a thread that ran %.2f ms on one thread, %.2f ms in two halves on "
			"two" % (f["threads"], float(f["syscall"]), float(f["moved"]), float(f.get("moved2", "nan"))))
		if "every thread moved" in split and "moved2" in f:
			cols = list(zip(*split["every thread moved"]))
			line += "; every thread moved: read %.2fx the two-thread floor, capture %.2fx" % (
				med(cols[1]) / float(f["moved2"]), med(cols[0]) / float(f["moved2"]))
		print(line)
	else:
		print("  the kernel's floor: %s failed: %s" % (floor, r.stderr.strip()))

# A new program's first dump, on daemons that have dumped other processes:
# the addresses the symbolizer's cache has not seen are looked up in module
# files whose DWARF the daemon read for another process (once per file, not
# once per process); eu-stack -i on the same process in the same run.
progs = [("python3 select", "import select; select.select([], [], [], 600)"),
	 ("python3 poll", "import os, select; p = select.poll(); p.register(os.pipe()[0]); p.poll()"),
	 ("python3 epoll", "import os, select; e = select.epoll(); e.register(os.pipe()[0]); e.poll()")]
print("\na new program's first dump (the daemon warm from the dumps above; ms; eu-stack -i in the same run)")
for name, code in progs:
	k = subprocess.Popen(["python3", "-c", code])
	time.sleep(0.5)
	order = list(modes)
	random.shuffle(order)
	first = {m: dump(m, k.pid, "%s/prog.json" % D) for m in order}
	eu = None
	if have_eu:
		t0 = time.perf_counter()
		r = subprocess.run(["eu-stack", "-i", "-p", str(k.pid)], capture_output=True)
		eu = (time.perf_counter() - t0) * 1e3 if r.returncode == 0 else None
	k.kill()
	k.wait()
	print("  %-16s %s%s" % (name, "  ".join("%s %.1f" % (m, first[m]) for m in modes),
		"  eu-stack -i %.1f (%s)" % (eu, "  ".join("%s %.1fx" % (m, eu / first[m]) for m in modes))
		if eu else ""))

# The daemon's memory after dumping 100 other processes (symbol caches and
# module maps): it keeps the modules of the last 16 only.
def rss_kb(pid):
	for line in open("/proc/%d/status" % pid):
		if line.startswith("VmRSS:"):
			return int(line.split()[1])
	return 0
m = modes[0]
dpid = int(open("%s/%s.pid" % (D, m)).read())
kids = [subprocess.Popen(["sleep", "600"]) for _ in range(100)]
time.sleep(0.3)
before = rss_kb(dpid)
for k in kids:
	dump(m, k.pid, "%s/one.json" % D)
mid = rss_kb(dpid)
for k in kids:
	dump(m, k.pid, "%s/one.json" % D)
after = rss_kb(dpid)
for k in kids:
	k.kill()
	k.wait()
print("daemon memory (%s): RSS %d KiB before dumping 100 other processes, %d after, %d after "
      "dumping them all again (the symbolizer keeps the last 16 processes' modules)" % (m, before, mid, after))
if big:
	big = int(big)
	nb = len(os.listdir("/proc/%d/task" % big))
	for m in modes:
		path = "%s/big-%s.json" % (D, m)
		ms = [dump(m, big, path) for _ in range(2)]
		td, n, nostack, approx = check(path, big)
		print("%d threads (%s): each thread once, as /proc lists them; end to end %.1f ms cold, %.1f warm "
		      "(%.1f us a thread), capture %.1f ms; %d without a stack" % (
			n, m, ms[0], ms[1], ms[1] * 1e3 / n, td["captureNs"] / 1e6, nostack))
PYEOF
