package analyze_test

import (
	"encoding/json"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// A huge directory left at dirshape's per-directory budget is named from
// its inode's estimate: its count read so far is below the threshold, the
// estimate is past the critical one. A lower-bound count with no estimate
// (an older bundle) and a small estimate are not findings.
func TestHugeDirectoryFromInodeEstimate(t *testing.T) {
	const dir = "/var/lib/kubelet/pods/0a1b2c3d-1111-2222-3333-444455556666/volumes/kubernetes.io~empty-dir/cache"
	shape := func(d layout.DirShapeDir) map[string][]byte {
		rep := layout.DirShapeReport{Roots: []layout.DirShapeRoot{{Path: "/var/lib/kubelet/pods", Kind: "root", Status: layout.DirShapeComplete,
			CountsAreLowerBounds: true, StopReason: dir + " holds at least 31000 entries", Entries: 31000, Largest: []layout.DirShapeDir{d},
			NlinkAnomalies: []layout.DirShapeDir{}, Deleting: []layout.DeletingGroup{}}}}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{layout.ShapePath: b}
	}
	cut := layout.DirShapeDir{Path: dir, Entries: 31000, Subdirs: 0, InodeSize: 53 << 20, Nlink: 2, Partial: true,
		Count: layout.DirCountLowerBound, EstimatedEntries: 1_300_000, EstimateBasis: "ext4 directory size 53.0 MiB, 30-byte names", ReadSeconds: 0.5}
	r := analyzeFiles(t, shape(cut))
	f := only(t, r, "huge-directory")
	if f.Severity != analyze.Critical || f.Subject != dir {
		t.Errorf("severity %s subject %q", f.Severity, f.Subject)
	}
	wantIn(t, "summary", f.Summary, "about 1300000 by its inode and at least 31000 entries")

	old := cut
	old.Count, old.EstimatedEntries, old.EstimateBasis = "", 0, ""
	small := cut
	small.EstimatedEntries = 40_000
	exact := cut
	exact.Count, exact.Partial = layout.DirCountExact, false
	for name, d := range map[string]layout.DirShapeDir{"no estimate": old, "small estimate": small, "exact count": exact} {
		if fs := findings(analyzeFiles(t, shape(d)), "huge-directory"); len(fs) != 0 {
			t.Errorf("%s: %d huge-directory findings, want none: %+v", name, len(fs), fs)
		}
	}
}
