#!/bin/sh
# Only the runtime includes runtime/: the daemon, scopecmd, scopetop, the BPF
# side, the protocol and common/ learn wire values from proto/ (wire.h) and
# the API from include/scope.h, never from libscope's internals.  Every
# header under runtime/ is looked for, by name (the build puts runtime/ on
# the include path) and by path.
set -eu
cd "$TOP"
headers=$(find runtime -name '*.h' -exec basename {} \; | sort -u)
[ -n "$headers" ] || { echo "no headers under runtime/"; exit 1; }
pattern=$(printf '%s\n' $headers | sed 's/\./\\./g' | paste -sd'|')
bad=0
for dir in daemon dumper tui common bpf proto; do
	[ -d "$dir" ] || continue
	hits=$(grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]([^\">]*/)?($pattern)[\">]|#[[:space:]]*include[[:space:]]*[<\"][^\">]*runtime/" \
		--include='*.c' --include='*.h' "$dir" || true)
	# A header of the part's own folder with a runtime header's name is the
	# part's own.
	hits=$(printf '%s\n' "$hits" | while IFS= read -r line; do
		[ -n "$line" ] || continue
		file=${line%%:*}
		inc=$(printf '%s\n' "$line" | sed -n 's/.*include[[:space:]]*[<"]\([^">]*\)[">].*/\1/p')
		[ -f "$(dirname "$file")/$inc" ] && continue
		printf '%s\n' "$line"
	done)
	if [ -n "$hits" ]; then
		printf '%s includes runtime/ headers:\n%s\n' "$dir" "$hits"
		bad=1
	fi
done
[ $bad -eq 0 ] || { echo "only runtime/ may include runtime/ (wire values live in proto/wire.h)"; exit 1; }
echo "no part but the runtime includes runtime/ ($(printf '%s\n' $headers | wc -l) headers checked)"
