package signatures

import "strings"

// The prefilter: one pass over a line tells which classes may match it.
// Each alternative of a class's first word is represented by one 4-byte
// window of it (lower-cased; the rarest-looking one); a line is folded to
// lower case as it is read, and a window of the line found in the table
// makes its classes candidates. Only candidates are tested word by word.
// A line of ordinary noise costs one pass and a bitmap lookup per byte.

const gramBits = 1 << 16

type gramIndex struct {
	// bitmap of hash(gram), to skip the map for almost every window.
	bitmap [gramBits / 64]uint64
	// classes of each gram, as a set of class indexes.
	classes map[uint32]classSet
	// always are the classes with an alternative shorter than a gram.
	always classSet
}

// classSet is a set of class indexes.
type classSet []uint64

func newClassSet(n int) classSet { return make(classSet, (n+63)/64) }

func (s classSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s classSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }
func (s classSet) union(o classSet) {
	for i := range s {
		s[i] |= o[i]
	}
}
func (s classSet) reset(o classSet) { copy(s, o) }
func (s classSet) empty() bool {
	for _, w := range s {
		if w != 0 {
			return false
		}
	}
	return true
}

func gramHash(g uint32) uint32 { return (g * 2654435761) >> 16 }

// rarity scores a window: lower is rarer in ordinary log text (letters
// of English text are common, punctuation and digits rare).
func rarity(w string) int {
	score := 0
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case strings.IndexByte("etaoinsrhl ", c) >= 0:
			score += 4
		case strings.IndexByte("dcumfpgwybv", c) >= 0:
			score += 2
		case c >= 'a' && c <= 'z':
			score++
		}
	}
	return score
}

func buildGrams(cs []compiled) *gramIndex {
	gi := &gramIndex{classes: map[uint32]classSet{}, always: newClassSet(len(cs))}
	for ci := range cs {
		for _, alt := range cs[ci].words[0] {
			a := strings.ToLower(string(alt))
			if len(a) < 4 {
				gi.always.add(ci)
				continue
			}
			best := a[:4]
			for i := 1; i+4 <= len(a); i++ {
				if w := a[i : i+4]; rarity(w) < rarity(best) {
					best = w
				}
			}
			g := uint32(best[0])<<24 | uint32(best[1])<<16 | uint32(best[2])<<8 | uint32(best[3])
			s := gi.classes[g]
			if s == nil {
				s = newClassSet(len(cs))
				gi.classes[g] = s
			}
			s.add(ci)
			h := gramHash(g)
			gi.bitmap[h/64] |= 1 << (h % 64)
		}
	}
	return gi
}

// candidates fills set with the classes a line may match.
func (gi *gramIndex) candidates(line []byte, set classSet) {
	set.reset(gi.always)
	var g uint32
	for i, b := range line {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		g = g<<8 | uint32(b)
		if i < 3 {
			continue
		}
		h := gramHash(g)
		if gi.bitmap[h/64]&(1<<(h%64)) == 0 {
			continue
		}
		if s, ok := gi.classes[g]; ok {
			set.union(s)
		}
	}
}
