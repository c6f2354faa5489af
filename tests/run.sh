#!/bin/sh
# tests/run.sh BUILD - runs every unit test binary and every end-to-end
# script, then prints one summary line "N passed, N failed, N skipped".
# An e2e script passes with exit 0, is skipped with exit 77 (it prints why),
# and fails otherwise.  TEST_FILTER=substring runs only matching tests.
BUILD=${1:-build}
export BUILD
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
pass=0 fail=0 skip=0 failed=""
log=$(mktemp -d /tmp/scoped-tests.XXXXXX)

run_one() { # name, command...
	name=$1; shift
	case "$name" in *"${TEST_FILTER:-}"*) ;; *) return ;; esac
	printf '=== %s\n' "$name"
	start=$(date +%s)
	timeout --kill-after=10 "${TEST_TIMEOUT:-600}" "$@" >"$log/out" 2>&1
	rc=$?
	cat "$log/out"
	end=$(date +%s)
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf -- '--- PASS %s (%ss)\n' "$name" $((end - start))
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1)); printf -- '--- SKIP %s\n' "$name"
	else
		fail=$((fail + 1)); failed="$failed $name"
		printf -- '--- FAIL %s (exit %s)\n' "$name" $rc
	fi
}

for t in "$TOP/$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done
for t in "$TOP"/tests/e2e/*.sh; do
	[ -f "$t" ] || continue
	run_one "e2e/$(basename "$t" .sh)" sh "$t"
done
rm -rf "$log"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
