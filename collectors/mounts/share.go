package mounts

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
)

// One copy of each distinct mount table (mounts.json format 2, see
// bundle/layout's MountTable): namespaces whose tables are the same but
// for their mount IDs share one, which is parsed once and written once.

// tableShape is a raw table's identity without its mount IDs, and the
// numbers that make it one namespace's.
type tableShape struct {
	hash        string
	ids         []int
	rootParents []int
}

// shapeOf reads the first two fields (mount ID, parent ID) of every line
// of a raw table. ok is false for an empty table, or when a line has no
// such fields or an ID appears twice: such a table is kept as it is, not
// shared. The hash is keyed with the run's own key (never written), so
// that it names the table within the bundle and says nothing of what the
// table held before redaction.
func (t *tableShare) shapeOf(data []byte) (s tableShape, ok bool) {
	if len(data) == 0 {
		return tableShape{}, false
	}
	h := hmac.New(sha256.New, t.key)
	ids, outside, ok := layout.MountinfoShape(data, h)
	if !ok {
		return tableShape{}, false
	}
	s.ids, s.rootParents = ids, outside
	sum := h.Sum(nil)
	s.hash = hex.EncodeToString(sum[:16])
	return s, true
}

// refShape is the shape of a table the worker answered as another's
// renumbered (r.SameAs), taken from that one's without hashing it again:
// the table was rebuilt from it, so its lines without their IDs are that
// one's, and its IDs and outside parents are the reference's once they
// fit (every ID once, no outside parent among them). ok is false when
// there is no reference, the table it names has no shape kept (cut,
// unparsed lines), or the numbers do not fit: the table is then hashed.
func (t *tableShare) refShape(r hostfs.MountinfoResult) (tableShape, bool) {
	if r.SameAs == nil || r.Truncated || r.SameAs.Of < 0 || r.SameAs.Of >= len(t.shapes) || !r.SameAs.Fits() {
		return tableShape{}, false
	}
	t.mu.Lock()
	base := t.shapes[r.SameAs.Of]
	t.mu.Unlock()
	if base.hash == "" {
		return tableShape{}, false
	}
	n := 0
	for _, run := range r.SameAs.IDs {
		n += run[1]
	}
	ids := make([]int, 0, n)
	for _, run := range r.SameAs.IDs {
		for k := range run[1] {
			ids = append(ids, run[0]+k)
		}
	}
	return tableShape{hash: base.hash, ids: ids, rootParents: r.SameAs.Outside}, true
}

// tableShare remembers, while tables arrive (from several goroutines),
// the first parsed copy of each shape, so that the others are not parsed.
type tableShare struct {
	key    []byte // the hashes' key: random, for this run only
	mu     sync.Mutex
	parsed map[string][]layout.NamespaceMount
	// shapes[i] is namespace i's shape, hash "" when not shared.
	shapes []tableShape
}

func newTableShare(n int) *tableShare {
	key := make([]byte, 32)
	rand.Read(key) // never fails (Go 1.24)
	return &tableShare{key: key, parsed: map[string][]layout.NamespaceMount{}, shapes: make([]tableShape, n)}
}

// known records namespace i's shape and says whether a table of that
// shape has been parsed already (then namespace i's need not be).
func (t *tableShare) known(i int, s tableShape) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.shapes[i] = s
	_, ok := t.parsed[s.hash]
	return ok
}

// keep records namespace i's parsed table as its shape's copy; a table
// with lines that could not be parsed is not shared.
func (t *tableShare) keep(i int, mounts []layout.NamespaceMount, shareable bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.shapes[i]
	if s.hash == "" {
		return
	}
	if !shareable {
		t.shapes[i] = tableShape{}
		return
	}
	if _, ok := t.parsed[s.hash]; !ok {
		t.parsed[s.hash] = mounts
	}
}

// finish gives every sharing namespace its mounts (numbered as its own),
// its table's hash and numbers, and returns the tables, each once, in the
// order of the first namespace that has it (the host's first). Called
// once every table has arrived.
func (t *tableShare) finish(nss []layout.MountNamespace) ([]layout.MountTable, error) {
	var tables []layout.MountTable
	seen := map[string]bool{}
	for i := range nss {
		s := t.shapes[i]
		ns := &nss[i]
		if s.hash == "" || ns.Error != "" {
			continue
		}
		ns.Table, ns.MountIDs, ns.RootParents = s.hash, layout.MountIDRuns(s.ids), s.rootParents
		if ns.Mounts == nil {
			src := t.parsed[s.hash]
			ms, err := layout.NamespaceTableMounts(&layout.MountTable{Mounts: src}, ns)
			if err != nil {
				return nil, err
			}
			ns.Mounts = ms
		}
		if !seen[s.hash] {
			seen[s.hash] = true
			tables = append(tables, layout.MountTable{Hash: s.hash, Mounts: ns.Mounts})
		}
	}
	return tables, nil
}
