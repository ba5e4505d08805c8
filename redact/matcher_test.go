package redact

import (
	"slices"
	"testing"
)

// TestMatcherTables: the 16-bit table finds exactly what the 32-bit one
// does (the built-in rules use the first; custom rules that make the
// automaton too large for it use the second).
func TestMatcherTables(t *testing.T) {
	r := Default()
	m := r.m
	if m.next16 == nil {
		t.Fatalf("the built-in automaton (%d entries) does not fit 16-bit entries", len(m.next))
	}
	wide := *m
	wide.next16 = nil
	in := append(mixedLogEvery(1<<20, 4), ruleCasesText()...)
	got := m.scan(in, nil)
	want := wide.scan(in, nil)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("16-bit table: %d events, 32-bit: %d", len(got), len(want))
	}
	// Enough words to overflow 16 bits: the matcher falls back.
	var words [][]byte
	for i := 0; i < 4000; i++ {
		words = append(words, []byte{byte('a' + i%26), byte('a' + i/26%26), byte('0' + i%10), byte('A' + i/260%26), '_', 'x'})
	}
	big := newMatcher(words)
	if big.next16 != nil {
		t.Fatalf("%d entries kept in 16 bits", len(big.next))
	}
	if ev := big.scan([]byte("..aa0A_x.."), nil); len(ev) != 1 || ev[0].end != 8 {
		t.Fatalf("32-bit table: %v", ev)
	}
}

func ruleCasesText() []byte {
	var b []byte
	for _, tc := range ruleCases() {
		b = append(b, tc.in...)
		b = append(b, '\n')
	}
	return b
}

// TestMatcherRowMultiply: the multiply scan16 uses for a state's row is
// the division it replaces, for every state of every class count the
// 16-bit table can hold.
func TestMatcherRowMultiply(t *testing.T) {
	for nc := uint64(1); nc <= 256; nc++ {
		recip := (1<<32 + nc - 1) / nc
		for s := uint64(0); s < 1<<16; s += nc {
			if got := (s * recip) >> 32; got != s/nc {
				t.Fatalf("nclass %d, state %d: row %d, want %d", nc, s, got, s/nc)
			}
		}
	}
}
