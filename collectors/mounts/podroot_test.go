package mounts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// In a pod, the host's root is at /host and its /proc is the kernel's
// procfs at /host/proc. The mount tables read there are the kernel's own
// files: a worker started ahead of its first item (the collector's
// prestarted one) must resolve them inside --proc, as later workers do,
// not refuse them as a host path that leads into /proc. This is the pod
// layout in miniature: a root directory with a procfs mounted in it.
func TestMountsUnderARootWithItsOwnProc(t *testing.T) {
	testkit.RequireRoot(t)
	root := t.TempDir()
	proc := filepath.Join(root, "proc")
	if err := os.Mkdir(proc, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("proc", proc, "proc", 0, ""); err != nil {
		t.Fatalf("mounting a procfs in the test root: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(proc, unix.MNT_DETACH) })
	b := supervisortest.Collect(t, "mounts", collectors.Common{Root: root})
	if b.Res.Status != bundle.StatusOK {
		t.Fatalf("mounts under --root %s: %s (%s)", root, b.Res.Status, b.Res.Error)
	}
	if strings.Contains(b.Res.Error+b.Notes(), "leads into /proc") {
		t.Errorf("the kernel's mount tables were refused as a link into /proc:\n%s", b.Notes())
	}
}
