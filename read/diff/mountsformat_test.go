package diff_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/test/testkit/bundletest"
)

// diff reads mounts.json of format 1 (bundles before 2026-12-07) and of
// format 2 (each distinct table once, the host's named by its hash) to the
// same snapshot: the host's mounts, the devices mounted only outside it,
// and analyze's findings.
func TestMountsFormat2SnapshotAsFormat1(t *testing.T) {
	ps, err := filepath.Glob(filepath.Join("..", "analyze", "testdata", "*", "mounts", "mounts.json"))
	if err != nil || len(ps) == 0 {
		t.Fatalf("no fixture with a mounts.json: %v", err)
	}
	for _, p := range ps {
		name := filepath.Base(filepath.Dir(filepath.Dir(p)))
		v1, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		snap := func(mountsJSON []byte) (hostMounts, foreign map[string]string, findings []byte) {
			files := fixture(t, name)
			files[layout.MountsPath] = mountsJSON
			s := load(t, makeBundle(t, files, bundleOpts{}))
			b, err := json.Marshal(s.Report.Findings)
			if err != nil {
				t.Fatal(err)
			}
			return s.HostMounts, s.ForeignDevices, b
		}
		h1, f1, r1 := snap(v1)
		if len(h1) == 0 {
			t.Errorf("%s: no host mounts read from format 1", name)
		}
		for _, last := range []bool{false, true} {
			h2, f2, r2 := snap(bundletest.MountsFormat2(t, v1, last))
			if !maps.Equal(h1, h2) || !maps.Equal(f1, f2) || string(r1) != string(r2) {
				t.Errorf("%s (tables last %v): format 2 host mounts %v, foreign devices %v; format 1 %v, %v; findings equal %v",
					name, last, h2, f2, h1, f1, string(r1) == string(r2))
			}
		}
	}
}
