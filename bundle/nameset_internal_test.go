package bundle

import (
	"fmt"
	"testing"
)

// A name is seen once, whatever the hashes do: with the real hash, and
// with every name forced onto one hash (each meeting another's).
func TestNameSet(t *testing.T) {
	names := []string{"manifest.json", "mounts/mounts.json", "", "a", "mounts/mounts.json.", "日本/x"}
	for i := 0; i < 1000; i++ {
		names = append(names, fmt.Sprintf("junk/%07d", i))
	}
	for _, tc := range []struct {
		desc  string
		hash  func(string) uint64
		arena uint64 // the arena's reach, when not the real one
	}{
		{"maphash", nil, 0},
		{"every hash the same", func(string) uint64 { return 42 }, 0},
		{"two hashes", func(s string) uint64 { return uint64(len(s) % 2) }, 0},
		{"the arena full after 100 bytes", nil, 100},
	} {
		reach := nameArenaMax
		if tc.arena > 0 {
			nameArenaMax = tc.arena
		}
		s := newNameSet()
		s.hash = tc.hash
		for _, n := range names {
			if s.add(n) {
				t.Errorf("%s: %q seen before it was added", tc.desc, n)
			}
		}
		for _, n := range names {
			if !s.add(n) {
				t.Errorf("%s: %q added twice unseen", tc.desc, n)
			}
		}
		if s.add("not/added") != false || !s.add("not/added") {
			t.Errorf("%s: a new name after the repeats", tc.desc)
		}
		if tc.arena > 0 && len(s.more) < len(names)-20 {
			t.Errorf("%s: %d names in the exact map, want the names past the arena's reach", tc.desc, len(s.more))
		}
		nameArenaMax = reach
	}
}

// BenchmarkNameSet compares, in one run, the set of names the walk keeps
// with the map of names it kept before (look up, then insert), over
// 1,000,000 entry names.
//
//	go test -run '^$' -bench NameSet -benchtime 3x -benchmem ./bundle
func BenchmarkNameSet(b *testing.B) {
	names := make([]string, 1_000_000)
	for i := range names {
		names[i] = fmt.Sprintf("junk/%07d", i)
	}
	b.Run("map-of-names", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			seen := map[string]bool{}
			for _, n := range names {
				if seen[n] {
					b.Fatal("seen")
				}
				seen[n] = true
			}
		}
	})
	b.Run("nameSet", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s := newNameSet()
			for _, n := range names {
				if s.add(n) {
					b.Fatal("seen")
				}
			}
		}
	})
}
