package signatures

import "strings"

// The prefilter: one pass over a line tells which classes may match it.
// Each alternative of a class's first word is represented by one 4-byte
// window of it (lower-cased; one that looks rare in log text and is
// shared by few other alternatives); a line is folded to lower case as it
// is read, and a window of the line found in the table makes its
// alternatives candidates. Only candidates are tested word by word. A
// line of ordinary noise costs one pass and a bitmap lookup per byte.

const gramBits = 1 << 16

// altRef names one alternative of the first word of a class.
type altRef struct{ class, alt int }

type gramIndex struct {
	// bitmap of hash(gram), to skip the map for almost every window.
	bitmap [gramBits / 64]uint64
	// alts are the alternatives each gram stands for, by global index.
	alts map[uint32][]int
	// refs maps a global alternative index to its class and position.
	refs []altRef
	// always are the alternatives shorter than a gram, alwaysClasses
	// their classes.
	always, alwaysClasses bitSet
}

// bitSet is a set of small integers.
type bitSet []uint64

func newBitSet(n int) bitSet    { return make(bitSet, (n+63)/64) }
func (s bitSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s bitSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }
func (s bitSet) reset(o bitSet) { copy(s, o) }

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
	gi := &gramIndex{alts: map[uint32][]int{}}
	var lowered []string
	for ci := range cs {
		for ai, alt := range cs[ci].words[0] {
			gi.refs = append(gi.refs, altRef{ci, ai})
			lowered = append(lowered, strings.ToLower(string(alt)))
		}
	}
	gi.always = newBitSet(len(gi.refs))
	gi.alwaysClasses = newBitSet(len(cs))
	// shared counts the alternatives holding each window: a window of
	// many is a poor filter.
	shared := map[string]int{}
	for _, a := range lowered {
		seen := map[string]bool{}
		for i := 0; i+4 <= len(a); i++ {
			if w := a[i : i+4]; !seen[w] {
				seen[w] = true
				shared[w]++
			}
		}
	}
	for ai, a := range lowered {
		if len(a) < 4 {
			gi.always.add(ai)
			gi.alwaysClasses.add(gi.refs[ai].class)
			continue
		}
		best, bestScore := "", 0
		for i := 0; i+4 <= len(a); i++ {
			w := a[i : i+4]
			if score := rarity(w) + 4*(shared[w]-1); best == "" || score < bestScore {
				best, bestScore = w, score
			}
		}
		g := uint32(best[0])<<24 | uint32(best[1])<<16 | uint32(best[2])<<8 | uint32(best[3])
		gi.alts[g] = append(gi.alts[g], ai)
		h := gramHash(g)
		gi.bitmap[h/64] |= 1 << (h % 64)
	}
	return gi
}

// candidates fills alts with the alternatives a line may hold and
// classes with their classes, and reports whether there is any.
func (gi *gramIndex) candidates(line []byte, alts, classes bitSet) bool {
	alts.reset(gi.always)
	classes.reset(gi.alwaysClasses)
	found := false
	for _, w := range gi.always {
		found = found || w != 0
	}
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
		for _, ai := range gi.alts[g] {
			alts.add(ai)
			classes.add(gi.refs[ai].class)
			found = true
		}
	}
	return found
}
