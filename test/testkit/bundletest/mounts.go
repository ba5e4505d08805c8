package bundletest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// Format 2 of mounts.json (each distinct mount table once) made from a
// format-1 fixture, for the readers' tests that read both to the same
// result. The hash here is not the collector's (readers take it as a
// name only).

// MountsFormat2 writes a format-1 mounts.json as formats 2 and 3 hold it:
// each distinct table once (the same but for mount IDs is the same), every
// namespace naming its table with its own numbers, and (format 3) every
// device naming those namespaces its table says all of. tablesLast moves the
// tables after the namespaces, which a reader must take as well.
func MountsFormat2(t testing.TB, v1 []byte, tablesLast bool) []byte {
	t.Helper()
	var rep layout.MountsReport
	if err := json.Unmarshal(v1, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Format != 0 || len(rep.Tables) > 0 {
		t.Fatalf("not format 1: format %d, %d tables", rep.Format, len(rep.Tables))
	}
	seen := map[string]bool{}
	for i := range rep.Namespaces {
		ns := &rep.Namespaces[i]
		if len(ns.Mounts) == 0 || len(ns.BadLines) > 0 || ns.Truncated {
			continue
		}
		at := map[int]int{}
		ids := make([]int, len(ns.Mounts))
		for j, m := range ns.Mounts {
			at[m.ID] = j
			ids[j] = m.ID
		}
		h := sha256.New()
		var roots []int
		for _, m := range ns.Mounts {
			if p, ok := at[m.ParentID]; ok {
				h.Write([]byte(strconv.Itoa(p)))
			} else {
				h.Write([]byte("-"))
				roots = append(roots, m.ParentID)
			}
			m.ID, m.ParentID = 0, 0
			b, _ := json.Marshal(m)
			h.Write(b)
		}
		hash := hex.EncodeToString(h.Sum(nil)[:16])
		if !seen[hash] {
			seen[hash] = true
			rep.Tables = append(rep.Tables, layout.MountTable{Hash: hash, Mounts: ns.Mounts})
		}
		ns.Table, ns.MountIDs, ns.RootParents = hash, layout.MountIDRuns(ids), roots
	}
	// Format 3: the devices name the namespaces their tables say all of.
	layout.CompactDeviceIndex(&rep)
	for i := range rep.Namespaces {
		if rep.Namespaces[i].Table != "" {
			rep.Namespaces[i].Mounts = nil
		}
	}
	rep.Format = layout.MountsFormat
	if !tablesLast {
		b, err := json.Marshal(&rep)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tables := rep.Tables
	rep.Tables = nil
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := json.Marshal(tables)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(append(b[:len(b)-1], `,"tables":`...), tb...), '}')
}

// MountsWithCopies adds to a format-1 mounts.json n copies of its last
// namespace that is not the host's, as `unshare --mount` makes them: a
// namespace of its own, its mounts numbered anew from a fresh ID, one
// process each (nil when there is no such namespace).
func MountsWithCopies(t testing.TB, v1 []byte, n int) []byte {
	t.Helper()
	var rep layout.MountsReport
	if err := json.Unmarshal(v1, &rep); err != nil {
		t.Fatal(err)
	}
	var src *layout.MountNamespace
	for i := range rep.Namespaces {
		if !rep.Namespaces[i].Host && len(rep.Namespaces[i].Mounts) > 0 {
			src = &rep.Namespaces[i]
		}
	}
	if src == nil {
		return nil
	}
	next := 90000
	base := *src
	for k := range n {
		c := base
		c.Inode = 4026539000 + uint64(k)
		c.Processes = []layout.NamespaceProcess{{PID: 70000 + k, Comm: "copy", Threads: 1}}
		c.ProcessCount, c.TaskCount = 1, 1
		ids := map[int]int{}
		for _, m := range base.Mounts {
			ids[m.ID] = next
			next++
		}
		c.Mounts = make([]layout.NamespaceMount, len(base.Mounts))
		for j, m := range base.Mounts {
			m.ID = ids[m.ID]
			if p, ok := ids[m.ParentID]; ok {
				m.ParentID = p
			} else {
				m.ParentID = 80000 + k
			}
			c.Mounts[j] = m
		}
		rep.Namespaces = append(rep.Namespaces, c)
	}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
