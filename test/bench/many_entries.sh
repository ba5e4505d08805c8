#!/usr/bin/env bash
# Readers over a bundle of many empty entries (issue 43): `nodesnap analyze`
# and `nodesnap report` on the healthy fixture's bundle with ENTRIES
# (1,000,000) empty entries that no manifest lists, the shape of a hostile
# or broken bundle. Each run's wall time, CPU time and peak RSS (GNU time);
# medians of ROUNDS. With BASELINE=<another nodesnap binary> (main's, say)
# the same commands run in the same rounds, alternated, and the ratios are
# printed; both binaries' analyses must be the same, byte for byte.
#
# Usage: [ROUNDS=3] [ENTRIES=1000000] [BASELINE=bin] [NODESNAP=bin] test/bench/many_entries.sh
set -euo pipefail
# Before lib.sh, which would set its own default.
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/lib.sh"
ENTRIES=${ENTRIES:-1000000}
die() { echo "many_entries: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "needs GNU time (/usr/bin/time) for the peak RSS"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(nodesnap_bin)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
fi

echo "== writing the healthy fixture's bundle with $ENTRIES empty entries"
(cd "$root" && NODESNAP_BENCH_EMPTY_BUNDLE="$work/many.tar.gz" NODESNAP_BENCH_EMPTY_ENTRIES="$ENTRIES" \
	go test -count=1 -run '^TestWriteEmptyEntriesBundle$' ./read/analyze/ >"$work/gen.log" 2>&1) || { cat "$work/gen.log" >&2; die "writing the bundle failed"; }
echo "bundle: $(stat -c %s "$work/many.tar.gz") bytes"

# run NAME BIN CMD...: one run; appends "wall_ms cpu_ms rss_kib" to $work/NAME.
run() {
	local name=$1 b=$2 rc=0
	shift 2
	/usr/bin/time -f '%e %U %S %M' -o "$work/time" "$b" "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
	# analyze exits 3 when it finds a warning; anything else is a failure.
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat "$work/$name.err" >&2; die "$name exited $rc"; }
	awk '{ printf "%d %d %d\n", $1 * 1000, ($2 + $3) * 1000, $4 }' "$work/time" >>"$work/$name.runs"
}

bins=(new)
[ -n "$BASELINE" ] && bins+=(base)
for ((i = 0; i < ROUNDS; i++)); do
	for which in "${bins[@]}"; do
		b=$bin
		[ "$which" = base ] && b=$BASELINE
		run "analyze-$which" "$b" analyze -o json "$work/many.tar.gz"
		run "report-$which" "$b" report "$work/many.tar.gz" --output-file "$work/report-$which.html"
	done
done
if [ -n "$BASELINE" ]; then
	cmp -s "$work/analyze-new.out" "$work/analyze-base.out" || die "the two binaries' analyses differ"
	echo "analyses: the same, byte for byte"
fi

printf '%-9s %-9s %9s %9s %9s\n' command binary wall_ms cpu_ms rss_kib
for cmd in analyze report; do
	ab_rows "$work" "$cmd" "$cmd $ENTRIES empty entries"
done
