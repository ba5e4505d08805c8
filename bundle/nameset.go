package bundle

import "hash/maphash"

// nameSet is the set of entry names a walk has met, to refuse a name met
// twice. A bundle may hold up to DefaultLimits.MaxEntries (2,000,000)
// entries: a map keyed by the names themselves hashed each name twice per
// entry and rehashed every string as it grew, most of the walk's own cost
// on a bundle of a million empty entries (issue 43). Here each name is
// hashed once to 64 bits; the map holds those, and the names sit in one
// byte arena, compared only when two hashes meet (a repeat, or a true
// collision, which goes to a small exact map).
type nameSet struct {
	seed  maphash.Seed
	hash  func(string) uint64 // nil: maphash with seed (tests force collisions)
	first map[uint64]int      // hash → index of the first name with it
	arena []byte
	ends  []int               // name i is arena[ends[i-1]:ends[i]]
	more  map[string]struct{} // names whose hash another name had first
}

func newNameSet() *nameSet {
	return &nameSet{seed: maphash.MakeSeed(), first: map[uint64]int{}}
}

func (s *nameSet) name(i int) string {
	start := 0
	if i > 0 {
		start = s.ends[i-1]
	}
	return string(s.arena[start:s.ends[i]])
}

// add records name and reports whether it was there already.
func (s *nameSet) add(name string) (seen bool) {
	var h uint64
	if s.hash != nil {
		h = s.hash(name)
	} else {
		h = maphash.String(s.seed, name)
	}
	if i, ok := s.first[h]; ok {
		if s.name(i) == name {
			return true
		}
		if _, ok := s.more[name]; ok {
			return true
		}
		if s.more == nil {
			s.more = map[string]struct{}{}
		}
		s.more[name] = struct{}{}
		return false
	}
	s.first[h] = len(s.ends)
	s.arena = append(s.arena, name...)
	s.ends = append(s.ends, len(s.arena))
	return false
}
