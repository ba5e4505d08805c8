#!/bin/sh
# nodesnap's package, after removal: let a running systemd forget the
# units that were removed with it.
set -e
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
