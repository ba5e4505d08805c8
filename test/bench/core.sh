#!/usr/bin/env bash
# Supervisor overhead: a collection with only host and processes against
# `ps -eLo pid,tid,stat,wchan,comm` on the same machine, and the run's own
# peak memory from the bundle's manifest.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bin=$(nodesnap_bin)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "core: $(nproc) cpus, $(ls -d /proc/[0-9]*/task/[0-9]* | wc -l) tasks, $ROUNDS rounds"
side_by_side "collect host,processes" \
  "rm -f $out/*.tar.gz; $bin collect -q --output-dir $out --only host,processes" \
  "ps -eLo pid,tid,stat,wchan,comm"
b=$(ls "$out"/*.tar.gz | head -1)
bundle_file "$b" manifest.json | python3 -c '
import json,sys
m=json.load(sys.stdin); r=m.get("resources",{})
print("peak RSS: supervisor %d KiB, largest child %d KiB" % (r.get("supervisor_max_rss_kib",0), r.get("largest_child_max_rss_kib",0)))
'
