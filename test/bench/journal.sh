#!/usr/bin/env bash
# test/bench/journal.sh — the journal collector against plain journalctl on the
# same journal lines.
#
# Starts a systemd-journald of its own in a private mount namespace (tmpfs
# over /run, volatile storage, the journal files in a temporary directory:
# the host's journal is not touched), writes LINES kubelet-like lines into
# it with systemd-cat, then for ROUNDS rounds times
#   A: journalctl --no-pager -o short-iso-precise -D DIR SYSLOG_IDENTIFIER=kubelet > /dev/null
#   B: nodesnap collect --only journal --journal-dir DIR --journal-unit kubelet,
#      once with --journal-reader native and once with journalctl (their
#      order alternating from round to round)
# and prints the medians: B's journal collector duration from the manifest
# (reading, windowing, redaction, writing to staging) with its ratio to A,
# the whole `collect` (wall and CPU), and the peak RSS of each (GNU time's
# %M: the largest process). Round 1 checks that both readers wrote the same
# kubelet.log. MAXB (default 1GiB: everything) is the --journal-max-bytes
# cap; MAXB=32MiB is the default a customer gets. Each reader also runs,
# in the same rounds, with --journal-memory-cap MEMCAP (default 64MiB, the
# flag's default): with MEMCAP below what the source holds, the collector
# keeps the newest MEMCAP, is partial and says how many lines it left out;
# the uncut runs have --journal-memory-cap MAXB (memory bounded by the byte
# cap only, as before the memory cap). Results are appended to
# $RESULTS_DIR/results.jsonl like the other side-by-side benchmarks.
#
# Needs root, util-linux (unshare, nsenter), systemd (systemd-journald,
# systemd-cat, journalctl), GNU time (/usr/bin/time), jq, awk, and go unless
# NODESNAP names a binary.
# Usage: sudo test/bench/journal.sh   (env: LINES=200000 ROUNDS=7 MAXB=1GiB MEMCAP=64MiB READERS="native journalctl" NODESNAP=bin/nodesnap)
set -euo pipefail
LINES=${LINES:-200000}
. "$(dirname "$0")/lib.sh"

die() { echo "test/bench/journal.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (journald in a private mount namespace)"
for t in unshare nsenter systemd-cat journalctl jq awk tar /usr/bin/time; do
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
# Ready once the process is journald (exec'ed after its mounts: before,
# /proc/PID/root/run is the host's /run, which may hold another journald's
# sockets) and its own stdout socket exists.
for _ in $(seq 200); do
  [ "$(cat "/proc/$jpid/comm" 2>/dev/null)" = systemd-journal ] && [ -S "/proc/$jpid/root/run/systemd/journal/stdout" ] && break
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
[ "$n" -eq "$LINES" ] || die "journal holds $n kubelet lines, want $LINES; not written by this script: $(journalctl -D "$work/journal" --no-pager -q -o cat SYSLOG_IDENTIFIER=kubelet | grep -v '^[IE]1121 ' | head -3)"
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
# rss_kb FILE: the peak RSS GNU time wrote (the largest process of the
# tree it waited for: for collect, the supervisor, the collector child, a
# worker or journalctl, whichever peaked highest).
rss_kb() { tail -1 "$1"; }
# collect_round VARIANT: one `collect --only journal` with a journal
# reader, native or journalctl, and "-capped" for --journal-memory-cap
# MEMCAP (else MAXB); appends collector ms, wall ms, CPU ms and peak RSS
# KiB to $work/{b,w,wc,rss}-VARIANT.
collect_round() {
  local v=$1 reader=${1%-capped} mem=$MAXB t0 t1 c b st
  [ "$v" = "$reader" ] || mem=$MEMCAP
  rm -rf "$work/out"/*
  t0=$(now)
  c=$(/usr/bin/time -f %M -o "$work/rss" "$NODESNAP" collect -q --output json --output-dir "$work/out" --only journal \
    --journal-dir "$work/journal" --journal-reader "$reader" --journal-unit kubelet --journal-kernel=false \
    --journal-max-bytes "$MAXB" --journal-memory-cap "$mem" --max-file-size 1GiB --max-collector-size 2GiB > "$work/result.json" || true; cpu_ms)
  t1=$(now)
  ms "$t0" "$t1" >> "$work/w-$v"
  echo "$c" >> "$work/wc-$v"
  rss_kb "$work/rss" >> "$work/rss-$v"
  b=$(jq -r .path "$work/result.json")
  bundle_file "$b" manifest.json > "$work/manifest.json"
  jq -r '.collectors[] | select(.name=="journal") | .duration_seconds * 1000 | floor' "$work/manifest.json" >> "$work/b-$v"
  jq -r '.collectors[] | select(.name=="journal") | .max_rss_kib // 0' "$work/manifest.json" >> "$work/crss-$v"
  st=$(jq -r '.collectors[] | select(.name=="journal") | .status' "$work/manifest.json")
  bundle_file "$b" journal/kubelet.log > "$work/kubelet-$v.log"
  if [ "$st" = partial ] && [ "$v" != "$reader" ] && jq -e '.collectors[] | select(.name=="journal") | .error | test("memory cap were left out")' "$work/manifest.json" >/dev/null; then
    [ "$(wc -c < "$work/kubelet-$v.log")" -le "$(cliflag_bytes "$MEMCAP")" ] || die "$v: kubelet.log exceeds the memory cap $MEMCAP"
    return
  fi
  [ "$st" = ok ] || die "journal collector ($v) status $st: $(jq -c '.collectors[] | select(.name=="journal")' "$work/manifest.json")"
}
# cliflag_bytes SIZE: KiB/MiB/GiB sizes as bytes (what the bench passes).
cliflag_bytes() {
  case $1 in
    *GiB) echo $(( ${1%GiB} << 30 )) ;; *MiB) echo $(( ${1%MiB} << 20 )) ;; *KiB) echo $(( ${1%KiB} << 10 )) ;; *) echo "$1" ;;
  esac
}
MAXB=${MAXB:-1GiB}
MEMCAP=${MEMCAP:-64MiB}
# READERS (default "native journalctl") picks the readers: READERS=native
# measures the native reader alone (journalctl may miss its own deadline on
# a loaded machine, which ends the script).
READERS=${READERS:-native journalctl}
VARIANTS=""
for rd in $READERS; do VARIANTS="$VARIANTS $rd"; done
for rd in $READERS; do VARIANTS="$VARIANTS $rd-capped"; done
: > "$work/a"; : > "$work/ac"; : > "$work/arss"
for rd in $VARIANTS; do : > "$work/crss-$rd"; : > "$work/b-$rd"; : > "$work/w-$rd"; : > "$work/wc-$rd"; : > "$work/rss-$rd"; done
for r in $(seq "$ROUNDS"); do
  t0=$(now)
  c=$(/usr/bin/time -f %M -o "$work/rss" journalctl --no-pager -o short-iso-precise -D "$work/journal" SYSLOG_IDENTIFIER=kubelet > /dev/null; cpu_ms)
  t1=$(now)
  ms "$t0" "$t1" >> "$work/a"
  echo "$c" >> "$work/ac"
  rss_kb "$work/rss" >> "$work/arss"
  # Alternate which reader goes first, so drift hits both alike.
  if [ $((r % 2)) = 1 ]; then
    for v in $VARIANTS; do collect_round "$v"; done
  else
    for v in $(echo "$VARIANTS" | tr ' ' '\n' | tac); do collect_round "$v"; done
  fi
  if [ "$r" = 1 ]; then
    if [ -f "$work/kubelet-journalctl.log" ] && [ -f "$work/kubelet-native.log" ]; then
      cmp -s "$work/kubelet-native.log" "$work/kubelet-journalctl.log" || die "kubelet.log differs between the native reader and journalctl"
    fi
    got=$(wc -l < "$work/kubelet-native.log")
    echo "round 1: kubelet.log holds $got lines, the same bytes from every reader measured (cap $MAXB)"
    for v in $(echo "$VARIANTS" | tr ' ' '\n' | grep -- -capped); do
      echo "round 1: $v (--journal-memory-cap $MEMCAP) kept $(wc -l < "$work/kubelet-$v.log") lines"
    done
  fi
  printf "round %d: journalctl %d ms  collector" "$r" "$(tail -1 "$work/a")"
  for rd in $READERS; do printf " %s %d ms" "$rd" "$(tail -1 "$work/b-$rd")"; done
  echo
done
A=$(median < "$work/a"); AC=$(median < "$work/ac"); AR=$(median < "$work/arss")
printf "\nmedians over %d rounds (%d lines, %d bytes in short-iso-precise, cap %s):\n" "$ROUNDS" "$LINES" "$bytes" "$MAXB"
printf "  %-44s %7s %7s %9s\n" "" "ms" "cpu ms" "peak RSS"
printf "  %-44s %7d %7d %6d MiB\n" "journalctl > /dev/null" "$A" "$AC" $((AR / 1024))
for rd in $VARIANTS; do
  mem=$MAXB; [ "$rd" = "${rd%-capped}" ] || mem=$MEMCAP
  B=$(median < "$work/b-$rd"); W=$(median < "$work/w-$rd"); WC=$(median < "$work/wc-$rd"); R=$(median < "$work/rss-$rd")
  CR=$(median < "$work/crss-$rd")
  printf "  %-44s %7d %7s %6d MiB   ratio %s\n" "journal collector, $rd (manifest)" "$B" "" $((CR / 1024)) "$(ratio "$B" "$A")"
  printf "  %-44s %7d %7d %6d MiB\n" "collect --only journal, $rd (wall)" "$W" "$WC" $((R / 1024))
  echo "{\"name\":\"journal collector ($rd reader), $LINES lines, cap $MAXB, memory cap $mem\",\"nodesnap_ms\":$B,\"reference_ms\":$A,\"ratio\":$(ratio "$B" "$A"),\"peak_rss_kib\":$R,\"collector_peak_rss_kib\":$CR,\"reference_peak_rss_kib\":$AR,\"rounds\":$ROUNDS}" >>"$RESULTS_DIR/results.jsonl"
done
