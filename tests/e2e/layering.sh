#!/bin/sh
# The layering the folders show, checked on every #include of the parts:
#
#   runtime/  libscope and its agent; only the runtime includes runtime/
#   proto/    the wire (wire.h holds the wire values); common/ what the
#             tools and the agent share; include/ the public API
#   dump/     the thread dump (build, render, write), shared by scopecmd,
#             scopetop and the daemon (which renders dumps for scopecmd)
#   daemon/, dumper/ (scopecmd), tui/ (scopetop), bpf/: programs' parts;
#             none includes another program's part
#
# An include is resolved as the compiler would: beside the including file
# first, then along the build's -I path; whatever resolves outside the tree
# (system headers) is not looked at.
set -eu
cd "$TOP"

exec python3 - <<'PY'
import os, re, sys

# The build's -I path (Makefile SC_CFLAGS), in order.
IPATH = ["include", "proto", "common", "dump", "runtime", "runtime/agent"]
# Folders each part may include from, besides its own.
ALLOWED = {
    "daemon": ["dump", "proto", "common", "include", "bpf"],
    "dumper": ["dump", "proto", "common", "include"],
    "tui": ["dump", "proto", "common", "include"],
    "dump": ["proto", "common", "include"],
    "bpf": ["proto", "common", "include"],
    "common": ["proto", "include"],
    "proto": ["common", "include"],
}
INC = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')


def resolve(path, inc):
    """The tree folder the header resolves to, or None outside the tree."""
    for base in [os.path.dirname(path)] + IPATH:
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(cand):
            return None if cand.startswith("..") else cand.split(os.sep)[0]
    return None


bad = checked = 0
for part, ok in ALLOWED.items():
    ok = set(ok) | {part}
    for root, _, files in os.walk(part):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    m = INC.match(line)
                    top = m and resolve(path, m.group(1))
                    if not top:
                        continue
                    checked += 1
                    if top not in ok:
                        print(f"{path}:{n} includes {top}/ ({m.group(1)}): "
                              f"{part}/ may include only {' '.join(sorted(ok))}")
                        bad += 1
if not checked:
    sys.exit("no includes found: the check looked at nothing")
if bad:
    sys.exit("layering broken (wire values live in proto/wire.h, the dump builder in dump/)")
print(f"layering holds: {checked} includes of the tree's own headers checked")
PY
