package layout

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The raw mount tables of every namespace in one file (MountinfoTablesFile),
// each table byte for byte after a header line:
//
//	==> mnt:[4026531841] pid=1 tid=1 host <==
//	22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/root rw
//	...
//	==> mnt:[4026532712] pid=4242 tid=4242 <==
//	...
//
// like the headers of `tail` over several files, so that
// `grep -e '^==>' -e rbd3 mounts/mountinfo.txt` answers which namespace
// mounts a device. "mnt:[inode]" is what readlink /proc/<pid>/ns/mnt
// prints. A mountinfo line starts with its mount ID, a number, so no line
// of a table starts with "==> ". Words after the task:
//
//	host           the host's mount namespace (pid 1's)
//	truncated      the table was cut at the size cap
//	newline-added  the cut table did not end with a newline, and one was
//	               added before the next header (it is not the table's)
//	same-as=<inode> (mounts.json format 4) the table is not written: it is
//	               the table of namespace <inode>, written earlier in the
//	               same file, but for its mount IDs, which ids= and
//	               outside= give (see RebuildMountinfo)
//	ids=<first>+<count>,...  the namespace's mount IDs, line by line, as
//	               runs of consecutive IDs
//	outside=<id>,...  the parent IDs of the lines whose parent is not a
//	               mount of the table, in line order
//
// Readers ignore words they do not know; a reader that does not know
// same-as refuses the bundle by its mounts.json format first.

// MountinfoHeader is the header line of one table.
type MountinfoHeader struct {
	Inode        uint64
	PID, TID     int
	Host         bool
	Truncated    bool
	NewlineAdded bool
	// SameAs, IDs and Outside say the table is namespace SameAs's,
	// renumbered (RebuildMountinfo); its own text is not written.
	SameAs  uint64
	IDs     [][2]int
	Outside []int
}

const (
	mountinfoHeaderOpen  = "==> mnt:["
	mountinfoHeaderClose = " <=="
)

// FormatMountinfoHeader returns h's line, with its newline.
func FormatMountinfoHeader(h MountinfoHeader) string {
	b := make([]byte, 0, 64)
	b = append(b, mountinfoHeaderOpen...)
	b = strconv.AppendUint(b, h.Inode, 10)
	b = append(b, ']')
	if h.PID > 0 {
		b = append(b, " pid="...)
		b = strconv.AppendInt(b, int64(h.PID), 10)
	}
	if h.TID > 0 {
		b = append(b, " tid="...)
		b = strconv.AppendInt(b, int64(h.TID), 10)
	}
	if h.Host {
		b = append(b, " host"...)
	}
	if h.Truncated {
		b = append(b, " truncated"...)
	}
	if h.NewlineAdded {
		b = append(b, " newline-added"...)
	}
	if h.SameAs != 0 {
		b = append(b, " same-as="...)
		b = strconv.AppendUint(b, h.SameAs, 10)
		b = append(b, " ids="...)
		for i, r := range h.IDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(r[0]), 10)
			b = append(b, '+')
			b = strconv.AppendInt(b, int64(r[1]), 10)
		}
		if len(h.Outside) > 0 {
			b = append(b, " outside="...)
			for i, p := range h.Outside {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(p), 10)
			}
		}
	}
	b = append(b, mountinfoHeaderClose...)
	b = append(b, '\n')
	return string(b)
}

// IsMountinfoHeader reports whether line (without its newline) looks like
// a header: a mountinfo line never starts with "==> ".
func IsMountinfoHeader(line []byte) bool {
	return bytes.HasPrefix(line, []byte(mountinfoHeaderOpen))
}

// ParseMountinfoHeader parses a header line (with or without its newline).
// ok is false for a line that is not a well-formed header.
func ParseMountinfoHeader(line []byte) (h MountinfoHeader, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	rest, found := bytes.CutPrefix(line, []byte(mountinfoHeaderOpen))
	if !found {
		return h, false
	}
	rest, found = bytes.CutSuffix(rest, []byte(mountinfoHeaderClose))
	if !found {
		return h, false
	}
	inode, rest, found := bytes.Cut(rest, []byte("]"))
	if !found {
		return h, false
	}
	n, err := strconv.ParseUint(string(inode), 10, 64)
	if err != nil || n == 0 {
		return h, false
	}
	h.Inode = n
	for _, w := range bytes.Fields(rest) {
		k, v, kv := bytes.Cut(w, []byte("="))
		switch {
		case kv && string(k) == "pid":
			h.PID, ok = atoiPositive(v)
		case kv && string(k) == "tid":
			h.TID, ok = atoiPositive(v)
		case !kv && string(w) == "host":
			h.Host, ok = true, true
		case !kv && string(w) == "truncated":
			h.Truncated, ok = true, true
		case !kv && string(w) == "newline-added":
			h.NewlineAdded, ok = true, true
		case kv && string(k) == "same-as":
			same, err := strconv.ParseUint(string(v), 10, 64)
			h.SameAs, ok = same, err == nil && same != 0
		case kv && string(k) == "ids":
			h.IDs, ok = parseIDRuns(v)
		case kv && string(k) == "outside":
			h.Outside, ok = parseIDList(v)
		default:
			ok = true // a word of a later version
		}
		if !ok {
			return MountinfoHeader{}, false
		}
	}
	if h.SameAs == 0 {
		h.IDs, h.Outside = nil, nil // no meaning alone
	} else if len(h.IDs) == 0 || h.SameAs == h.Inode || h.Truncated || h.NewlineAdded {
		return MountinfoHeader{}, false
	}
	return h, true
}

// parseIDRuns parses "first+count,first+count...".
func parseIDRuns(v []byte) ([][2]int, bool) {
	var runs [][2]int
	for _, r := range bytes.Split(v, []byte(",")) {
		a, c, found := bytes.Cut(r, []byte("+"))
		if !found {
			return nil, false
		}
		first, ok1 := atoiNonNegative(a)
		count, ok2 := atoiPositive(c)
		if !ok1 || !ok2 {
			return nil, false
		}
		runs = append(runs, [2]int{first, count})
	}
	return runs, true
}

// parseIDList parses "id,id...".
func parseIDList(v []byte) ([]int, bool) {
	var ids []int
	for _, s := range bytes.Split(v, []byte(",")) {
		n, ok := atoiNonNegative(s)
		if !ok {
			return nil, false
		}
		ids = append(ids, n)
	}
	return ids, true
}

func atoiNonNegative(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func atoiPositive(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	return n, err == nil && n > 0
}

// ErrMountinfoRebuild is returned for a table written by reference
// (same-as) that cannot be rebuilt: its copy is missing, or its numbers do
// not fit the copy (a damaged or hostile bundle).
var ErrMountinfoRebuild = errors.New("a mount table written as another namespace's cannot be rebuilt")

// RebuildMountinfo is the raw table of a namespace whose table is the
// same as base's but for its mount IDs: every line of base with its
// first two fields (mount ID, parent ID) replaced by the namespace's, ids
// giving the IDs line by line (as runs) and outside the parents of the
// lines whose parent is not a mount of base, in order. The rest of every
// line, empty lines and the final newline (or its absence) are base's,
// byte for byte. It allocates no more than base's size and the IDs.
func RebuildMountinfo(base []byte, ids [][2]int, outside []int) ([]byte, error) {
	b, err := NewMountinfoBase(base)
	if err != nil {
		return nil, err
	}
	return b.Rebuild(ids, outside)
}

// MountinfoBase is a raw table read once to rebuild, or check, the tables
// of many namespaces from it (see RebuildMountinfo).
type MountinfoBase struct {
	data  []byte
	rests [][]byte // each line after its IDs; nil for an empty line
	ids   []int    // the mounts' IDs and parents, line by line
	par   []int
	at    map[int]int // ID → its mount's index
}

// NewMountinfoBase reads base; it fails when a line does not start with
// two IDs.
func NewMountinfoBase(base []byte) (*MountinfoBase, error) {
	n := bytes.Count(base, []byte{'\n'}) + 1
	b := &MountinfoBase{data: base, rests: make([][]byte, 0, n), ids: make([]int, 0, n), par: make([]int, 0, n)}
	for data := base; len(data) > 0; {
		var l []byte
		l, data = cutLine(data)
		if len(l) == 0 {
			b.rests = append(b.rests, nil)
			continue
		}
		id, parent, rest, ok := CutMountIDs(l)
		if !ok {
			return nil, fmt.Errorf("%w: a line of the copy does not start with two IDs", ErrMountinfoRebuild)
		}
		b.ids, b.par = append(b.ids, id), append(b.par, parent)
		b.rests = append(b.rests, rest)
	}
	b.at = make(map[int]int, len(b.ids))
	for j, id := range b.ids {
		b.at[id] = j
	}
	return b, nil
}

// renumber is the namespace's IDs and parents, mount by mount.
func (b *MountinfoBase) renumber(runs [][2]int, outside []int) (ids, parents []int, err error) {
	n := len(b.ids)
	ids = make([]int, 0, n)
	for _, r := range runs {
		if r[1] <= 0 || r[1] > n-len(ids) {
			return nil, nil, fmt.Errorf("%w: %w: %d mounts in the table, more IDs given", ErrMountinfoRebuild, ErrMountTable, n)
		}
		for k := range r[1] {
			ids = append(ids, r[0]+k)
		}
	}
	if len(ids) != n {
		return nil, nil, fmt.Errorf("%w: %w: %d mounts in the table, %d IDs given", ErrMountinfoRebuild, ErrMountTable, n, len(ids))
	}
	parents = make([]int, n)
	k := 0
	for j, p := range b.par {
		if i, ok := b.at[p]; ok {
			parents[j] = ids[i]
			continue
		}
		if k >= len(outside) {
			return nil, nil, fmt.Errorf("%w: %w: more mounts with a parent outside the table than outside parents given", ErrMountinfoRebuild, ErrMountTable)
		}
		parents[j] = outside[k]
		k++
	}
	if k != len(outside) {
		return nil, nil, fmt.Errorf("%w: %w: %d outside parents given, %d mounts with a parent outside the table", ErrMountinfoRebuild, ErrMountTable, len(outside), k)
	}
	return ids, parents, nil
}

// Rebuild is the table of the namespace numbered by ids and outside (see
// RebuildMountinfo).
func (b *MountinfoBase) Rebuild(ids [][2]int, outside []int) ([]byte, error) {
	nids, nparents, err := b.renumber(ids, outside)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b.data)+len(b.ids)*8)
	j := 0
	for k, rest := range b.rests {
		if k > 0 {
			out = append(out, '\n')
		}
		if rest == nil {
			continue
		}
		out = strconv.AppendInt(out, int64(nids[j]), 10)
		out = append(out, ' ')
		out = strconv.AppendInt(out, int64(nparents[j]), 10)
		out = append(out, ' ')
		out = append(out, rest...)
		j++
	}
	if len(b.data) > 0 && b.data[len(b.data)-1] == '\n' {
		out = append(out, '\n')
	}
	return out, nil
}

// Rebuilds says whether Rebuild(ids, outside) is want, without building
// it.
func (b *MountinfoBase) Rebuilds(want []byte, ids [][2]int, outside []int) bool {
	nids, nparents, err := b.renumber(ids, outside)
	if err != nil {
		return false
	}
	var num [48]byte
	j := 0
	for k, rest := range b.rests {
		if k > 0 {
			if len(want) == 0 || want[0] != '\n' {
				return false
			}
			want = want[1:]
		}
		if rest == nil {
			continue
		}
		h := strconv.AppendInt(num[:0], int64(nids[j]), 10)
		h = append(h, ' ')
		h = strconv.AppendInt(h, int64(nparents[j]), 10)
		h = append(h, ' ')
		if !bytes.HasPrefix(want, h) || !bytes.HasPrefix(want[len(h):], rest) {
			return false
		}
		want = want[len(h)+len(rest):]
		j++
	}
	if len(b.data) > 0 && b.data[len(b.data)-1] == '\n' {
		return len(want) == 1 && want[0] == '\n'
	}
	return len(want) == 0
}

// MountinfoShape writes to w a raw table without its mount IDs, line by
// line: the parent as the index of its line in the table ("-" when it is
// not a mount of the table), a space, the rest of the line and a newline.
// It returns the IDs in order and the parents outside the table. ok is
// false when a line does not start with two IDs or an ID appears twice;
// empty lines are skipped. Two tables of one shape (the same but for
// their IDs) write the same bytes, so a hash of them keys the shape.
func MountinfoShape(data []byte, w io.Writer) (ids, outside []int, ok bool) {
	n := bytes.Count(data, []byte{'\n'}) + 1
	ids = make([]int, 0, n)
	parents, rests := make([]int, 0, n), make([][]byte, 0, n)
	at := make(map[int]int, n)
	for len(data) > 0 {
		var l []byte
		l, data = cutLine(data)
		if len(l) == 0 {
			continue
		}
		id, parent, rest, ok := CutMountIDs(l)
		if _, dup := at[id]; !ok || dup {
			return nil, nil, false
		}
		at[id] = len(ids)
		ids, parents, rests = append(ids, id), append(parents, parent), append(rests, rest)
	}
	var num []byte
	for k, p := range parents {
		num = num[:0]
		if j, in := at[p]; in {
			num = strconv.AppendInt(num, int64(j), 10)
		} else {
			num = append(num, '-')
			outside = append(outside, p)
		}
		num = append(num, ' ')
		w.Write(num)
		w.Write(rests[k])
		w.Write([]byte{'\n'})
	}
	return ids, outside, true
}

// CutMountIDs cuts a mountinfo line's first two fields, its mount ID and
// its parent's, each a decimal number followed by one space.
func CutMountIDs(line []byte) (id, parent int, rest []byte, ok bool) {
	id, rest, ok1 := cutMountID(line)
	parent, rest, ok2 := cutMountID(rest)
	return id, parent, rest, ok1 && ok2
}

// cutMountID cuts a decimal ID and the one space after it off b.
func cutMountID(b []byte) (n int, rest []byte, ok bool) {
	i := bytes.IndexByte(b, ' ')
	if i <= 0 {
		return 0, nil, false
	}
	n, ok = atoiNonNegative(b[:i])
	return n, b[i+1:], ok
}

// EachMountinfoTable calls fn with every table of a tables file, as it was
// read (an added newline removed); a table written by reference (same-as)
// is rebuilt from its copy, and err says why when it cannot be (table is
// then nil). Bytes before the first header, which a well-formed file does
// not have, are passed with a zero header.
func EachMountinfoTable(data []byte, fn func(h MountinfoHeader, table []byte, err error)) {
	var cur MountinfoHeader
	copies := map[uint64][]byte{}
	start, pos := 0, 0
	emit := func(end int) {
		t := data[start:end]
		if cur.NewlineAdded {
			t = bytes.TrimSuffix(t, []byte("\n"))
		}
		if cur.SameAs != 0 {
			c, ok := copies[cur.SameAs]
			switch {
			case len(t) > 0:
				fn(cur, nil, fmt.Errorf("%w: mount namespace %d has text of its own after its header", ErrMountinfoRebuild, cur.Inode))
			case !ok:
				fn(cur, nil, fmt.Errorf("%w: mount namespace %d's copy (namespace %d) is not before it in the file", ErrMountinfoRebuild, cur.Inode, cur.SameAs))
			default:
				r, err := RebuildMountinfo(c, cur.IDs, cur.Outside)
				if err != nil {
					err = fmt.Errorf("mount namespace %d: %w", cur.Inode, err)
				}
				fn(cur, r, err)
			}
			return
		}
		if cur.Inode != 0 && !cur.Truncated {
			if _, dup := copies[cur.Inode]; !dup {
				copies[cur.Inode] = t
			}
		}
		if cur.Inode != 0 || len(t) > 0 {
			fn(cur, t, nil)
		}
	}
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		if h, ok := ParseMountinfoHeader(data[pos:next]); ok {
			emit(pos)
			cur, start = h, next
		}
		pos = next
	}
	emit(len(data))
}

// cutLine is data's first line, without its newline, and what follows it
// (nil after the last line).
func cutLine(data []byte) (line, rest []byte) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return data[:i], data[i+1:]
	}
	return data, nil
}
