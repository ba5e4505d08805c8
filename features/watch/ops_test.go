package watch

import (
	"fmt"
	"github.com/nodesnap/nodesnap/test/skip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// The directory scan finds .deleting~ directories where the kubelet makes
// them, never enters a volume directory, and stops at its bound.
func TestScanDirs(t *testing.T) {
	root := t.TempDir()
	vols := filepath.Join(root, "pods", "0b8f0f0c-uid", "volumes", "kubernetes.io~csi")
	for _, d := range []string{"pv1/mount", "pv2.deleting~123", "pv3.deleting~456/inner.deleting~9"} {
		if err := os.MkdirAll(filepath.Join(vols, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Inside a volume (a mountpoint): out of the scan's reach.
	if err := os.MkdirAll(filepath.Join(vols, "pv1", "mount", "x.deleting~1"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, err := scanDirs(DirsRequest{Root: root, Max: 1000})
	if err != nil {
		t.Fatal(err)
	}
	r := v.(DirsResult)
	if r.DeletingCount != 2 || len(r.Deleting) != 2 || r.Truncated {
		t.Errorf("scan = %+v, want the 2 .deleting~ volume directories", r)
	}
	v, err = scanDirs(DirsRequest{Root: root, Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(DirsResult); !r.Truncated || r.Entries != 2 {
		t.Errorf("bounded scan = %+v, want 2 entries and truncated", r)
	}
	v, err = scanDirs(DirsRequest{Root: root, Max: 1000, Skip: []string{filepath.Join(root, "pods", "0b8f0f0c-uid")}})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(DirsResult); r.DeletingCount != 0 {
		t.Errorf("scan skipping the pod = %+v", r)
	}
	if _, err := scanDirs(DirsRequest{Root: filepath.Join(root, "absent"), Max: 10}); err != nil {
		t.Errorf("a kubelet root without pods: %v", err)
	}
}

// The kernel log is read from its end on: the first call reports nothing,
// a line written after it is reported once, and a worker that starts
// over (its /dev/kmsg closed) does not report it again.
func TestReadKmsg(t *testing.T) {
	testkit.RequireRoot(t)
	kmsg, err := os.OpenFile("/dev/kmsg", os.O_WRONLY, 0)
	if err != nil {
		skip.Missing(t, "/dev/kmsg cannot be written: %v", err)
	}
	defer func() { _ = kmsg.Close() }()
	reset := func() {
		if kmsgFD >= 0 {
			_ = unix.Close(kmsgFD)
			kmsgFD = -1
		}
	}
	reset()
	t.Cleanup(reset)
	read := func(after uint64) KmsgResult {
		t.Helper()
		v, err := readKmsg(KmsgRequest{Path: "/dev/kmsg", After: after, Max: 100000})
		if err != nil {
			t.Fatal(err)
		}
		return v.(KmsgResult)
	}
	first := read(0)
	if len(first.Lines) != 0 || first.Last == 0 {
		t.Fatalf("first read: %d lines, last %d; want none, and the newest record's number", len(first.Lines), first.Last)
	}
	mark := fmt.Sprintf("nodesnap watch test %d", os.Getpid())
	if _, err := fmt.Fprintf(kmsg, "<7>%s\n", mark); err != nil {
		t.Fatal(err)
	}
	count := func(r KmsgResult) int {
		n := 0
		for _, l := range r.Lines {
			if strings.Contains(l, mark) {
				n++
			}
		}
		return n
	}
	second := read(first.Last)
	if count(second) != 1 || second.Last <= first.Last {
		t.Fatalf("second read: %q (last %d), want the marked line once", second.Lines, second.Last)
	}
	reset() // a new worker
	if third := read(second.Last); count(third) != 0 {
		t.Errorf("a new worker reported the marked line again: %q", third.Lines)
	}
}
