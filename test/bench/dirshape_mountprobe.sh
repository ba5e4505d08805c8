#!/usr/bin/env bash
# Benchmark of the dirshape and mountprobe collectors (issue 4):
#
#   dirshape   vs  find ROOT -mindepth 1 | wc -l    on a tree of >= 1,000,000
#                  entries on tmpfs, warm cache: wall time side by side
#                  (target ratio <= 1.0), identical entry totals, peak RSS
#                  (target < 64 MiB)
#   mountprobe on 200 hung mounts beside 50 healthy (BenchmarkMountprobeHung200,
#                  probe deadline 3s): target <= deadline + 2 s, all healthy probed
#   mountprobe on 200 mounts of which 20 hang (20 stuck FUSE daemons, served
#                  by the Go benchmark BenchmarkMountprobe200): the
#                  collector's time against the probe deadline (target <=
#                  deadline + 1 s)
#
# The tree: 900 directories of 999 files, plus one directory of 100,000
# empty subdirectories (incident 001 in small), 1,000,001 entries below the
# root. Everything is removed on exit (the tmpfs is unmounted; the Go
# benchmark cleans up its own mounts).
#
# Usage: sudo test/bench/dirshape_mountprobe.sh
#   env: ROUNDS=7 PROBE_TIMEOUT=2s MP_ROUNDS=3
#        TREE_DIRS=900 TREE_FILES=999 TREE_BIG=100000 (the tree's shape; smaller for a smoke run)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (tmpfs, FUSE)"
for t in go python3 tar find mount umount; do command -v "$t" >/dev/null || die "missing $t"; done
[ -x /usr/bin/time ] || die "missing /usr/bin/time (GNU time)"

PROBE_TIMEOUT=${PROBE_TIMEOUT:-2s}
MP_ROUNDS=${MP_ROUNDS:-3}
TREE_DIRS=${TREE_DIRS:-900}
TREE_FILES=${TREE_FILES:-999}
TREE_BIG=${TREE_BIG:-100000}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(nodesnap_bin)
work=$(mktemp -d /tmp/nodesnap-bench-dirshape.XXXXXX)
tree=$work/tree
out=$work/out
cleanup() {
	if grep -q " $tree " /proc/self/mountinfo 2>/dev/null; then umount "$tree" || umount -l "$tree"; fi
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$tree" "$out"
mount -t tmpfs -o size=1g,nr_inodes=2m,mode=0755 nodesnap-bench "$tree"

echo "dirshape: building the tree on tmpfs ($(nproc) cpus)"
python3 - "$tree" "$TREE_DIRS" "$TREE_FILES" "$TREE_BIG" <<'EOF'
import os, sys
root = sys.argv[1]
dirs, files, nbig = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for d in range(dirs):
    p = "%s/d%03d" % (root, d)
    os.mkdir(p)
    for f in range(files):
        os.close(os.open("%s/f%03d" % (p, f), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
big = root + "/big"
os.mkdir(big)
for i in range(nbig):
    os.mkdir("%s/d%06d" % (big, i))
EOF

# Warm the cache, and count.
find_total=$(find "$tree" -mindepth 1 | wc -l)
# Read to the end (no per-directory budget), so the totals can be compared.
collect="rm -f $out/*.tar.gz; $bin collect -q --output-dir $out --only dirshape --dirshape-max-dir-time 0 --dirshape-root $tree"
side_by_side "dirshape $find_total entries (tmpfs)" "$collect" "find $tree -mindepth 1 | wc -l"
# As a customer runs it: a huge directory is left after its budget (0.5 s),
# known by its count so far and its inode's estimate.
bounded="rm -f $out/*.tar.gz; $bin collect -q --output-dir $out --only dirshape --dirshape-root $tree"
side_by_side "dirshape $find_total entries (tmpfs), default per-directory budget" "$bounded" "find $tree -mindepth 1 | wc -l"

rm -f "$out"/*.tar.gz
/usr/bin/time -f '%M' -o "$work/rss" "$bin" collect -q --output-dir "$out" --only dirshape --dirshape-max-dir-time 0 --dirshape-root "$tree" >/dev/null
b=$(ls "$out"/*.tar.gz | head -1)
bundle_file "$b" dirshape/shape.json >"$work/shape.json"
bundle_file "$b" manifest.json >"$work/manifest.json"
python3 - "$work/shape.json" "$work/manifest.json" "$find_total" "$(cat "$work/rss")" "$RESULTS_DIR/results.jsonl" <<'EOF'
import json, sys
shape = json.load(open(sys.argv[1])); man = json.load(open(sys.argv[2]))
find_total, tree_rss = int(sys.argv[3]), int(sys.argv[4])
r = shape["roots"][0]
c = [x for x in man["collectors"] if x["name"] == "dirshape"][0]
ok = r["total_entries"] == find_total and r["complete"]
print("entries: dirshape %d, find %d -> %s" % (r["total_entries"], find_total, "identical" if ok else "DIFFERENT"))
print("dirshape scan alone: %.0f ms (%.0f entries/s); collector %.0f ms" % (r["duration_ms"], r["entries_per_second"], c["duration_seconds"] * 1000))
print("largest directory: %s, %d entries, nlink %d" % (r["largest_dirs"][0]["path"], r["largest_dirs"][0]["entries"], r["largest_dirs"][0]["nlink"]))
print("peak RSS: whole process tree (GNU time, largest process) %d KiB; dirshape collector and its workers %d KiB (target < 65536)" % (tree_rss, c.get("max_rss_kib", 0)))
with open(sys.argv[5], "a") as f:
    f.write(json.dumps({"name": "dirshape %d entries (tmpfs) totals" % find_total, "dirshape_entries": r["total_entries"], "find_entries": find_total,
                        "scan_ms": r["duration_ms"], "peak_rss_kib": tree_rss, "collector_rss_kib": c.get("max_rss_kib", 0)}) + "\n")
if not ok:
    sys.exit(1)
EOF

echo
echo "mountprobe: 200 mounts of which 20 hang, probe deadline $PROBE_TIMEOUT, $MP_ROUNDS rounds"
(cd "$repo" && NODESNAP_BENCH_PROBE_TIMEOUT=$PROBE_TIMEOUT go test -run '^$' -bench '^BenchmarkMountprobe200$' \
	-benchtime "${MP_ROUNDS}x" -v ./collectors/mountprobe/) >"$work/mp.txt" 2>&1 || { cat "$work/mp.txt"; die "mountprobe benchmark failed"; }
grep -E 'round [0-9]+:|^BenchmarkMountprobe200' "$work/mp.txt" | sed 's/^ *//'
over=$(awk '/^BenchmarkMountprobe200/ { for (i = 1; i < NF; i++) if ($(i+1) == "s-over-deadline") print $i }' "$work/mp.txt")
echo "worst round: mountprobe took the probe deadline + ${over}s (target <= 1 s)"
echo "{\"name\":\"mountprobe 200 mounts, 20 hung\",\"probe_timeout\":\"$PROBE_TIMEOUT\",\"over_deadline_s\":${over:-null}}" >>"$RESULTS_DIR/results.jsonl"

echo "mountprobe: a kubelet pod volume hung, behind 200 hung FUSE mounts of another namespace (probe deadline 3s)"
(cd "$repo" && go test -run '^$' -bench '^BenchmarkMountprobeKubeletBehind200$' -benchtime 1x -v ./collectors/mountprobe/) >"$work/mpk.txt" 2>&1 || { cat "$work/mpk.txt"; die "mountprobe kubelet benchmark failed"; }
grep -E 'kubelet mount:|^BenchmarkMountprobeKubeletBehind200' "$work/mpk.txt" | sed 's/^ *//'
tohung=$(awk '/^BenchmarkMountprobeKubeletBehind200/ { for (i = 1; i < NF; i++) if ($(i+1) == "s-to-kubelet-hung") print $i }' "$work/mpk.txt")
echo "{\"name\":\"mountprobe kubelet mount behind 200 hung\",\"s_to_kubelet_hung\":${tohung:-null}}" >>"$RESULTS_DIR/results.jsonl"

echo "mountprobe: 200 hung FUSE mounts (200 stuck daemons) beside 50 healthy ones, probe deadline 3s (issue 17; target <= deadline + 2 s, every healthy mount probed)"
(cd "$repo" && go test -run '^$' -bench '^BenchmarkMountprobeHung200$' -benchtime "${MP_ROUNDS}x" -v ./collectors/mountprobe/) >"$work/mph.txt" 2>&1 || { cat "$work/mph.txt"; die "mountprobe 200-hung benchmark failed"; }
grep -E 'round [0-9]+:|^BenchmarkMountprobeHung200' "$work/mph.txt" | sed 's/^ *//'
overh=$(awk '/^BenchmarkMountprobeHung200/ { for (i = 1; i < NF; i++) if ($(i+1) == "s-over-deadline") print $i }' "$work/mph.txt")
echo "{\"name\":\"mountprobe 200 hung + 50 healthy\",\"probe_timeout\":\"3s\",\"over_deadline_s\":${overh:-null}}" >>"$RESULTS_DIR/results.jsonl"
