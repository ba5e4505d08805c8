#!/bin/sh
# nodesnap's package, before removal: stop and disable its systemd units, so
# that removing the package leaves no enabled timer or service pointing at a
# binary that is gone. An upgrade keeps them as the admin set them.
# deb calls this with "remove" (or "upgrade"); rpm with the number of copies
# left after the erase ("0" on removal, "1" on upgrade).
set -e
case "$1" in
  remove | purge | 0) ;;
  *) exit 0 ;;
esac
units="nodesnap.timer nodesnap.service nodesnap-watch.service"
command -v systemctl >/dev/null 2>&1 || exit 0
if [ -d /run/systemd/system ]; then
  systemctl stop $units >/dev/null 2>&1 || true
fi
# disable works without a running systemd (a chroot, a container build):
# it removes the links that enable created.
systemctl --no-reload disable $units >/dev/null 2>&1 || true
exit 0
