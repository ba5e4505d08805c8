package signatures

import (
	"bytes"
	"testing"
)

// FuzzMatchLine: any bytes (a node's log lines are untrusted) match
// without panic, and every key a match carries is text of the line.
func FuzzMatchLine(f *testing.F) {
	for _, c := range Classes {
		if c.Example != "" {
			f.Add([]byte(c.Example))
		}
	}
	for _, fm := range Formats[:min(len(Formats), 40)] {
		if l, ok := Render(fm, ByID(fm.Class), FormJSON); ok {
			f.Add([]byte(l))
		}
	}
	f.Add([]byte(`Pod "a_b(0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d)" is terminated, but some volumes have not been cleaned up`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, m := range MatchLine(line) {
			if ByID(m.ID) == nil {
				t.Fatalf("match of unknown class %q", m.ID)
			}
			if m.Key != "" && !bytes.Contains(line, []byte(m.Key)) {
				t.Fatalf("key %q is not in the line %q", m.Key, line)
			}
		}
	})
}
