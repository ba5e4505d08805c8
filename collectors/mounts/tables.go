package mounts

import (
	"fmt"
	"sync"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

// mntTables writes the raw mount tables of every namespace into one file,
// mountinfo.txt, each after its header line (layout.FormatMountinfoHeader),
// in the collector's order (the host's first) although they arrive out of
// order: a table waits for those before it while the waiting ones hold
// less than tablesPending bytes, past which the earliest is written at
// once (the order then differs; the headers say which table is which).
// One file instead of one per namespace: at a thousand namespaces,
// creating the files (and the supervisor's hashing and archiving them one
// by one) cost more than reading the tables. A file that would pass the
// per-file cap is closed and the next tables go on in mountinfo-2.txt, so
// no table is cut for sharing a file.
//
// A table the same as one already written in the same file but for its
// mount IDs (same shape, see tableShape) is written as its header alone,
// naming that copy and giving its own IDs (mounts.json format 4,
// layout.RebuildMountinfo), and only once the copy rebuilds it byte for
// byte: anything else is written in full.
type mntTables struct {
	env    *collectors.Env
	budget int64 // bytes per file; 0 is no cap

	mu   sync.Mutex
	f    *collectors.File
	part int
	err  error
	// names[i] is the file holding table i, once written.
	names []string
	// next is the first table not yet written or skipped; pending holds
	// the tables that arrived before it.
	next         int
	done         []bool
	pending      map[int]mntTable
	pendingBytes int64
	// copies are the tables written in full in the current file, by
	// shape hash.
	copies map[string]tableCopy
	// byRef counts the tables written as a reference to a copy.
	byRef int
}

type mntTable struct {
	h    layout.MountinfoHeader
	data []byte
	// shape is the table's shape; hash "" when it has none (never shared).
	shape tableShape
	// from is the table data was rebuilt from (its index + 1), its IDs
	// shape.ids and its outside parents shape.rootParents; 0 when data
	// is the kernel's as read.
	from int
}

type tableCopy struct {
	inode uint64
	base  *layout.MountinfoBase
	// i is the copy's table (its index + 1).
	i int
}

// tablesPending bounds the bytes of tables waiting for their turn.
var tablesPending int64 = 8 << 20

// tableSlack is room for a header line and redaction markers (which can
// be longer than what they replace) within the per-file cap.
func tableSlack(budget int64) int64 { return min(4096, budget/4) + budget/64 }

// newMntTables writes n tables, numbered from 0 in the order wanted.
func newMntTables(env *collectors.Env, n int) *mntTables {
	return &mntTables{env: env, budget: env.MaxFileBytes, names: make([]string, n), done: make([]bool, n), pending: map[int]mntTable{},
		copies: map[string]tableCopy{}}
}

// maxTable is the size at which one table is cut: it fits in a file of its
// own.
func (t *mntTables) maxTable() int64 {
	if t.budget <= 0 {
		return 64 << 20
	}
	return max(t.budget-tableSlack(t.budget), 1)
}

// put hands table i over, with its shape (hash "" for none) and, when
// data was rebuilt from table from-1 with the shape's numbers, from
// (else 0); skip(i) says it will not come. Each i once.
func (t *mntTables) put(i int, h layout.MountinfoHeader, data []byte, shape tableShape, from int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[i] = mntTable{h: h, data: data, shape: shape, from: from}
	t.pendingBytes += int64(len(data))
	t.flush(false)
}

func (t *mntTables) skip(i int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done[i] = true
	t.flush(false)
}

// flush writes the tables whose turn has come, then, while too many bytes
// wait (or all when all is set), the earliest waiting ones.
func (t *mntTables) flush(all bool) {
	for {
		for t.next < len(t.done) && t.done[t.next] {
			t.next++
		}
		i := t.next
		if _, ok := t.pending[i]; !ok {
			if !all && t.pendingBytes <= tablesPending || len(t.pending) == 0 {
				return
			}
			i = -1
			for j := range t.pending {
				if i < 0 || j < i {
					i = j
				}
			}
		}
		p := t.pending[i]
		delete(t.pending, i)
		t.pendingBytes -= int64(len(p.data))
		t.done[i] = true
		if name, err := t.write(i, p); err == nil {
			t.names[i] = name
		}
	}
}

// write writes one table and returns the file (relative to the collector's
// directory) that holds it.
func (t *mntTables) write(i int, p mntTable) (string, error) {
	h, data := p.h, p.data
	h.NewlineAdded = len(data) > 0 && data[len(data)-1] != '\n'
	if t.err != nil {
		return "", t.err
	}
	if ref, ok := t.reference(p); ok {
		h, data = ref, nil
	}
	head := layout.FormatMountinfoHeader(h)
	if t.f != nil && t.budget > 0 && t.f.Written()+int64(len(head)+len(data))+1 > t.budget-t.budget/64 {
		if t.err = t.f.Close(); t.err != nil {
			return "", t.err
		}
		t.f = nil
		if h.SameAs != 0 {
			// The copy is in the file just closed: this one in full.
			h, data = p.h, p.data
			h.NewlineAdded = len(data) > 0 && data[len(data)-1] != '\n'
			head = layout.FormatMountinfoHeader(h)
		}
		clear(t.copies)
	}
	if t.f == nil {
		t.part++
		if t.f, t.err = t.env.Create(layout.MountinfoTablesPart(t.part)); t.err != nil {
			return "", t.err
		}
	}
	name := layout.MountinfoTablesPart(t.part)
	if _, t.err = t.f.WriteString(head); t.err == nil {
		_, t.err = t.f.Write(data)
	}
	if t.err == nil && h.NewlineAdded {
		_, t.err = t.f.WriteString("\n")
	}
	if t.err != nil {
		t.err = fmt.Errorf("writing %s: %w", name, t.err)
		return "", t.err
	}
	if h.SameAs != 0 {
		t.byRef++
	} else if p.shape.hash != "" && !h.Truncated {
		if _, ok := t.copies[p.shape.hash]; !ok {
			if b, err := layout.NewMountinfoBase(p.data); err == nil {
				t.copies[p.shape.hash] = tableCopy{h.Inode, b, i + 1}
			}
		}
	}
	return name, nil
}

// reference is table p's header as a reference to the copy of its shape
// written in the current file, when there is one and it rebuilds p's
// table byte for byte.
func (t *mntTables) reference(p mntTable) (layout.MountinfoHeader, bool) {
	if p.shape.hash == "" || p.h.Truncated || t.f == nil {
		return layout.MountinfoHeader{}, false
	}
	c, ok := t.copies[p.shape.hash]
	if !ok {
		return layout.MountinfoHeader{}, false
	}
	h := p.h
	h.SameAs, h.IDs, h.Outside = c.inode, layout.MountIDRuns(p.shape.ids), p.shape.rootParents
	if len(layout.FormatMountinfoHeader(h)) >= len(p.data) {
		return layout.MountinfoHeader{}, false // no smaller
	}
	// A table rebuilt from the copy's own table with these numbers (the
	// worker's reference, see hostfs.MountinfoResult.SameAs) is what
	// the copy rebuilds: no need to compare it again.
	if (p.from == 0 || p.from != c.i) && !c.base.Rebuilds(p.data, h.IDs, h.Outside) {
		return layout.MountinfoHeader{}, false
	}
	return h, true
}

// close writes the tables still waiting and closes the last file. names[i]
// is then the file holding table i, "" for one not written.
func (t *mntTables) close() (names []string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flush(true)
	if t.f != nil {
		if err := t.f.Close(); t.err == nil {
			t.err = err
		}
		t.f = nil
	}
	return t.names, t.err
}
