package testkit

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// MountTmpfs mounts a tmpfs at dir (created if missing; "" means a fresh
// directory under t.TempDir()) and returns its canonical path. data are
// mount options joined with commas (default "size=64m,mode=0755"). It is
// unmounted (lazily if busy) and verified gone on cleanup.
func MountTmpfs(t testing.TB, dir string, data ...string) string {
	t.Helper()
	RequireRoot(t)
	if dir == "" {
		dir = tempMountpoint(t, "tmpfs")
	}
	mp, created, err := prepareDir(dir)
	if err != nil {
		t.Fatalf("testkit: MountTmpfs: %v", err)
	}
	opts := "size=64m,mode=0755"
	if len(data) > 0 {
		opts = strings.Join(data, ",")
	}
	if err := unix.Mount("nodesnap-testkit", mp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		removeCreated(created)
		t.Fatalf("testkit: mount tmpfs at %s: %v", mp, err)
	}
	m, ok, err := lastMountAt(0, mp, func(m MountEntry) bool { return m.FSType == "tmpfs" })
	if err != nil || !ok {
		unix.Unmount(mp, unix.MNT_DETACH)
		removeCreated(created)
		t.Fatalf("testkit: tmpfs at %s not found in /proc/self/mountinfo (err=%v)", mp, err)
	}
	dev := unix.Mkdev(m.Major, m.Minor)
	registerScratchDev(dev)
	t.Cleanup(func() {
		unregisterScratchDev(dev)
		if err := unmountVerified(m.ID, mp); err != nil {
			t.Errorf("testkit: MountTmpfs cleanup: %v", err)
			return
		}
		removeCreated(created)
	})
	return mp
}
