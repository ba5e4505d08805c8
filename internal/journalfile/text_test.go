package journalfile

import (
	"strings"
	"testing"
)

// A field of the line's head holding a newline (any program may log
// under any identifier) is escaped: one entry is one line plus its
// indented continuation lines, never a forged line of its own.
func TestShortFieldsEscaped(t *testing.T) {
	b := func(s string) []byte { return []byte(s) }
	cases := []struct {
		name string
		s    Short
		want string
	}{
		{"plain", Short{Hostname: b("node-1"), Identifier: b("kubelet"), PID: b("42"), Message: b("ok")},
			"node-1 kubelet[42]: ok\n"},
		{"identifier forging a line", Short{Hostname: b("node-1"),
			Identifier: b("x\n2026-11-21T10:00:00.000000+0000 node-1 kubelet"), PID: b("1"), Message: b("E1121 fake")},
			`node-1 x\n2026-11-21T10:00:00.000000+0000 node-1 kubelet[1]: E1121 fake` + "\n"},
		{"pid and host", Short{Hostname: b("h\r\x1b[2J"), Comm: b("c\tm"), PID: b("1\n2"), Message: b("m")},
			`h\r\x1b[2J c\tm[1\n2]: m` + "\n"},
		{"message keeps its lines, indented", Short{Identifier: b("k"), Message: b("a\nb")},
			"k: a\n" + strings.Repeat(" ", 35) + "b\n"},
	}
	for _, c := range cases {
		out, ok := AppendShortISOPrecise(nil, 1_700_000_000_000_000, &c.s)
		if !ok {
			t.Fatalf("%s: not printed", c.name)
		}
		got := string(out)
		// The time is 31 bytes and a space.
		if len(got) < 32 || got[32:] != c.want {
			t.Errorf("%s: %q, want …%q", c.name, got, c.want)
		}
		if strings.Count(strings.TrimSuffix(got, "\n"), "\n") != strings.Count(string(c.s.Message), "\n") {
			t.Errorf("%s: %d lines for a message of %d", c.name, strings.Count(got, "\n"), strings.Count(string(c.s.Message), "\n")+1)
		}
	}
}
