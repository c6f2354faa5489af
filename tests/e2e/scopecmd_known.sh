#!/bin/sh
# scopecmd_known.sh - scopecmd against a program of known structure
# (tests/helpers/dump_known): the JSON container tree equals what the program
# built, stacks name its functions with file:line, every dump validates, and
# Thread.print, Scope.tree, Runtime.info and the target forms agree.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
HELPER=$TOP/$BUILD/tests/helpers/dump_known
need_built "$BIN/scoped" "$BIN/scopecmd" "$HELPER"
need_jsonschema
private_dir scopecmd-known
dpid= hpid=
trap 'stop_all $hpid $dpid' EXIT
fail() {
	echo "FAIL: $*"
	[ -f "$D/log" ] && tail -5 "$D/log"
	# Where everything was, to tell a placement bug from a model that lagged.
	[ -f "$D/d.json" ] && $PY -c '
import json, sys
for c in json.load(open(sys.argv[1]))["threadDump"]["threadContainers"]:
    print("  %s <- %s owner %s: %s" % (c["container"], c["parent"], c["owner"],
          [(t["tid"], (t["task"] or {}).get("id")) for t in c["threads"]]))' "$D/d.json"
	exit 1
}

# True once dump_known has written its thread ids.
reported() { grep -q pid "$D/known" 2>/dev/null; }
# True once the daemon's model holds the whole tree (tests/lib/e2e.sh).
has_tree() { known_tree "$hpid"; }

scoped_start "$D/log" || fail "scoped did not create $(control_sock)"
"$HELPER" >"$D/known" &
hpid=$!
poll 100 reported || fail "dump_known did not report its threads"
cat "$D/known"
poll 100 has_tree ||
	{ "$BIN/scopecmd" --no-start "$hpid" Scope.tree; fail "the three scopes never showed up"; }

out=$("$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json "$D/d.json") || fail "dump_to_file failed"
[ "$out" = "$hpid:
Created $D/d.json" ] || fail "unexpected reply: $out"
$PY "$TOP/tests/validate_dump.py" --pid "$hpid" "$D/d.json" || fail "the dump does not validate"

$PY - "$D/known" "$D/d.json" <<'PYEOF' || fail "the dump does not match the program's structure"
import json, re, sys
who = json.load(open(sys.argv[1]))
td = json.load(open(sys.argv[2]))["threadDump"]
cs = td["threadContainers"]
by = {c["container"]: c for c in cs}
def one(prefix):
    m = [c for c in cs if c["container"].startswith(prefix + "@")]
    assert len(m) == 1, "expected one %s container, got %r" % (prefix, [c["container"] for c in cs])
    return m[0]
def tids(c):
    return sorted(t["tid"] for t in c["threads"])
outer, middle, inner, pool = one("outer"), one("middle"), one("inner"), one("pool:kp")
assert outer["parent"] == "<root>" and outer["owner"] == who["main"], outer["parent"]
assert middle["parent"] == outer["container"] and middle["owner"] == who["b"]
assert inner["parent"] == middle["container"] and inner["owner"] == who["c"]
assert pool["parent"] == "<root>"
assert tids(outer) == sorted([who["a"], who["b"]]), tids(outer)
assert tids(middle) == [who["c"]], tids(middle)
assert tids(inner) == [who["d"]], tids(inner)
assert who["main"] in tids(by["<root>"])
# 6 prestarted workers, 4 busy: the idle ones wait in the pool's container.
assert len(pool["threads"]) >= 2 and all(t["name"].startswith("kp-") for t in pool["threads"]), pool["threads"]
assert outer["joiner"] == "all_successful" and middle["joiner"] == "any_successful" and inner["joiner"] == "await_all"
assert middle["deadline"] is not None and outer["deadline"] is None
assert outer["values"] == {"request_id": "rq-1"}
assert outer["openSite"].startswith("main (dump_known.c:"), outer["openSite"]
threads = {t["tid"]: t for c in cs for t in c["threads"]}
want = {"a": "known_wait_a", "b": "known_task_b", "c": "known_task_c", "d": "known_wait_d", "main": "main"}
for k, fn in want.items():
    st = threads[who[k]]["stack"]
    pat = re.compile(r"^%s \(dump_known\.c:\d+\)$" % fn)
    assert any(pat.match(f) for f in st), "%s's stack lacks %s (dump_known.c:N): %r" % (k, fn, st)
d = threads[who["d"]]
assert d["scopedValues"].get("request_id") == "rq-1" and d["scopedValues"].get("level") == "inner", d["scopedValues"]
assert d["task"]["state"] == "running" and d["task"]["forkSite"].startswith("open_fork_join (dump_known.c:"), d["task"]
assert threads[who["a"]]["task"]["forkSite"].startswith("main (dump_known.c:")
# Each subtask names the body it runs, beside the forker's site.
bodies = {"a": "task_a", "b": "known_task_b", "c": "known_task_c", "d": "task_d"}
for k, fn in bodies.items():
    assert threads[who[k]]["task"]["function"] == fn, "%s runs %r, want %s" % (k, threads[who[k]]["task"], fn)
# libscope's own reporting thread sits in <root> under its name.
agents = [t for t in by["<root>"]["threads"] if t.get("role") == "agent"]
assert [t["name"] for t in agents] == ["scoped-agent"], by["<root>"]["threads"]
assert td["processId"] == who["pid"] and td["formatVersion"] == 2
print("structure ok: %d containers, %d threads" % (len(cs), len(threads)))
PYEOF

# "-" writes the JSON to standard output, and only the JSON: the "<pid>:"
# line goes to standard error there.
"$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json - 2>"$D/hdr" >"$D/stdout.json" ||
	fail "dump_to_file - failed"
grep -qx "$hpid:" "$D/hdr" || fail "no '$hpid:' line on standard error"
$PY "$TOP/tests/validate_dump.py" --pid "$hpid" - <"$D/stdout.json" || fail "the dump on standard output does not validate"

# The text dump shows the same tree, indented, with frames.
"$BIN/scopecmd" --no-start "$hpid" Thread.print -l -e >"$D/t.txt" || fail "Thread.print failed"
head -1 "$D/t.txt" | grep -qx "$hpid:" || fail "Thread.print output does not start with '$hpid:'"
grep -q "^Thread dump of process $hpid (dump_known) at " "$D/t.txt" || fail "no text header"
grep -Eq '^    middle@[0-9]+  any_successful, ' "$D/t.txt" || fail "middle is not indented under outer"
grep -Eq '^      inner@[0-9]+  await_all, ' "$D/t.txt" || fail "inner is not indented under middle"
a=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["a"])' "$D/known")
grep -Eq "^    #$a \"kp-[0-9]+\" [A-Z_]+\$" "$D/t.txt" || fail "thread a is not listed in outer"
grep -Eq '^ +at known_wait_a \(dump_known\.c:[0-9]+\)$' "$D/t.txt" || fail "no 'at known_wait_a (dump_known.c:N)' line"
grep -q 'scoped values: ' "$D/t.txt" || fail "-e did not add scoped values"
grep -Eq '^ +task [0-9]+ known_task_c\(\) running, forked at .* by open_fork_join \(dump_known\.c:[0-9]+\)$' "$D/t.txt" ||
	fail "-e does not name task c's body (known_task_c); its task lines: $(grep -E '^ +task ' "$D/t.txt")"

# The text file form, by name target.
out=$("$BIN/scopecmd" --no-start dump_kno Thread.dump_to_file -format=text "$D/d.txt") || fail "dump by name failed"
echo "$out" | grep -qx "Created $D/d.txt" || fail "unexpected reply: $out"
grep -q '^Thread dump of process ' "$D/d.txt" || fail "the text file has no header"

"$BIN/scopecmd" --no-start "$hpid" Scope.tree >"$D/tree" || fail "Scope.tree failed"
grep -Eq '^outer@[0-9]+  all_successful ' "$D/tree" || fail "Scope.tree lacks outer"
grep -Eq '^  task [0-9]+ known_task_b\(\) running on #[0-9]+  forked at main \(dump_known\.c:[0-9]+\)$' "$D/tree" || fail "Scope.tree lacks outer's task known_task_b()"
grep -Eq '^    middle@[0-9]+  any_successful ' "$D/tree" || fail "middle is not under the task that opened it"

"$BIN/scopecmd" --no-start 0 Runtime.info >"$D/info" || fail "Runtime.info failed"
grep -q "^$hpid:" "$D/info" || fail "target 0 did not include $hpid"
grep -q '^Runtime: libscope 0.1.0' "$D/info" || fail "no runtime version"
grep -Eq '^  kp@[0-9]+: [0-9]+ threads \(core 6, max 8' "$D/info" || fail "no pool statistics"
grep -q '^Events: ' "$D/info" || fail "no event counts"

"$BIN/scopecmd" --no-start -l | grep -qx "$hpid dump_known" || fail "-l does not list '$hpid dump_known'"

# A name that matches two processes, and 0, target both, each under its pid.
"$HELPER" >"$D/known2" &
h2=$!
poll 100 is_listed $h2 || { kill $h2; fail "the second dump_known did not register"; }
"$BIN/scopecmd" --no-start known Runtime.info >"$D/two" || { kill $h2; fail "name target over two processes failed"; }
"$BIN/scopecmd" --no-start 0 Runtime.info >"$D/all" || { kill $h2; fail "target 0 failed"; }
kill $h2
for f in "$D/two" "$D/all"; do
	grep -qx "$hpid:" "$f" && grep -qx "$h2:" "$f" || fail "$(basename "$f"): not both <pid>: headers"
	[ "$(grep -c '^Runtime: ' "$f")" -eq 2 ] || fail "$(basename "$f"): not two reports"
done

# A daemon that starts after the program learns the tree from the agent's
# snapshot alone: the snapshot carries the bodies too.
scoped_stop
scoped_start "$D/log" || fail "the restarted scoped did not listen"
poll 200 has_tree || fail "the restarted daemon never got dump_known's tree"
"$BIN/scopecmd" --no-start "$hpid" Thread.dump_to_file -format=json "$D/late.json" >/dev/null ||
	fail "dump_to_file after the daemon restart failed"
$PY - "$D/known" "$D/late.json" <<'PYEOF' || fail "the snapshot did not carry the task bodies"
import json, sys
who = json.load(open(sys.argv[1]))
cs = json.load(open(sys.argv[2]))["threadDump"]["threadContainers"]
threads = {t["tid"]: t for c in cs for t in c["threads"]}
for k, fn in {"a": "task_a", "b": "known_task_b", "c": "known_task_c", "d": "task_d"}.items():
    got = (threads[who[k]]["task"] or {}).get("function")
    assert got == fn, "after a snapshot %s runs %r, want %s" % (k, got, fn)
PYEOF
echo "ok"
