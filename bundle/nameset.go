package bundle

import (
	"hash/maphash"
	"math"
)

// nameSet is the set of entry names a walk has met, to refuse a name met
// twice. A bundle may hold up to DefaultLimits.MaxEntries (2,000,000)
// entries: a map keyed by the names themselves hashed each name twice per
// entry and rehashed every string as it grew, most of the walk's own cost
// on a bundle of a million empty entries (issue 43). Here each name is
// hashed once to 64 bits and looked up and inserted in one probe of an
// open-addressing table of those hashes (a Go map of them took a lookup
// and an insert, two probes, per name); the names sit in one byte arena,
// compared only when two hashes meet (a repeat, or a true collision,
// which goes to a small exact map). A slot points at its name in the
// arena itself (offset and length), so there is no index of names.
type nameSet struct {
	seed  maphash.Seed
	hash  func(string) uint64 // nil: maphash with seed (tests force collisions)
	slots []nameSlot          // power-of-two length, linear probing; h 0 is empty
	used  int
	arena []byte
	more  map[string]struct{} // names whose hash another name had first, or past the arena's reach
}

// nameArenaMax is the most name bytes slots point at (their offsets are
// 32-bit); a variable so that tests reach it.
var nameArenaMax uint64 = math.MaxUint32

// nameSlot is the first name met with hash h: arena[off:off+n].
type nameSlot struct {
	h      uint64
	off, n uint32
}

func newNameSet() *nameSet {
	return &nameSet{seed: maphash.MakeSeed()}
}

// add records name and reports whether it was there already.
func (s *nameSet) add(name string) (seen bool) {
	var h uint64
	if s.hash != nil {
		h = s.hash(name)
	} else {
		h = maphash.String(s.seed, name)
	}
	if h == 0 {
		h = 1 // 0 marks an empty slot; names that hash to 0 and 1 share a hash
	}
	if 4*(s.used+1) > 3*len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for j := h & mask; ; j = (j + 1) & mask {
		sl := &s.slots[j]
		switch sl.h {
		case 0:
			if uint64(len(s.arena))+uint64(len(name)) > nameArenaMax {
				// Beyond what a slot can point at (4 GiB of names): the
				// exact map.
				return s.addMore(name)
			}
			*sl = nameSlot{h: h, off: uint32(len(s.arena)), n: uint32(len(name))}
			s.used++
			s.arena = append(s.arena, name...)
			return false
		case h:
			if string(s.arena[sl.off:sl.off+sl.n]) == name {
				return true
			}
			return s.addMore(name)
		}
	}
}

// addMore records a name in the exact map and reports whether it was there.
func (s *nameSet) addMore(name string) bool {
	if _, ok := s.more[name]; ok {
		return true
	}
	if s.more == nil {
		s.more = map[string]struct{}{}
	}
	s.more[name] = struct{}{}
	return false
}

// grow doubles the table (1,024 slots at first) and puts every hash back.
func (s *nameSet) grow() {
	old := s.slots
	s.slots = make([]nameSlot, max(1024, 2*len(old)))
	mask := uint64(len(s.slots) - 1)
	for _, sl := range old {
		if sl.h == 0 {
			continue
		}
		j := sl.h & mask
		for s.slots[j].h != 0 {
			j = (j + 1) & mask
		}
		s.slots[j] = sl
	}
}
