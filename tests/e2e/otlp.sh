#!/bin/sh
# otlp.sh - scoped --otlp: scope trees of a program of known shape reach an
# OTLP/HTTP receiver that decodes them with the OpenTelemetry protobuf
# definitions (from the npm registry: @opentelemetry/otlp-transformer's
# generated root), with parents, attributes, statuses, events, the trace
# joined from a traceparent value, and the sampling rules; a receiver that is
# slow or down costs the daemon nothing of its model.
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 77; }
command -v node >/dev/null 2>&1 || { echo "skip: node is not installed (make deps: nodejs)"; exit 77; }
TOP=${TOP:-.}
BUILD=${BUILD:-build}
# One copy for every build flavour (build, build-asan, build-tsan).
MODULES=$TOP/build/npm-otlp/node_modules
if [ ! -f "$MODULES/@opentelemetry/otlp-transformer/build/src/generated/root.js" ]; then
	command -v npm >/dev/null 2>&1 || { echo "skip: npm is not installed"; exit 77; }
	timeout 180 npm install --silent --no-audit --no-fund --prefix "$TOP/build/npm-otlp" \
		@opentelemetry/otlp-transformer@0.52.1 >/dev/null 2>&1 ||
		{ echo "skip: cannot install @opentelemetry/otlp-transformer from the npm registry"; exit 77; }
fi
export MODULES
exec python3 - <<'PY'
import json, os, re, subprocess, sys, time, urllib.request
sys.path.insert(0, os.path.join(os.environ.get("TOP", "."), "tests/lib"))
import daemon_e2e
LOAD = daemon_e2e.setup("tests/helpers/otlp_load")
from daemon_e2e import *

RECEIVER = os.path.join(os.environ.get("TOP", "."), "tests/lib/otlp_receiver.js")
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def receiver(mode, name=None):
    out = tmp + "/otlp-%s.jsonl" % (name or mode)
    p = subprocess.Popen(["node", RECEIVER, os.environ["MODULES"], out, mode], stdout=subprocess.PIPE,
                         stderr=open(tmp + "/receiver.log", "a"))
    children.append(p)
    line = p.stdout.readline().decode()
    if not line.startswith("port "): fail("the receiver did not start: %r" % line)
    return p, int(line.split()[1]), out


def spans_in(out):
    spans = []
    if not os.path.exists(out): return spans
    for line in open(out):
        req = json.loads(line)
        if "error" in req: fail("the receiver could not decode a request: " + req["error"])
        for rs in req.get("resourceSpans", []):
            res = {a["key"]: list(a["value"].values())[0] for a in rs["resource"].get("attributes", [])}
            for ss in rs.get("scopeSpans", []):
                for s in ss.get("spans", []):
                    s["attrs"] = {a["key"]: list(a["value"].values())[0] for a in s.get("attributes", [])}
                    s["resource"] = res
                    spans.append(s)
    return spans


def run_load(sock):
    load = subprocess.Popen([LOAD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=dict(os.environ, SCOPED_SOCKET=sock))
    children.append(load)
    line = load.stdout.readline().decode().split()
    if line[:1] != ["pool"]: fail("otlp_load did not start")
    pid = int(line[1])
    c = Ctl(os.path.join(os.path.dirname(sock), "control.sock"))
    wait_until(lambda: c.req({"cmd": "tree", "pid": pid})["ok"], 5, "otlp_load to register")
    load.stdin.write(b"go\n"); load.stdin.flush()
    if load.stdout.readline().decode().split() != ["ready", str(pid)]: fail("otlp_load did not finish")
    return load, pid, c


def metrics_url(n):
    """The n-th metrics address in the log (the daemon logs it once it serves)."""
    def found():
        urls = re.findall(r"serving metrics on (http://\S+)", open(LOG).read())
        return urls[n] if len(urls) > n else None
    return wait_until(found, 5, "scoped to log its metrics address")


def metrics(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r'^scoped_otlp_spans_total\{outcome="(\w+)"\} (\S+)$', text, re.M)}


def main():
    out = subprocess.run([SCOPED, "--foreground", "--socket", tmp + "/bad/agent.sock", "--otlp", "ftp://x"],
                         capture_output=True, text=True, timeout=20)
    check(out.returncode == 1 and "--otlp takes an http://" in out.stderr, "a URL that is not http(s) is refused")

    rp, port, got = receiver("ok")
    start_daemon("--stacks=signal", "--otlp", "http://127.0.0.1:%d/v1/traces" % port, "--otlp-sample", "0",
                 "--metrics", "0")
    murl = metrics_url(0)
    load, pid, c = run_load(SOCK)
    spans = wait_until(lambda: (lambda s: s if len(s) >= 8 else None)(spans_in(got)), 10,
                       "the kept trees at the receiver")
    time.sleep(0.5)
    spans = spans_in(got)
    names = sorted(s["name"] for s in spans)
    check(names == sorted(["request", "inner", "task", "task", "task", "late", "task", "twice"]),
          "the failed, late and violating trees arrive whole, the 10 fine ones are sampled out (%s)" % names)
    by_id = {s["spanId"]: s for s in spans}
    req = [s for s in spans if s["name"] == "request"][0]
    inner = [s for s in spans if s["name"] == "inner"][0]
    check(req["traceId"] == TRACE_ID and req["parentSpanId"] == PARENT,
          "the request tree joins the trace of its traceparent value, under its parent span")
    tree = [s for s in spans if s["traceId"] == TRACE_ID]
    check(len(tree) == 5, "the whole request tree is in that trace (%d spans)" % len(tree))
    a = by_id.get(inner.get("parentSpanId"))
    check(a and a["name"] == "task" and a["parentSpanId"] == req["spanId"] and
          a["attrs"]["scoped.task.state"] == "success", "inner's parent is task a, a child of request")
    c_task = [s for s in tree if s.get("parentSpanId") == inner["spanId"]]
    check(len(c_task) == 1 and c_task[0]["attrs"]["scoped.task.state"] == "success", "inner's task")
    b = [s for s in tree if s["name"] == "task" and s["attrs"]["scoped.task.state"] == "failed"]
    check(len(b) == 1 and b[0]["parentSpanId"] == req["spanId"] and b[0]["status"]["code"] == "STATUS_CODE_ERROR"
          and b[0]["attrs"]["scoped.task.error"] == str(-5), "the failed task: error status and its error")
    check(req["attrs"]["scoped.scope.joiner"] == "await_all" and "code.file.path" in req["attrs"] and
          req["resource"]["service.name"] == "otlp_load" and req["resource"]["process.pid"] == str(pid),
          "attributes of a scope span and the process's resource")
    check(int(req["startTimeUnixNano"]) <= int(a["startTimeUnixNano"]) <= int(a["endTimeUnixNano"]) <=
          int(req["endTimeUnixNano"]) and abs(int(req["endTimeUnixNano"]) / 1e9 - time.time()) < 60,
          "times are Unix nanoseconds, children inside their parents")
    late = [s for s in spans if s["name"] == "late"][0]
    ev = late.get("events", [])
    check(late["attrs"].get("scoped.scope.late") is True and late["traceId"] != TRACE_ID and
          [e["name"] for e in ev] == ["scoped.cancel"] and
          ev[0]["attributes"][0]["value"]["stringValue"] == "timeout",
          "the late scope: its own trace, marked late, a cancel event with the reason")
    twice = [s for s in spans if s["name"] == "twice"][0]
    check(twice["status"]["code"] == "STATUS_CODE_ERROR" and "double_join" in twice["status"]["message"]
          and [e["name"] for e in twice.get("events", [])] == ["scoped.violation"],
          "a structure violation is an error status and an event")
    m = wait_until(lambda: (lambda m: m if m.get("exported") == 8 else None)(metrics(murl)), 5,
                   "scoped_otlp_spans_total to count the export")
    check(m["sampled_out"] == 40 and m["dropped_failed"] == 0,
          "/metrics counts 8 spans exported, 40 sampled out (%s)" % m)
    load.stdin.close(); load.wait(5)

    # OTLP/JSON, gzipped, with headers from OTEL_EXPORTER_OTLP_HEADERS (a
    # secret stays off the command line): the same trees arrive.
    out = subprocess.run([SCOPED, "--foreground", "--socket", tmp + "/bad/agent.sock", "--otlp",
                          "http://127.0.0.1:1/v1/traces", "--otlp-headers", "x=a%0d%0aEvil: 1"],
                         capture_output=True, text=True, timeout=20)
    check(out.returncode == 1 and "--otlp-headers" in out.stderr,
          "a header value that would inject a header line is refused")
    _, port, got = receiver("ok", "json")
    os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = "authorization=Bearer%20s3cret, x-tenant=blue"
    jsock = tmp + "/json/agent.sock"
    d = start_daemon("--stacks=signal", "--otlp", "http://127.0.0.1:%d/v1/traces" % port, "--otlp-sample", "0",
                     "--otlp-protocol", "http/json", "--otlp-compression", "gzip", sock=jsock)
    del os.environ["OTEL_EXPORTER_OTLP_HEADERS"]
    check("s3cret" not in " ".join(open("/proc/%d/cmdline" % d.pid).read().split("\0")),
          "the header's secret is not on scoped's command line")
    load, pid, c = run_load(jsock)
    spans = wait_until(lambda: (lambda s: s if len(s) >= 8 else None)(spans_in(got)), 10,
                       "the kept trees as OTLP/JSON")
    time.sleep(0.5)
    spans = spans_in(got)
    reqs = [json.loads(l) for l in open(got)]
    want = {"content-encoding": "gzip", "authorization": "Bearer s3cret", "x-tenant": "blue"}
    check(reqs and all(r.get("_format") == "json" and r.get("_headers") == want for r in reqs),
          "OTLP/JSON requests, gzipped, with the configured headers (%s)" %
          [(r.get("_format"), r.get("_headers")) for r in reqs])
    check(sorted(x["name"] for x in spans) == names, "the same trees arrive as OTLP/JSON")
    req = [x for x in spans if x["name"] == "request"][0]
    by_id = {x["spanId"]: x for x in spans}
    tree = [x for x in spans if x["traceId"] == TRACE_ID]
    check(req["parentSpanId"] == PARENT and len(tree) == 5 and
          all(x is req or x.get("parentSpanId") in by_id for x in tree) and
          req["attrs"]["scoped.scope.joiner"] == "await_all" and
          int(req["startTimeUnixNano"]) <= int(req["endTimeUnixNano"]),
          "in JSON too: the joined trace, every parent, attributes, times")
    load.stdin.close(); load.wait(5)
    d.terminate()
    check(d.wait(15) == 0, "scoped stops cleanly after the JSON export")

    # A receiver that answers slowly, and one that is not there: the loop
    # goes on, the model is whole.
    for mode in ("slow", "down"):
        sock = tmp + "/%s/agent.sock" % mode
        if mode == "slow":
            _, port, _ = receiver("slow")
        else:
            port = 9  # discard: nothing listens there
        # Down, it also has room for 4 spans only.
        budget = ["--otlp-max-spans", "4", "--metrics", "0"] if mode == "down" else []
        d = start_daemon("--stacks=signal", "--otlp", "http://127.0.0.1:%d/v1/traces" % port,
                         "--otlp-sample", "1000", *budget, sock=sock)
        load, pid, c = run_load(sock)
        t0 = time.time()
        r = wait_until(lambda: (lambda r: r if r["ok"] and len(r["model"]["scopes"]) >= 13 else None)(
            c.req({"cmd": "tree", "pid": pid})), 5, "the tree while the receiver is %s" % mode)
        time.sleep(0.5)
        t1 = time.time(); st = c.req({"cmd": "status"}); dt = time.time() - t1
        check(st["ok"] and dt < 1, "receiver %s: the daemon answers at once (%.3f s) and holds the model" % (mode, dt))
        if mode == "down":
            url = metrics_url(1)
            m = metrics(url)
            check(m["dropped_memory"] > 0 and m["exported"] == 0,
                  "past --otlp-max-spans spans are dropped and counted (%s)" % m)
        load.stdin.close(); load.wait(5)
        d.terminate()
        check(d.wait(15) == 0, "receiver %s: scoped stops cleanly, the export abandoned" % mode)
    check(log_is_clean(), "no sanitizer report in scoped's log")

run(main)
PY
