package procfs

import (
	"errors"
	"testing"
)

func TestParseUptime(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Uptime
	}{
		{"350735.47 234388.90\n", Uptime{350735.47, 234388.90}},
		{"295.69 524.11", Uptime{295.69, 524.11}},
		{"12\n", Uptime{Seconds: 12}},
	} {
		got, err := ParseUptime([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("ParseUptime(%q) = %+v, %v", tt.in, got, err)
		}
	}
	for in, want := range map[string]error{"": ErrEmpty, "\n": ErrEmpty, "NaN 1": ErrMalformed, "1 Inf": ErrMalformed, "-5 1": ErrMalformed, "1e999 1": ErrMalformed} {
		if _, err := ParseUptime([]byte(in)); !errors.Is(err, want) {
			t.Errorf("ParseUptime(%q) err = %v, want %v", in, err, want)
		}
	}
}
