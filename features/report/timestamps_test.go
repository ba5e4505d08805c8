package report

import (
	"testing"
	"time"
)

func TestLineTime(t *testing.T) {
	ref := time.Date(2026, 11, 21, 9, 18, 14, 0, time.UTC)
	jan := time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		line string
		ref  time.Time
		want string // RFC 3339 nano, "" for none
	}{
		{"journal short-iso-precise", "2026-11-23T19:26:17.027707+0000 vm kubelet[26344]: E1123 x", ref, "2026-11-23T19:26:17.027707Z"},
		{"rfc3339 with offset", "2026-11-23T20:26:17+01:00 vm kernel: x", ref, "2026-11-23T19:26:17Z"},
		{"CRI log", "2026-11-21T09:00:00.123456789Z stderr F I1121 09:00:00.1 x", ref, "2026-11-21T09:00:00.123456789Z"},
		{"syslog", "Apr 04 16:25:40 node7 kernel: libceph: mon0 session lost", ref, "2026-04-04T16:25:40Z"},
		{"syslog space-padded day", "Apr  4 16:25:40 node7 kernel: x", ref, "2026-04-04T16:25:40Z"},
		{"syslog micro", "Nov 21 09:00:01.250000 node7 kubelet[1]: x", ref, "2026-11-21T09:00:01.25Z"},
		{"syslog December read in January", "Dec 31 23:59:59 node7 kernel: x", jan, "2026-12-31T23:59:59Z"},
		{"syslog next day kept in the year", "Nov 22 01:00:00 node7 kernel: x", ref, "2026-11-22T01:00:00Z"},
		{"klog header only", `Nov 21 kubelet[1]: E1121 09:10:11.500000 1 kubelet.go:2] "x"`, ref, "2026-11-21T09:10:11.5Z"},
		{"klog glued to a word", `xI0404 16:27:02.104221 x`, ref, ""},
		{"klog after a quote", `log="I0404 16:27:02.104221 x"`, ref, "2026-04-04T16:27:02.104221Z"},
		{"no time", "healthz check syncloop failed", ref, ""},
		{"dmesg relative", "[12345.678901] INFO: task kubelet:1 blocked", ref, ""},
		{"not a date", "2026-13-45T99:99:99Z x", ref, ""},
		{"short", "Apr", ref, ""},
		{"empty", "", ref, ""},
		{"bad month", "Foo 04 16:25:40 node7", ref, ""},
		{"klog bad month", "I1304 16:27:02.104221 x", ref, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := lineTime(c.line, c.ref)
			if c.want == "" {
				if ok {
					t.Errorf("lineTime(%q) = %v, want none", c.line, got)
				}
				return
			}
			if !ok || got.Format(time.RFC3339Nano) != c.want {
				t.Errorf("lineTime(%q) = %v, %v; want %s", c.line, got.Format(time.RFC3339Nano), ok, c.want)
			}
		})
	}
}

// FuzzLineTime: any line, any bytes: no panic, and a time found lies in
// a sane range (a year-less time within a year and a day of ref).
func FuzzLineTime(f *testing.F) {
	for _, s := range []string{
		"2026-11-23T19:26:17.027707+0000 vm kubelet[26344]: x",
		"Apr 04 16:25:40 node7 kernel: x",
		"Nov 21 09:00:01.250000 node7 x",
		`x E1121 09:10:11.500000 1 kubelet.go:2] "x"`,
		"2026-11-21T09:00:00.123456789Z stderr F x",
		"Apr 04 16:25:40.",
		"I0404 16:27:02.10422",
	} {
		f.Add(s)
	}
	ref := time.Date(2026, 11, 21, 9, 18, 14, 0, time.UTC)
	f.Fuzz(func(t *testing.T, line string) {
		got, ok := lineTime(line, ref)
		if !ok {
			return
		}
		if len(line) >= 10 && line[4] == '-' {
			return // a full RFC 3339 date says its own year
		}
		if got.After(ref.Add(25*time.Hour)) || got.Before(ref.AddDate(-1, 0, -1)) {
			t.Errorf("lineTime(%q) = %v, outside the year before ref", line, got)
		}
	})
}
