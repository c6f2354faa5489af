#!/bin/sh
# bench/run.sh BUILD - runs every benchmark; each prints its own table with
# the baseline it measured in the same run.
BUILD=${1:-build}
export BUILD
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
rc=0
for b in "$TOP/$BUILD"/bench/*; do
	[ -x "$b" ] || continue
	echo "### $(basename "$b")"
	"$b" || rc=1
	echo
done
for b in "$TOP"/bench/*.sh; do
	[ -f "$b" ] || continue
	[ "$(basename "$b")" = run.sh ] && continue
	echo "### $(basename "$b" .sh)"
	sh "$b" || rc=1
	echo
done
exit $rc
