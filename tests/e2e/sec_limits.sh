#!/bin/sh
# sec_limits.sh - scoped under floods of peers: out of file descriptors
# (a 128-descriptor limit and 250 control connections) it neither spins nor
# floods its log, and serves a new client once some leave; one unprivileged
# user holding every control connection it may get leaves root served.
# The user part needs root (it runs a client as nobody), else is skipped.
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 77; }
exec python3 - <<'PY'
import os, resource, socket, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
daemon_e2e.setup()
from daemon_e2e import *

def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def dial(n):
    # Past the daemon's descriptors and its listen backlog a connect waits
    # for an accept that cannot come: stop there (the descriptors are
    # exhausted either way) rather than hang the test.
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX); s.settimeout(2)
        try:
            s.connect(CTL)
        except (socket.timeout, BlockingIOError):
            s.close(); break
        out.append(s)
    return out

def main():
    # --- out of descriptors
    def low_nofile(): resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
    d = subprocess.Popen([SCOPED, "--foreground", "--socket", SOCK, "--max-clients", "1000"],
                         stdout=subprocess.DEVNULL, stderr=open(LOG, "a"), preexec_fn=low_nofile)
    children.append(d)
    wait_until(lambda: os.path.exists(CTL), 5, "scoped to listen")
    held = dial(250)
    time.sleep(0.3)
    c0 = cpu_s(d.pid); time.sleep(1.0); used = cpu_s(d.pid) - c0
    check(used < 0.5, "out of descriptors with connections queued, scoped does not spin "
          "(%.2f s of CPU in 1 s)" % used)
    lines = open(LOG).read().count("out of file descriptors")
    check(1 <= lines <= 3, "it says it is out of descriptors, rate-limited (%d lines)" % lines)
    for s in held: s.close()
    held = []
    r = Ctl().req({"cmd": "status"})
    check(r.get("ok"), "once the connections leave, a new client is served")
    d.terminate(); d.wait(5)
    os.unlink(SOCK) if os.path.exists(SOCK) else None

    # --- one user holding every control connection it may get
    if os.geteuid() != 0:
        print("skip part: a client as another user needs root"); return
    d = start_daemon("--max-clients", "20")
    os.chmod(tmp, 0o711); os.chmod(SOCKDIR, 0o711); os.chmod(CTL, 0o666)
    hog = subprocess.Popen([sys.executable, "-c", """
import os, socket, sys, time
os.setgid(65534); os.setuid(65534)
got = []
for _ in range(40):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); got.append(s)
time.sleep(0.5)
alive = 0
for s in got:
    s.setblocking(False)
    try:
        s.recv(1)  # the refusal, or the end: not kept
    except BlockingIOError:
        alive += 1
print(alive, flush=True)
time.sleep(30)
""", CTL], stdout=subprocess.PIPE)
    children.append(hog)
    kept = int(hog.stdout.readline())
    check(kept == 15, "nobody keeps its share of --max-clients 20 (%d of 40 kept)" % kept)
    r = Ctl().req({"cmd": "list"})
    check(r.get("ok"), "root's list is still served")
    others = dial(6)
    r = Ctl().req({"cmd": "status"})
    check(r.get("ok"), "and root past the cap, by its reserve")
    for s in others: s.close()
    check(log_is_clean(), "no sanitizer report in the daemon's log")

run(main)
PY
