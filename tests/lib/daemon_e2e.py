"""daemon_e2e.py - what the Python end-to-end tests of scoped share: a private
socket directory, scoped started on it, checks that fail with the daemon's
log, and a control client that validates every request and reply against
the control schemas.

Use: setup() first (it skips the test when a binary is not built), then
`from daemon_e2e import *`, then run(main)."""
import json, os, select, shutil, socket, subprocess, sys, tempfile, time

TOP = os.environ.get("TOP", "."); BUILD = os.environ.get("BUILD", "build")
SCOPED = os.path.join(TOP, BUILD, "bin/scoped")
# Set by setup(): the test's directory, the default sockets, the daemon's log.
tmp = SOCKDIR = SOCK = CTL = LOG = None
children = []


def setup(*helpers):
    """Skips (exit 77) unless scoped and the helpers (paths below BUILD) are
    built; makes the private directory.  Returns the helpers' full paths."""
    global tmp, SOCKDIR, SOCK, CTL, LOG
    paths = [os.path.join(TOP, BUILD, h) for h in helpers]
    for p in [SCOPED] + paths:
        if not os.access(p, os.X_OK):
            print("skip: %s is not built" % p); sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="scoped-e2e-")
    SOCKDIR = tmp + "/run"
    SOCK = SOCKDIR + "/agent.sock"; CTL = SOCKDIR + "/control.sock"
    LOG = tmp + "/scoped.log"
    return paths[0] if len(paths) == 1 else paths


def cleanup():
    for p in children:
        if p.poll() is None:
            p.kill(); p.wait()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def fail(msg):
    print("FAIL: " + msg)
    if LOG and os.path.exists(LOG):
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
# The validator is a dependency (scripts/deps.sh installs python3-jsonschema):
# without it the test fails rather than pass having checked less.
try:
    from jsonschema import Draft202012Validator
except ImportError:
    print("FAIL: python3-jsonschema is missing (run 'make deps' as root); "
          "replies cannot be checked against the control schemas")
    sys.exit(1)
SCHEMAS = os.path.join(TOP, "schemas")
REQ_V = Draft202012Validator(json.load(open(SCHEMAS + "/control-request.schema.json")))
REP_V = Draft202012Validator(json.load(open(SCHEMAS + "/control-reply.schema.json")))
validated = [0]


def valid(v, obj, what):
    errs = sorted(v.iter_errors(obj), key=lambda e: e.path)
    if errs:
        fail("%s does not match its schema: %s: %s" % (what, json.dumps(obj)[:300], errs[0].message[:300]))
    validated[0] += 1


class Ctl:
    def __init__(self, path=None):
        self.s = socket.socket(socket.AF_UNIX); self.s.connect(path or CTL); self.buf = b""; self.n = 0
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


def start_daemon(*args, sock=None):
    sock = sock or SOCK
    p = subprocess.Popen([SCOPED, "--foreground", "--socket", sock, "--log-level", "debug"] + list(args),
                         stdout=subprocess.DEVNULL, stderr=open(LOG, "a"))
    children.append(p)
    ctl = os.path.join(os.path.dirname(sock), "control.sock")
    def up():
        try: Ctl(ctl); return True
        except OSError: return False
    wait_until(up, 5, "scoped to listen on " + ctl)
    return p


def spawn_ready(argv, log, env, timeout, is_ready, what):
    """Starts a helper that prints a ready line once set up; fails the test
    when it does not within timeout seconds."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(log, "a"), env=dict(os.environ, **env))
    children.append(p)
    if not select.select([p.stdout], [], [], timeout)[0] or not is_ready(p.stdout.readline()):
        fail(what + " did not get ready")
    return p


def rss_kb(pid):
    for l in open("/proc/%d/status" % pid):
        if l.startswith("VmRSS:"): return int(l.split()[1])
    return 0


def log_is_clean():
    """No sanitizer report in the daemon's log."""
    log = open(LOG).read()
    return "Sanitizer" not in log and "runtime error:" not in log


def run(main):
    """Runs the test's main; a test that breaks fails with its traceback."""
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:
        import traceback; traceback.print_exc(); fail("the test itself broke: %r" % e)
    finally:
        cleanup()
