package watch

import (
	"os"
	"path/filepath"
	"testing"
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
