package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/skip"
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
// over (its log reopened) does not report it again. Lines are written to a
// private stand-in of the device, never into the machine's real kernel log.
func TestReadKmsg(t *testing.T) {
	reset := func() {
		if kmsgFD >= 0 {
			_ = unix.Close(kmsgFD)
			kmsgFD = -1
		}
	}
	reset()
	t.Cleanup(reset)
	k := testkit.StartKmsg(t)
	read := func(path string, after uint64) KmsgResult {
		t.Helper()
		v, err := readKmsg(KmsgRequest{Path: path, After: after, Max: 100000})
		if err != nil {
			t.Fatal(err)
		}
		return v.(KmsgResult)
	}
	first := read(k.Path, 0)
	if len(first.Lines) != 0 || first.Last == 0 {
		t.Fatalf("first read: %d lines, last %d; want none, and the newest record's number", len(first.Lines), first.Last)
	}
	mark := fmt.Sprintf("nodesnap watch test %d", os.Getpid())
	seq := k.Write(t, 7, mark)
	second := read(k.Path, first.Last)
	if len(second.Lines) != 1 || !strings.Contains(second.Lines[0], mark) || second.Last != seq {
		t.Fatalf("second read: %q (last %d), want the marked line once, last %d", second.Lines, second.Last, seq)
	}
	if third := read(k.Path, second.Last); len(third.Lines) != 0 {
		t.Errorf("the marked line reported again: %q", third.Lines)
	}
}

// On the real device, read only: a first pass learns the newest record's
// number and reports nothing; a new worker asked for what came after an
// earlier number reads the ring again from its start and reports only the
// records past that number, so a replaced worker neither loses nor repeats.
func TestReadKmsgDevice(t *testing.T) {
	testkit.RequireRoot(t)
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
			skip.Missing(t, "/dev/kmsg cannot be read: %v", err)
		}
		return v.(KmsgResult)
	}
	first := read(0)
	if len(first.Lines) != 0 || first.Last < 3 {
		t.Fatalf("first read: %d lines, last %d; want none, and the newest record's number", len(first.Lines), first.Last)
	}
	reset() // a new worker, asked for the last two records
	second := read(first.Last - 2)
	if len(second.Lines) < 2 || second.Last < first.Last {
		t.Fatalf("a new worker after record %d: %d lines (last %d), want the 2 records after it at least", first.Last-2, len(second.Lines), second.Last)
	}
	reset()
	third := read(second.Last)
	for _, l := range third.Lines {
		for _, seen := range second.Lines {
			if l == seen {
				t.Errorf("a new worker after record %d reported %q again", second.Last, l)
			}
		}
	}
}
