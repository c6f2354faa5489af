#!/usr/bin/env python3
"""advisor_sweep.py - checks the pool advisor against a sweep of pool sizes in
the same run: for tasks of known wait/compute ratio (examples/pool-mix), the
size the advisor recommends from a run at a small size, against the size at
which throughput stops growing (the smallest size whose median throughput
reaches 95% of the best median found).  Prints a table (docs/advisor.md).

  scripts/advisor_sweep.py [BUILD] [--cpus Q] [--reps R] [--seconds S] [--quick]

A shared host gives a program whatever CPU the others leave, which changes
from second to second, so "the best size" would move with the neighbours.
As root, the programs run in a cgroup of their own with a CPU quota of Q
CPUs (default 1) and a large CPU weight: the CPU budget is then fixed and
known, the advisor reads it as Ncpu (the cgroup quota), and the right size
is Q x (1 + W/C).  Without a cgroup the run says so and uses what it gets.

Needs scoped, scopecmd and pool-mix built (make).  Takes about 4 minutes
(--quick: about 1)."""
import json, os, statistics, subprocess, sys, tempfile, time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = [a for a in sys.argv[1:] if not a.startswith("--")]


def opt(name, default):
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            try:
                return float(sys.argv[i + 1])
            except ValueError:
                sys.exit("advisor_sweep: %s wants a number, not '%s'" % (name, sys.argv[i + 1]))
    return default


QUICK = "--quick" in sys.argv
SECONDS = opt("--seconds", 2.0)
REPS = int(opt("--reps", 2 if QUICK else 3))
CPUS = opt("--cpus", 1.0)
if [a for a in args if a.startswith("-")] or len(args) > 1 or SECONDS <= 0 or REPS < 1 or CPUS <= 0:
    sys.exit(__doc__)
BUILD = os.path.join(TOP, args[0] if args else "build")
BIN = os.path.join(BUILD, "bin")

# (label, wait ms, compute ms, size the advisor watches, sizes swept, key of the sweep)
CASES = [
    ("W/C 0", 0, 2, 2, [1, 2, 3, 4], "c"),
    ("W/C 4", 4, 1, 2, [1, 2, 3, 4, 5, 6, 7, 8, 10, 12], "w4"),
    ("W/C 19", 19, 1, 4, [5, 10, 14, 17, 20, 23, 26, 30, 40], "w19"),
    # The W/C 0 load on 4 threads: the CPU budget is used up; the right
    # answer is not to grow (the sweep is W/C 0's).
    ("saturated (W/C 0 on 4 threads)", 0, 2, 4, [1, 2, 3, 4], "c"),
]
if QUICK:
    CASES = CASES[1:2]


class Cgroup:
    """A cgroup with a CPU quota of CPUS and a large weight, when we may make one."""

    def __init__(self):
        self.dir = None
        self.kind = None
        name = "scoped-advisor-sweep-%d" % os.getpid()
        period = 20000
        v1 = "/sys/fs/cgroup/cpu"
        try:
            if os.path.isfile(os.path.join(v1, "cpu.cfs_quota_us")):
                d = os.path.join(v1, name)
                os.mkdir(d)
                self.dir, self.kind = d, "v1"
                self._w("cpu.cfs_period_us", period)
                self._w("cpu.cfs_quota_us", int(CPUS * period))
                self._w("cpu.shares", 8192)
            elif "cpu" in open("/sys/fs/cgroup/cgroup.subtree_control").read().split():
                d = os.path.join("/sys/fs/cgroup", name)
                os.mkdir(d)
                self.dir, self.kind = d, "v2"
                self._w("cpu.max", "%d %d" % (int(CPUS * 100000), 100000))
                self._w("cpu.weight", 800)
        except OSError as e:
            self.why = "%s: %s" % (type(e).__name__, e)
            self.close()
            self.dir = None

    def _w(self, f, v):
        with open(os.path.join(self.dir, f), "w") as fh:
            fh.write(str(v))

    def enter(self):
        """For preexec_fn: moves the child into the cgroup."""
        if self.dir:
            with open(os.path.join(self.dir, "cgroup.procs"), "w") as fh:
                fh.write(str(os.getpid()))

    def close(self):
        if self.dir:
            for _ in range(50):
                try:
                    os.rmdir(self.dir)
                    return
                except OSError:
                    time.sleep(0.1)


def mixargs(w, c, n, seconds):
    # Large batches: the pool's threads stay busy to the end of each one.
    return [os.path.join(BIN, "pool-mix"), "-q", "-w", str(w), "-c", str(c), "-n", str(n),
            "-b", str(max(64, 8 * n)), "-s", str(seconds)]


def mix(cg, w, c, n, env):
    out = subprocess.run(mixargs(w, c, n, SECONDS), capture_output=True, text=True, env=env,
                         timeout=SECONDS + 60, preexec_fn=cg.enter)
    f = out.stdout.split()
    if out.returncode or "throughput" not in f:
        sys.exit("advisor_sweep: pool-mix failed: %s" % out.stderr.strip())
    return float(f[f.index("throughput") + 1])


def advise(cg, w, c, n, sock):
    env = dict(os.environ, SCOPED_SOCKET=sock)
    p = subprocess.Popen(mixargs(w, c, n, 0), env=env, stdout=subprocess.DEVNULL,
                         preexec_fn=cg.enter)
    try:
        # Two windows of 5 s: the advice covers the last one to two.
        time.sleep(7.5)
        r = subprocess.run([os.path.join(BIN, "scopecmd"), "--socket", sock, "--no-start", str(p.pid),
                            "Pool.advise", "mix", "-format=json"], capture_output=True, text=True, timeout=30)
        doc = json.loads(r.stdout)
        return doc["advice"], doc["advice"]["pools"][0]
    finally:
        p.kill()
        p.wait()


def main():
    tmp = tempfile.mkdtemp(prefix="advisor-sweep-")
    sock = tmp + "/agent.sock"
    cg = Cgroup()
    if cg.dir:
        print("CPU budget: a cgroup (%s) with a quota of %.2f CPUs and a large weight; "
              "%d runs of %.1f s per size, medians [min-max]" % (cg.kind, CPUS, REPS, SECONDS))
    else:
        print("CPU budget: none fixed (no cgroup: %s); the host's spare CPU decides; "
              "%d runs of %.1f s per size" % (getattr(cg, "why", "not root?"), REPS, SECONDS))
    d = subprocess.Popen([os.path.join(BIN, "scoped"), "--foreground", "--socket", sock],
                         stderr=open(tmp + "/scoped.log", "w"))
    time.sleep(0.5)
    sweeps = {}
    rows = []
    try:
        # No advisor in the sweep: the program runs alone, without a daemon.
        env = dict(os.environ, SCOPED_SOCKET=tmp + "/none.sock")
        for label, w, c, n, sizes, key in CASES:
            if key not in sweeps:
                runs = {s: [] for s in sizes}
                # Round-robin over the sizes, so a noisy minute spreads over all.
                for _ in range(REPS):
                    for s in sizes:
                        runs[s].append(mix(cg, w, c, s, env))
                sweeps[key] = runs
            runs = sweeps[key]
            med = {s: statistics.median(v) for s, v in runs.items()}
            peak = max(med.values())
            best = min(s for s in sizes if med[s] >= 0.95 * peak)
            advs = [advise(cg, w, c, n, sock) for _ in range(REPS)]
            recs = [a["recommended"] or n for _, a in advs]
            rec = int(statistics.median(recs))
            wcs = [a["wait_compute_ratio"] for _, a in advs]
            verdicts = sorted(set(a["verdict"] for _, a in advs))
            ncpu = advs[0][0]["ncpu"]
            if "saturated" in label:
                # Right when it does not grow and the best size is no larger.
                ok = all(a["verdict"] in ("saturated", "leave", "shrink") for _, a in advs) and best <= n
            else:
                ok = abs(rec - best) <= 0.2 * best
            # The throughput the advice gets, against the peak: the advised
            # size itself, or the nearest swept below it.
            at = max([s for s in sizes if s <= rec] or [min(sizes)])
            rows.append((label, ncpu, statistics.median(wcs), min(wcs), max(wcs), "/".join(verdicts), n,
                         rec, min(recs), max(recs), best, peak, med[at] / peak, ok))
            print("  %s sweep (tasks/s, median [min-max]): %s" % (label, ", ".join(
                "%d: %.0f [%.0f-%.0f]" % (s, med[s], min(runs[s]), max(runs[s])) for s in sizes)))
            sys.stdout.flush()
    finally:
        d.terminate()
        d.wait()
        cg.close()
    print()
    print("| case | Ncpu read | W/C measured, median [min-max] | verdict (at size) | recommended, median [min-max] "
          "| best size (95% of peak) | peak tasks/s | throughput at the advice / peak | within 20% |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (label, ncpu, wc, wlo, whi, verdict, n, rec, rlo, rhi, best, peak, share, ok) in rows:
        print("| %s | %.3g | %.3g [%.3g-%.3g] | %s (%d) | %d [%d-%d] | %d | %.0f | %.2f | %s |" % (
            label, ncpu, wc, wlo, whi, verdict, n, rec, rlo, rhi, best, peak, share, "yes" if ok else "no"))
    return 0 if all(r[-1] for r in rows) else 1


sys.exit(main())
