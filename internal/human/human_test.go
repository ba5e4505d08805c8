package human

import (
	"strings"
	"testing"
)

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1024: "1.0 KiB", 1536: "1.5 KiB",
		5 << 20: "5.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"  one\ntwo\n", "one"},
		{strings.Repeat("x", 301), strings.Repeat("x", 300) + "…"},
		{strings.Repeat("é", 200), strings.Repeat("é", 150) + "…"},
	}
	for _, tc := range tests {
		if got := FirstLine(tc.in); got != tc.want {
			t.Errorf("FirstLine(%.20q…) = %.20q…, want %.20q…", tc.in, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	if got := Cut("héllo", 2); got != "h…" {
		t.Errorf("Cut at a rune's middle = %q", got)
	}
	if got := Cut("abc", 3); got != "abc" {
		t.Errorf("Cut of a short string = %q", got)
	}
}
