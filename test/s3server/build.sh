#!/usr/bin/env bash
# Build the S3-compatible server the object-storage tests run against:
# SeaweedFS, from its module source as the Go module proxy serves it, into
# $NODESNAP_E2E_CACHE/seaweedfs/<version>/weed (default cache
# /var/cache/nodesnap-e2e, beside the e2e cluster's binaries). Nothing is
# done when the binary is already there. Prints the binary's path last.
#
# `go install module@version` refuses this module (its go.mod has replace
# directives), so the module's source is copied out of the module cache and
# built in place. Cold, the download and build took 38 minutes on a shared
# 2-core machine under heavy load (a 230 MB binary); a warm run does
# nothing.
set -euo pipefail
MODULE=github.com/seaweedfs/seaweedfs
VERSION="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"
CACHE="${NODESNAP_E2E_CACHE:-/var/cache/nodesnap-e2e}"
OUT="$CACHE/seaweedfs/$VERSION/weed"
GO="${GO:-go}"

if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$(dirname "$OUT")"
# One build at a time: two runs of this script wait for each other.
exec 9>"$(dirname "$OUT")/.build.lock"
flock 9
if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
dir=$("$GO" mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -n "$dir" ] && [ -d "$dir" ] || { echo "s3server: go mod download $MODULE@$VERSION gave no source directory" >&2; exit 1; }
src=$(mktemp -d)
trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT
cp -r "$dir/." "$src/"
chmod -R u+w "$src"
echo "s3server: building SeaweedFS $VERSION (tens of minutes cold on 2 cores)" >&2
(cd "$src" && CGO_ENABLED=0 "$GO" build -trimpath -o "$OUT.tmp" ./weed)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
