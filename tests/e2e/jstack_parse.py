#!/usr/bin/python3
"""jstack_parse.py - a thread-dump reader written to HotSpot's published
jstack / `jcmd Thread.print` text layout, as thread-dump analysers read it:

    "name" #N [daemon] prio=P [os_prio=O] [cpu=..] [elapsed=..] tid=0x.. nid=0x.. activity  [0x..]
       java.lang.Thread.State: STATE [(detail)]
    <TAB>at method(location)
    <TAB>- locked <0x..> (a Class)
    <TAB>- waiting to lock <0x..> (a Class)
    ...
       Locked ownable synchronizers:
    <TAB>- <0x..> (a Class)

VM-internal threads of a real JVM have no "#N" and no prio=.  Modes:

  --compare DUMP.json DUMP.jstack  scopecmd's jstack layout holds the JSON
                                   dump's threads, states and frames
  --plain DUMP.json DUMP.txt       scopecmd's text form names each thread's
                                   Thread.State on its line (JDK 25's layout)
  --real JCMD.txt                  the reader reads a real JVM's dump
  --locks DUMP.jstack WAITER HOLDER ADDR
                                   the thread with tid WAITER waits to lock
                                   ADDR, which the thread with tid HOLDER
                                   holds (a "- locked" line or its
                                   ownable synchronizers), as analysers
                                   link a blocked thread to its blocker
"""
import json
import re
import sys

THREAD = re.compile(
    r'^"(?P<name>.*)"(?: #(?P<num>\d+))?(?: daemon)?(?: prio=(?P<prio>\d+))?'
    r'(?: os_prio=\S+)?(?: cpu=\S+)?(?: elapsed=\S+)? tid=(?P<tid>0x[0-9a-f]+)'
    r' nid=(?P<nid>0x[0-9a-f]+) (?P<activity>[^\[]*?)\s*(?:\[0x[0-9a-f]+\])?$')
STATE = re.compile(r'^   java\.lang\.Thread\.State: (?P<state>[A-Z_]+)(?: \((?P<detail>[^)]+)\))?$')
FRAME = re.compile(r'^\tat (?P<method>[^\s(]+)\((?P<where>[^()]*)\)$')
# The lock lines analysers look for (IntelliJ's parser's patterns, as
# prefixes: what follows the ">" is free).
WAITING = re.compile(r'^\t- (?:waiting (?:on|to lock)|parking to wait for ) <(0x[0-9a-f]+)>')
LOCKED = re.compile(r'^\t- locked <(0x[0-9a-f]+)>')
OWNABLE = re.compile(r'^\t- <(0x[0-9a-f]+)> \(a .+\)$')
STATES = {"NEW", "RUNNABLE", "BLOCKED", "WAITING", "TIMED_WAITING", "TERMINATED"}


def parse(text):
    """The threads of a jstack-layout dump, in order: dicts of name, num,
    nid, state, detail, frames (method(where) strings)."""
    threads, cur, expect_state = [], None, False
    for line in text.split("\n"):
        m = THREAD.match(line)
        if m:
            cur = {"name": m["name"], "num": m["num"], "nid": int(m["nid"], 16),
                   "state": None, "detail": None, "frames": [], "activity": m["activity"],
                   "waits": [], "holds": [], "in_ownable": False}
            threads.append(cur)
            expect_state = True
            continue
        if expect_state:
            expect_state = False
            s = STATE.match(line)
            if s:
                cur["state"], cur["detail"] = s["state"], s["detail"]
                continue
        if cur is not None:
            if line == "   Locked ownable synchronizers:":
                cur["in_ownable"] = True
                continue
            w, lk, ow = WAITING.match(line), LOCKED.match(line), OWNABLE.match(line)
            if w:
                cur["waits"].append(w[1])
            elif lk or (ow and cur["in_ownable"]):
                cur["holds"].append((lk or ow)[1])
        f = FRAME.match(line)
        if f and cur is not None:
            cur["frames"].append("%s(%s)" % (f["method"], f["where"]))
        elif line.startswith("\tat "):
            raise ValueError("frame line not in HotSpot's layout: %r" % line)
    return threads


def json_threads(path):
    with open(path) as f:
        td = json.load(f)["threadDump"]
    return [t for c in td["threadContainers"] for t in c["threads"]]


def hotspot_frame(frame):
    """The JSON frame as the jstack form writes it: the last " (" splits
    name and place; a name loses white space and parentheses, a place its
    parentheses (a C++ name such as "f<g(int)> >" would end the frame)."""
    def method(m):
        return re.sub(r"\s", "_", m).replace("(", "[").replace(")", "]")

    def place(w):
        return w.replace("(", "[").replace(")", "]")

    i = frame.rfind(" (")
    if i >= 0 and frame.endswith(")"):
        return "%s(%s)" % (method(frame[:i]), place(frame[i + 2:-1]))
    return method(frame) + "(Unknown Source)"


def compare(json_path, jstack_path):
    want = json_threads(json_path)
    with open(jstack_path) as f:
        text = f.read()
    got = parse(text)
    # Line 2, or 3 after jcmd's "<pid>:" line.
    if not any(ln.startswith("Full thread dump ") for ln in text.split("\n")[1:3]):
        return "no 'Full thread dump' line"
    if len(got) != len(text.split('\n"')) - 1:
        return "a thread line the layout's pattern does not match"
    by_tid = {t["nid"]: t for t in got}
    errors = []
    for g in got:
        if g["num"] is None or int(g["num"]) != g["nid"]:
            errors.append("thread %r: #N is not its tid" % g["name"])
        if g["state"] not in STATES:
            errors.append("thread %r: no java.lang.Thread.State line" % g["name"])
    for w in want:
        g = by_tid.get(w["tid"])
        if g is None:
            # A pool's idle worker may retire between the two dumps.
            if w.get("task") or w.get("role") == "main":
                errors.append("thread %d (%s) missing" % (w["tid"], w["name"]))
            continue
        if g["name"] != w["name"]:
            errors.append("thread %d named %r, not %r" % (w["tid"], g["name"], w["name"]))
        # The agent thread moves between dumps; the others are blocked.
        if w.get("role") == "agent":
            continue
        if g["state"] != w["state"]:
            errors.append("thread %d state %s, JSON %s" % (w["tid"], g["state"], w["state"]))
        if g["frames"] != [hotspot_frame(x) for x in w["stack"]]:
            errors.append("thread %d frames %r, JSON %r" % (w["tid"], g["frames"], w["stack"]))
    if len(got) < 3:
        errors.append("only %d threads parsed" % len(got))
    return "; ".join(errors)


def plain(json_path, text_path):
    want = {t["tid"]: t for t in json_threads(json_path)}
    line = re.compile(r'^\s*#(\d+) "(.*)" ([A-Z_]+)$')
    found = 0
    with open(text_path) as f:
        for ln in f:
            m = line.match(ln.rstrip("\n"))
            if not m:
                continue
            found += 1
            if m[3] not in STATES:
                return "thread line %r: %s is no Thread.State" % (ln, m[3])
            w = want.get(int(m[1]))
            if w and w["name"] != m[2]:
                return "thread %s named %r, JSON %r" % (m[1], m[2], w["name"])
    return "" if found >= 3 else "only %d thread lines with a state" % found


def real(path):
    with open(path) as f:
        got = parse(f.read())
    java = [t for t in got if t["num"] is not None]
    main = [t for t in java if t["name"] == "main"]
    if len(java) < 3 or not main:
        return "%d Java threads parsed in a real dump, main %s" % (len(java), bool(main))
    if any(t["state"] not in STATES for t in java):
        return "a Java thread without its state line"
    m = main[0]
    if m["state"] != "TIMED_WAITING" or m["detail"] != "sleeping":
        return "main is %s (%s), not TIMED_WAITING (sleeping)" % (m["state"], m["detail"])
    if not any(f.startswith("Idle.main(") for f in m["frames"]):
        return "main's frames %r lack Idle.main" % m["frames"]
    return ""


def locks(path, waiter, holder, addr):
    with open(path) as f:
        got = {t["nid"]: t for t in parse(f.read())}
    w, h = got.get(int(waiter)), got.get(int(holder))
    if w is None or h is None:
        return "waiter %s or holder %s not in the dump" % (waiter, holder)
    if w["waits"] != [addr]:
        return "thread %s waits for %r, not [%s]" % (waiter, w["waits"], addr)
    holders = [t["nid"] for t in got.values() if addr in t["holds"]]
    if holders != [int(holder)]:
        return "%s is held by %r, not [%s]" % (addr, holders, holder)
    return ""


def main(argv):
    modes = {"--compare": (compare, 2), "--plain": (plain, 2), "--real": (real, 1),
             "--locks": (locks, 4)}
    if len(argv) < 2 or argv[1] not in modes or len(argv) != 2 + modes[argv[1]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    err = modes[argv[1]][0](*argv[2:])
    if err:
        print("jstack_parse: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
