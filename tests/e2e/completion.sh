#!/bin/sh
# completion.sh - the bash completion of scopecmd, scopetop and scoped
# (dist/bash-completion/scopecmd): commands, options, values after '=', and
# the live processes from the daemon as targets.
BUILD=${BUILD:-build}
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$TOP/tests/lib/e2e.sh"
need_built "$BIN/scoped" "$BIN/scopecmd" "$TOP/$BUILD/tests/helpers/dump_known"
command -v bash >/dev/null || { echo "skip: no bash"; exit 77; }
private_dir completion
dpid= hpid=
trap 'stop_all $dpid $hpid' EXIT
scoped_start "$D/log" || { echo "FAIL: scoped did not start"; exit 1; }
"$TOP/$BUILD/tests/helpers/dump_known" >/dev/null &
hpid=$!
poll 100 is_listed $hpid || { echo "FAIL: dump_known did not register"; exit 1; }

# Each case: the function, the line typed so far, and the replies wanted
# (joined with '|', in order).
PATH=$BIN:$PATH bash -c '
. "$1/dist/bash-completion/scopecmd"
fails=0
t() {
	COMP_LINE=$2 COMP_POINT=${#2}
	COMPREPLY=()
	"$1"
	got=$(IFS="|"; echo "${COMPREPLY[*]}")
	if [ "$got" != "$3" ]; then
		echo "FAIL: $1 \"$2\" gave \"$got\", wanted \"$3\""
		fails=$((fails + 1))
	fi
}
t _scopecmd "scopecmd 123 Thread.pr" "Thread.print"
t _scopecmd "scopecmd 123 " "Thread.print|Thread.dump_to_file|Scope.tree|Runtime.info|Pool.advise|help"
t _scopecmd "scopecmd 123 Thread.print -format=js" "jstack"
t _scopecmd "scopecmd 123 Scope.tree -f" "-format=text|-format=json"
t _scopecmd "scopecmd --timeout 500 123 Runtime.i" "Runtime.info"
t _scopecmd "scopecmd help " "-all|Thread.print|Thread.dump_to_file|Scope.tree|Runtime.info|Pool.advise|help"
t _scopecmd "scopecmd --no" "--no-start"
t _scopecmd "scopecmd dump_k" "dump_known"
t _scopecmd "scopecmd $2" "$2"
t _scoped "scoped --stacks s" "signal"
t _scoped "scoped --idle" "--idle-exit"
t _scopetop "scopetop --columns w" "worker"
t _scopetop "scopetop dump_k" "dump_known"
exit $fails
' sh "$TOP" "$hpid" || { echo "FAIL: completion"; exit 1; }
echo "completion ok"
