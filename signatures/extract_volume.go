package signatures

import (
	"regexp"
	"slices"
	"sync"
)

// A volume's match is looked for only where one can start (volumeStarts),
// each place with the expression anchored there (volumeAt): see
// volumeSubmatch in match.go, whose slow path (reVolume from the first
// such place) TestExtractShortcuts and FuzzExtractShortcuts hold it to.

// maxVolumeStarts is how many places a line's volume may start at that
// volumeSubmatch tries one by one.
const maxVolumeStarts = 32

var (
	// reVolumeAt is reVolume anchored at its input's second rune, the
	// first (the byte before a place a match may start) being read only
	// as the context of \b; reVolumeAt0 at the input's start.
	reVolumeAt = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?s:.)(?:` + reVolume().String() + `)`)
	})
	reVolumeAt0 = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?:` + reVolume().String() + `)`)
	})
)

// volumeAt is reVolume's match starting at line[c], if any. The byte
// before c is an ASCII byte, or one the expression reads as a rune of
// its own (a place to start is an ASCII letter or the lead byte of 'ſ'),
// which \b reads as it reads that byte in the whole line: a word byte or
// not.
func volumeAt(line []byte, c int) [][]byte {
	if c == 0 {
		return reVolumeAt0().FindSubmatch(line)
	}
	m := reVolumeAt().FindSubmatch(line[c-1:])
	if m != nil {
		m[0] = m[0][1:]
	}
	return m
}

// volumeStarts appends to starts, in order, every place in line a match
// of reVolume can start at (see volumeSubmatch); ok is false when there
// are more than cap(starts).
func volumeStarts(line []byte, starts []int) ([]int, bool) {
	add := func(c int) bool {
		if len(starts) == cap(starts) {
			return false
		}
		starts = append(starts, c)
		return true
	}
	for _, w := range []string{"volume", "req-id", "pec.name"} {
		for from := 0; ; {
			i := indexFold(line[from:], w)
			if i < 0 {
				break
			}
			i += from
			from = i + 1
			ok := true
			switch w {
			case "volume":
				if i >= 4 && lower(line[i-4]) == 'f' && lower(line[i-3]) == 'o' && lower(line[i-2]) == 'r' && line[i-1] == ' ' {
					ok = add(i - 4)
				}
				ok = ok && add(i)
			case "req-id":
				ok = add(i)
			case "pec.name":
				if i >= 1 && lower(line[i-1]) == 's' {
					ok = add(i - 1)
				} else if i >= 2 && line[i-2] == 0xc5 && line[i-1] == 0xbf {
					ok = add(i - 2)
				}
			}
			if !ok {
				return nil, false
			}
		}
	}
	slices.Sort(starts)
	return starts, true
}
