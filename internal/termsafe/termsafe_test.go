package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

func TestField(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain node-1", "plain node-1"},
		{"ünïcode ok", "ünïcode ok"},
		{"\x1b]52;c;aGk=\x07", `\x1b]52;c;aGk=\x07`},
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"del\x7f", `del\x7f`},
		{"c1\u009b31m", `c1\x9b31m`},
		{"raw \x9b byte", `raw \x9b byte`},
		{"bidi \u202egnp.exe", `bidi \u202egnp.exe`},
		{"\u2066\u2069\u200e\u200f\u061c", `\u2066\u2069\u200e\u200f\u061c`},
	}
	for _, c := range cases {
		if got := Field(c.in); got != c.want {
			t.Errorf("Field(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := Text("a\n\tb\x1b"); got != "a\n\tb\\x1b" {
		t.Errorf("Text kept %q", got)
	}
}

func TestWriterSplitsRunes(t *testing.T) {
	in := "host \u202e\x1b[31m OK ü\n"
	for cut := 0; cut <= len(in); cut++ {
		var b bytes.Buffer
		w := NewWriter(&b)
		w.Write([]byte(in[:cut]))
		w.Write([]byte(in[cut:]))
		w.Flush()
		if got, want := b.String(), `host \u202e\x1b[31m OK ü`+"\n"; got != want {
			t.Fatalf("cut %d: %q", cut, got)
		}
	}
}

func FuzzField(f *testing.F) {
	f.Add("\x1b]8;;http://x\x07link\x1b]8;;\x07")
	f.Add("\xc2")
	f.Fuzz(func(t *testing.T, s string) {
		out := Field(s)
		for _, r := range out {
			if unsafe(r) {
				t.Fatalf("%q left %U", s, r)
			}
		}
		if !strings.Contains(s, "\\") && Clean(s) && out != s {
			t.Fatalf("clean %q changed", s)
		}
	})
}
