#!/usr/bin/env bash
# `nodesnap analyze` on the large bundle of BenchmarkAnalyzeLargeBundle
# (test/roundtrip: 1,000,000 open-file records, 50,000 mounts, a kubelet
# log of 100,000 plain lines), and on the same bundle with a busy node's
# kubelet journal of JOURNAL_LINES (1,000,000) lines in the wordings
# kubelets log, about one in a hundred a storage error (the log the event
# model of read/events costs most on; JOURNAL_LINES=0 leaves it out).
# Each run's wall time, CPU time and peak RSS (GNU time); medians of
# ROUNDS. With BASELINE=<another nodesnap binary> (main's, say) the same
# commands run in the same rounds, alternated, the ratios are printed and
# the two analyses compared byte for byte (SAME=1: a difference ends the
# script). The baseline must read the bundle's schema.
#
# Usage: [ROUNDS=5] [JOURNAL_LINES=1000000] [BASELINE=bin] [SAME=1] [NODESNAP=bin] test/bench/analyze_large.sh
set -euo pipefail
# Before lib.sh, which would set its own default.
ROUNDS=${ROUNDS:-5}
. "$(dirname "$0")/lib.sh"
JOURNAL_LINES=${JOURNAL_LINES:-1000000}
SAME=${SAME:-}
die() { echo "analyze_large: $*" >&2; exit 1; }
[ -x /usr/bin/time ] || die "needs GNU time (/usr/bin/time) for the peak RSS"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(nodesnap_bin)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
fi

# write NAME LINES: the large bundle, its kubelet journal of LINES lines
# (0: the benchmark's plain log), as $work/NAME.tar.gz.
write() {
	echo "== writing the large bundle $1 (kubelet journal: ${2/#0/the plain 100000} lines)"
	(cd "$root" && NODESNAP_BENCH_LARGE_BUNDLE="$work/$1.tar.gz" NODESNAP_BENCH_KUBELET_LINES="$2" \
		go test -count=1 -run '^TestWriteLargeBundle$' ./test/roundtrip/ >"$work/gen.log" 2>&1) || { cat "$work/gen.log" >&2; die "writing the bundle failed"; }
	echo "bundle $1: $(stat -c %s "$work/$1.tar.gz") bytes"
}
bundles=(large)
write large 0
if [ "$JOURNAL_LINES" -gt 0 ]; then
	write journal "$JOURNAL_LINES"
	bundles+=(journal)
fi

# run NAME BIN BUNDLE: one analysis; appends "wall_ms cpu_ms rss_kib" to $work/NAME.runs.
run() {
	local name=$1 b=$2 rc=0
	/usr/bin/time -f '%e %U %S %M' -o "$work/time" "$b" analyze -o json "$3" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
	# analyze exits 3 when it finds a warning; anything else is a failure.
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat "$work/$name.err" >&2; die "$name exited $rc"; }
	awk '{ printf "%d %d %d\n", $1 * 1000, ($2 + $3) * 1000, $4 }' "$work/time" >>"$work/$name.runs"
}

bins=(new)
[ -n "$BASELINE" ] && bins+=(base)
for ((i = 0; i < ROUNDS; i++)); do
	# Alternate which binary goes first, so drift hits both alike.
	order=("${bins[@]}")
	if [ $((i % 2)) = 1 ] && [ -n "$BASELINE" ]; then order=(base new); fi
	for bn in "${bundles[@]}"; do
		for which in "${order[@]}"; do
			b=$bin
			[ "$which" = base ] && b=$BASELINE
			run "$bn-$which" "$b" "$work/$bn.tar.gz"
		done
	done
	echo "round $((i + 1)) done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
if [ -n "$BASELINE" ]; then
	for bn in "${bundles[@]}"; do
		if cmp -s "$work/$bn-new.out" "$work/$bn-base.out"; then
			echo "analyses of $bn: the same, byte for byte"
		else
			[ -z "$SAME" ] || die "the two binaries' analyses of $bn differ"
			echo "analyses of $bn: they differ"
		fi
	done
fi

printf '%-9s %-9s %9s %9s %9s\n' bundle binary wall_ms cpu_ms rss_kib
for bn in "${bundles[@]}"; do
	ab_rows "$work" "$bn" "analyze large bundle ($bn)"
done
