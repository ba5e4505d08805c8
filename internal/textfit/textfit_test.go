package textfit

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriterFits(t *testing.T) {
	long := "    " + strings.Repeat("ünïcode path/segment ", 10) + strings.Repeat("x", 100)
	cases := []struct {
		name  string
		in    string
		wrap  bool
		lines int // want at least this many output lines
	}{
		{"short", "a short line\n", false, 1},
		{"elided", long + "\n", false, 1},
		{"wrapped", long + "\n", true, 4},
		{"no newline", long, true, 4},
		{"trailing spaces", strings.Repeat(" ", 200) + "\n", false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			w := NewWriter(&b, 40, c.wrap)
			if _, err := w.Write([]byte(c.in)); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			out := strings.TrimSuffix(b.String(), "\n")
			lines := strings.Split(out, "\n")
			if len(lines) < c.lines {
				t.Errorf("%d lines, want at least %d:\n%s", len(lines), c.lines, out)
			}
			for _, l := range lines {
				if Len(l) > 40 {
					t.Errorf("line of %d runes: %q", Len(l), l)
				}
			}
			if c.wrap {
				// Nothing lost: the words come back in order.
				if got, want := strings.Join(strings.Fields(out), ""), strings.Join(strings.Fields(c.in), ""); got != want {
					t.Errorf("wrapped text lost something:\n got %q\nwant %q", got, want)
				}
			}
			if c.name == "elided" && !strings.HasSuffix(lines[0], "…") {
				t.Errorf("elided line does not say so: %q", lines[0])
			}
		})
	}
}

func TestElide(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
		{"ééééé", 4, "ééé…"},
		{"ab", 1, "a"[:0] + "…"},
	} {
		if got := Elide(c.in, c.n); got != c.want {
			t.Errorf("Elide(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
