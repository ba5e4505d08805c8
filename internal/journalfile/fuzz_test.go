package journalfile

import (
	"bytes"
	"testing"
)

// FuzzJournalFile: no file makes the reader panic, loop or read past its
// bounds; whatever it reads is text lines, each starting with a time or,
// for a continuation, a blank. Seeds are files built by the test (every
// layout and compression), not copies of a real machine's journal.
func FuzzJournalFile(f *testing.F) {
	for _, l := range []struct{ compact, keyed bool }{{false, false}, {false, true}, {true, true}} {
		for _, how := range []uint8{compNone, compLZ4, compZSTD, compXZ} {
			f.Add(sampleFile(f, l.compact, l.keyed, how))
		}
	}
	f.Add([]byte(Signature))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range [][]string{nil, kubeletMatch, {"_TRANSPORT=kernel"}} {
			text, it, err := readText(data, m)
			if err != nil {
				if text != "" || it != nil {
					t.Fatalf("an error (%v) with output", err)
				}
				continue
			}
			if it.f.Len() > len(data)/4 {
				t.Fatalf("%d entries listed in %d bytes", it.f.Len(), len(data))
			}
			if text == "" {
				continue
			}
			// One entry is one line plus indented continuations: no
			// field can start a line of its own (a forged kubelet line).
			entries, _, _ := readEntries(data, m)
			for _, e := range entries {
				for i, l := range bytes.Split(bytes.TrimSuffix([]byte(e), []byte("\n")), []byte("\n")) {
					if i > 0 && (len(l) == 0 || l[0] != ' ') {
						t.Fatalf("entry %q holds a line of its own: %q", e, l)
					}
				}
			}
			for _, l := range bytes.Split(bytes.TrimSuffix([]byte(text), []byte("\n")), []byte("\n")) {
				if len(l) == 0 || (l[0] != ' ' && !bytes.HasPrefix(l, []byte("1")) && !bytes.HasPrefix(l, []byte("2")) && !bytes.HasPrefix(l, []byte("0"))) {
					if len(l) > 0 && l[0] >= '0' && l[0] <= '9' {
						continue
					}
					t.Fatalf("line %q is neither an entry nor a continuation", l)
				}
			}
		}
	})
}
