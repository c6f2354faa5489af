#!/bin/sh
# demo.sh BUILD - the demo `make demo` runs: starts scoped on a private
# socket and scope-demo against it, prints a thread dump, writes and
# validates a JSON dump, then prints the commands to look further.  Both
# programs keep running afterwards (the last lines say how to stop them);
# DEMO_STOP=1 stops them before exiting instead.
set -u
BUILD=${1:-build}
TOP=$(cd "$(dirname "$0")/.." && pwd)
# The daemon start and polling helpers the end-to-end tests use too.
. "$TOP/tests/lib/e2e.sh"
for f in scoped scopecmd scope-demo; do
	[ -x "$BIN/$f" ] || { echo "demo: $BIN/$f is missing; run 'make' first" >&2; exit 1; }
done

private_dir scoped-demo
SOCK=$SCOPED_SOCKET
dpid= ppid_=

die() {
	echo "demo: $*" >&2
	for log in "$D/scoped.log" "$D/demo.log"; do
		[ -s "$log" ] && { echo "--- $log" >&2; tail -5 "$log" >&2; }
	done
	# scope-demo finishes its current batch of requests first, about a second.
	stop_all "$ppid_" "$dpid"
	exit 1
}

echo "== starting scoped on a private socket: $SOCK"
scoped_start "$D/scoped.log"
case $? in
1) die "scoped exited at start" ;;
2) die "scoped did not start (no $D/control.sock after 5 s)" ;;
esac

echo "== starting scope-demo (a request loop on libscope)"
"$BIN/scope-demo" >"$D/demo.log" 2>&1 &
ppid_=$!
# Registered, or gone (then the check below says so).
demo_listed() { is_listed "$ppid_" || ! kill -0 "$ppid_" 2>/dev/null; }
poll 100 demo_listed || die "scope-demo (pid $ppid_) did not register within 5 s"
kill -0 "$ppid_" 2>/dev/null || die "scope-demo exited at start"
# Let a few requests get under way so that the dump has scopes to show.
has_handlers() { "$BIN/scopecmd" --no-start "$ppid_" Scope.tree 2>/dev/null | grep -q '^ *handle@'; }
poll 60 has_handlers

cat <<EOT
scoped pid $dpid, scope-demo pid $ppid_

== scopecmd $ppid_ Thread.print
EOT
"$BIN/scopecmd" --no-start "$ppid_" Thread.print || die "Thread.print failed"

echo
echo "== scopecmd $ppid_ Thread.dump_to_file -format=json $D/dump.json"
"$BIN/scopecmd" --no-start "$ppid_" Thread.dump_to_file -format=json "$D/dump.json" ||
	die "Thread.dump_to_file failed"
if $PY -c 'import jsonschema' 2>/dev/null; then
	$PY "$TOP/tests/validate_dump.py" --pid "$ppid_" "$D/dump.json" ||
		die "the JSON dump does not validate against schemas/thread-dump.schema.json"
else
	echo "(not validated: python3-jsonschema is missing; 'make deps' installs it)"
fi

cat >"$D/stop.sh" <<EOT
#!/bin/sh
# Stops the demo's scope-demo and scoped, and removes $D.
kill $ppid_ $dpid 2>/dev/null
# scope-demo finishes its current batch of requests first (about a second).
i=0
while kill -0 $ppid_ 2>/dev/null || kill -0 $dpid 2>/dev/null; do
	i=\$((i + 1)); [ \$i -gt 100 ] && { echo "still running after 10 s: $ppid_ $dpid" >&2; exit 1; }
	sleep 0.1
done
rm -rf "$D"
EOT

if [ "${DEMO_STOP:-0}" = 1 ]; then
	echo
	echo "== stopping (DEMO_STOP=1)"
	stop_all "$ppid_" "$dpid"
	exit 0
fi

TOPCMD="(scopetop is not built)"
[ -x "$BIN/scopetop" ] && TOPCMD="$BIN/scopetop $ppid_"
cat <<EOT

== both keep running; look further with:
   export SCOPED_SOCKET=$SOCK
   $BIN/scopecmd                                  # list the processes
   $BIN/scopecmd $ppid_ Scope.tree                   # the scope tree alone
   $BIN/scopecmd $ppid_ Thread.print -l -e           # with tasks, scoped values, waits
   $BIN/scopecmd scope-demo Runtime.info           # pools and event counts
   $BIN/scopecmd $ppid_ help
   $TOPCMD
== stop them with:
   sh $D/stop.sh
EOT
