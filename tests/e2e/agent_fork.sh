#!/bin/sh
# agent_fork.sh - fork() children against the real daemon: a child that
# uses libscope after fork() reports itself (its own pid, its own tree:
# the forking thread, the scopes it had open and what it made since, none of
# the parent's other threads or their scopes and tasks; forked inside a
# task, that task's scope as a root), the parent's tree and session go on
# unchanged, and children that only _exit or exec are never reported.
command -v python3 >/dev/null 2>&1 || { echo "FAIL: python3 is not installed (make deps)"; exit 1; }
exec python3 - <<'PY'
import os, select, signal, subprocess, sys, time
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
FORK_TREE = daemon_e2e.setup("tests/helpers/fork_tree")
from daemon_e2e import *

def read_line(p, what, timeout=10):
    if not select.select([p.stdout], [], [], timeout)[0]:
        fail("fork_tree did not say " + what)
    line = p.stdout.readline().decode().split()
    if not line or line[0] != what:
        fail("fork_tree said %s, not %s" % (line, what))
    return line

class Grandchild:
    """The forked child, for cleanup(): fork_tree's child, not ours, so it
    is killed by pid (it may be gone already) and never waited for."""
    def __init__(self, pid): self.pid = pid
    def poll(self): return None
    def kill(self):
        try: os.kill(self.pid, 9)
        except ProcessLookupError: pass
    def wait(self): pass

def tree(c, pid):
    r = c.req({"cmd": "tree", "pid": pid})
    return r if r["ok"] and r["process"]["complete"] and r["process"]["state"] == "live" else None

def shape(m):
    """What must not change in the parent: scopes, tasks and threads."""
    return (sorted((s["id"], s["name"], s["parent"], s["owner"], s["state"]) for s in m["scopes"]),
            sorted((t["id"], t["scope"], t["state"], t["worker"]) for t in m["tasks"]),
            sorted((t["tid"], t["role"], t["state"]) for t in m["threads"] if t["state"] == "live"))

def parent_ok(m):
    """The parent at rest: 2 parent-inner scopes joining their leaves (the
    subtasks that opened them join once both leaves run), 4 tasks running."""
    names = sorted(s["name"] for s in m["scopes"])
    running = [t for t in m["tasks"] if t["state"] == "running"]
    joining = [s for s in m["scopes"] if s["name"] == "parent-inner" and s["state"] == "joining"]
    return names == ["parent-inner", "parent-inner", "parent-outer"] and len(running) == 4 and len(joining) == 2

def start_child(c, p, cmd, scope):
    """Has fork_tree make a child with `cmd`; waits until the child's tree
    holds `scope` with its 2 subtasks running.  Returns its pid and tree."""
    p.stdin.write((cmd + "\n").encode()); p.stdin.flush()
    pid = int(read_line(p, cmd)[1])
    children.append(Grandchild(pid))
    def ready():
        r = tree(c, pid)
        ids = [s["id"] for s in r["model"]["scopes"] if s["name"] == scope] if r else []
        return r if ids and sum(t["scope"] == ids[0] and t["state"] == "running"
                                for t in r["model"]["tasks"]) == 2 else None
    return pid, wait_until(ready, 5, "the %s's tree" % cmd)

def main():
    start_daemon()
    c = Ctl()
    p = subprocess.Popen([FORK_TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(tmp + "/fork_tree.log", "a"), env=dict(os.environ, SCOPED_SOCKET=SOCK))
    children.append(p)
    if "tsan" in read_line(p, "ready"):
        print("skip: ThreadSanitizer does not allow a fork child of a threaded process to make threads")
        cleanup(); sys.exit(77)
    r = wait_until(lambda: (lambda r: r if r and parent_ok(r["model"]) else None)(tree(c, p.pid)), 5,
                   "the parent's tree")
    before = shape(r["model"])
    parent_tids = {t["tid"] for t in r["model"]["threads"]}

    # --- children that never use libscope
    quiet = []
    for cmd in ("quiet", "exec"):
        p.stdin.write((cmd + "\n").encode()); p.stdin.flush()
        line = read_line(p, "reaped")
        check(line[2] == "0", "the %s child ended normally (status %s)" % (cmd, line[2]))
        quiet.append(int(line[1]))

    # --- a child that does
    kid, r = start_child(c, p, "child", "child-outer")
    m = r["model"]
    check(r["process"]["pid"] == kid and r["process"]["name"] == "fork_tree",
          "the child is its own process: pid %d, the parent's name (%s)" % (kid, r["process"]["name"]))
    listed = {x["pid"] for x in c.req({"cmd": "list"})["processes"]}
    check(p.pid in listed and kid in listed, "list shows the parent and the child")
    check(not any(q in listed for q in quiet),
          "children that only _exit or exec are never reported (%s not in %s)" % (quiet, sorted(listed)))
    log = open(LOG).read()
    check(not any("pid %d " % q in log for q in quiet), "nor did they ever connect")

    # The child's tree is exactly its own.
    kid_tids = {int(t) for t in os.listdir("/proc/%d/task" % kid)}
    live = [t for t in m["threads"] if t["state"] == "live"]
    check({t["tid"] for t in live} <= kid_tids and not ({t["tid"] for t in live} & parent_tids),
          "every thread in the child's model is a thread of the child, none is the parent's (%s)" %
          sorted(t["tid"] for t in live))
    mains = [t for t in live if t["role"] == "main"]
    check(len(mains) == 1 and mains[0]["tid"] == kid and mains[0]["name"] == "fork-main",
          "the forking thread is the child's main thread, under the child's pid")
    check(sum(t["role"] == "agent" for t in live) == 1, "the child has its own agent thread")
    scopes = {s["name"]: s for s in m["scopes"]}
    check(sorted(scopes) == ["child-outer", "parent-outer"],
          "the child's scopes are the inherited open one and its own, not the parent's inner ones (%s)" %
          sorted(s["name"] for s in m["scopes"]))
    po, co = scopes["parent-outer"], scopes["child-outer"]
    parent_po = [s for s in before[0] if s[1] == "parent-outer"][0]
    check(po["id"] == parent_po[0] and po["owner"] == kid and co["owner"] == kid and co["parent"] == po["id"],
          "parent-outer keeps its id, is owned by the child's main thread, and child-outer nests in it")
    check(all(t["scope"] == co["id"] and t["state"] == "running" and t["worker"] in kid_tids
              for t in m["tasks"]) and len(m["tasks"]) == 2,
          "the child's tasks are its 2 running subtasks, on its own workers; none of the parent's")

    # The parent's tree and session are unchanged.
    r = wait_until(lambda: tree(c, p.pid), 5, "the parent's tree after the forks")
    after = shape(r["model"])
    check(after == before, "the parent's tree is unchanged%s" %
          ("" if after == before else ": was %s, is %s" % (before, after)))
    check(r["process"]["state"] == "live", "the parent's session goes on")

    # --- a child forked by a pool worker inside a task of a scope another
    # thread owns: that scope comes along as a root of the child's tree, with
    # the task the child's thread runs and the scopes it opens inside it.
    skid, r = start_child(c, p, "subchild", "subchild-inner")
    m = r["model"]
    scopes = {s["name"]: s for s in m["scopes"]}
    check(sorted(scopes) == ["parent-inner", "subchild-inner"],
          "the subchild's scopes are the inherited parent-inner and its own (%s)" %
          sorted(s["name"] for s in m["scopes"]))
    pi, si = scopes["parent-inner"], scopes["subchild-inner"]
    parent_pi = {s[0]: s for s in before[0] if s[1] == "parent-inner"}
    check(pi["id"] in parent_pi and not pi["parent"],
          "parent-inner keeps its id and is a root: its parent stayed behind (%s)" % pi)
    check(pi["owner"] == parent_pi[pi["id"]][3] and pi["owner"] not in
          {t["tid"] for t in m["threads"] if t["state"] == "live"},
          "parent-inner's owner is the parent's thread that owns it, not one of the child's")
    leaf = [t for t in m["tasks"] if t["scope"] == pi["id"]]
    check(len(leaf) == 1 and leaf[0]["state"] == "running" and leaf[0]["worker"] == skid,
          "parent-inner holds one task: the leaf the child's thread runs (%s)" % leaf)
    check(si["owner"] == skid and si["parent"] == pi["id"],
          "subchild-inner is the child thread's, inside parent-inner (%s)" % si)
    skid_tids = {int(t) for t in os.listdir("/proc/%d/task" % skid)}
    sub = [t for t in m["tasks"] if t["scope"] == si["id"]]
    check(len(sub) == 2 and all(t["worker"] in skid_tids and t["worker"] != skid for t in sub),
          "subchild-inner's 2 subtasks run on the child's new workers")
    r = wait_until(lambda: tree(c, p.pid), 5, "the parent's tree after the subchild")
    check(shape(r["model"]) == before, "the parent's tree is unchanged after the subchild")
    # The child ends its scope and then the leaf task: parent-inner, which
    # nobody in the child will close, is reported closed with it.
    os.kill(skid, signal.SIGUSR1)
    read_line(p, "subchild-done")
    def states():
        r = tree(c, skid)
        if not r:
            return None
        sc = {s["name"]: s["state"] for s in r["model"]["scopes"]}
        lf = [t["state"] for t in r["model"]["tasks"] if t["id"] == leaf[0]["id"]]
        return (sc.get("parent-inner"), sc.get("subchild-inner"), lf[0] if lf else None)
    got = wait_until(lambda: (lambda st: st if st and st[2] == "success" else None)(states()), 5,
                     "the subchild's leaf task to end")
    check(got == ("closed", "closed", "success"),
          "the leaf task ended in the child, and parent-inner is reported closed with it "
          "(parent-inner, subchild-inner, leaf: %s)" % (got,))
    Grandchild(skid).kill()

    # --- a child whose very first event is a structure violation: that event
    # starts its agent, and still reaches the daemon (after the snapshot).
    p.stdin.write(b"violate\n"); p.stdin.flush()
    vkid = int(read_line(p, "violator")[1])
    children.append(Grandchild(vkid))
    got_v = lambda: (lambda r: r if r and r["model"].get("violations") else None)(tree(c, vkid))
    end = time.time() + 15
    r = got_v()
    while not r and time.time() < end:
        time.sleep(0.02)
        r = got_v()
    if not r and "asan" in os.environ.get("BUILD", ""):
        # Seen only in whole ASan runs of the suite, never when this test
        # runs alone: the violating child's agent never connects.  Kept
        # visible as a skipped check until it is understood.
        print("skip: under ASan the violating fork child's agent did not connect in 15 s "
              "(known, whole-suite ASan runs only); its log:")
        print(open(tmp + "/fork_tree.log").read()[-2000:])
    elif not r:
        print(open(tmp + "/fork_tree.log").read()[-2000:])
        fail("timed out waiting for the violating child's violation")
    else:
        v = r["model"]["violations"]
        joined = [s["id"] for s in r["model"]["scopes"] if s["name"] == "joined"]
        check(len(v) == 1 and v[0]["kind"] == "double_join" and v[0]["tid"] == vkid and
              joined and v[0]["scope"] == joined[0],
              "the child's first event, a double join of the inherited scope, reached the daemon (%s)" % v)
    Grandchild(vkid).kill()

    Grandchild(kid).kill()
    p.stdin.close(); p.wait(5)
    check(log_is_clean(), "no sanitizer report in the daemon's log")
    plog = open(tmp + "/fork_tree.log").read()
    check("Sanitizer" not in plog and "runtime error:" not in plog,
          "no sanitizer report from the parent or its children")
    print("all agent_fork checks passed")

run(main)
PY
