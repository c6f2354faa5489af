#!/bin/sh
# demo.sh BUILD - the demo `make demo` runs: starts scoped on a private
# socket and scope-demo against it, prints a thread dump, writes and
# validates a JSON dump, then prints the commands to look further.  Both
# programs keep running afterwards (the last lines say how to stop them);
# DEMO_STOP=1 stops them before exiting instead.
set -u
BUILD=${1:-build}
TOP=$(cd "$(dirname "$0")/.." && pwd)
BIN=$TOP/$BUILD/bin
for f in scoped scopecmd scope-demo; do
	[ -x "$BIN/$f" ] || { echo "demo: $BIN/$f is missing; run 'make' first" >&2; exit 1; }
done

D=$(mktemp -d /tmp/scoped-demo.XXXXXX) || { echo "demo: cannot make a directory in /tmp" >&2; exit 1; }
SOCK=$D/agent.sock
export SCOPED_SOCKET=$SOCK
dpid= ppid_=

# Stops both and waits for them (scope-demo finishes its current batch of
# requests first, about a second).
stop_all() {
	[ -n "$ppid_" ] && kill "$ppid_" 2>/dev/null
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$D"
}
die() {
	echo "demo: $*" >&2
	for log in "$D/scoped.log" "$D/demo.log"; do
		[ -s "$log" ] && { echo "--- $log" >&2; tail -5 "$log" >&2; }
	done
	stop_all
	exit 1
}

echo "== starting scoped on a private socket: $SOCK"
"$BIN/scoped" --foreground --socket "$SOCK" >"$D/scoped.log" 2>&1 &
dpid=$!
i=0
until [ -S "$D/control.sock" ]; do
	i=$((i + 1)); [ $i -gt 100 ] && die "scoped did not start (no $D/control.sock after 5 s)"
	kill -0 "$dpid" 2>/dev/null || die "scoped exited at start"
	sleep 0.05
done

echo "== starting scope-demo (a request loop on libscope)"
"$BIN/scope-demo" >"$D/demo.log" 2>&1 &
ppid_=$!
i=0
until "$BIN/scopecmd" --no-start -l 2>/dev/null | grep -q "^$ppid_ "; do
	i=$((i + 1)); [ $i -gt 100 ] && die "scope-demo (pid $ppid_) did not register within 5 s"
	kill -0 "$ppid_" 2>/dev/null || die "scope-demo exited at start"
	sleep 0.05
done
# Let a few requests get under way so that the dump has scopes to show.
i=0
until "$BIN/scopecmd" --no-start "$ppid_" Scope.tree 2>/dev/null | grep -q '^ *handle@'; do
	i=$((i + 1)); [ $i -gt 60 ] && break
	sleep 0.05
done

cat <<EOT
scoped pid $dpid, scope-demo pid $ppid_

== scopecmd $ppid_ Thread.print
EOT
"$BIN/scopecmd" --no-start "$ppid_" Thread.print || die "Thread.print failed"

echo
echo "== scopecmd $ppid_ Thread.dump_to_file -format=json $D/dump.json"
"$BIN/scopecmd" --no-start "$ppid_" Thread.dump_to_file -format=json "$D/dump.json" ||
	die "Thread.dump_to_file failed"
if /usr/bin/python3 -c 'import jsonschema' 2>/dev/null; then
	/usr/bin/python3 "$TOP/tests/validate_dump.py" --pid "$ppid_" "$D/dump.json" ||
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
	stop_all
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
