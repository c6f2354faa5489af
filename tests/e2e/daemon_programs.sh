#!/bin/sh
# daemon_programs.sh - scoped with real libscope programs on a private socket:
# several trees at once, post-mortem of a program that aborts and one that
# exits, a SIGKILLed daemon restarted (every tree back within 2 s), and a
# client of another uid that must not see or dump what it does not own.
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 77; }
exec python3 - <<'PY'
import json, os, select, shutil, signal, socket, stat, subprocess, sys, tempfile, time

TOP = os.environ.get("TOP", "."); BUILD = os.environ.get("BUILD", "build")
SCOPED = os.path.join(TOP, BUILD, "bin/scoped")
TREE = os.path.join(TOP, BUILD, "tests/helpers/daemon_tree")
for p in (SCOPED, TREE):
    if not os.access(p, os.X_OK):
        print("skip: %s is not built" % p); sys.exit(77)
tmp = tempfile.mkdtemp(prefix="scoped-e2e-")
SOCKDIR = tmp + "/run"
SOCK = SOCKDIR + "/agent.sock"; CTL = SOCKDIR + "/control.sock"
LOG = tmp + "/scoped.log"
children = []

def cleanup():
    for p in children:
        if p.poll() is None:
            p.kill(); p.wait()
    shutil.rmtree(tmp, ignore_errors=True)

def fail(msg):
    print("FAIL: " + msg)
    if os.path.exists(LOG):
        print("--- scoped log (last 30 lines)"); print("".join(open(LOG).readlines()[-30:]))
    cleanup(); sys.exit(1)

def check(cond, msg):
    if not cond: fail(msg)
    print("ok - " + msg)

def wait_until(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v: return v
        time.sleep(0.02)
    fail("timed out waiting for " + what)

# Every request sent and every line received is checked against the schemas.
try:
    from jsonschema import Draft202012Validator
    SCHEMAS = os.path.join(TOP, "schemas")
    REQ_V = Draft202012Validator(json.load(open(SCHEMAS + "/control-request.schema.json")))
    REP_V = Draft202012Validator(json.load(open(SCHEMAS + "/control-reply.schema.json")))
except ImportError:
    REQ_V = REP_V = None
    print("note: python3-jsonschema is missing; replies are not validated")
validated = [0]

def valid(v, obj, what):
    if v is None: return
    errs = sorted(v.iter_errors(obj), key=lambda e: e.path)
    if errs:
        fail("%s does not match its schema: %s: %s" % (what, json.dumps(obj)[:300], errs[0].message[:300]))
    validated[0] += 1

class Ctl:
    def __init__(self, path=CTL):
        self.s = socket.socket(socket.AF_UNIX); self.s.connect(path); self.buf = b""; self.n = 0
    def send(self, obj, raw=False):
        if not raw: valid(REQ_V, obj, "request")
        self.s.sendall((json.dumps(obj) + "\n").encode())
    def line(self, timeout=5):
        end = time.time() + timeout
        while b"\n" not in self.buf:
            left = end - time.time()
            if left <= 0 or not select.select([self.s], [], [], left)[0]: return None
            d = self.s.recv(1 << 20)
            if not d: return None
            self.buf += d
        l, self.buf = self.buf.split(b"\n", 1)
        obj = json.loads(l)
        valid(REP_V, obj, "reply")
        return obj
    def req(self, obj, timeout=5, raw=False):
        self.n += 1; obj = dict(obj, id=self.n); self.send(obj, raw)
        while True:
            r = self.line(timeout)
            if r is None: fail("no reply to %s" % obj)
            if r.get("id") == self.n: return r

def start_daemon(*args, sock=SOCK):
    p = subprocess.Popen([SCOPED, "--foreground", "--socket", sock, "--log-level", "debug"] + list(args),
                         stdout=subprocess.DEVNULL, stderr=open(LOG, "a"))
    children.append(p)
    ctl = os.path.join(os.path.dirname(sock), "control.sock")
    def up():
        try: Ctl(ctl); return True
        except OSError: return False
    wait_until(up, 5, "scoped to listen on " + ctl)
    return p

def program(*args):
    p = subprocess.Popen([TREE] + list(args), stdout=subprocess.PIPE,
                         stderr=open(tmp + "/programs.log", "a"), env=dict(os.environ, SCOPED_SOCKET=SOCK))
    children.append(p)
    if not select.select([p.stdout], [], [], 10)[0] or not p.stdout.readline().startswith(b"ready"):
        fail("daemon_tree %s did not get ready" % " ".join(args))
    return p

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

def rss_kb(pid):
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS:"): return int(l.split()[1])
    return 0

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

    # --- daemon SIGKILLed and restarted: every live tree back within 2 s
    d.kill(); d.wait()
    t0 = time.time()
    start_daemon()
    c = Ctl()
    def all_back():
        for p in progs:
            r = c.req({"cmd": "tree", "pid": p.pid})
            if not r["ok"] or not r["process"]["complete"] or tree_ok(r["model"]) is not None:
                return False
        return True
    wait_until(all_back, 4, "the programs to come back after a restart")
    took = time.time() - t0
    check(took < 2.0, "after SIGKILL and restart every live program is back with its whole tree (%.2f s)" % took)

    # --- another uid sees and dumps nothing it does not own
    if os.geteuid() != 0:
        print("skip: the other-uid checks need root to become nobody")
        return
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
    out = subprocess.run([py, "-c", probe, CTL, str(progs[0].pid)], capture_output=True,
                         text=True, preexec_fn=as_nobody, timeout=10, cwd="/")
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    check(len(lines) == 4, "the other-uid client got its replies (%s)" % out.stderr.strip()[-200:])
    check(lines[0]["ok"] and lines[0]["processes"] == [], "another uid lists none of root's processes")
    check(all(not l["ok"] and l["error"]["code"] == "permission_denied" for l in lines[1:]),
          "another uid cannot get the tree, dump or stacks of a process it does not own")
    os.chmod(SOCKDIR, 0o700)
    out = subprocess.run([py, "-c", probe, CTL, str(progs[0].pid)], capture_output=True,
                         text=True, preexec_fn=as_nobody, timeout=10, cwd="/")
    check(out.returncode != 0 and "Permission" in out.stderr, "with the default 0700 directory another uid cannot even connect")
    log = open(LOG).read()
    check("Sanitizer" not in log and "runtime error:" not in log, "no sanitizer report in the daemon's log")
    check(REP_V is None or validated[0] > 10, "%d requests and replies matched the control schemas" % validated[0])
    print("all daemon_programs checks passed")

try:
    main()
except SystemExit:
    raise
except BaseException as e:
    import traceback; traceback.print_exc(); fail("the test itself broke: %r" % e)
finally:
    cleanup()
PY
