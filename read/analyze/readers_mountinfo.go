package analyze

import (
	"fmt"
	"strconv"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// mountinfoCopies rebuilds, in one streaming pass over a tables file, the
// lines of the tables written by reference (mounts.json format 4): a
// namespace whose table is another's renumbered has its header alone,
// after that copy in the same file. For each table read in full it keeps
// every line's mount and parent IDs and the lines evidence may quote in
// some namespace (mountinfoWanted), the part after the IDs; a reference
// gets those lines with its own IDs (layout.RenumberMounts), each quoted
// with the number of the copy's line it was rebuilt from. Kept per file:
// a reference never names a table of another file.
type mountinfoCopies struct {
	byNS map[uint64]*mountinfoCopy
	cur  *mountinfoCopy
	curN uint64
	errs []string
}

type mountinfoCopy struct {
	ids, parents []int
	wanted       []wantedLine
	broken       bool // a line without IDs, or cut: nothing rebuilds from it
}

type wantedLine struct {
	j, n           int    // the mount's index in the table, the line's number
	rest           string // the line after its two IDs
	anyNS, outside bool   // see mountinfoWanted
}

func newMountinfoCopies() *mountinfoCopies {
	return &mountinfoCopies{byNS: map[uint64]*mountinfoCopy{}}
}

// begin starts the table of header h (not a reference).
func (c *mountinfoCopies) begin(h layout.MountinfoHeader) {
	if h.Truncated {
		return // a cut table is never a copy
	}
	if _, dup := c.byNS[h.Inode]; dup {
		return
	}
	c.cur, c.curN = &mountinfoCopy{}, h.Inode
}

// line reads one line of the table begun.
func (c *mountinfoCopies) line(b []byte, n int, cut bool) {
	cp := c.cur
	if cp == nil || cp.broken || len(b) == 0 {
		return
	}
	id, parent, rest, ok := layout.CutMountIDs(b)
	if !ok || cut {
		cp.broken = true
		return
	}
	if _, anyNS, outside := mountinfoWanted(b); anyNS || outside {
		cp.wanted = append(cp.wanted, wantedLine{j: len(cp.ids), n: n, rest: string(rest), anyNS: anyNS, outside: outside})
	}
	cp.ids, cp.parents = append(cp.ids, id), append(cp.parents, parent)
}

// end closes the table begun.
func (c *mountinfoCopies) end() {
	if c.cur != nil {
		c.byNS[c.curN] = c.cur
		c.cur = nil
	}
}

// rebuild keeps the wanted lines of reference h, or says why it cannot.
func (c *mountinfoCopies) rebuild(st *state, h layout.MountinfoHeader, host bool) {
	cp := c.byNS[h.SameAs]
	if cp == nil || cp.broken {
		c.errs = append(c.errs, fmt.Sprintf("mount namespace %d: its table is written as namespace %d's, which is not before it in the file in full", h.Inode, h.SameAs))
		return
	}
	ids, parents, err := layout.RenumberMounts(cp.ids, cp.parents, h.IDs, h.Outside)
	if err != nil {
		c.errs = append(c.errs, fmt.Sprintf("mount namespace %d: its table cannot be rebuilt from namespace %d's: %v", h.Inode, h.SameAs, err))
		return
	}
	var b []byte
	for _, w := range cp.wanted {
		if !w.anyNS && (host || !w.outside) {
			continue
		}
		b = strconv.AppendInt(b[:0], int64(ids[w.j]), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(parents[w.j]), 10)
		b = append(b, ' ')
		b = append(b, w.rest...)
		st.storeMountinfoLine(h.Inode, ids[w.j], w.n, b, false)
	}
}
