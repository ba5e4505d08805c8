package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/skip"
)

// InCI reports whether the tests run in CI, i.e. whether the environment
// variable CI holds a true value ("true", "1", ...). In CI a missing
// facility fails the test instead of skipping it.
func InCI() bool {
	return skip.InCI()
}

// missing skips the test, or fails it in CI, because a facility is missing.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	skip.Missing(t, "testkit: "+format, args...)
}

// RequireRoot skips the test unless it runs as root (effective uid 0).
// With CI=true it fails the test instead of skipping it.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		missing(t, "test needs root (euid is %d); run the tests with sudo", os.Geteuid())
	}
}

// RequireTool skips the test unless the named program is found in $PATH.
// With CI=true it fails the test instead of skipping it.
func RequireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		missing(t, "test needs the %q program, which is not in $PATH (%v)", name, err)
	}
}

// RequireFUSE skips the test unless FUSE can be used: root, the fuse and
// fusectl filesystems registered with the kernel, and /dev/fuse openable.
// With CI=true it fails the test instead of skipping it.
func RequireFUSE(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	for _, fs := range []string{"fuse", "fusectl"} {
		if !kernelHasFS(fs) {
			missing(t, "test needs the %q filesystem, which is not in /proc/filesystems (modprobe fuse)", fs)
		}
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		missing(t, "test needs /dev/fuse: %v", err)
		return
	}
	unix.Close(fd)
}

// RequireLoop skips the test unless loop devices can be used: root,
// /dev/loop-control, losetup and mkfs.ext4. With CI=true it fails instead.
func RequireLoop(t testing.TB) {
	t.Helper()
	RequireRoot(t)
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		missing(t, "test needs loop devices: %v (modprobe loop)", err)
	}
	RequireTool(t, "losetup")
	RequireTool(t, "mkfs.ext4")
	if !kernelHasFS("ext4") {
		missing(t, "test needs the ext4 filesystem, which is not in /proc/filesystems")
	}
}

// kernelHasFS reports whether /proc/filesystems lists the filesystem type.
func kernelHasFS(name string) bool {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := bytes.Fields(line)
		if len(f) > 0 && string(f[len(f)-1]) == name {
			return true
		}
	}
	return false
}
