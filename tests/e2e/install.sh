#!/bin/sh
# install.sh - `make install` into a staging directory (DESTDIR, PREFIX
# /opt/scoped): every file lands where mk/install.mk says; a program built
# against the installed header and pkg-config file links, against the shared
# library (by its soname) and against the static one, and runs; the installed
# programs run and say the library's version; `make uninstall` leaves nothing.
set -eu
case "$BUILD" in
*asan* | *tsan*)
	echo "skip: a sanitizer build ($BUILD) is not what gets installed"
	exit 77
	;;
esac
command -v pkg-config >/dev/null || { echo "FAIL: pkg-config is not installed (make deps)"; exit 1; }
tmp=$(mktemp -d /tmp/scoped-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A make of its own, not a part of the one that runs the tests.
unset MAKEFLAGS MFLAGS MAKELEVEL
mk() { make -C "$TOP" --no-print-directory -s BUILD="$BUILD" DESTDIR="$tmp/root" PREFIX=/opt/scoped "$@"; }

mk install >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make install"; }
R=$tmp/root/opt/scoped
export PKG_CONFIG_LIBDIR="$R/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/root"
V=$(pkg-config --modversion libscope) || fail "pkg-config does not find libscope.pc"
for f in bin/scoped bin/scopecmd bin/scopetop "lib/libscope.so.$V" lib/libscope.so.0 \
	lib/libscope.so lib/libscope.a include/scope.h share/man/man1/scopecmd.1 \
	share/man/man1/scopetop.1 share/man/man8/scoped.8 \
	share/scoped/schemas/thread-dump.schema.json share/scoped/schemas/protocol.md; do
	[ -s "$R/$f" ] || fail "$f is not installed"
done
[ "$(readlink "$R/lib/libscope.so.0")" = "libscope.so.$V" ] || fail "libscope.so.0 does not name libscope.so.$V"
echo "ok: make install put every file in place (libscope $V)"
# The static archive defines no global name but the API's.
leak=$(nm -g --defined-only "$R/lib/libscope.a" | awk 'NF == 3 && $3 !~ /^scope_/ { print $3 }')
[ -z "$leak" ] || fail "libscope.a exports internal names: $(echo $leak | head -c 200)"

cat >"$tmp/prog.c" <<'EOF'
#include <scope.h>
#include <stdio.h>
#include <string.h>

static int body(void *arg, void **res)
{
	(void)res;
	*(int *)arg = 1;
	return 0;
}

int main(void)
{
	struct scope_config cfg = SCOPE_CONFIG_INIT;
	int ran[4] = {0};
	scope_t *s;
	if (scope_open(&s, &cfg))
		return 2;
	for (int i = 0; i < 4; i++)
		if (scope_fork(s, body, &ran[i], NULL))
			return 3;
	if (scope_join(s) || scope_close(s))
		return 4;
	printf("ran %d %s\n", ran[0] + ran[1] + ran[2] + ran[3], scope_version());
	return 0;
}
EOF
# shellcheck disable=SC2046
cc -o "$tmp/prog" "$tmp/prog.c" $(pkg-config --cflags --libs libscope) -Wl,-rpath,"$R/lib" ||
	fail "a program does not build against the installed libscope"
readelf -d "$tmp/prog" | grep -q 'NEEDED.*\[libscope\.so\.0\]' || fail "the program does not load libscope by its soname"
out=$(SCOPED_DISABLE=1 "$tmp/prog") || fail "the program linked to libscope.so failed"
[ "$out" = "ran 4 $V" ] || fail "the shared-library program printed '$out', not 'ran 4 $V'"
echo "ok: a program built with pkg-config runs on libscope.so.0 ($out)"

# Static: the archive, then what pkg-config --static adds for it.
libs=$(pkg-config --static --libs-only-l libscope | sed 's/-lscope//')
# shellcheck disable=SC2046,SC2086
cc -o "$tmp/prog-static" "$tmp/prog.c" $(pkg-config --cflags libscope) "$R/lib/libscope.a" $libs ||
	fail "a program does not build against the installed libscope.a"
readelf -d "$tmp/prog-static" | grep -q 'libscope' && fail "the static build still loads libscope.so"
out=$(SCOPED_DISABLE=1 "$tmp/prog-static") || fail "the program linked to libscope.a failed"
[ "$out" = "ran 4 $V" ] || fail "the static program printed '$out'"
echo "ok: and on libscope.a, with pkg-config --static's libraries"

for p in scoped scopecmd scopetop; do
	"$R/bin/$p" --version | grep -q "$V" || fail "the installed $p does not say version $V"
done
echo "ok: the installed programs run"

mk uninstall >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make uninstall"; }
left=$(find "$tmp/root" ! -type d)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "ok: make uninstall removed every file it installed"

# The same build folder installed under /usr: the .pc names /usr, not the
# /opt/scoped it was made for above; the library goes to Debian's multiarch
# directory; docs, the service files and the bash completion come along.
mu() { make -C "$TOP" --no-print-directory -s BUILD="$BUILD" DESTDIR="$tmp/usr" PREFIX=/usr "$@"; }
mu install >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make install PREFIX=/usr"; }
ma=$(${CC:-cc} -print-multiarch 2>/dev/null || :)
L=$tmp/usr/usr/lib${ma:+/$ma}
grep -qx 'prefix=/usr' "$L/pkgconfig/libscope.pc" || fail "the .pc under /usr says $(grep prefix= "$L/pkgconfig/libscope.pc" 2>/dev/null)"
grep -qx "libdir=/usr/lib${ma:+/$ma}" "$L/pkgconfig/libscope.pc" || fail "the .pc's libdir is not the multiarch one"
for f in "$L/libscope.so.0" "$L/libscope.a" "$tmp/usr/usr/share/doc/scoped/README.md" \
	"$tmp/usr/usr/share/doc/scoped/scopecmd.md" "$tmp/usr/usr/share/scoped/dist/scoped.service" \
	"$tmp/usr/usr/share/bash-completion/completions/scopecmd" \
	"$tmp/usr/usr/share/bash-completion/completions/scoped" "$tmp/usr/usr/share/man/man3/scope.3"; do
	[ -s "$f" ] || fail "${f#"$tmp"/usr} is not installed under /usr"
done
mu uninstall >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "make uninstall PREFIX=/usr"; }
left=$(find "$tmp/usr" ! -type d)
[ -z "$left" ] || fail "make uninstall PREFIX=/usr left: $left"
echo "ok: under /usr: multiarch libdir, a .pc for /usr, docs, service files, completion"
