package driverwords

import (
	"bytes"
	"testing"
)

// FuzzDecode: no input makes Decode panic, and a table it accepts encodes
// to a table it accepts again, with the same words.
func FuzzDecode(f *testing.F) {
	f.Add(wordsJSON)
	f.Add([]byte(`{"generated":"` + GeneratedHeader + `","sources":[],"words":[]}`))
	f.Add([]byte(`{"generated":`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := tab.Encode()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("a decoded table does not decode after encoding: %v", err)
		}
		if len(again.Words) != len(tab.Words) || len(again.Sources) != len(tab.Sources) {
			t.Fatalf("round trip changed the table: %d/%d words, %d/%d sources", len(again.Words), len(tab.Words), len(again.Sources), len(tab.Sources))
		}
		if !bytes.Equal(enc, mustEncode(t, again)) {
			t.Fatal("encoding is not stable")
		}
	})
}

func mustEncode(t *testing.T, tab *Table) []byte {
	t.Helper()
	b, err := tab.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
