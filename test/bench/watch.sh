#!/usr/bin/env bash
# nodesnap watch's own cost (issue 21): the idle watcher's CPU (% of one
# core: the watcher and its worker processes together) and RSS on a node
# with MOUNTS mounts, then the latency from a fault (the kubelet stand-in
# stops answering) to a finished bundle. Targets: <= 1 % of one core and
# <= 40 MiB RSS idle.
#
# The watcher runs as pid 1 of a private mount and PID namespace
# (unshare --mount-proc) that holds MOUNTS bind mounts of an ext4 directory,
# so its /proc/1/mountinfo is that table and nothing reaches the host's.
# Default intervals (docs/watch.md): mounts every 30 s, tasks 15 s, kernel
# log 5 s, journal 15 s, kubelet 10 s; kubelet-down with for: 0s.
#
# Usage: sudo test/bench/watch.sh   (env: MOUNTS=200 IDLE=120 NODESNAP=path/to/binary)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mount and PID namespaces)"
for t in unshare python3 tar; do command -v "$t" >/dev/null || die "missing $t"; done
MOUNTS=${MOUNTS:-200}
IDLE=${IDLE:-120}
bin=$(nodesnap_bin)
work=$(mktemp -d -p /var/tmp nodesnap-bench-watch.XXXXXX)
ns= kubelet= pid=
cleanup() {
	# unshare ignores SIGTERM while it waits: stop the watcher itself.
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
	[ -n "$kubelet" ] && kill "$kubelet" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/out" "$work/m" "$work/src"

# The kubelet stand-in: healthz answers 200 until it is killed.
python3 - "$work/port" <<'PY' &
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"[+]ping ok\nhealthz check passed\n")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
kubelet=$!
for _ in $(seq 50); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port")
cat >"$work/watch.yaml" <<YAML
listen: 127.0.0.1:0
collect_args: [--timeout, 2m]
kubelet: {healthz_url: "http://127.0.0.1:$port/healthz"}
dirs: {kubelet_root: $work/src}
triggers:
  kubelet-down: {for: 0s}
YAML

unshare -m -p -f --mount-proc --propagation private bash -c '
	for i in $(seq -w 1 '"$MOUNTS"'); do mkdir -p '"$work"'/m/$i && mount --bind '"$work"'/src '"$work"'/m/$i; done
	exec "$0" watch --config '"$work"'/watch.yaml --output-dir '"$work"'/out --keep 0' "$bin" 2>"$work/log" &
ns=$!
for _ in $(seq 100); do
	pid=$(cat /proc/$ns/task/$ns/children 2>/dev/null | awk '{print $1}')
	[ -n "$pid" ] && grep -q "metrics and /healthz on" "$work/log" 2>/dev/null && break
	sleep 0.2
done
[ -n "$pid" ] || die "the watcher did not start: $(cat "$work/log")"
addr=$(sed -n 's|.*/metrics and /healthz on http://||p' "$work/log" | head -1)
mounts=$(wc -l </proc/$pid/mountinfo)
echo "watch: $mounts mounts in its namespace ($MOUNTS bind mounts of ext4), pid $pid, /metrics on $addr"

# cpu_ticks: user+system ticks of the watcher, its reaped children, and its
# live workers.
cpu_ticks() {
	local t=0 c
	t=$(awk '{print $14+$15+$16+$17}' /proc/$pid/stat)
	for c in $(cat /proc/$pid/task/*/children 2>/dev/null); do
		t=$((t + $(awk '{print $14+$15}' /proc/$c/stat 2>/dev/null || echo 0)))
	done
	echo "$t"
}
rss_kib() { awk '/^VmRSS/ {print $2}' /proc/$1/status; }
# pss_kib: proportional set size, the binary's shared pages divided among
# the processes that map them (the watcher and its workers are one binary).
pss_kib() { awk '/^Pss:/ {print $2}' /proc/$1/smaps_rollup; }

sleep 35 # the first round of every signal (mounts every 30 s)
t0=$(cpu_ticks); s0=$(date +%s%N)
sleep "$IDLE"
t1=$(cpu_ticks); s1=$(date +%s%N)
hz=$(getconf CLK_TCK)
cpu=$(awk -v d=$((t1 - t0)) -v hz="$hz" -v ns=$((s1 - s0)) 'BEGIN { printf "%.2f", 100 * d / hz / (ns / 1e9) }')
rss=$(rss_kib "$pid")
pss=$(pss_kib "$pid")
wrss=0 wpss=0 nw=0
for c in $(cat /proc/$pid/task/*/children 2>/dev/null); do
	wrss=$((wrss + $(rss_kib "$c" 2>/dev/null || echo 0)))
	wpss=$((wpss + $(pss_kib "$c" 2>/dev/null || echo 0)))
	nw=$((nw + 1))
done
probed=$(python3 -c 'import sys,urllib.request; print([l.split()[1] for l in urllib.request.urlopen("http://'"$addr"'/metrics").read().decode().splitlines() if l.startswith("nodesnap_watch_mounts_probed ")][0])')
echo "idle ${IDLE}s: CPU ${cpu}% of one core (watcher + workers; target <= 1%); watcher RSS $((rss / 1024)) MiB, PSS $((pss / 1024)) MiB (target <= 40 MiB); its $nw workers RSS $((wrss / 1024)) MiB, PSS $((wpss / 1024)) MiB together; $probed mounts probed a round"

if ls "$work"/out/nodesnap-*.tar.gz >/dev/null 2>&1; then
	die "a trigger fired while the watcher was idle (a fault elsewhere on this machine?), not a measure of latency: $(grep fired "$work/log")"
fi

# The fault: the kubelet stops answering.
kill "$kubelet"; wait "$kubelet" 2>/dev/null || true; kubelet=
f0=$(date +%s%N)
for _ in $(seq 1800); do ls "$work"/out/nodesnap-*.tar.gz >/dev/null 2>&1 && break; sleep 0.1; done
f1=$(date +%s%N)
b=$(ls "$work"/out/nodesnap-*.tar.gz 2>/dev/null | head -1)
[ -n "$b" ] || die "no bundle within 180 s of the fault: $(cat "$work/log")"
bundle_file "$b" manifest.json >"$work/manifest.json"
python3 - "$work/manifest.json" "$f0" "$f1" "$cpu" "$rss" "$MOUNTS" "$RESULTS_DIR/results.jsonl" <<'PY'
import json, sys, datetime
m = json.load(open(sys.argv[1]))
f0, f1 = int(sys.argv[2]) / 1e9, int(sys.argv[3]) / 1e9
fired = datetime.datetime.fromisoformat(m["trigger"]["fired_at"].replace("Z", "+00:00")).timestamp()
print("fault to bundle %.1f s: %.1f s until the next kubelet round fired %s, %.1f s from trigger to finished bundle (collection %.1f s, status %s)" % (
    f1 - f0, fired - f0, m["trigger"]["name"], f1 - fired, m["duration_seconds"], m["status"]))
open(sys.argv[7], "a").write(json.dumps({"name": "watch idle", "mounts": int(sys.argv[6]), "cpu_percent": float(sys.argv[4]),
    "rss_kib": int(sys.argv[5]), "fault_to_bundle_s": round(f1 - f0, 1), "trigger_to_bundle_s": round(f1 - fired, 1)}) + "\n")
PY
