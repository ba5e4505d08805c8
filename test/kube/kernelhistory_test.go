package kube_test

import (
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// kernelHistory leaves out of the healthy-node check only a finding whose
// every line is a kernel record stamped before the suite began: a newer
// record, an unstamped line or a line of another file keeps it counted.
func TestKernelHistory(t *testing.T) {
	since := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	kernel := func(path string, lines ...string) analyze.Finding {
		e := analyze.Evidence{Path: path}
		for i, l := range lines {
			e.Lines = append(e.Lines, analyze.Line{N: i + 1, Text: l})
		}
		return analyze.Finding{Evidence: []analyze.Evidence{e}}
	}
	old := "2026-12-07T11:59:58,123456+00:00 node kernel: loop3: detected capacity change"
	oldNoColon := "2026-12-07T11:59:59.5+0000 node kernel: INFO: task kworker blocked"
	newer := "2026-12-07T12:00:01.000000+00:00 node kernel: loop3: detected capacity change"
	for _, c := range []struct {
		name string
		f    analyze.Finding
		want bool
	}{
		{"old kernel records", kernel("journal/kernel.log", old, oldNoColon), true},
		{"old dmesg record", kernel("journal/dmesg.log", old), true},
		{"one record after the start", kernel("journal/kernel.log", old, newer), false},
		{"an unstamped line", kernel("journal/kernel.log", old, "[  12.345] loop3: detected"), false},
		{"another file", kernel("journal/kubelet.log", old), false},
		{"no lines", kernel("journal/kernel.log"), false},
		{"no evidence", analyze.Finding{}, false},
	} {
		if got := kernelHistory(c.f, since); got != c.want {
			t.Errorf("%s: kernelHistory = %v, want %v", c.name, got, c.want)
		}
	}
}
