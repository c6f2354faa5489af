#!/bin/sh
# daemon_programs.sh - scoped with real libscope programs on a private socket:
# several trees at once, post-mortem of a program that aborts and one that
# exits, a SIGKILLed daemon restarted (every tree back within 2 s), and a
# client of another uid that must not see or dump what it does not own.
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed (make deps)"; exit 1; }
exec python3 - <<'PY'
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
TREE = daemon_e2e.setup("tests/helpers/daemon_tree")
from daemon_e2e import *

def program(*args):
    return spawn_ready([TREE] + list(args), tmp + "/programs.log", {"SCOPED_SOCKET": SOCK}, 10,
                       lambda l: l.startswith(b"ready"), "daemon_tree %s" % " ".join(args))

def tree_ok(m):
    """The tree daemon_tree builds: outer with 3 tasks, each opening an inner with 2."""
    scopes = {s["id"]: s for s in m["scopes"]}
    outer = [s for s in m["scopes"] if s["name"] == "outer"]
    inner = [s for s in m["scopes"] if s["name"] == "inner"]
    if len(outer) != 1 or len(inner) != 3 or len(scopes) != 4:
        return "scopes %s" % sorted(s["name"] for s in m["scopes"])
    o = outer[0]["id"]
    outer_tasks = {t["id"] for t in m["tasks"] if t["scope"] == o}
    if len(outer_tasks) != 3:
        return "outer has %d tasks" % len(outer_tasks)
    for s in inner:
        if s["parent"] != o or s["parent_task"] not in outer_tasks:
            return "inner %d hangs off %s/%s" % (s["id"], s["parent"], s["parent_task"])
        if s["values"].get("request_id") != "r-17":
            return "inner %d values %s" % (s["id"], s["values"])
        n = sum(1 for t in m["tasks"] if t["scope"] == s["id"] and t["state"] == "running")
        if n != 2:
            return "inner %d has %d running tasks" % (s["id"], n)
    return None

def main():
    d = start_daemon()
    c = Ctl()
    # --- several programs at once, each tree as built
    progs = [program("hold") for _ in range(3)]
    for p in progs:
        r = wait_until(lambda: (lambda r: r if r["ok"] and r["process"]["complete"] and tree_ok(r["model"]) is None else None)(
            c.req({"cmd": "tree", "pid": p.pid})), 5, "the tree of program %d" % p.pid)
        check(r["process"]["name"] == "daemon_tree" and r["process"]["state"] == "live",
              "program %d: the daemon's tree equals what it built" % p.pid)
    listed = {x["pid"] for x in c.req({"cmd": "list"})["processes"]}
    check(all(p.pid in listed for p in progs), "list shows every program")
    r = c.req({"cmd": "dump", "pid": progs[0].pid})
    funcs = {f["func"] for st in r["stacks"] for f in st["frames"]}
    check(r["ok"] and r["source"] in ("bpf", "signal") and "scope_join" in funcs and "main" in funcs,
          "a dump has symbolized stacks (%s source)" % r["source"])

    # --- post-mortem: abort and exit
    ab = program("abort")
    ab.wait(5)
    r = wait_until(lambda: (lambda r: r if r["ok"] and r["process"]["state"] == "exited" else None)(
        c.req({"cmd": "tree", "pid": ab.pid})), 5, "the aborting program to be marked exited")
    check(r["process"]["exit_cause"] == "signal" and r["process"]["exit_signal"] == 6,
          "an aborted program is marked exited by signal 6")
    check(tree_ok(r["model"]) is None, "its last tree is still dumpable")
    r = c.req({"cmd": "dump", "pid": ab.pid})
    check(r["ok"] and r["stacks"] == [] and tree_ok(r["model"]) is None, "dump of an exited program gives its tree")
    r = c.req({"cmd": "stacks", "pid": ab.pid})
    check(not r["ok"] and r["error"]["code"] == "exited", "stacks of an exited program: code exited")
    ex = program("exit", "3")
    ex.wait(5)
    r = wait_until(lambda: (lambda r: r if r["ok"] and r["process"]["state"] == "exited" else None)(
        c.req({"cmd": "tree", "pid": ex.pid})), 5, "the exiting program to be marked exited")
    check(r["process"]["exit_cause"] == "exit" and r["process"]["exit_code"] == 3 and tree_ok(r["model"]) is None,
          "a program calling exit(3) is marked exited with code 3, tree kept")

    # --- daemon SIGKILLed and restarted: every live tree back soon after the
    # new daemon listens.  Counted from the listen, not from the restart: a
    # daemon under a sanitizer can take seconds to start, which says nothing
    # about the agents.  An agent retries at most 2 s apart (its backoff cap),
    # then sends its snapshot.
    d.kill(); d.wait()
    start_daemon()
    t0 = time.time()
    c = Ctl()
    def all_back():
        for p in progs:
            r = c.req({"cmd": "tree", "pid": p.pid})
            if not r["ok"] or not r["process"]["complete"] or tree_ok(r["model"]) is not None:
                return False
        return True
    wait_until(all_back, 10, "the programs to come back after a restart")
    took = time.time() - t0
    # The issue's bound is 2 s; sanitized agents and daemons run several
    # times slower, so those builds get one more second.
    limit = 2.0 if os.environ.get("BUILD", "build") == "build" else 3.0
    check(took < limit, "after SIGKILL and restart every live program is back with its whole tree "
          "within %.0f s (%.2f s after the listen)" % (limit, took))

    # --- another uid sees and dumps nothing it does not own
    if os.geteuid() == 0:
        other_uid(progs[0].pid)
    else:
        print("skip: the other-uid checks need root to become nobody")
    check(log_is_clean(), "no sanitizer report in the daemon's log")
    check(validated[0] > 10, "%d requests and replies matched the control schemas" % validated[0])
    print("all daemon_programs checks passed")

def other_uid(pid):
    """As nobody: lists nothing of root's, and is refused the tree, dump and
    stacks of root's program pid; with the default 0700 directory it cannot
    even connect."""
    os.chmod(tmp, 0o711); os.chmod(SOCKDIR, 0o711); os.chmod(CTL, 0o666)
    probe = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
for req in [{"id": 1, "cmd": "list"}, {"id": 2, "cmd": "tree", "pid": int(sys.argv[2])},
            {"id": 3, "cmd": "dump", "pid": int(sys.argv[2])}, {"id": 4, "cmd": "stacks", "pid": int(sys.argv[2])}]:
    f.write(json.dumps(req) + "\\n"); f.flush(); print(f.readline().strip())
"""
    # The test's own interpreter may live where nobody cannot read (pyenv under /root).
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    def as_nobody():
        os.setgroups([]); os.setgid(65534); os.setuid(65534)
    out = subprocess.run([py, "-c", probe, CTL, str(pid)], capture_output=True,
                         text=True, preexec_fn=as_nobody, timeout=10, cwd="/")
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    check(len(lines) == 4, "the other-uid client got its replies (%s)" % out.stderr.strip()[-200:])
    check(lines[0]["ok"] and lines[0]["processes"] == [], "another uid lists none of root's processes")
    check(all(not l["ok"] and l["error"]["code"] == "permission_denied" for l in lines[1:]),
          "another uid cannot get the tree, dump or stacks of a process it does not own")
    os.chmod(SOCKDIR, 0o700)
    out = subprocess.run([py, "-c", probe, CTL, str(pid)], capture_output=True,
                         text=True, preexec_fn=as_nobody, timeout=10, cwd="/")
    check(out.returncode != 0 and "Permission" in out.stderr, "with the default 0700 directory another uid cannot even connect")

run(main)
PY
