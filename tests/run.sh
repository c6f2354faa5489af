#!/bin/sh
# tests/run.sh BUILD - runs every unit test binary and every end-to-end
# script, then prints every skip with its reason and one summary line
# "N passed, N failed, N skipped", where a test is a cmocka case or an e2e
# script.
#
# A unit binary's cases are counted from cmocka's report ([ RUN ], [ OK ],
# [ SKIPPED ], [ FAILED ]): a binary whose every case called skip() exits 0
# but counts as skipped, not passed.  A skip's reason is the last line the
# case printed before skip() (tests print it with print_message).  A binary
# that exits non-zero without a failed case (a crash, its watchdog, the
# timeout) counts as one failure.
#
# An e2e script passes with exit 0, is skipped with exit 77 (it prints
# "skip: why"), and fails otherwise; a passing script that skipped some of
# its checks prints "skip: why" for each, and each counts as one skipped test.
#
# TEST_FILTER=substring runs only matching tests.  TEST_TIMEOUT (seconds)
# bounds each unit binary (default 120) and each e2e script (default 600).
BUILD=${1:-build}
export BUILD
TOP=$(cd "$(dirname "$0")/.." && pwd)
export TOP
pass=0 fail=0 skip=0 failed=""
upass=0 ufail=0 uskip=0 epass=0 efail=0 eskip=0 epart=0
log=$(mktemp -d /tmp/scoped-tests.XXXXXX)
: >"$log/skips"

# Counts one unit binary's cases from its output ($log/out): prints
# "passed failed skipped" and appends "name/case: reason" to $log/skips.
count_cases() { # name
	awk -v bin="$1" -v skips="$log/skips" '
	function reason(s) {
		sub(/^[ \t]*(skipped|skip)[: ]+[ \t]*/, "", s)
		return s == "" ? "(the case printed no reason)" : s
	}
	/^\[ RUN      \] / { cur = substr($0, 14); last = ""; next }
	/^\[       OK \] / { if (cur != "" && substr($0, 14) == cur) { p++; cur = "" } next }
	/^\[  SKIPPED \] / {
		if (cur != "" && substr($0, 14) == cur) {
			s++; print bin "/" cur ": " reason(last) >>skips; cur = ""
		}
		next
	}
	/^\[  FAILED  \] / { if (cur != "" && substr($0, 14) == cur) { f++; cur = "" } next }
	/^\[/ { next }
	{ if (cur != "" && $0 !~ /^[ \t]*$/) last = $0 }
	END { print p + 0, f + 0, s + 0 }' "$log/out"
}

# Runs one test; kind is unit or e2e.
run_one() { # kind, name, command...
	kind=$1 name=$2
	shift 2
	case "$name" in *"${TEST_FILTER:-}"*) ;; *) return ;; esac
	printf '=== %s\n' "$name"
	if [ "$kind" = unit ]; then limit=${TEST_TIMEOUT:-120}; else limit=${TEST_TIMEOUT:-600}; fi
	start=$(date +%s)
	timeout --kill-after=10 "$limit" "$@" >"$log/out" 2>&1
	rc=$?
	cat "$log/out"
	end=$(date +%s)
	[ $rc -eq 124 ] && echo "(killed after TEST_TIMEOUT=$limit s)"
	if [ "$kind" = unit ] && [ $rc -ne 77 ]; then
		set -- $(count_cases "$name")
		p=$1 f=$2 s=$3
		if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
			f=1 # crashed, watchdog or timeout: the case that was running
		elif [ $rc -eq 0 ] && [ $((p + f + s)) -eq 0 ]; then
			p=1 # not a cmocka binary: one test
		fi
		upass=$((upass + p)) ufail=$((ufail + f)) uskip=$((uskip + s))
		pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
		if [ "$f" -gt 0 ]; then
			failed="$failed $name"
			printf -- '--- FAIL %s (exit %s; %s passed, %s failed, %s skipped)\n' \
				"$name" $rc "$p" "$f" "$s"
		elif [ "$p" -eq 0 ]; then
			printf -- '--- SKIP %s (%s cases skipped)\n' "$name" "$s"
		else
			printf -- '--- PASS %s (%ss; %s passed, %s skipped)\n' "$name" \
				$((end - start)) "$p" "$s"
		fi
		return
	fi
	why=$(grep -E '^skip(ped)?:' "$log/out" | sed -E 's/^skip(ped)?:[ ]*//')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)) epass=$((epass + 1))
		if [ -n "$why" ]; then
			n=$(printf '%s\n' "$why" | wc -l)
			skip=$((skip + n)) epart=$((epart + n))
			printf '%s\n' "$why" | sed "s|^|$name (part): |" >>"$log/skips"
		fi
		printf -- '--- PASS %s (%ss)\n' "$name" $((end - start))
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1))
		[ "$kind" = e2e ] && eskip=$((eskip + 1)) || uskip=$((uskip + 1))
		printf '%s: %s\n' "$name" "${why:-(the test printed no reason)}" | head -1 >>"$log/skips"
		printf -- '--- SKIP %s\n' "$name"
	else
		fail=$((fail + 1)) efail=$((efail + 1)) failed="$failed $name"
		printf -- '--- FAIL %s (exit %s)\n' "$name" $rc
	fi
}

for t in "$TOP/$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one unit "$(basename "$t")" "$t"
done
for t in "$TOP"/tests/e2e/*.sh; do
	[ -f "$t" ] || continue
	run_one e2e "e2e/$(basename "$t" .sh)" sh "$t"
done
echo
if [ -s "$log/skips" ]; then
	echo "skipped, and why:"
	sed 's/^/  /' "$log/skips"
fi
rm -rf "$log"
echo "unit cases: $upass passed, $ufail failed, $uskip skipped;" \
	"e2e scripts: $epass passed, $efail failed, $eskip skipped, $epart checks skipped in passing scripts"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ] && [ $pass -gt 0 ]
