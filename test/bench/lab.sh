#!/usr/bin/env bash
# Issue 43's lab: a full `nodesnap collect`, warm and cold, on a quiet node
# whose /var/lib is an ext4 on a disk-backed loop device (a Docker volume
# with 70,000 empty subdirectories, 38 leaked .deleting~ directories), a
# hung ceph-fuse pod volume with a process named kubelet stuck in it, a
# loop device held only in a private mount namespace and a pod volume
# frozen with FIFREEZE (see test/faults/lab_test.go). Cold rounds run
# `sync; echo 3 > /proc/sys/vm/drop_caches` first (every cache of the
# machine: run it on a quiet one). Prints medians, CPU time, each
# collector's own duration and whether analyze names the huge directory
# and incident 001. Needs root, FUSE and loop devices.
# env: ROUNDS=3 COLD_ROUNDS=$ROUNDS LAB_ENTRIES=70000 LAB_NS=10 LAB_LINES=20000
#      LAB_HOLD=FILE (keep the lab up while FILE exists; the collect command is written in it)
#      LAB_BEFORE=BINARY (an earlier nodesnap, run in turn with this tree's, round by round)
#      LAB_ARGS="extra collect flags" (e.g. LAB_ARGS="--dirshape-max-dir-time 0")
set -euo pipefail
# Before lib.sh, which would set its own default.
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "test/bench/lab.sh: needs root" >&2; exit 1; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
state=$(mktemp)
# What the test did not undo (it was killed): thaw, unmount, detach.
undo() {
	[ -s "$state" ] || { rm -f "$state"; return; }
	echo "test/bench/lab.sh: undoing what the lab left behind" >&2
	while read -r what p; do
		case $what in
		frozen) if grep -q " $p " /proc/self/mountinfo; then fsfreeze -u "$p" 2>/dev/null || true; fi ;;
		esac
	done <"$state"
	tac "$state" | while read -r what p; do
		case $what in
		mount) if grep -q " $p " /proc/self/mountinfo; then umount -l "$p" 2>/dev/null || true; fi ;;
		esac
	done
	while read -r what p; do
		case $what in
		image) for dev in $(losetup -j "$p/ext4.img" -O NAME -n 2>/dev/null); do losetup -d "$dev" || true; done; rm -f "$p/ext4.img" ;;
		esac
	done <"$state"
	rm -f "$state"
}
trap undo EXIT
NODESNAP_BENCH_LAB=1 LAB_STATE="$state" RESULTS_JSONL="$RESULTS_DIR/results.jsonl" ROUNDS="$ROUNDS" \
  go test -count=1 -timeout 60m -run '^TestBenchLab$' -v ./test/faults/ | grep -E '^ +[a-z_]+\.go:[0-9]+:|^(ok|FAIL|---)'
