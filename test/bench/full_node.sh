#!/usr/bin/env bash
# The whole-node comparison of issue 10: a full `nodesnap collect` against
# `sos report --batch` on a sick node built on this machine (see
# test/faults/fullnode_test.go for the scenario). Needs root, FUSE, loop
# devices and Debian's sosreport package. ROUNDS=3 by default.
# env: ROUNDS=3 FULL_NS=100 FULL_ENTRIES=1000000 FULL_LINES=200000 (the node's size)
set -euo pipefail
# Before lib.sh, which would set its own default.
ROUNDS=${ROUNDS:-3}
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "test/bench/full_node.sh: needs root" >&2; exit 1; }
command -v sos >/dev/null || echo "test/bench/full_node.sh: sos not installed (apt-get install sosreport); nodesnap alone is measured" >&2
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
NODESNAP_BENCH_FULL=1 FULL_NS="${FULL_NS:-}" FULL_ENTRIES="${FULL_ENTRIES:-}" FULL_LINES="${FULL_LINES:-}" RESULTS_JSONL="$RESULTS_DIR/results.jsonl" ROUNDS="$ROUNDS" \
  go test -count=1 -timeout 60m -run '^TestBenchFullNode$' -v ./test/faults/ | grep -E 'fullnode_test|^(ok|FAIL|---)'
