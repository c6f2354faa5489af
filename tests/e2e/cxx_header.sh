#!/bin/sh
# include/scope.h compiles warning-free as C++ (g++ -Wall -Wextra -Werror,
# and clang++ when present), its initializers included, and a C++ program
# links against libscope through the header's extern "C" and runs a scope.
set -eu
lib="$TOP/$BUILD/lib/libscope.so"
[ -f "$lib" ] || { echo "no $lib"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/use.cc" <<'CXX'
#include "scope.h"
static int work(void *arg, void **result) { *result = arg; return 0; }
int main()
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	struct scope_pool_config pc = SCOPE_POOL_CONFIG_INIT;
	scope_t *s;
	scope_task_t *t;
	(void)pc;
	cfg.name = "cxx";
	if (scope_open(&s, &cfg) || scope_fork(s, work, &cfg, &t) || scope_join(s))
		return 1;
	int ok = scope_task_result(t) == &cfg;
	return scope_close(s) == 0 && ok ? 0 : 1;
}
CXX
# A sanitizer's libscope.so wants its runtime first: link the program so.
san=
case $BUILD in
*asan*) san="-fsanitize=address,undefined" ;;
*tsan*) san="-fsanitize=thread" ;;
esac
ran=0
for cxx in g++ clang++; do
	command -v "$cxx" >/dev/null || continue
	# The sanitizer runtimes are gcc's in a gcc build: only g++ links them.
	[ -n "$san" ] && [ "$cxx" != g++ ] && continue
	"$cxx" -std=c++11 -Wall -Wextra -Werror $san -I"$TOP/include" "$tmp/use.cc" \
		-L"$TOP/$BUILD/lib" -Wl,-rpath,"$TOP/$BUILD/lib" -lscope -lpthread -o "$tmp/use-$cxx"
	SCOPED_DISABLE=1 "$tmp/use-$cxx"
	echo "$cxx: scope.h compiles warning-free with -Wall -Wextra and links"
	ran=1
done
[ $ran -eq 1 ] || { echo "skip: no C++ compiler (g++ or clang++) to compile scope.h with"; exit 77; }
