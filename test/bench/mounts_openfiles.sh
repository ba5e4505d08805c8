#!/usr/bin/env bash
# Benchmark of the mounts and openfiles collectors against the commands an
# expert would run by hand (issue 3):
#
#   mounts    vs  cat /proc/*/task/*/mountinfo > /dev/null   (target <= 0.3x)
#   openfiles vs  lsof -n -P -w > /dev/null                  (target <= 0.25x)
#
# It builds nodesnap, then creates the scenario: an ext4 image on a loop
# device mounted under a temporary directory, a few processes holding it
# (open fd, cwd), and NS processes each in a private mount namespace
# (unshare -m) with THREADS threads, so the node has >= NS*THREADS tasks in
# >= NS mount namespaces. Each side is run ROUNDS times, alternating; the
# script prints the medians of wall time, the collector's own duration from
# the manifest, peak RSS (largest process of the tree, GNU time %M), the
# ratios, and checks that openfiles and lsof name the same holders of the
# loop device. Everything it created is removed on exit; it kills only the
# pids it started.
#
# Usage: sudo test/bench/mounts_openfiles.sh
#   env: ROUNDS=7 NS=100 THREADS=20 HOLDERS=5 EXTRA_MOUNTS=0
#        OUTDIR=<dir for the bundles>
#        NODESNAP=<binary to measure> (default: built from this checkout)
#        BASELINE=<an earlier nodesnap binary>: measured in the same rounds,
#          alternating with NODESNAP, its rows printed beside (build one with
#          `git worktree add /tmp/old REV && (cd /tmp/old && go build -o /tmp/nodesnap-old ./cmd/nodesnap)`)
set -eu
. "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-7}
NS=${NS:-100}
THREADS=${THREADS:-20}
HOLDERS=${HOLDERS:-5}
# EXTRA_MOUNTS tmpfs mounts are added on the host before the namespaces
# are made (a kubelet node has hundreds: every pod's secrets and volumes),
# so every namespace's table grows by that many lines.
EXTRA_MOUNTS=${EXTRA_MOUNTS:-0}

die() { echo "bench: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (loop devices, mount namespaces)"
for t in go unshare losetup mkfs.ext4 mount umount lsof jq tar; do
	command -v "$t" >/dev/null || die "missing $t${t:+ (lsof: apt-get install -y lsof)}"
done
[ -x /usr/bin/time ] || die "missing /usr/bin/time (GNU time)"

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/nodesnap-bench.XXXXXX)
pids=()
loopdev=""
mnt="$work/mnt"

cleanup() {
	set +e
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt"; fi
	if mountpoint -q "$work/ram" 2>/dev/null; then umount "$work/ram"; fi
	for d in "$work"/extra/*; do
		mountpoint -q "$d" 2>/dev/null && umount "$d"
	done
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	rm -rf "$work"
	[ -n "${OUTDIR:-}" ] && rm -f "$OUTDIR"/nodesnap-*.tar.gz
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== building nodesnap and the thread holder"
if [ -n "${NODESNAP:-}" ]; then
	cp "$NODESNAP" "$work/nodesnap"
else
	(cd "$repo" && CGO_ENABLED=0 go build -o "$work/nodesnap" ./cmd/nodesnap)
fi
BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ]; then
	[ -x "$BASELINE" ] || die "BASELINE=$BASELINE is not an executable"
	cp "$BASELINE" "$work/baseline"
fi
mkdir -p "$work/holder"
cat >"$work/holder/main.go" <<'EOF'
// holder keeps N threads alive (N-1 goroutines locked to their threads)
// until killed.
package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// sleep blocks in a system call forever (a channel receive would trip the
// runtime's deadlock detector).
func sleep() {
	for {
		syscall.Select(0, nil, nil, nil, nil)
	}
}

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	for i := 1; i < n; i++ {
		go func() { runtime.LockOSThread(); sleep() }()
	}
	runtime.LockOSThread()
	sleep()
}
EOF
(cd "$work/holder" && cat >go.mod <<'EOF'
module holder
go 1.21
EOF
CGO_ENABLED=0 go build -o "$work/thread-holder" .)

echo "== scenario: loop ext4, $HOLDERS fd + $HOLDERS cwd holders, $EXTRA_MOUNTS extra mounts, $NS namespaces x $THREADS threads"
truncate -s 64M "$work/ext4.img"
mkfs.ext4 -q -F "$work/ext4.img"
loopdev=$(losetup --find --show "$work/ext4.img")
mkdir -p "$mnt"
mount "$loopdev" "$mnt"
mkdir -p "$mnt/dir"
echo data >"$mnt/dir/file"
majmin=$(cat "/sys/block/$(basename "$loopdev")/dev")
for i in $(seq "$HOLDERS"); do
	sh -c 'exec 3<"$1"; exec sleep infinity' sh "$mnt/dir/file" &
	pids+=($!)
	sh -c 'cd "$1" && exec sleep infinity' sh "$mnt/dir" &
	pids+=($!)
done
for i in $(seq "$EXTRA_MOUNTS"); do
	mkdir -p "$work/extra/$i"
	mount -t tmpfs -o size=1m bench-extra "$work/extra/$i"
done
for i in $(seq "$NS"); do
	unshare --mount --propagation private "$work/thread-holder" "$THREADS" &
	pids+=($!)
done
# Wait until every namespace holder runs all its threads.
for p in "${pids[@]}"; do
	for _ in $(seq 500); do
		n=$(ls "/proc/$p/task" 2>/dev/null | wc -l)
		comm=$(cat "/proc/$p/comm" 2>/dev/null || true)
		case "$comm" in
		thread-holder) [ "$n" -ge "$THREADS" ] && break ;;
		sleep) break ;;
		esac
		sleep 0.01
	done
done
tasks=$( (ls -d /proc/[0-9]*/task/[0-9]* 2>/dev/null || true) | wc -l)
nss=$(for t in /proc/[0-9]*/task/[0-9]*; do readlink "$t/ns/mnt" 2>/dev/null || true; done | sort -u | wc -l)
echo "   tasks on the node: $tasks, mount namespaces: $nss, mounts in the host namespace: $(wc -l </proc/self/mountinfo), loop device $loopdev ($majmin)"

# OUTDIR puts the bundles elsewhere (a tmpfs, say, to take the disk's
# metadata speed out of the figures).
out=${OUTDIR:-$work/out}
mkdir -p "$out"
rm -f "$out"/*.tar.gz
# The same collections are also run with the bundle on a tmpfs: cat writes
# nothing, and on some disks creating files dominates. This VM's root is
# ext4 without a journal, where allocating an inode skips every inode
# freed in the last five minutes (recently_deleted()): back-to-back runs
# that create and delete ~100 staging files each make creation ms-slow.
ram=$work/ram
mkdir -p "$ram"
mount -t tmpfs -o size=1g nodesnap-bench "$ram"
# measure NAME CMD...: appends "wall_ms rss_kb cpu_ms" to $work/NAME. CPU
# is user+system time of the whole process tree: on a busy machine it
# says more than wall time.
measure() {
	local name=$1
	shift
	local t0 t1
	t0=$(date +%s%N)
	/usr/bin/time -f "%M %U %S" -o "$work/time.tmp" "$@" >/dev/null 2>"$work/stderr.tmp" || true
	t1=$(date +%s%N)
	tail -1 "$work/time.tmp" | awk -v w=$(((t1 - t0) / 1000000)) '{printf "%d %d %d\n", w, $1, ($2 + $3) * 1000}' >>"$work/$name"
}
# nodesnap_run NAME COLLECTOR [DIR [BINARY]]: one collection with the
# bundle in DIR (default $out), plus the collector's own duration (ms) from
# the manifest into $work/NAME.own.
nodesnap_run() {
	local name=$1 coll=$2 dir=${3:-$out} bin=${4:-$work/nodesnap}
	rm -f "$dir"/*.tar.gz
	measure "$name" "$bin" collect --only "$coll" --output-dir "$dir" -q --timeout 120s
	local b
	b=$(ls "$dir"/*.tar.gz)
	bundle_file "$b" manifest.json | jq -r --arg c "$coll" '.collectors[] | select(.name==$c) | "\(.duration_seconds * 1000 | floor) \(.status)"' >>"$work/$name.own"
	cp "$b" "$work/last-$name.tar.gz"
}
catmi() { cat /proc/*/task/*/mountinfo >/dev/null 2>&1 || true; }
export -f catmi

echo "== $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	measure cat bash -c catmi
	nodesnap_run mounts mounts
	nodesnap_run floor host
	nodesnap_run mounts_ram mounts "$ram"
	nodesnap_run floor_ram host "$ram"
	measure lsof lsof -n -P -w
	nodesnap_run openfiles openfiles
	if [ -n "$BASELINE" ]; then
		nodesnap_run base_mounts mounts "$out" "$work/baseline"
		nodesnap_run base_floor host "$out" "$work/baseline"
		nodesnap_run base_floor_ram host "$ram" "$work/baseline"
		nodesnap_run base_openfiles openfiles "$out" "$work/baseline"
	fi
	printf '   round %d done\n' "$r"
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print int((a[NR/2]+a[NR/2+1])/2)}'; }
col() { awk -v c="$2" '{print $c}' "$work/$1"; }
m_cat=$(col cat 1 | median)
m_mounts=$(col mounts 1 | median)
m_mounts_own=$(col mounts.own 1 | median)
m_lsof=$(col lsof 1 | median)
m_of=$(col openfiles 1 | median)
m_of_own=$(col openfiles.own 1 | median)
m_floor=$(col floor 1 | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.2f", a / b }'; }

c_cat=$(col cat 3 | median)
c_mounts=$(col mounts 3 | median)
c_lsof=$(col lsof 3 | median)
c_of=$(col openfiles 3 | median)
echo
echo "medians of $ROUNDS rounds; own ms = the collector's duration in the manifest; CPU = user+sys of the whole tree"
printf '%-36s %9s %8s %8s %12s\n' "command" "wall ms" "own ms" "CPU ms" "peak RSS KB"
printf '%-36s %9s %8s %8s %12s\n' "cat /proc/*/task/*/mountinfo" "$m_cat" "-" "$c_cat" "$(col cat 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "nodesnap collect --only mounts" "$m_mounts" "$m_mounts_own" "$c_mounts" "$(col mounts 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "nodesnap collect --only host (floor)" "$m_floor" "$(col floor.own 1 | median)" "$(col floor 3 | median)" "$(col floor 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "  same, mounts, bundle on tmpfs" "$(col mounts_ram 1 | median)" "$(col mounts_ram.own 1 | median)" "$(col mounts_ram 3 | median)" "$(col mounts_ram 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "  same, host (floor), bundle on tmpfs" "$(col floor_ram 1 | median)" "$(col floor_ram.own 1 | median)" "$(col floor_ram 3 | median)" "$(col floor_ram 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "lsof -n -P -w" "$m_lsof" "-" "$c_lsof" "$(col lsof 2 | median)"
printf '%-36s %9s %8s %8s %12s\n' "nodesnap collect --only openfiles" "$m_of" "$m_of_own" "$c_of" "$(col openfiles 2 | median)"
if [ -n "$BASELINE" ]; then
	printf '%-36s %9s %8s %8s %12s\n' "baseline: collect --only mounts" "$(col base_mounts 1 | median)" "$(col base_mounts.own 1 | median)" "$(col base_mounts 3 | median)" "$(col base_mounts 2 | median)"
	printf '%-36s %9s %8s %8s %12s\n' "baseline: collect --only host" "$(col base_floor 1 | median)" "$(col base_floor.own 1 | median)" "$(col base_floor 3 | median)" "$(col base_floor 2 | median)"
	printf '%-36s %9s %8s %8s %12s\n' "baseline:   same, bundle on tmpfs" "$(col base_floor_ram 1 | median)" "$(col base_floor_ram.own 1 | median)" "$(col base_floor_ram 3 | median)" "$(col base_floor_ram 2 | median)"
	printf '%-36s %9s %8s %8s %12s\n' "baseline: collect --only openfiles" "$(col base_openfiles 1 | median)" "$(col base_openfiles.own 1 | median)" "$(col base_openfiles 3 | median)" "$(col base_openfiles 2 | median)"
fi
echo
echo "floor = a run of the smallest collector: six processes started (the supervisor, three workers of its own, the collector and its worker), a bundle written and fsynced"
echo "mounts/cat     wall $(ratio "$m_mounts" "$m_cat")x, collector alone $(ratio "$m_mounts_own" "$m_cat")x, CPU $(ratio "$c_mounts" "$c_cat")x (target <= 0.3)"
echo "mounts/cat, bundle on tmpfs: wall $(ratio "$(col mounts_ram 1 | median)" "$m_cat")x, collector alone $(ratio "$(col mounts_ram.own 1 | median)" "$m_cat")x, CPU $(ratio "$(col mounts_ram 3 | median)" "$c_cat")x"
echo "openfiles/lsof wall $(ratio "$m_of" "$m_lsof")x, collector alone $(ratio "$m_of_own" "$m_lsof")x, CPU $(ratio "$c_of" "$c_lsof")x (target <= 0.25)"
if [ -n "$BASELINE" ]; then
	echo "baseline mounts/cat      wall $(ratio "$(col base_mounts 1 | median)" "$m_cat")x, collector alone $(ratio "$(col base_mounts.own 1 | median)" "$m_cat")x"
	echo "baseline openfiles/lsof  wall $(ratio "$(col base_openfiles 1 | median)" "$m_lsof")x, collector alone $(ratio "$(col base_openfiles.own 1 | median)" "$m_lsof")x"
	echo "floor now/baseline       wall $(ratio "$m_floor" "$(col base_floor 1 | median)")x, bundle on tmpfs $(ratio "$(col floor_ram 1 | median)" "$(col base_floor_ram 1 | median)")x"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "collector statuses: mounts $(col mounts.own 2 | sort | uniq -c | xargs), openfiles $(col openfiles.own 2 | sort | uniq -c | xargs)"

echo
echo "== checks"
# Every run must have given its collector's own duration: an empty or zero
# figure means the manifest was not read (the bench itself is broken).
for n in mounts openfiles floor; do
	[ "$(wc -l <"$work/$n.own")" = "$ROUNDS" ] || die "the manifest of $n gave no collector duration in some rounds"
done
grep -qv ' ok$' "$work/mounts.own" "$work/openfiles.own" && echo "note: a collector was not ok in some round (statuses above)"
found_ns=$(bundle_file "$work/last-mounts.tar.gz" mounts/mounts.json | jq '.namespaces | length')
found_tasks=$(bundle_file "$work/last-mounts.tar.gz" mounts/mounts.json | jq '.tasks')
# Every namespace's mounts: another process's namespace with thousands of
# mounts on a shared machine changes the figures more than the load does.
# (format 2 keeps each distinct table once: a namespace naming one has
# as many mounts as its mount_ids runs count)
found_mounts=$(bundle_file "$work/last-mounts.tar.gz" mounts/mounts.json | jq '[.namespaces[] | if .table then ([.mount_ids[][1]] | add) else (.mounts // [] | length) end] | add')
# (format 3 names a shared table's namespaces under a device's tables)
loop_ns=$(bundle_file "$work/last-mounts.tar.gz" mounts/mounts.json | jq --arg d "$majmin" '[.devices[] | select(.dev==$d) | (.namespaces | length), ([.tables[]?.namespaces | length] | add // 0)] | add')
echo "mounts: $found_ns namespaces, $found_tasks tasks, $found_mounts mounts in all; $loopdev mounted in $loop_ns namespaces"
# mounts_size BUNDLE: "<mounts.json bytes> bytes (format <n>, <t> distinct
# tables), raw tables <mountinfo*.txt bytes> bytes"
mounts_size() {
	local j raw
	j=$(bundle_file "$1" mounts/mounts.json | wc -c)
	raw=$(tar -tzvf "$1" | awk '$NF ~ /\/mounts\/mountinfo(-[0-9]+)?\.txt$/ || $NF ~ /\/mounts\/ns\// {s += $3} END {print s + 0}')
	echo "$j bytes ($(bundle_file "$1" mounts/mounts.json | jq -r '"format \(.format // 1), \(.tables // [] | length) distinct tables"')), raw tables $raw bytes"
}
echo "mounts.json: $(mounts_size "$work/last-mounts.tar.gz")"
if [ -n "$BASELINE" ]; then
	echo "baseline mounts.json: $(mounts_size "$work/last-base_mounts.tar.gz")"
fi
maj=${majmin%%:*}
min=${majmin##*:}
hexdev=$(printf '0x%x' $(((maj << 8) | min)))
{ lsof -n -P -w -F pD 2>/dev/null || true; } | awk -v d="$hexdev" '/^p/ {p=substr($0,2)} /^D/ && substr($0,2)==d {print p}' | sort -un >"$work/lsof.holders"
bundle_file "$work/last-openfiles.tar.gz" openfiles/holders.json | jq -r --arg d "$majmin" '.devices[] | select(.dev==$d) | .holders[].pid' | sort -un >"$work/nodesnap.holders"
if cmp -s "$work/lsof.holders" "$work/nodesnap.holders"; then
	echo "holders of $majmin: same set from lsof and openfiles ($(wc -l <"$work/lsof.holders") pids)"
else
	echo "holders of $majmin DIFFER: lsof-only: $(comm -23 "$work/lsof.holders" "$work/nodesnap.holders" | xargs) openfiles-only: $(comm -13 "$work/lsof.holders" "$work/nodesnap.holders" | xargs)"
	exit 1
fi
