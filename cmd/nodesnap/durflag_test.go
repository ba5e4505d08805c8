package main

import (
	"testing"
	"time"
)

func TestParseDays(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0", 0, true},
		{"-1h", 0, false},
		{"-2d", 0, false},
		{"d", 0, false},
		{"7x", 0, false},
		{"1d-1h", 0, false},
		{"99999d", 0, false},
		{"", 0, false},
	} {
		got, err := parseDays(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("parseDays(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
	for d, want := range map[time.Duration]string{24 * time.Hour: "1d", 36 * time.Hour: "1d12h0m0s", 2 * time.Hour: "2h0m0s"} {
		if got := formatDays(d); got != want {
			t.Errorf("formatDays(%v) = %q, want %q", d, got, want)
		}
	}
}

// FuzzParseDays: --since is typed by people; no input panics, and a
// value accepted is never negative.
func FuzzParseDays(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "-1h", "90m", "d", "1dd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseDays(s); err == nil && d < 0 {
			t.Fatalf("parseDays(%q) = %v", s, d)
		}
	})
}
