package diff

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// shapeJSON is a dirshape report of one root whose largest directory
// holds entries, counted exactly, or (lower) only to the scan's budget,
// with the inode's estimate.
func shapeJSON(t *testing.T, entries, estimate uint64, lower bool) string {
	t.Helper()
	d := layout.DirShapeDir{Path: "/var/lib/kubelet/pods/u1/volumes/x/data", Entries: entries, Count: layout.DirCountExact}
	if lower {
		d.Count, d.Partial, d.EstimatedEntries, d.EstimateBasis = layout.DirCountLowerBound, true, estimate, "inode size"
	}
	root := layout.DirShapeRoot{Path: "/var/lib/kubelet", Kind: "root", Complete: !lower, CountsAreLowerBounds: lower, Largest: []layout.DirShapeDir{d}}
	raw, err := json.Marshal(layout.DirShapeReport{Roots: []layout.DirShapeRoot{root}})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func dirsOf(t *testing.T, shape string) *Snapshot {
	t.Helper()
	s := &Snapshot{Dirs: map[string]uint64{}, Deleting: map[string]uint64{}}
	if err := s.readShape(strings.NewReader(shape)); err != nil {
		t.Fatal(err)
	}
	return s
}

// dirshape stops reading a huge directory at its budget and says its
// count is a lower bound, with the inode's estimate beside it. The diff
// compares the best figures (the estimate when larger) and says "at
// least"; before, it compared the cut counts as if exact, so a directory
// that grew from 600,000 to 1,200,000 entries while the budget stopped at
// 500,000 both times was not reported, and a cut count read as the size.
func TestDirGrowthLowerBounds(t *testing.T) {
	const dir = "/var/lib/kubelet/pods/u1/volumes/x/data"
	cases := []struct {
		name             string
		old, new         string
		want             bool
		wantOld, wantNew uint64
		text             string
	}{
		{"exact, then cut by the budget", shapeJSON(t, 60000, 0, false), shapeJSON(t, 500000, 1200000, true), true, 60000, 1200000,
			"60000 → at least 1200000"},
		{"cut at the same count twice, the inode grew", shapeJSON(t, 500000, 600000, true), shapeJSON(t, 500000, 1200000, true), true, 600000, 1200000,
			"at least 600000 → at least 1200000"},
		{"cut at the same count twice, no estimate", shapeJSON(t, 500000, 0, true), shapeJSON(t, 500000, 0, true), false, 0, 0, ""},
		{"exact both times", shapeJSON(t, 1000, 0, false), shapeJSON(t, 70000, 0, false), true, 1000, 70000, "     1000 → 70000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := dirsOf(t, c.old), dirsOf(t, c.new)
			d := &Diff{}
			compareDirs(d, a, b)
			if !c.want {
				if len(d.DirGrowth) != 0 {
					t.Fatalf("growth reported: %+v", d.DirGrowth)
				}
				return
			}
			if len(d.DirGrowth) != 1 || d.DirGrowth[0].Name != dir || d.DirGrowth[0].Old != c.wantOld || d.DirGrowth[0].New != c.wantNew {
				t.Fatalf("growth %+v, want %s %d → %d", d.DirGrowth, dir, c.wantOld, c.wantNew)
			}
			var out strings.Builder
			if err := WriteText(&out, d, 200); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), c.text) {
				t.Errorf("the text diff does not say %q:\n%s", c.text, out.String())
			}
			if exact := !strings.Contains(c.text, "at least"); exact && strings.Contains(out.String(), "at least") {
				t.Errorf("exact counts said to be lower bounds:\n%s", out.String())
			}
		})
	}
}
