#!/bin/sh
# Installs the Debian 12 packages scoped needs to build, test and demo.
# Idempotent: does nothing when every package is already present.
set -eu
PKGS="build-essential pkg-config clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
libjansson-dev libncurses-dev libcmocka-dev libdw-dev elfutils libunwind-dev
tmux gdb python3 python3-jsonschema libclang-rt-14-dev procps util-linux libmicrohttpd-dev prometheus libcurl4-openssl-dev nodejs"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" \
		|| missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages:$missing; run 'make deps' as root (apt-get)" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
