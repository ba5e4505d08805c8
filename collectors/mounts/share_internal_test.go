package mounts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/engine/isolate"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// renumbered is table with its mount IDs moved by delta (parents inside
// the table with them) and the parents outside it set to root: what
// `unshare --mount` of the same namespace gives.
func renumbered(t *testing.T, table []byte, delta, root int) []byte {
	t.Helper()
	ids := map[string]bool{}
	lines := strings.SplitAfter(string(table), "\n")
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 {
			ids[f[0]] = true
		}
	}
	var b strings.Builder
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		if len(f) < 3 {
			b.WriteString(l)
			continue
		}
		id, _ := strconv.Atoi(f[0])
		parent, _ := strconv.Atoi(f[1])
		if ids[f[1]] {
			parent += delta
		} else {
			parent = root
		}
		fmt.Fprintf(&b, "%d %d %s", id+delta, parent, f[2])
	}
	return []byte(b.String())
}

func parsed(t *testing.T, raw []byte) []layout.NamespaceMount {
	t.Helper()
	ms, bad := procfs.ParseMountInfo(raw)
	if len(bad) > 0 {
		t.Fatalf("bad lines: %v", bad)
	}
	out := make([]layout.NamespaceMount, len(ms))
	for i, m := range ms {
		out[i] = layout.NamespaceMount{Mount: m, PropagationType: PropagationType(m.Propagation), Class: procfs.Classify(m).String()}
	}
	return out
}

// Tables the same but for their mount IDs have one shape; a different
// tree, line or number of lines is another; what cannot be numbered is
// not shared.
func TestShapeOf(t *testing.T) {
	host, err := os.ReadFile(filepath.Join("testdata", "mounts", "host.mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	share := newTableShare(0)
	shapeOf := share.shapeOf
	a, ok := shapeOf(host)
	if !ok {
		t.Fatal("the host's table has no shape")
	}
	b, ok := shapeOf(renumbered(t, host, 5000, 4999))
	if !ok || b.hash != a.hash {
		t.Errorf("a renumbered copy: hash %q (ok %v), want %q", b.hash, ok, a.hash)
	}
	if len(b.ids) != strings.Count(string(host), "\n") || b.ids[0] != a.ids[0]+5000 || len(b.rootParents) != len(a.rootParents) || b.rootParents[0] != 4999 {
		t.Errorf("copy's numbers: ids %v, root parents %v (original: %v, %v)", b.ids, b.rootParents, a.ids, a.rootParents)
	}
	// The second mount re-parented under the third: same lines, another
	// tree.
	lines := strings.SplitAfter(string(host), "\n")
	f1 := strings.SplitN(lines[1], " ", 3)
	f2 := strings.SplitN(lines[2], " ", 3)
	moved := strings.Join(append([]string{lines[0], f1[0] + " " + f2[0] + " " + f1[2]}, lines[2:]...), "")
	if c, ok := shapeOf([]byte(moved)); !ok || c.hash == a.hash {
		t.Errorf("another tree: hash %q (ok %v), the same as the original's", c.hash, ok)
	}
	if c, ok := shapeOf([]byte(strings.Replace(string(host), "rw", "ro", 1))); !ok || c.hash == a.hash {
		t.Error("another line: the same hash")
	}
	if c, ok := shapeOf([]byte(strings.Join(lines[:len(lines)-2], "") + "\n")); !ok || c.hash == a.hash {
		t.Error("a line fewer: the same hash")
	}
	// Another run's key: another name for the same table, so a hash
	// in a bundle cannot be matched against guessed tables.
	if c, ok := newTableShare(0).shapeOf(host); !ok || c.hash == a.hash || len(c.hash) != 32 {
		t.Errorf("another run's hash of the same table: %q (ok %v), this run's %q", c.hash, ok, a.hash)
	}
	for _, raw := range []string{"", "x 1 0:1 / / rw - tmpfs t rw\n", "5 1 0:1 / / rw - tmpfs t rw\n5 5 0:2 / /a rw - tmpfs t rw\n", "5\n", "-5 1 0:1 / / rw - tmpfs t rw\n"} {
		if _, ok := shapeOf([]byte(raw)); ok {
			t.Errorf("%q: shared", raw)
		}
	}
}

// The shared path gives every namespace the mounts that parsing its own
// table gives, whichever copy arrives first; the tables come once each,
// the host's first.
func TestTableShareIsParsing(t *testing.T) {
	host, err := os.ReadFile(filepath.Join("testdata", "mounts", "host.mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(filepath.Join("testdata", "mounts", "node-exporter.mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	raws := [][]byte{host, renumbered(t, host, 1000, 999), other, renumbered(t, host, 2000, 1999), renumbered(t, other, 3000, 2999)}
	for _, arrival := range [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {3, 0, 4, 2, 1}} {
		share := newTableShare(len(raws))
		nss := make([]layout.MountNamespace, len(raws))
		for _, i := range arrival {
			if s, ok := share.shapeOf(raws[i]); ok && share.known(i, s) {
				continue
			}
			nss[i].Mounts = parsed(t, raws[i])
			share.keep(i, nss[i].Mounts, true)
		}
		tables, err := share.finish(nss)
		if err != nil {
			t.Fatal(err)
		}
		for i, raw := range raws {
			if want := parsed(t, raw); !reflect.DeepEqual(nss[i].Mounts, want) {
				t.Errorf("arrival %v, namespace %d: mounts differ from its table's parse", arrival, i)
			}
		}
		if len(tables) != 2 || tables[0].Hash != nss[0].Table || tables[1].Hash != nss[2].Table ||
			nss[1].Table != nss[0].Table || nss[3].Table != nss[0].Table || nss[4].Table != nss[2].Table {
			t.Errorf("arrival %v: %d tables, namespaces name %q %q %q %q %q", arrival, len(tables),
				nss[0].Table, nss[1].Table, nss[2].Table, nss[3].Table, nss[4].Table)
		}
		if !reflect.DeepEqual(tables[0].Mounts, parsed(t, host)) {
			t.Errorf("arrival %v: the first table is not numbered as its first namespace", arrival)
		}
		// What a reader gets back from the table and the numbers.
		for i := range nss {
			tbl := &tables[0]
			if nss[i].Table == tables[1].Hash {
				tbl = &tables[1]
			}
			ms, err := layout.NamespaceTableMounts(tbl, &nss[i])
			if err != nil || !reflect.DeepEqual(ms, nss[i].Mounts) {
				t.Errorf("arrival %v, namespace %d: read back %v", arrival, i, err)
			}
		}
	}
}

// A table the worker sent as another's renumbered takes that one's shape
// without being hashed: the same hash, IDs and outside parents as hashing
// it gives. A reference whose numbers do not fit (an ID twice, an outside
// parent among the IDs), or whose table has no shape kept, gives none,
// and the table is hashed.
func TestRefShapeIsTheHashedShape(t *testing.T) {
	base := testTable(7, 12)
	copyOf := renumbered(t, base, 1000, 5)
	share := newTableShare(4)
	s0, ok := share.shapeOf(base)
	if !ok {
		t.Fatal("the base table has no shape")
	}
	share.known(0, s0)
	want, _ := share.shapeOf(copyOf)
	ref := func(of int, ids [][2]int, outside []int) hostfs.MountinfoResult {
		return hostfs.MountinfoResult{ReadFileResult: isolate.ReadFileResult{Data: copyOf}, SameAs: &hostfs.MountinfoRef{Of: of, IDs: ids, Outside: outside}}
	}
	got, ok := share.refShape(ref(0, layout.MountIDRuns(want.ids), want.rootParents))
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("from the reference: %+v, %v; hashed: %+v", got, ok, want)
	}
	for name, r := range map[string]hostfs.MountinfoResult{
		"no reference":               {ReadFileResult: isolate.ReadFileResult{Data: copyOf}},
		"an ID twice":                ref(0, [][2]int{{1100, 6}, {1105, 6}}, want.rootParents),
		"an outside parent an ID":    ref(0, layout.MountIDRuns(want.ids), []int{1100}),
		"a table without shape kept": ref(1, layout.MountIDRuns(want.ids), want.rootParents),
		"a table out of range":       ref(9, layout.MountIDRuns(want.ids), want.rootParents),
		"a cut table": {ReadFileResult: isolate.ReadFileResult{Data: copyOf, Truncated: true},
			SameAs: &hostfs.MountinfoRef{Of: 0, IDs: layout.MountIDRuns(want.ids), Outside: want.rootParents}},
	} {
		if s, ok := share.refShape(r); ok {
			t.Errorf("%s: shape %+v taken from the reference", name, s)
		}
	}
}
