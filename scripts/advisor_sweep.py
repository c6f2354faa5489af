#!/usr/bin/env python3
"""advisor_sweep.py - checks the pool advisor against a sweep of pool sizes in
the same run: for tasks of known wait/compute ratio (examples/pool-mix), the
size the advisor recommends from a run at a small size, against the size at
which throughput stops growing (the smallest size reaching 95% of the best
throughput found).  Prints one table row per case (docs/advisor.md).

  scripts/advisor_sweep.py [BUILD] [--seconds S] [--quick]

Needs scoped, scopecmd and pool-mix built (make).  Takes a few minutes."""
import json, os, subprocess, sys, tempfile, time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
BUILD = os.path.join(TOP, args[0] if args else "build")
SECONDS = 3.0
for i, a in enumerate(sys.argv):
    if a == "--seconds":
        SECONDS = float(sys.argv[i + 1])
QUICK = "--quick" in sys.argv
BIN = os.path.join(BUILD, "bin")

# (label, wait ms, compute ms, size the advisor watches, sizes swept)
CASES = [
    ("W/C 0", 0, 2, 2, [1, 2, 3, 4, 6]),
    ("W/C 4", 4, 1, 2, [2, 4, 6, 8, 9, 10, 12, 14, 16]),
    ("W/C 19", 19, 1, 4, [8, 16, 24, 32, 36, 40, 44, 48, 56]),
    ("saturated (W/C 0 on 8 threads)", 0, 2, 8, [1, 2, 3, 4, 8]),
]


def mix(w, c, n, seconds, env=None):
    out = subprocess.run([os.path.join(BIN, "pool-mix"), "-q", "-w", str(w), "-c", str(c), "-n", str(n),
                          "-s", str(seconds)], capture_output=True, text=True, env=env, timeout=seconds + 60)
    f = out.stdout.split()
    return float(f[f.index("throughput") + 1])


def advise(w, c, n, sock):
    env = dict(os.environ, SCOPED_SOCKET=sock)
    p = subprocess.Popen([os.path.join(BIN, "pool-mix"), "-q", "-w", str(w), "-c", str(c), "-n", str(n),
                          "-s", "0"], env=env, stdout=subprocess.DEVNULL)
    try:
        time.sleep(7)
        r = subprocess.run([os.path.join(BIN, "scopecmd"), "--socket", sock, "--no-start", str(p.pid),
                            "Pool.advise", "mix", "-format=json"], capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout)["advice"]["pools"][0]
    finally:
        p.kill()
        p.wait()


def main():
    tmp = tempfile.mkdtemp(prefix="advisor-sweep-")
    sock = tmp + "/agent.sock"
    d = subprocess.Popen([os.path.join(BIN, "scoped"), "--foreground", "--socket", sock],
                         stderr=open(tmp + "/scoped.log", "w"))
    time.sleep(0.5)
    print("| case | W/C measured | N formula | verdict (at size) | recommended | best size (95% of peak) | peak tasks/s | within 20% |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        for label, w, c, n, sizes in CASES[:2] if QUICK else CASES:
            a = advise(w, c, n, sock)
            # No advisor: the sweep runs the program alone, without a daemon.
            env = dict(os.environ, SCOPED_SOCKET=tmp + "/none.sock")
            tp = {s: mix(w, c, s, SECONDS, env) for s in sizes}
            peak = max(tp.values())
            best = min(s for s in sizes if tp[s] >= 0.95 * peak)
            rec = a["recommended"] or n
            ok = abs(rec - best) <= 0.2 * best
            print("| %s | %.3g | %.3g | %s (%d) | %d | %d | %.0f | %s |" % (
                label, a["wait_compute_ratio"], a["n_formula"], a["verdict"], n, rec, best, peak,
                "yes" if ok else "no"))
            print("  sweep: " + ", ".join("%d: %.0f/s" % (s, tp[s]) for s in sizes), file=sys.stderr)
            sys.stdout.flush()
    finally:
        d.terminate()
        d.wait()


main()
