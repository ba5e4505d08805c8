package isolate

import (
	"strings"
	"testing"
)

func TestComposeNote(t *testing.T) {
	big := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name  string
		lines []*noteLine
		want  string
		ok    bool
	}{
		{"none", nil, "", true},
		{"one", []*noteLine{{"a", "s"}}, "a", true},
		{"full forms while they fit", []*noteLine{{"a b", "a"}, {"c d", "c"}}, "a b\nc d", true},
		{"exactly full", []*noteLine{{big(NoteSize - 2), ""}, {"z", ""}}, big(NoteSize-2) + "\nz", true},
		{"the line gaining most goes short", []*noteLine{{big(100), "s1"}, {big(NoteSize - 50), "s2"}}, big(100) + "\ns2", true},
		{"as few short as needed", []*noteLine{{big(3000), "s1"}, {big(3000), "s2"}, {big(3000), "s3"}}, "s1\ns2\n" + big(3000), true},
		{"every line short", []*noteLine{{big(4095), "s1"}, {big(4095), "s2"}, {big(4095), "s3"}}, "s1\ns2\ns3", true},
		{"no short form to fall back on", []*noteLine{{big(3000), ""}, {big(3000), ""}}, "", false},
		{"short forms too long", []*noteLine{{big(3000), big(2100)}, {big(3000), big(2100)}}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := composeNote(tc.lines)
			if got != tc.want || ok != tc.ok {
				t.Errorf("composeNote = %q (%d bytes), %v; want %q, %v", trim(got), len(got), ok, trim(tc.want), tc.ok)
			}
			if ok && len(got) > NoteSize {
				t.Errorf("note of %d bytes, over %d", len(got), NoteSize)
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 40 {
		return s[:20] + "…" + s[len(s)-20:]
	}
	return s
}
