#!/bin/sh
# metrics.sh - scoped --metrics: the option and its errors, /metrics of a
# program with a known workload (every scrape checked by promtool), HTTP
# requests that are not scrapes, and a real Prometheus server that scrapes
# the endpoint and answers queries with the workload's figures.
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 77; }
for t in promtool prometheus curl; do
	command -v $t >/dev/null 2>&1 || { echo "skip: $t is not installed (make deps: prometheus)"; exit 77; }
done
exec python3 - <<'PY'
import json, os, re, socket, subprocess, sys, time, urllib.parse, urllib.request
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
LOAD = daemon_e2e.setup("tests/helpers/metrics_load")
from daemon_e2e import *

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')


def http(url, method="GET", timeout=5):
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape(url):
    """One scrape, checked by promtool; {(name, frozenset(labels)): value}."""
    status, headers, body = http(url)
    check(status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4"),
          "a scrape answers 200 in the text format") if not scrape.quiet else None
    lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    if lint.returncode != 0 or lint.stdout.strip() or lint.stderr.strip():
        fail("promtool check metrics refuses a scrape: %s%s\n%s" % (lint.stdout, lint.stderr, body[:2000]))
    scrape.checked += 1
    out = {}
    for line in body.splitlines():
        if line.startswith("#"): continue
        m = SAMPLE.match(line)
        if not m: fail("not a sample line: %r" % line)
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    scrape.quiet = True
    return out
scrape.checked = 0
scrape.quiet = False


def value(s, metric_, **labels):
    return s.get((metric_, frozenset(labels.items())))


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    return port


def tcp_listeners(pid):
    """How many listening TCP sockets process pid holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue  # closed between the listing and the look: not a listener
        m = re.match(r"socket:\[(\d+)\]", link)
        if m: inodes.add(m.group(1))
    n = 0
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(f).readlines()[1:]:
            cols = line.split()
            n += cols[3] == "0A" and cols[9] in inodes
    return n


def metrics_url():
    """The address the daemon logged (port 0 asked it to pick one)."""
    def found():
        m = re.search(r"serving metrics on (http://\S+/metrics)", open(LOG).read())
        return m.group(1) if m else None
    return wait_until(found, 5, "scoped to log its metrics address")


def main():
    out = subprocess.run([SCOPED, "--help"], capture_output=True, text=True)
    check(out.returncode == 0 and "--metrics [ADDR:]PORT" in out.stdout, "--help lists --metrics")
    for bad, why in [("nonsense", "[ADDR:]PORT"), ("70000", "PORT 0..65535"), ("::1:9464", "brackets"),
                     ("no.such.host.invalid:9464", "cannot resolve")]:
        out = subprocess.run([SCOPED, "--foreground", "--socket", tmp + "/bad/agent.sock", "--metrics", bad],
                             capture_output=True, text=True, timeout=20)
        check(out.returncode == 1 and why in out.stderr, "--metrics %s is refused: %s" % (bad, out.stderr.strip()))

    # Prometheus starts while the rest runs: it is the slow part.
    prom_port = free_port()
    metrics_daemon = start_daemon("--stacks=signal", "--metrics", "0")
    url = metrics_url()
    host, port = re.match(r"http://(.*):(\d+)/metrics", url).groups()
    check(host == "127.0.0.1", "with no address the endpoint listens on loopback (%s)" % url)
    open(tmp + "/prom.yml", "w").write(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n- job_name: scoped\n  static_configs:\n  - targets: ['127.0.0.1:%s']\n" % port)
    prom = subprocess.Popen(["prometheus", "--config.file=" + tmp + "/prom.yml",
                             "--storage.tsdb.path=" + tmp + "/prom-data",
                             "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp + "/prom.log", "a"))
    children.append(prom)

    other = subprocess.run([SCOPED, "--foreground", "--socket", tmp + "/other/agent.sock", "--metrics",
                            "127.0.0.1:" + port], capture_output=True, text=True, timeout=20)
    check(other.returncode == 1 and "cannot serve metrics on '127.0.0.1:%s'" % port in other.stderr,
          "a taken port is reported on the terminal")
    plain = start_daemon("--stacks=signal", sock=tmp + "/plain/agent.sock")
    check(tcp_listeners(plain.pid) == 0 and tcp_listeners(metrics_daemon.pid) == 1,
          "without --metrics scoped listens on no TCP port; with it, on one")
    plain.terminate(); plain.wait(5)

    s = scrape(url)
    check(value(s, "scoped_build_info", version="0.1.0", protocol="4") == 1 and
          value(s, "scoped_processes", state="live") == 0, "an idle daemon's scrape")

    # The known workload, started once the daemon holds the process.
    load = subprocess.Popen([LOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ, SCOPED_SOCKET=SOCK))
    children.append(load)
    line = load.stdout.readline().decode().split()
    check(line[:1] == ["pool"], "the workload program started")
    pid = line[1]
    wait_until(lambda: value(scrape(url), "scoped_process_info", pid=pid, process="metrics_load",
                             runtime_version="0.1.0") == 1, 5, "the process to show in /metrics")
    load.stdin.write(b"go\n"); load.stdin.flush()
    check(load.stdout.readline().decode().split() == ["ready", pid], "the workload ran")

    def settled():
        s = scrape(url)
        return s if value(s, "executor_pool_max_threads", pid=pid, name="mload") == 5 else None
    s = wait_until(settled, 5, "the workload's last event to reach /metrics")
    want = {
        ("scoped_tasks_ended_total", ("pool", "mload"), ("state", "success")): 30,
        ("scoped_tasks_ended_total", ("pool", "mload"), ("state", "failed")): 10,
        ("scoped_tasks_ended_total", ("pool", "mload"), ("state", "cancelled")): 5,
        ("scoped_tasks_ended_total", ("pool", "mload"), ("state", "unavailable")): 0,
        ("scoped_scope_cancellations_total", ("reason", "explicit")): 1,
        ("scoped_scope_cancellations_total", ("reason", "timeout")): 1,
        ("scoped_scope_cancellations_total", ("reason", "joiner")): 0,
        ("scoped_structure_violations_total", ("kind", "double_join")): 1,
        ("scoped_structure_violations_total", ("kind", "not_owner")): 0,
        ("scoped_scopes_closed_total",): 4,
        ("scoped_tasks", ("state", "running")): 0,
        ("scoped_process_live",): 1,
        ("scoped_lost_events_total",): 0,
        ("executor_pool_core_threads", ("name", "mload")): 4,
        ("executor_pool_max_threads", ("name", "mload")): 5,
        ("executor_completed_tasks_total", ("name", "mload")): 45,
        ("executor_seconds_count", ("name", "mload")): 45,
        ("executor_idle_seconds_count", ("name", "mload")): 45,
        ("executor_seconds_bucket", ("name", "mload"), ("le", "+Inf")): 45,
    }
    for key, v in want.items():
        got = value(s, key[0], pid=pid, **dict(key[1:]))
        check(got == v, "/metrics: %s%s = %s (%s)" % (key[0], dict(key[1:]), v, got))
    check(value(s, "executor_seconds_sum", pid=pid, name="mload") >= 40 * 0.002,
          "run time sums the 40 tasks' 2 ms sleeps at least")
    check(value(s, "executor_seconds_bucket", pid=pid, name="mload", le="0.001") < 40,
          "the 2 ms tasks are not in the 1 ms bucket")
    check(value(s, "scoped_ingest_lag_seconds_count", pid=pid) > 0, "ingest lag is measured")
    check(value(s, "process_resident_memory_bytes") > 0 and value(s, "process_open_fds") > 3,
          "the daemon's own process figures")

    # Requests that are not scrapes, and a client that never finishes its
    # request: the loop serves the rest meanwhile.
    base = url[: -len("/metrics")]
    check(http(base + "/nothing")[0] == 404, "another path is 404")
    code, headers, _ = http(url, "POST")
    check(code == 405 and headers["Allow"] == "GET, HEAD", "POST is 405 with Allow")
    check(http(url, "HEAD")[0] == 200, "HEAD is served")
    slow = socket.create_connection((host, int(port))); slow.sendall(b"GET /metr")
    odd = socket.create_connection((host, int(port))); odd.sendall(b"\x00\xff\r\n\r\n")
    junk = socket.create_connection((host, int(port))); junk.sendall(b"GARBAGE\r\n\r\n")
    junk.settimeout(5)
    reply = junk.recv(100)
    check(reply.startswith(b"HTTP/1.1 400") or reply == b"", "a garbage request is refused (%r)" % reply[:20])
    t0 = time.time(); scrape(url)
    check(time.time() - t0 < 2, "half-sent and undecodable requests do not hold up a scrape")
    check(Ctl().req({"cmd": "status"})["ok"], "nor the control socket")
    slow.close(); junk.close(); odd.close()

    # Prometheus scrapes it and answers from what it stored.
    api = "http://127.0.0.1:%d/api/v1/query?query=" % prom_port
    def query(q):
        try:
            code, _, body = http(api + urllib.parse.quote(q), timeout=2)
        except OSError:
            return None
        r = json.loads(body) if code == 200 else None
        return r["data"]["result"] if r and r["status"] == "success" else None
    def vals(q):
        res = query(q)
        return [float(x["value"][1]) for x in res] if res else None
    sel = 'pid="%s"' % pid
    wait_until(lambda: vals('up{job="scoped"}') == [1.0] and
               vals('scoped_tasks_ended_total{%s,state="success"}' % sel), 25, "Prometheus to scrape scoped")
    for q, v in [('scoped_tasks_ended_total{%s,pool="mload",state="success"}' % sel, 30),
                 ('sum(scoped_tasks_ended_total{%s,pool="mload"})' % sel, 45),
                 ('sum(scoped_scope_cancellations_total{%s})' % sel, 2),
                 ('scoped_structure_violations_total{%s,kind="double_join"}' % sel, 1),
                 ('executor_pool_max_threads{%s,name="mload"}' % sel, 5),
                 ('executor_seconds_count{%s,name="mload"}' % sel, 45),
                 ('count(scoped_process_info{%s,process="metrics_load"})' % sel, 1)]:
        check(vals(q) == [float(v)], "Prometheus: %s = %s (%s)" % (q, v, vals(q)))
    med = vals('histogram_quantile(0.5, executor_seconds_bucket{%s,name="mload"})' % sel)
    check(med and 0.001 < med[0] <= 0.05, "Prometheus: the median task ran 1..50 ms (%s)" % med)

    load.stdin.close(); load.wait(5)
    wait_until(lambda: value(scrape(url), "scoped_process_live", pid=pid) == 0, 5,
               "the exited process to read 0 in scoped_process_live")
    check(scrape.checked > 3, "promtool accepted all %d scrapes" % scrape.checked)
    metrics_daemon.terminate()
    check(metrics_daemon.wait(10) == 0 and log_is_clean(),
          "scoped stops cleanly, the HTTP server with it, with no sanitizer report")

run(main)
PY
