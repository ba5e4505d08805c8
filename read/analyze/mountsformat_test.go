package analyze_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/test/testkit/bundletest"
)

// Every reader of mounts.json reads format 1 (bundles before 2026-12-07)
// and formats 2 and 3 (each distinct table once; format 3's devices naming
// the namespaces of a table instead of repeating them) to the same result: analyze's
// whole report, over every fixture that has a mounts.json, with the
// tables before or after the namespaces, and with copies of a namespace
// that share one table.
func TestMountsFormat2ReadsAsFormat1(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "mounts", "mounts.json"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixture with a mounts.json: %v", err)
	}
	shared, byTable, heldByTable := 0, 0, 0
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(filepath.Dir(p)))
		v1, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		report := func(mountsJSON []byte) []byte {
			files := fixture(t, name)
			files[layout.MountsPath] = mountsJSON
			r := analyzeFiles(t, files)
			r.Bundle, r.BytesRead = "", 0 // a temporary file's name; the file's size
			b, err := json.MarshalIndent(r, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		check := func(what string, v1 []byte) {
			want := report(v1)
			for _, last := range []bool{false, true} {
				f2 := bundletest.MountsFormat2(t, v1, last)
				if got := report(f2); !bytes.Equal(got, want) {
					t.Errorf("%s, %s (tables last %v): format 2 reads differently: %s", name, what, last, firstDiff(got, want))
				}
			}
		}
		check("as it is", v1)
		if c := bundletest.MountsWithCopies(t, v1, 3); c != nil {
			var r layout.MountsReport
			if err := json.Unmarshal(bundletest.MountsFormat2(t, c, false), &r); err != nil {
				t.Fatal(err)
			}
			if len(r.Tables) > len(r.Namespaces)-3 {
				t.Errorf("%s: %d tables for %d namespaces of which 3 copies", name, len(r.Tables), len(r.Namespaces))
			}
			// Format 3: the copies' device entries are named, not written.
			for _, d := range r.Devices {
				if len(d.Tables) == 0 {
					continue
				}
				byTable++
				if d.OnlyOutsideHostNamespace {
					heldByTable++
				}
				for _, n := range d.Namespaces {
					for _, g := range d.Tables {
						if slices.Contains(g.Namespaces, n.Namespace) {
							t.Errorf("%s: device %s lists namespace %d both in full and by its table", name, d.Dev, n.Namespace)
						}
					}
				}
			}
			shared++
			check("with 3 copies of a namespace", c)
		}
	}
	if shared == 0 {
		t.Error("no fixture has a namespace besides the host's to copy")
	}
	if byTable == 0 || heldByTable == 0 {
		t.Errorf("%d devices name their namespaces by table, %d of them held only outside the host's namespace: the device index's format 3 is not tried", byTable, heldByTable)
	}
}

// firstDiff shows where two texts part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-300, 0)
	return "format 2 gives\n" + string(got[lo:min(i+300, len(got))]) + "\nwhere format 1 gives\n" + string(want[lo:min(i+300, len(want))])
}
