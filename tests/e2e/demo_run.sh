#!/bin/sh
# demo_run.sh - `make demo`'s script end to end (DEMO_STOP=1): it prints a
# thread dump of scope-demo with its scopes, writes a JSON dump that
# validates, prints the follow-up commands, and leaves nothing running.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$BIN/scope-demo"
need_jsonschema
out=$(mktemp /tmp/demo-run.XXXXXX)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }

DEMO_STOP=1 sh "$TOP/scripts/demo.sh" "$BUILD" >"$out" 2>&1 || fail "demo.sh exited $?"
pids=$(sed -n 's/^scoped pid \([0-9]*\), scope-demo pid \([0-9]*\)$/\1 \2/p' "$out")
[ -n "$pids" ] || fail "demo.sh did not say which pids it started"
set -- $pids
grep -q "^== scopecmd $2 Thread.print\$" "$out" || fail "no Thread.print heading"
grep -q "^Thread dump of process $2 (scope-demo) at " "$out" || fail "no thread dump"
grep -Eq '^  pool:io@[0-9]+  pool io: ' "$out" || fail "the dump lacks the io pool"
grep -Eq '^  batch@[0-9]+  await_all, ' "$out" || fail "the dump lacks the request loop's scope"
grep -Eq '^    handle@[0-9]+  all_successful, [a-z]+, deadline 20' "$out" || fail "no handler scope with a deadline"
grep -Eq "^Created /tmp/scoped-demo\.[A-Za-z0-9]+/dump\.json\$" "$out" || fail "no JSON dump written"
grep -Eq 'dump\.json: valid$' "$out" || fail "the JSON dump was not validated"
grep -q '^== stopping (DEMO_STOP=1)' "$out" || fail "demo.sh did not stop"
# demo.sh waited for both; a zombie left for init to reap is fine.
for p in "$@"; do
	[ -d "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null && fail "pid $p still runs"
done
echo "demo ok"
