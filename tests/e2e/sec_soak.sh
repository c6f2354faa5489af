#!/bin/sh
# sec_soak.sh - one scoped, for a bounded time (SOAK_S, default 8 s), under
# a mix of hostile peers at once - agents sending garbage, oversized and
# half frames, silent connection floods, entity floods, control clients
# that send bad lines, hold connections or ask for dumps and never read -
# while two real libscope programs are served: a well-behaved client asks
# for the list and both trees every 200 ms and must get correct answers
# every time, and the daemon's memory and log stay bounded.  Prints what it
# held (requests answered, slowest answer, hostile peers, peak RSS).
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 77; }
exec python3 - <<'PY'
import json, os, random, socket, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
TREE, FAKE = daemon_e2e.setup("tests/helpers/daemon_tree", "tests/helpers/daemon_fake_agent")
from daemon_e2e import *

SOAK_S = float(os.environ.get("SOAK_S", "8"))
# Under a sanitizer the daemon is several times slower: an answer may take
# longer, but must still come.
SLOW = any(x in BUILD for x in ("asan", "tsan"))
ANSWER_S = 10 if SLOW else 2

def program():
    return spawn_ready([TREE, "hold"], tmp + "/programs.log", {"SCOPED_SOCKET": SOCK}, 10,
                       lambda l: l.startswith(b"ready"), "daemon_tree")

def tree_ok(r):
    if not r or not r.get("ok"): return False
    m = r["model"]
    return (sorted(s["name"] for s in m["scopes"]) == ["inner", "inner", "inner", "outer"]
            and len(m["tasks"]) == 9)

hostile = []
def hostile_agent(mode, n=0):
    p = subprocess.Popen([FAKE, SOCK, mode, str(n)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=dict(os.environ, SCOPED_DISABLE="1"))
    hostile.append(p); children.append(p)

def hostile_clients(rng, held):
    kind = rng.randrange(4)
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(CTL); s.setblocking(False)
    except OSError:
        return  # refused at the cap: that is the daemon holding
    if kind == 0:    # garbage lines
        s.send(bytes(rng.randrange(256) for _ in range(300)) + b"\n{\"cmd\":7}\n"); s.close()
    elif kind == 1:  # dumps of everything, never read
        for pid in (p.pid for p in progs):
            s.send(("{\"cmd\":\"dump\",\"pid\":%d}\n{\"cmd\":\"tree\",\"pid\":%d}\n" % (pid, pid)).encode())
        held.append(s)
    elif kind == 2:  # an endless line
        try: s.send(b"{\"cmd\":\"" + b"x" * 200000)
        except BlockingIOError: pass
        held.append(s)
    else:            # held idle
        held.append(s)
    hostile.append(s)

def main():
    global progs
    d = start_daemon("--max-clients", "48", "--max-processes", "64", "--max-entities", "20000",
                     "--stacks=signal")
    progs = [program(), program()]
    good = Ctl()
    # A program says ready before its agent's snapshot is in: wait for both
    # trees before the hostile mix starts.
    for p in progs:
        wait_until(lambda: tree_ok(good.req({"cmd": "tree", "pid": p.pid})), 10,
                   "the tree of program %d" % p.pid)
    rng = random.Random(21)
    held = []
    answered, slowest, rss_peak = 0, 0.0, 0
    modes = [("random", 4096), ("oversize", 0), ("half", 0), ("flood", 8), ("flood-tasks", 30000),
             ("churn", 50)]
    end = time.time() + SOAK_S
    next_good = 0
    while time.time() < end:
        mode, n = modes[rng.randrange(len(modes))]
        hostile_agent(mode, n)
        hostile_clients(rng, held)
        if len(held) > 40:
            for s in held[:20]: s.close()
            del held[:20]
        live = [p for p in hostile if isinstance(p, subprocess.Popen) and p.poll() is None]
        for p in live[:-12]:  # at most a dozen hostile agents at a time
            p.kill(); p.wait()
        if time.time() >= next_good:
            t0 = time.time()
            r = good.req({"cmd": "list"}, timeout=ANSWER_S)
            pids = {p["pid"] for p in r.get("processes", [])}
            if not (r.get("ok") and all(p.pid in pids for p in progs)):
                fail("the list lost a real program: %s" % json.dumps(r)[:300])
            for p in progs:
                t = good.req({"cmd": "tree", "pid": p.pid}, timeout=ANSWER_S)
                if not tree_ok(t):
                    fail("the tree of real program %d is wrong: %s" % (p.pid, json.dumps(t)[:300]))
            slowest = max(slowest, time.time() - t0)
            answered += 3
            rss_peak = max(rss_peak, rss_kb(d.pid))
            next_good = time.time() + 0.2
        time.sleep(0.02)
    check(d.poll() is None, "scoped is still running after %.0f s of hostile peers" % SOAK_S)
    check(answered >= (3 if SLOW else 3 * int(SOAK_S)), "the well-behaved client was answered throughout "
          "(%d requests, slowest round %.0f ms)" % (answered, slowest * 1000))
    check(rss_peak < 400 * 1024, "scoped's memory stayed bounded (peak RSS %d MiB)" % (rss_peak // 1024))
    log = open(LOG).read()
    check(log.count("\n") < 20000, "its log stayed bounded (%d lines)" % log.count("\n"))
    check(log_is_clean(), "no sanitizer report in the daemon's log")
    agents = sum(isinstance(p, subprocess.Popen) for p in hostile)
    print("held: %d hostile agents and %d hostile control connections over %.0f s; "
          "%d good requests answered, slowest round %.0f ms, peak RSS %d MiB"
          % (agents, len(hostile) - agents, SOAK_S, answered, slowest * 1000, rss_peak // 1024))

run(main)
PY
