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

func TestParseLoadavg(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Loadavg
	}{
		{"0.16 0.21 0.09 1/85 5837\n", Loadavg{0.16, 0.21, 0.09, 1, 85, 5837}},
		{"98.50 97.10 90.00 2/1203 44210\n", Loadavg{98.5, 97.1, 90, 2, 1203, 44210}},
		{"1.00 2.00 3.00", Loadavg{1, 2, 3, -1, -1, -1}},
		{"1.00 2.00 3.00 x/y z", Loadavg{1, 2, 3, -1, -1, -1}},
	} {
		got, err := ParseLoadavg([]byte(tt.in))
		if err != nil || got != tt.want {
			t.Errorf("ParseLoadavg(%q) = %+v, %v", tt.in, got, err)
		}
	}
	for in, want := range map[string]error{"": ErrEmpty, "1.0 2.0": ErrMissingField, "a b c": ErrMalformed} {
		if _, err := ParseLoadavg([]byte(in)); !errors.Is(err, want) {
			t.Errorf("ParseLoadavg(%q) err = %v, want %v", in, err, want)
		}
	}
}

func TestParseMeminfo(t *testing.T) {
	in := "MemTotal:       24684092 kB\nMemFree:        24433988 kB\nHugePages_Total:       4\n" +
		"garbage line\nBroken:   12 MB\nHugepagesize:       2048 kB\n"
	got, err := ParseMeminfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"MemTotal": 24684092, "MemFree": 24433988, "HugePages_Total": 4, "Hugepagesize": 2048}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	for in, want := range map[string]error{"": ErrEmpty, "nothing here\n": ErrMalformed} {
		if _, err := ParseMeminfo([]byte(in)); !errors.Is(err, want) {
			t.Errorf("ParseMeminfo(%q) err = %v, want %v", in, err, want)
		}
	}
}
