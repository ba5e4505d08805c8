# Shared helpers for the side-by-side benchmarks. Source it.
# Timing is wall-clock in milliseconds; every figure is a median of ROUNDS.
ROUNDS=${ROUNDS:-7}
RESULTS_DIR=${RESULTS_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bench-results}
mkdir -p "$RESULTS_DIR"
# Every script says on what it ran: a shared machine's load moves wall
# times more than most changes do.
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ)"

# nodesnap_bin builds the binary unless NODESNAP points at one.
nodesnap_bin() {
  if [ -n "${NODESNAP:-}" ] && [ -x "$NODESNAP" ]; then echo "$NODESNAP"; return; fi
  local root; root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  (cd "$root" && CGO_ENABLED=0 go build -o bin/nodesnap ./cmd/nodesnap) >&2 && echo "$root/bin/nodesnap"
}

# time_ms CMD...: run once, print elapsed milliseconds.
time_ms() {
  local s e
  s=$(date +%s%N)
  "$@" >/dev/null 2>&1
  e=$(date +%s%N)
  echo $(( (e - s) / 1000000 ))
}

# bundle_file BUNDLE PATH: the file PATH of a bundle (e.g. manifest.json,
# mounts/mounts.json) to stdout. A bundle's files are under one top-level
# directory named like the bundle; the pattern matches only there, so
# host/…/manifest.json is never taken for the bundle's own.
bundle_file() { tar -xzOf "$1" --wildcards --no-wildcards-match-slash "*/$2"; }

# median of the numbers on stdin.
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print 0} else if (NR%2) {print a[(NR+1)/2]} else {print int((a[NR/2]+a[NR/2+1])/2)}}'; }

# ratio A B: A/B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "inf"; else printf "%.2f", a / b }'; }

# side_by_side NAME "NODESNAP CMD" "REFERENCE CMD": alternate the two ROUNDS
# times (so drift on a shared machine hits both alike), print medians and ratio.
side_by_side() {
  local name=$1 ours=$2 ref=$3 a=() b=() i
  for ((i = 0; i < ROUNDS; i++)); do
    a+=("$(time_ms bash -c "$ours")")
    b+=("$(time_ms bash -c "$ref")")
  done
  local ma mb
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  printf '%-28s nodesnap %6d ms   reference %6d ms   ratio %s\n' "$name" "$ma" "$mb" "$(ratio "$ma" "$mb")"
  echo "{\"name\":\"$name\",\"nodesnap_ms\":$ma,\"reference_ms\":$mb,\"ratio\":$(ratio "$ma" "$mb"),\"rounds\":$ROUNDS}" >>"$RESULTS_DIR/results.jsonl"
}

# ab_rows DIR KEY NAME: the medians of DIR/KEY-new.runs (and, with
# BASELINE set, DIR/KEY-base.runs and the new/base ratios) as table rows,
# each runs file's lines "wall_ms cpu_ms rss_kib"; appends the new
# binary's medians to results.jsonl as NAME.
runs_col() { awk -v c="$1" '{ print $c }' "$2" | median; }
ab_rows() {
  local dir=$1 key=$2 name=$3 which f n o
  local bins=(new)
  [ -n "${BASELINE:-}" ] && bins+=(base)
  for which in "${bins[@]}"; do
    f=$dir/$key-$which.runs
    printf '%-9s %-9s %9d %9d %9d\n' "$key" "$which" "$(runs_col 1 "$f")" "$(runs_col 2 "$f")" "$(runs_col 3 "$f")"
  done
  n=$dir/$key-new.runs o=$dir/$key-base.runs
  if [ -n "${BASELINE:-}" ]; then
    printf '%-9s %-9s %9s %9s %9s\n' "$key" "new/base" "$(ratio "$(runs_col 1 "$n")" "$(runs_col 1 "$o")")" \
      "$(ratio "$(runs_col 2 "$n")" "$(runs_col 2 "$o")")" "$(ratio "$(runs_col 3 "$n")" "$(runs_col 3 "$o")")"
  fi
  echo "{\"name\":\"$name\",\"nodesnap_ms\":$(runs_col 1 "$n"),\"cpu_ms\":$(runs_col 2 "$n"),\"rss_kib\":$(runs_col 3 "$n"),\"rounds\":$ROUNDS}" >>"$RESULTS_DIR/results.jsonl"
}
