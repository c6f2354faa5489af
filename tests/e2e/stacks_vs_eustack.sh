#!/bin/sh
# stacks_vs_eustack.sh - the daemon's stacks against `eu-stack -i -s` on the
# same threads (tests/helpers/inline_target, every thread parked): inlined
# functions are frames of their own, marked inlined, with the lines eu-stack
# gives (the outer frame's line is the inlined call); frame #0 of a thread
# blocked in a system call has eu-stack's line; the text dump marks the
# inlined frames; the dump validates.  Signal mode always, BPF when it loads.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/inline_target
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
command -v eu-stack >/dev/null || { echo "skip: eu-stack missing (elfutils; make deps)"; exit 77; }
case $BUILD in
*asan* | *tsan*) echo "skip: sanitizer builds inline differently and run their own threads"; exit 77 ;;
esac
# Which functions the compiler inlined is its choice: the checks that name
# them hold for gcc's -O2.  Any other compiler's build is still compared
# frame by frame with eu-stack, which reads the same DWARF.
STRICT_INLINE=1
case $BUILD in
*clang*)
	STRICT_INLINE=0
	echo "skip: the gcc-specific inlining checks (park_inner, serve_batch...) in a clang build"
	;;
esac
export STRICT_INLINE

private_dir stacks-vs-eustack
dpid= tpid=
trap 'stop_all $tpid $dpid' EXIT
fail() { echo "FAIL: $*"; [ -f "$D/log" ] && tail -5 "$D/log"; exit 1; }

"$HELPER" >"$D/t.out" 2>&1 &
tpid=$!
says_ready() { grep -q '^ready$' "$D/t.out" 2>/dev/null; }
poll 200 says_ready || fail "inline_target did not get ready: $(cat "$D/t.out")"

# compare MODE: dumps through scoped --stacks=MODE, then compares with eu-stack.
compare() {
	"$BIN/scopecmd" --no-start "$tpid" Thread.dump_to_file -format=json "$D/$1.json" \
		>/dev/null 2>"$D/err" || fail "$1: dump failed: $(cat "$D/err")"
	"$BIN/scopecmd" --no-start "$tpid" Thread.print >"$D/$1.txt" 2>"$D/err" ||
		fail "$1: Thread.print failed: $(cat "$D/err")"
	$PY "$TOP/tests/validate_dump.py" --pid "$tpid" "$D/$1.json" || fail "$1: the dump does not validate"
	eu-stack -i -s -p "$tpid" >"$D/eu.txt" 2>"$D/eu.err" || fail "eu-stack failed: $(cat "$D/eu.err")"
	$PY - "$D/$1.json" "$D/eu.txt" "$D/$1.txt" "$1" <<'PYEOF' || fail "$1: stacks differ from eu-stack -i"
import json, os, re, sys
dump, eu_path, text_path, mode = sys.argv[1:5]
td = json.load(open(dump))["threadDump"]
assert td["stackSource"] == mode, td["stackSource"]

def norm(name):
	# Clones (.constprop.0, .isra.0, .cold) are the function of their name.
	return name.split(".")[0] if name else name

ours = {}
for c in td["threadContainers"]:
	for t in c["threads"]:
		inl = set(t.get("inlinedFrames", []))
		frames = []
		for i, f in enumerate(t["stack"]):
			m = re.match(r"^(\S+) \(([^():]+):(\d+)\)$", f)
			frames.append((norm(m.group(1)), m.group(2), int(m.group(3)), i in inl) if m
				      else (f, None, None, i in inl))
		ours[t["tid"]] = (t["name"], frames)

eu, tid, cur = {}, None, None
for line in open(eu_path):
	m = re.match(r"^TID (\d+):", line)
	if m:
		tid = int(m.group(1))
		eu[tid] = []
		continue
	m = re.match(r"^#\d+\s+(0x[0-9a-f]+)\s+(\S+)", line)
	if m and tid is not None:
		cur = [m.group(1), norm(m.group(2)), None, None, False]
		eu[tid].append(cur)
		continue
	m = re.match(r"^\s+(\S+?):(\d+)(:\d+)?$", line)
	if m and cur is not None:
		cur[2], cur[3] = m.group(1), int(m.group(2))
# eu-stack lists the frames of one address innermost first; all but the
# last of them are inlined.
for frames in eu.values():
	for a, b in zip(frames, frames[1:]):
		a[4] = a[0] == b[0]

def ours_of_tree(path):
	# Our own sources: relative paths in the line table; glibc's are "../".
	return path is not None and not path.startswith(("../", "/"))

compared = inlined = 0
for tid, frames in eu.items():
	if tid not in ours or ours[tid][0] == "scoped-agent":
		continue  # the agent answers the capture itself: it moved
	name, mine = ours[tid]
	want = [(f[1], f[2].rsplit("/", 1)[-1], f[3], f[4]) for f in frames if ours_of_tree(f[2])]
	files = {w[1] for w in want}
	got = [f for f in mine if f[1] in files]
	if want != got:
		print("tid %d (%s):\n  eu-stack: %s\n  ours:     %s" % (tid, name, want, got))
		sys.exit(1)
	# Frame #0: a thread parked in the kernel, where eu-stack puts it.
	top = (frames[0][1], (frames[0][2] or "").rsplit("/", 1)[-1], frames[0][3])
	if mine[0][:3] != top:
		print("tid %d (%s): frame #0 %s, eu-stack %s" % (tid, name, mine[0][:3], top))
		sys.exit(1)
	compared += 1
	inlined += sum(1 for w in want if w[3])
names = [f[0] for _, fr in ours.values() for f in fr if f[3]]
strict = os.environ.get("STRICT_INLINE") == "1"
assert compared >= 5, compared
if strict:
	for fn in ("park_inner", "park_middle", "join_close"):
		assert fn in names, "no inlined frame of %s in %s" % (fn, sorted(set(names)))
	assert inlined >= 8, inlined
text = open(text_path).read()
assert not strict or re.search(r"at park_middle \(inline_target\.c:\d+\) \(inlined\)\n\s+at deep_body \(inline_target\.c:\d+\)\n", text), text
print("%s: %d threads as eu-stack -i shows them, %d inlined frames" % (mode, compared, inlined))
PYEOF
}

scoped_start "$D/log" --stacks=signal || fail "scoped did not start"
registered() { is_listed "$tpid"; }
poll 200 registered || fail "inline_target never registered"
compare signal

# The demo, as the issue saw it: main's frame was named main at
# serve_batch's line; handle_request's at join_close's line.
"$BIN/scope-demo" >/dev/null 2>&1 &
demo=$!
demo_registered() { is_listed "$demo"; }
poll 200 demo_registered || { kill $demo; fail "scope-demo never registered"; }
sleep 1 # requests in flight
"$BIN/scopecmd" --no-start "$demo" Thread.dump_to_file -format=json "$D/demo.json" >/dev/null 2>&1
kill $demo
wait $demo 2>/dev/null
$PY - "$D/demo.json" <<'PYEOF' || fail "the demo's inlined frames are not shown"
import json, os, re, sys
td = json.load(open(sys.argv[1]))["threadDump"]
seen = 0
for c in td["threadContainers"]:
	for t in c["threads"]:
		st, inl = t["stack"], set(t.get("inlinedFrames", []))
		for i, f in enumerate(st):
			if os.environ.get("STRICT_INLINE") == "1" and f.startswith("main (scope-demo.c:"):
				assert i > 0 and st[i - 1].startswith("serve_batch (scope-demo.c:") and i - 1 in inl, st
				seen += 1
			if f.startswith("handle_request (scope-demo.c:") and i > 0 and st[i - 1].startswith("join_close"):
				assert i - 1 in inl and f != "handle_request (scope-demo.c:80)", st
assert seen == 1 or os.environ.get("STRICT_INLINE") != "1", "main's frame: %d" % seen
print("demo: main <- serve_batch (inlined) as eu-stack -i shows it")
PYEOF
scoped_stop
if scoped_start "$D/log" --stacks=bpf; then
	poll 200 registered || fail "inline_target never registered again"
	compare bpf
else
	echo "bpf: not compared, scoped --stacks=bpf cannot start here: $(tail -1 "$D/log")"
fi
echo "ok"
