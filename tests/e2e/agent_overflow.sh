#!/bin/sh
# agent_overflow.sh - a stack overflow is reported: a libscope program that
# recurses without bound on its main thread, and one that does it in a
# subtask on a pool worker, are each marked exited by SIGSEGV in scoped (the
# fatal-signal handler ran on the thread's alternate stack), and each still
# dies by SIGSEGV.
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed (make deps)"; exit 1; }
exec python3 - <<'PY'
import os, select, signal, subprocess, sys
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
OVERFLOW = daemon_e2e.setup("tests/helpers/overflow")
from daemon_e2e import *

def crash(c, mode):
    p = subprocess.Popen([OVERFLOW, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(tmp + "/overflow.log", "a"), env=dict(os.environ, SCOPED_SOCKET=SOCK))
    children.append(p)
    line = p.stdout.readline() if select.select([p.stdout], [], [], 10)[0] else b""
    if not line.startswith(b"ready"):
        fail("overflow %s did not get ready (%r)" % (mode, line))
    fields = dict(f.split("=", 1) for f in line.decode().split()[2:])
    if fields.get("handler") != "onstack":
        # A sanitizer's runtime takes SIGSEGV before libscope's constructor
        # runs, and reports the overflow itself; libscope leaves it be.
        p.kill(); p.wait()
        print("skip: SIGSEGV is not libscope's to handle here (handler=%s)" % fields.get("handler"))
        cleanup(); sys.exit(77)
    check(fields.get("altstack") == "1", "%s: the crashing thread has an alternate signal stack" % mode)
    # Crash only once the daemon holds the program's tree: the report must be
    # of a known, live process.
    wait_until(lambda: (lambda r: r["ok"] and r["process"]["complete"] and
                        any(s["name"] == "doomed" for s in r["model"]["scopes"]))(
        c.req({"cmd": "tree", "pid": p.pid})), 5, "the daemon to hold the tree of overflow %s" % mode)
    p.stdin.write(b"go\n"); p.stdin.flush()
    rc = p.wait(20)
    check(rc == -signal.SIGSEGV, "%s: the program still dies by SIGSEGV (status %d)" % (mode, rc))
    r = wait_until(lambda: (lambda r: r if r["ok"] and r["process"]["state"] == "exited" else None)(
        c.req({"cmd": "tree", "pid": p.pid})), 5, "overflow %s to be marked exited" % mode)
    check(r["process"]["exit_cause"] == "signal" and r["process"]["exit_signal"] == signal.SIGSEGV,
          "%s: scoped got PROCESS_EXIT with SIGSEGV (cause %s, signal %s)" %
          (mode, r["process"]["exit_cause"], r["process"]["exit_signal"]))

def main():
    start_daemon()
    c = Ctl()
    for mode in ("main", "task"):
        crash(c, mode)
    check(log_is_clean(), "no sanitizer report in the daemon's log")
    print("all agent_overflow checks passed")

run(main)
PY
