#!/bin/sh
# Downloads every module of modules.txt through the Go module proxy and
# prints one "source module version dir" line per module served; a module
# the proxy refuses is said on stderr and skipped.
set -u
list="${1:-$(dirname "$0")/modules.txt}"
grep -v '^#' "$list" | grep -v '^$' | while read -r source module versions; do
	got=""
	for v in $versions; do
		dir=$("${GO:-go}" mod download -json "$module@$v" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
		if [ -n "$dir" ]; then
			echo "$source $module $v $dir"
			got=1
			break
		fi
	done
	[ -n "$got" ] || echo "refused: $module ($versions)" >&2
done
