package mountprobe

import (
	"bytes"
	"cmp"
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/procfs"
)

// From mount tables to probe items, one table and a part of it at a time.
//
// A parsed table of 30,000 mounts is 20 MB (every field of every line as a
// string, the lines as one string), as much as the items built from it:
// held whole beside them, it made half of mountprobe's peak. Each table is
// parsed chunkLines lines at a time, once: each part's mounts become
// items (or join the item of the same mount seen in an earlier namespace)
// and what is left of them is a mount ID, its parent's and the item; an
// item keeps copies of its own fields, not views into the table, so the
// table's memory goes as soon as its items are built.

// chunkLines is how many lines of a table are parsed at once.
const chunkLines = 512

// eachChunk parses data chunkLines lines at a time and calls fn with
// each part's mounts, in order; it returns how many lines could not be
// parsed and the first of them, numbered in data.
func eachChunk(data []byte, fn func([]procfs.Mount)) (nbad int, first procfs.LineError) {
	line := 0
	for len(data) > 0 {
		end, n := 0, 0
		for n < chunkLines && end < len(data) {
			if i := bytes.IndexByte(data[end:], '\n'); i >= 0 {
				end += i + 1
			} else {
				end = len(data)
			}
			n++
		}
		mounts, bad := procfs.ParseMountInfo(data[:end])
		if len(bad) > 0 && nbad == 0 {
			first = bad[0]
			first.Line += line
		}
		nbad += len(bad)
		fn(mounts)
		line += n
		data = data[end:]
	}
	return nbad, first
}

// interner shares the copies of strings that repeat from mount to mount
// (filesystem types, sources, roots), up to a bound, past which it copies.
type interner map[string]string

func (in interner) get(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	c := strings.Clone(s)
	if len(in) < 4096 {
		in[c] = c
	}
	return c
}

// mpKey identifies a distinct mount across namespaces: the same
// filesystem, root and mountpoint.
type mpKey struct {
	major, minor     uint32
	root, mountpoint string
}

// mpDistinct finds the item of a mount seen before. Its map is keyed by a
// hash of the key, a third of the size of a map keyed by the key itself
// (30,000 mounts: 0.6 MB, not 2); the rare key whose hash another's item
// holds goes to the second map.
type mpDistinct struct {
	seed     maphash.Seed
	byHash   map[uint64]*mpItem
	collided map[mpKey]*mpItem
}

func newMpDistinct() *mpDistinct {
	return &mpDistinct{seed: maphash.MakeSeed(), byHash: map[uint64]*mpItem{}, collided: map[mpKey]*mpItem{}}
}

func (d *mpDistinct) get(k mpKey) *mpItem {
	it := d.byHash[maphash.Comparable(d.seed, k)]
	if it != nil && it.key() == k {
		return it
	}
	return d.collided[k]
}

// add records it, whose key is not there yet.
func (d *mpDistinct) add(it *mpItem) {
	k := it.key()
	h := maphash.Comparable(d.seed, k)
	if d.byHash[h] == nil {
		d.byHash[h] = it
	} else {
		d.collided[k] = it
	}
}

func (it *mpItem) key() mpKey {
	return mpKey{it.major, it.minor, it.rec.Root, it.rec.Mountpoint}
}

// buildItems turns the namespaces' tables into one item per distinct
// mount (same filesystem, root and mountpoint in several namespaces is one
// mount) and links each to the mounts that must be probed before it. Each
// namespace's raw table is dropped once read.
func (p *prober) buildItems(order []*mpNamespace) []*mpItem {
	seen := newMpDistinct()
	in := interner{}
	var items []*mpItem
	// The memory limit follows the items built, the lines of the table
	// being read (each may become an item) and the bytes of the tables
	// still to read: a thousand namespaces that mostly repeat the host's
	// mounts hold their tables but add few items.
	held := 0
	for _, ns := range order {
		held += len(ns.raw)
	}
	var limit int64
	setLimit := func(mounts, held int) {
		l := min(memoryLimit(mounts)+int64(held), memoryCeiling)
		if p.limitMemory != nil && l != limit {
			p.limitMemory(l)
			limit = l
		}
	}
	for _, ns := range order {
		held -= len(ns.raw)
		setLimit(len(items)+bytes.Count(ns.raw, []byte{'\n'}), held)
		items = p.addTable(ns, items, seen, in)
		ns.raw = nil
	}
	setLimit(len(items), 0)
	for _, it := range items {
		it.likely = it.class == procfs.ClassNetwork || it.class == procfs.ClassFUSE
		first := firstPath(it.rec.Mountpoint, p.first)
		if it.ns.self && !first {
			if hp, ok := p.env.Host().Host(it.rec.Mountpoint); ok {
				first = firstPath(string(hp), p.first)
			}
		}
		tier := 3
		switch {
		case it.ns.first && first:
			tier = 0
		case it.ns.first:
			tier = 1
		case first:
			tier = 2
		}
		it.own = mpPrio{tier: tier, class: int(it.class), order: it.order}
		it.prio = it.own
	}
	// The probe of a filesystem (a FUSE connection, a device) that stands
	// for all its mounts, in every namespace, is its most urgent mount's.
	byPrio := append([]*mpItem(nil), items...)
	sort.SliceStable(byPrio, func(i, j int) bool { return byPrio[i].own.less(byPrio[j].own) })
	devRep := map[string]*mpItem{}
	for _, it := range byPrio {
		if it.hidden || it.autofs {
			continue
		}
		if r := devRep[it.rec.Dev]; r != nil {
			it.devRep = r
		} else {
			devRep[it.rec.Dev] = it
		}
	}
	inherit(items)
	return items
}

// addTable adds the items of ns's table to items: a new item for each
// mount not seen in an earlier namespace, the namespace added to the
// record of each one seen. Then, with the whole table known, the new items
// over-mounted in ns are marked hidden and each other one is linked to its
// parent mount in ns, the one walked through to reach it, probed first.
func (p *prober) addTable(ns *mpNamespace, items []*mpItem, seen *mpDistinct, in interner) []*mpItem {
	// Each mount of the table: its IDs and its item (whose mountpoint is
	// the mount's).
	type entry struct {
		id, parent int
		it         *mpItem
	}
	var entries []entry
	created := len(items)
	nbad, firstBad := eachChunk(ns.raw, func(ms []procfs.Mount) {
		for _, m := range ms {
			class := procfs.Classify(m)
			if class == procfs.ClassNetwork || class == procfs.ClassFUSE || m.FSType == "fusectl" {
				ns.mounts = append(ns.mounts, m)
			}
			it := seen.get(mpKey{m.Major, m.Minor, m.Root, m.MountPoint})
			if it != nil {
				it.rec.Namespaces = append(it.rec.Namespaces, ns.inode)
			} else {
				it = newItem(ns, m, class, len(items), in)
				seen.add(it)
				items = append(items, it)
			}
			entries = append(entries, entry{m.ID, m.ParentID, it})
		}
	})
	if nbad > 0 {
		p.notef("mount namespace %d: %d mountinfo line(s) could not be parsed (first: %v)", ns.inode, nbad, firstBad)
	}
	ns.nMounts = len(entries)

	// Mount ID -> index in entries, the last one of an ID (a table read
	// while mounts change may list one twice): a sorted slice, a third of
	// a map's size.
	type idIndex struct{ id, i int }
	ids := make([]idIndex, len(entries))
	for i, e := range entries {
		ids[i] = idIndex{e.id, i}
	}
	slices.SortStableFunc(ids, func(a, b idIndex) int { return cmp.Compare(a.id, b.id) })
	parentOf := func(e entry) *mpItem {
		j, ok := slices.BinarySearchFunc(ids, e.parent, func(x idIndex, id int) int { return cmp.Compare(x.id, id) })
		if !ok {
			return nil
		}
		for j+1 < len(ids) && ids[j+1].id == e.parent {
			j++
		}
		return entries[ids[j].i].it
	}
	// The mount visible at a path is the one no other mount at the same
	// path sits on.
	covered := map[int]bool{} // IDs of mounts something is mounted on at the same path
	for _, e := range entries {
		if pm := parentOf(e); pm != nil && pm.rec.Mountpoint == e.it.rec.Mountpoint && e.parent != e.id {
			covered[e.parent] = true
		}
	}
	// Dependencies, in the namespace each item is probed through.
	for _, e := range entries {
		it := e.it
		if it.order < created || it.rec.MountID != e.id || it.ns != ns {
			continue // seen in an earlier namespace, or another line of the same mount
		}
		it.hidden = covered[e.id]
		if it.hidden || it.autofs {
			continue
		}
		if pm := parentOf(e); pm != nil && pm != it {
			it.parent = pm
		}
	}
	return items
}

// newItem is the item of a mount first seen in ns, holding copies of
// the strings it keeps, not views of the table.
func newItem(ns *mpNamespace, m procfs.Mount, class procfs.FSClass, order int, in interner) *mpItem {
	it := &mpItem{major: m.Major, minor: m.Minor, ns: ns, class: class, order: order}
	it.autofs = m.FSType == "autofs"
	// The mountpoint is the end of the probe path, not another copy.
	probePath := ns.prefix + m.MountPoint
	if ns.prefix == "" {
		probePath = strings.Clone(m.MountPoint)
	}
	it.rec = layout.MountProbe{
		Mountpoint: probePath[len(ns.prefix):], ProbePath: probePath,
		Namespaces: []uint64{ns.inode}, ProbeNamespace: ns.inode, MountID: m.ID,
		FSType: in.get(m.FSType), Source: in.get(m.Source), Dev: m.Dev(), Root: in.get(m.Root),
		Class: className(class),
	}
	return it
}
