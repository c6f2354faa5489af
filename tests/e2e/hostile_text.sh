#!/bin/sh
# hostile_text.sh - a program that names things to attack whoever reads its
# dumps (tests/helpers/daemon_fake_agent hostile: scope and task ids past
# 2^63, names and sites with terminal escapes, newlines and C1 controls, a
# stack whose function's DWARF file name holds ESC, a newline and C1):
# every text scopecmd and scopetop print holds no control byte but the
# line ends (and jstack's tabs), every id reads as the program's (no
# negative or missing one, no "Cannot allocate memory"), and every JSON
# listing and dump still validates.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
FAKE=$TOP/$BUILD/tests/helpers/daemon_fake_agent
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scopetop" "$FAKE"
need_jsonschema
private_dir hostile-text
dpid= fpid=
trap 'stop_all $fpid $dpid' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
valid() { $PY "$TOP/tests/validate_json.py" "$1" "$2" >"$D/v" 2>&1 || bad "$2 against $1: $(cat "$D/v")"; }
# clean FILE WHAT [TABS] : FILE holds no C0 control but '\n' (and '\t' when
# TABS), no DEL, no C1 control, and is UTF-8.
clean() {
	$PY - "$1" "${3:-}" <<'PYEOF' || bad "$2 prints control characters raw: $(cat -v "$1" | head -20)"
import sys
text = open(sys.argv[1], "rb").read().decode("utf-8")
ok = "\n\t" if sys.argv[2] else "\n"
sys.exit(any((ord(c) < 0x20 and c not in ok) or 0x7f <= ord(c) < 0xa0 for c in text))
PYEOF
}

# Signal mode: the fake agent answers with its own frames, hostile_frame's
# file name among them (BPF would unwind the fake agent's real stack).
scoped_start "$D/log" --stacks=signal || { echo "FAIL: scoped did not start"; exit 1; }
# libscope, which the helper links, must not register the same pid itself.
SCOPED_DISABLE=1 "$FAKE" "$SCOPED_SOCKET" hostile >"$D/fake.out" 2>&1 &
fpid=$!
S="$BIN/scopecmd --no-start"
has_tree() { $S $fpid Scope.tree 2>/dev/null | grep -q 'max@18446744073709551614'; }
poll 100 has_tree || { echo "FAIL: the big ids never showed in Scope.tree:"; $S $fpid Scope.tree; exit 1; }

$S -l >"$D/list" 2>&1 || bad "-l failed"
clean "$D/list" "-l"
grep -q "^$fpid " "$D/list" || bad "-l lacks $fpid: $(cat -v "$D/list")"

$S $fpid Scope.tree >"$D/tree" 2>&1 || bad "Scope.tree failed"
clean "$D/tree" "Scope.tree"
grep -q '@9223372036854775809 ' "$D/tree" || bad "Scope.tree lacks scope 2^63+1: $(cat -v "$D/tree")"
grep -q '^    task 18446744073709551613 ' "$D/tree" || bad "Scope.tree lacks task 2^64-3 under max: $(cat -v "$D/tree")"
grep -q -- '-[0-9]\{15,\}' "$D/tree" && bad "Scope.tree shows a negative id: $(cat -v "$D/tree")"
$S $fpid Scope.tree -format=json >"$D/tree.json" 2>/dev/null || bad "Scope.tree -format=json failed"
valid scope-tree.schema.json "$D/tree.json"
grep -q '"scopeId": "18446744073709551614"' "$D/tree.json" || bad "Scope.tree JSON lacks scope 2^64-2 exact"

$S $fpid Thread.print -e -l >"$D/text" 2>&1 || bad "Thread.print failed"
clean "$D/text" "Thread.print"
grep -qF 'at hostile_frame (ev\x1b[31mil\n\u009b.c:' "$D/text" ||
	bad "Thread.print lacks the escaped hostile frame: $(cat -v "$D/text")"
$S $fpid Thread.print -format=jstack >"$D/jstack" 2>&1 || bad "Thread.print -format=jstack failed"
clean "$D/jstack" "the jstack layout" tabs
$S $fpid Thread.dump_to_file -format=json "$D/d.json" >/dev/null 2>&1 || bad "Thread.dump_to_file failed"
$PY "$TOP/tests/validate_dump.py" "$D/d.json" >"$D/v" 2>&1 || bad "the dump does not validate: $(cat "$D/v")"
grep -q '"scopeId": *"9223372036854775809"' "$D/d.json" || bad "the dump lacks scope 2^63+1 exact"

$S $fpid Runtime.info >"$D/info" 2>&1 || bad "Runtime.info failed: $(cat -v "$D/info")"
clean "$D/info" "Runtime.info"

"$BIN/scopetop" --once $fpid >"$D/once" 2>&1 || bad "scopetop --once failed: $(cat -v "$D/once")"
clean "$D/once" "scopetop --once"
grep -q -- '-[0-9]\{6,\}' "$D/once" && bad "scopetop --once shows a negative id: $(cat -v "$D/once")"
grep -q ' max ' "$D/once" || bad "scopetop --once lacks scope max: $(cat -v "$D/once")"
"$BIN/scopetop" --once --json $fpid >"$D/once.json" 2>/dev/null || bad "scopetop --once --json failed"
valid scopetop-once.schema.json "$D/once.json"
grep -q '"id": "18446744073709551613"' "$D/once.json" || bad "scopetop --once --json lacks task 2^64-3 exact"

[ $fails -eq 0 ] || exit 1
echo "hostile names escaped and ids past 2^63 exact in every listing, dump and view"
