#!/usr/bin/env bash
# mountprobe's peak memory at scale (issue 17): N tmpfs mounts (default
# 30,000) in a private mount namespace held by `unshare`, so the host's own
# table is untouched; one collection with --only mountprobe; the peak RSS
# the manifest records for the collector (its process, not the workers')
# and the probe counts. Target: <= 64 MiB at 30,000 mounts. Each round runs
# the collection twice, with mountprobe's memory limit and without it, to
# show what the limit costs in time.
#
# Usage: sudo test/bench/mountprobe_scale.sh   (env: MOUNTS=30000 PAIRS=3 NODESNAP=path/to/binary)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mount namespaces, tmpfs)"
for t in unshare python3 tar; do command -v "$t" >/dev/null || die "missing $t"; done
MOUNTS=${MOUNTS:-30000}
bin=$(nodesnap_bin)
work=$(mktemp -d -t nodesnap-bench-mpscale.XXXXXX)
holder=
cleanup() {
	[ -n "$holder" ] && kill "$holder" 2>/dev/null || true
	[ -n "$holder" ] && wait "$holder" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/out" "$work/m"

# The holder mounts one tmpfs, then MOUNTS small tmpfs mounts below it, in
# its own namespace (private propagation: nothing reaches the host), says
# "ready" and sleeps until killed; its namespace goes with it.
unshare -m --propagation private python3 - "$work/m" "$MOUNTS" "$work/ready" <<'PY' &
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
root, n, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def mount(src, dst, fs, data):
    if libc.mount(src.encode(), dst.encode(), fs.encode(), 0, data.encode()) != 0:
        raise OSError(ctypes.get_errno(), "mount " + dst)
mount("bench", root, "tmpfs", "size=64m,nr_inodes=200k")
for i in range(n):
    d = "%s/m%05d" % (root, i)
    os.mkdir(d)
    mount("bench", d, "tmpfs", "size=4k,nr_inodes=16")
open(ready, "w").close()
while True:
    time.sleep(3600)
PY
holder=$!
for _ in $(seq 600); do [ -e "$work/ready" ] && break; kill -0 "$holder" 2>/dev/null || die "the mount holder failed"; sleep 1; done
[ -e "$work/ready" ] || die "the mount holder did not finish mounting"
echo "mountprobe: $MOUNTS tmpfs mounts in namespace $(readlink /proc/$holder/ns/mnt)"

# PAIRS (default 3) collections with mountprobe's own memory limit,
# alternating with as many where GOMEMLIMIT=256MiB (the collection's general
# limit) replaces it, so the limit's cost in time is measured on the same
# load: medians of each, and the ratio (stated bound: <= 1.5).
PAIRS=${PAIRS:-3}
one() { # one LABEL [ENV=VALUE]: one collection, one result line
	local label=$1; shift
	rm -rf "$work/out"; mkdir -p "$work/out"
	env "$@" /usr/bin/time -f '%e' -o "$work/time" "$bin" collect -q --output-dir "$work/out" --only mountprobe --timeout 5m --collector-timeout 4m >/dev/null 2>&1 || true
	b=$(ls "$work"/out/*.tar.gz | head -1)
	bundle_file "$b" manifest.json >"$work/manifest.json"
	bundle_file "$b" mountprobe/probes.json >"$work/probes.json"
	python3 - "$work/manifest.json" "$work/probes.json" "$label" <<'PY'
import json, sys
man = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2]))
c = [x for x in man["collectors"] if x["name"] == "mountprobe"][0]
print(sys.argv[3], c["status"], c["duration_seconds"], c.get("max_rss_kib", 0), len(rep["probes"]), json.dumps(rep["counts"], sort_keys=True).replace(" ", ""))
PY
}
: >"$work/runs"
for _ in $(seq "$PAIRS"); do
	one limit >>"$work/runs"
	one nolimit GOMEMLIMIT=256MiB >>"$work/runs"
done
python3 - "$work/runs" "$RESULTS_DIR/results.jsonl" "$MOUNTS" <<'PY'
import json, statistics, sys
runs = [l.split() for l in open(sys.argv[1]) if l.strip()]; n = int(sys.argv[3])
def med(label, i): return statistics.median(float(r[i]) for r in runs if r[0] == label)
for r in runs:
    print("mountprobe (%s): status %s, %.1fs, %s probes %s; peak RSS %s KiB = %.1f MiB" % (r[0], r[1], float(r[2]), r[4], r[5], r[3], int(r[3]) / 1024))
rss, rss0 = med("limit", 3), med("nolimit", 3)
t, t0 = med("limit", 2), med("nolimit", 2)
print("mountprobe: peak RSS %.1f MiB (target <= 64 MiB), %.1f MiB without its own limit; %.2fs vs %.2fs, ratio %.2f (bound <= 1.5); medians of %d pairs" % (
    rss / 1024, rss0 / 1024, t, t0, t / t0 if t0 else float("inf"), len(runs) // 2))
with open(sys.argv[2], "a") as f:
    f.write(json.dumps({"name": "mountprobe %d mounts peak RSS" % n, "collector_rss_kib": rss, "seconds": t,
                        "nolimit_rss_kib": rss0, "nolimit_seconds": t0}) + "\n")
PY
