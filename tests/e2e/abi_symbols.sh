#!/bin/sh
# The symbols libscope.so exports are exactly the functions include/scope.h
# declares, and the thread-local variable OpenTelemetry's thread context
# names (OTEP 4947, docs/otel-context.md): nothing internal leaks, nothing
# documented is missing.
set -eu
lib="$TOP/$BUILD/lib/libscope.so"
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Declared: every "SCOPE_API <type> <name>(" in the header.
{ tr '\n' ' ' < "$TOP/include/scope.h" | sed 's/;/;\n/g' | grep 'SCOPE_API' \
	| sed -n 's/.*[ *]\(scope_[a-z_0-9]*\)(.*/\1/p'; echo otel_thread_ctx_v1; } \
	| sort -u > "$tmp/declared"
# Exported: defined dynamic text/data symbols, minus the toolchain's own.
nm -D --defined-only "$lib" | awk '{print $3}' \
	| grep -v -E '^(_init|_fini|__bss_start|_edata|_end|__.*)$' | sort -u > "$tmp/exported"
n=$(wc -l < "$tmp/declared")
if [ "$n" -lt 30 ]; then echo "parsed only $n declarations from scope.h"; exit 1; fi
if ! diff -u "$tmp/declared" "$tmp/exported"; then
	echo "exported symbols differ from scope.h (- declared only, + exported only)"
	exit 1
fi
echo "libscope.so exports exactly the $n functions scope.h declares"
