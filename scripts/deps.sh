#!/bin/sh
# Installs the Debian 12 packages scoped needs, in two lists:
#   PKGS      needed to build and to run `make test`: missing ones fail.
#   OPT_PKGS  needed only by a benchmark peer, the fuzz targets or the
#             format check: missing ones are named, and only what needs
#             them is skipped (each says why).
# As root it installs whatever of both lists is missing; as another user it
# only checks.  Idempotent: does nothing when every package is present.
set -eu
PKGS="build-essential pkg-config clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
libjansson-dev libncurses-dev libcmocka-dev libdw-dev elfutils libunwind-dev
tmux python3 python3-jsonschema procps util-linux
libmicrohttpd-dev prometheus libcurl4-openssl-dev"
# gdb: bench_dump's peer; libclang-rt-14-dev: libFuzzer (make fuzz);
# clang-format: make format-check; libtbb-dev, libglib2.0-dev: the
# scheduler benchmark's peers (TBB, GLib); nodejs: e2e/otlp's OTLP decoder.
OPT_PKGS="gdb libclang-rt-14-dev clang-format libtbb-dev libglib2.0-dev nodejs"

missing_of() {
	for p in "$@"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" ||
			printf ' %s' "$p"
	done
}
# shellcheck disable=SC2086 # the lists are split on purpose
missing=$(missing_of $PKGS)
# shellcheck disable=SC2086
opt_missing=$(missing_of $OPT_PKGS)
[ -z "$missing$opt_missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	[ -z "$opt_missing" ] ||
		echo "deps: optional packages missing:$opt_missing; the benchmarks, fuzz targets" \
			"or checks that need them are skipped ('make deps' as root installs them)" >&2
	[ -z "$missing" ] && exit 0
	echo "deps: missing packages:$missing; run 'make deps' as root (apt-get)" >&2
	exit 1
fi
echo "deps: installing$missing$opt_missing"
export DEBIAN_FRONTEND=noninteractive
if [ -n "$missing" ]; then
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
# An optional package that cannot be installed only skips what needs it.
if [ -n "$opt_missing" ]; then
	# shellcheck disable=SC2086
	{ [ -n "$missing" ] || apt-get update -qq; } &&
		apt-get install -y -qq --no-install-recommends $opt_missing >/dev/null ||
		echo "deps: could not install$opt_missing; what needs them is skipped" >&2
fi
