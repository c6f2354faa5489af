#!/bin/sh
# bench/advisor_sweep.sh - the pool advisor's advice against a sweep of pool
# sizes in the same run (scripts/advisor_sweep.py; docs/advisor.md has the
# method and the last figures).  As root the programs get a fixed CPU budget
# of their own (a cgroup quota); otherwise the table says so.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 is not installed"; exit 0; }
for f in scoped scopecmd pool-mix; do
	[ -x "$TOP/$BUILD/bin/$f" ] || { echo "skip: $TOP/$BUILD/bin/$f is not built"; exit 0; }
done
exec python3 "$TOP/scripts/advisor_sweep.py" "$BUILD" ${ADVISOR_SWEEP_ARGS:-}
