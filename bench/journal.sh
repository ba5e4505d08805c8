#!/usr/bin/env bash
# bench/journal.sh — the journal collector against plain journalctl on the
# same journal lines.
#
# Starts a systemd-journald of its own in a private mount namespace (tmpfs
# over /run, volatile storage, the journal files in a temporary directory:
# the host's journal is not touched), writes LINES kubelet-like lines into
# it with systemd-cat, then for ROUNDS rounds, alternating, times
#   A: journalctl --no-pager -o short-iso-precise -D DIR SYSLOG_IDENTIFIER=kubelet > /dev/null
#   B: nodesnap collect --only journal --journal-dir DIR --journal-unit kubelet
# and prints the medians and the ratio B/A, B being the journal collector's
# own duration from the manifest (journalctl, windowing, redaction, writing
# to staging). The whole `collect` (child start-up, bundle compression) is
# printed too. Target: ratio <= 1.2. Results are appended to
# $RESULTS_DIR/results.jsonl like the other side-by-side benchmarks.
#
# Needs root, util-linux (unshare, nsenter), systemd (systemd-journald,
# systemd-cat, journalctl), jq, awk, and go unless NODESNAP names a binary.
# Usage: sudo bench/journal.sh   (env: LINES=200000 ROUNDS=7 NODESNAP=bin/nodesnap)
set -euo pipefail
LINES=${LINES:-200000}
. "$(dirname "$0")/lib.sh"

die() { echo "bench/journal.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (journald in a private mount namespace)"
for t in unshare nsenter systemd-cat journalctl jq awk tar; do
  command -v "$t" >/dev/null || die "needs $t"
done
JOURNALD=""
for p in /lib/systemd/systemd-journald /usr/lib/systemd/systemd-journald; do
  [ -x "$p" ] && JOURNALD=$p && break
done
[ -n "$JOURNALD" ] || die "needs systemd-journald (Debian package systemd)"

work=$(mktemp -d /tmp/nodesnap-bench-journal.XXXXXX)
jpid=""
cleanup() {
  # Only the journald this script started, by its pid.
  if [ -n "$jpid" ]; then kill "$jpid" 2>/dev/null || true; wait "$jpid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

NODESNAP=$(nodesnap_bin)

mkdir -p "$work/journal" "$work/out"
unshare --mount --propagation private sh -c '
set -e
mount -t tmpfs -o mode=0755 nodesnap-bench-run /run
mkdir -p /run/systemd/journal /run/systemd/journald.conf.d /run/log/journal
mount --bind "$1" /run/log/journal
if [ -d /var/log/journal ]; then mount -t tmpfs -o mode=0755 nodesnap-bench-journal /var/log/journal; fi
printf "[Journal]\nStorage=volatile\nRateLimitBurst=0\nRuntimeMaxUse=4G\nRuntimeMaxFileSize=1G\nForwardToSyslog=no\nForwardToKMsg=no\nForwardToConsole=no\nForwardToWall=no\n" > /run/systemd/journald.conf.d/bench.conf
exec "$2"' sh "$work/journal" "$JOURNALD" 2>"$work/journald.err" &
jpid=$!
for _ in $(seq 200); do
  [ -S "/proc/$jpid/root/run/systemd/journal/stdout" ] && break
  sleep 0.05
done
[ -S "/proc/$jpid/root/run/systemd/journal/stdout" ] || die "journald did not start: $(cat "$work/journald.err")"

echo "writing $LINES kubelet lines into the test journald (pid $jpid)..."
awk -v n="$LINES" 'BEGIN {
  for (i = 0; i < n; i++) {
    if (i % 1000 == 7)
      printf "E1121 09:%02d:%02d.%06d    2211 nestedpendingoperations.go:348] Operation for \"{volumeName:kubernetes.io/csi/rbd.csi.ceph.com^0001-0024-%08d podName: nodeName:}\" failed. No retries permitted until (durationBeforeRetry 2m2s). Error: UnmountVolume.TearDown failed: rbd output: [114 98 100 58 32 115 121 115]\n", (i/60)%60, i%60, i, i
    else if (i % 1000 == 500)
      printf "I1121 09:%02d:%02d.%06d    2211 round_trippers.go:466] curl -v -XGET -H \"Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJub2RlIn0.sig%d\" https://10.0.0.1:6443/api/v1/nodes/node-7\n", (i/60)%60, i%60, i, i
    else
      printf "I1121 09:%02d:%02d.%06d    2211 reconciler_common.go:%d] \"operationExecutor.UnmountVolume started for volume \\\"pvc-%08d\\\"\" pod=\"default/web-%d\"\n", (i/60)%60, i%60, i, 100 + i % 200, i, i % 97
  }
}' | nsenter -t "$jpid" -m systemd-cat -t kubelet
for _ in $(seq 600); do
  n=$(journalctl -D "$work/journal" --no-pager -q -o cat SYSLOG_IDENTIFIER=kubelet | wc -l)
  [ "$n" -ge "$LINES" ] && break
  sleep 0.1
done
[ "$n" -eq "$LINES" ] || die "journal holds $n kubelet lines, want $LINES"
bytes=$(journalctl -D "$work/journal" --no-pager -q -o short-iso-precise SYSLOG_IDENTIFIER=kubelet | wc -c)
echo "journal ready: $n lines, $bytes bytes in short-iso-precise"

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
# cpu_ms: user+system CPU milliseconds of the children of this subshell
# (bash's `times`, second line), i.e. of the command just run in it.
# `times` must not run in a pipeline (that would be a fresh subshell).
cpu_ms() {
  times > "$work/times"
  tail -1 "$work/times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); t += p[1] * 60 + p[2] } printf "%d\n", t * 1000 }'
}
: > "$work/a"; : > "$work/b"; : > "$work/w"; : > "$work/ac"; : > "$work/wc"
for r in $(seq "$ROUNDS"); do
  t0=$(now)
  c=$(journalctl --no-pager -o short-iso-precise -D "$work/journal" SYSLOG_IDENTIFIER=kubelet > /dev/null; cpu_ms)
  t1=$(now)
  ms "$t0" "$t1" >> "$work/a"
  echo "$c" >> "$work/ac"

  rm -rf "$work/out"/*
  t0=$(now)
  c=$("$NODESNAP" collect -q --output json -o "$work/out" --only journal --journal-dir "$work/journal" \
    --journal-unit kubelet --journal-kernel=false --journal-max-bytes 1GiB \
    --max-file-size 1GiB --max-collector-size 2GiB > "$work/result.json" || true; cpu_ms)
  t1=$(now)
  ms "$t0" "$t1" >> "$work/w"
  echo "$c" >> "$work/wc"
  b=$(jq -r .path "$work/result.json")
  tar -xzOf "$b" manifest.json > "$work/manifest.json"
  jq -r '.collectors[] | select(.name=="journal") | .duration_seconds * 1000 | floor' "$work/manifest.json" >> "$work/b"
  st=$(jq -r '.collectors[] | select(.name=="journal") | .status' "$work/manifest.json")
  [ "$st" = ok ] || die "journal collector status $st: $(jq -c '.collectors[] | select(.name=="journal")' "$work/manifest.json")"
  if [ "$r" = 1 ]; then
    got=$(tar -xzOf "$b" journal/kubelet.log | wc -l)
    [ "$got" -eq "$LINES" ] || die "the bundle's kubelet.log has $got lines, want $LINES"
    red=$(jq -r '[.files[] | select(.path=="journal/kubelet.log") | .redactions // {} | to_entries[] | .value] | add // 0' "$work/manifest.json")
    echo "round 1: kubelet.log holds all $got lines; $red redactions"
  fi
  printf "round %d: journalctl %d ms (cpu %d)  collector %d ms  collect %d ms (cpu %d)\n" "$r" "$(tail -1 "$work/a")" "$(tail -1 "$work/ac")" \
    "$(tail -1 "$work/b")" "$(tail -1 "$work/w")" "$(tail -1 "$work/wc")"
done
A=$(median < "$work/a"); B=$(median < "$work/b"); W=$(median < "$work/w")
AC=$(median < "$work/ac"); WC=$(median < "$work/wc")
printf "\nmedians over %d rounds (%d lines, %d bytes):\n" "$ROUNDS" "$LINES" "$bytes"
printf "  journalctl > /dev/null        %6d ms\n" "$A"
printf "  journal collector (manifest)  %6d ms   ratio %s (target <= 1.2)\n" "$B" "$(ratio "$B" "$A")"
printf "  nodesnap collect (wall)       %6d ms   ratio %s\n" "$W" "$(ratio "$W" "$A")"
printf "  CPU, user+system: journalctl %d ms; whole collect (supervisor, collector, journalctl, gzip of the bundle) %d ms, ratio %s\n" "$AC" "$WC" "$(ratio "$WC" "$AC")"
echo "{\"name\":\"journal collector, $LINES lines\",\"nodesnap_ms\":$B,\"reference_ms\":$A,\"ratio\":$(ratio "$B" "$A"),\"rounds\":$ROUNDS}" >>"$RESULTS_DIR/results.jsonl"
echo "{\"name\":\"collect --only journal (wall), $LINES lines\",\"nodesnap_ms\":$W,\"reference_ms\":$A,\"ratio\":$(ratio "$W" "$A"),\"rounds\":$ROUNDS}" >>"$RESULTS_DIR/results.jsonl"
