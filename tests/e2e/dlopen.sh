#!/bin/sh
# libscope.so can be loaded with dlopen() (a plugin, a Python extension):
# its initial-exec TLS must fit the little static TLS glibc keeps for
# libraries loaded late.  A 2 KiB per-thread cache in initial-exec TLS made
# exactly this fail with "cannot allocate memory in static TLS block".
set -eu
lib="$TOP/$BUILD/lib/libscope.so"
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
command -v python3 >/dev/null || { echo "FAIL: no python3 to dlopen() with (make deps)"; exit 1; }
# The TLS segment's size in memory (readelf -l: the MemSiz column).
tls=$(readelf -lW "$lib" | awk '$1 == "TLS" {print $6}')
if [ -n "$tls" ] && [ $((tls)) -gt 256 ]; then
	echo "libscope.so has $((tls)) bytes of TLS; glibc keeps about 512 for dlopen()"
	exit 1
fi
# Loaded late into a running program, agent on (no daemon listens: it
# backs off quietly) and then used.  A sanitizer's build cannot be loaded
# into a program that was not built with it (its runtime must come first);
# the TLS check above still holds there.
case $BUILD in
*asan* | *tsan*)
	echo "skip: a sanitizer build of libscope.so cannot be dlopen()ed by python3 ($((tls)) bytes of TLS checked)"
	exit 77
	;;
esac
sock=$(mktemp -u /tmp/scoped-dlopen-XXXXXX.sock)
SCOPED_SOCKET="$sock" python3 - "$lib" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.scope_version.restype = ctypes.c_char_p
v = lib.scope_version()
assert v and v[0:1].isdigit(), v
print("dlopen ok, libscope", v.decode())
PY
echo "libscope.so loads with dlopen() ($((tls)) bytes of TLS)"
