package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// A kubelet that logged slow sync-loop iterations earlier but whose
// healthz, collected in the same run, says "[+]syncloop ok": the logs are
// history (info), not the incident (warning); without the healthz, or with
// it failing, they stay a warning or worse.
func TestSyncloopLogsOverruledByHealthz(t *testing.T) {
	const logLine = `2026-11-23T09:00:01.000000+0000 node1 kubelet[812]: E1123 09:00:01.000000     812 kubelet.go:2513] "Housekeeping took longer than expected" err="sync Loop took longer than expected" expected="1s" actual="12.1s"` + "\n"
	cases := []struct {
		name    string
		healthz string
		want    analyze.Severity
		summary string
	}{
		{"healthz ok", "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n", analyze.Info, "earlier:"},
		{"no healthz", "", analyze.Warning, "takes longer than expected"},
		{"healthz failing", "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n", analyze.Critical, "syncloop failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string][]byte{
				"host/summary.json":   []byte(`{"hostname":"node1"}`),
				"journal/kubelet.log": []byte(logLine),
			}
			if tc.healthz != "" {
				files["kubelet/healthz.txt"] = []byte(tc.healthz)
			}
			r := analyzeFiles(t, files)
			f := only(t, r, "kubelet-syncloop-unhealthy")
			if f.Severity != tc.want || !strings.Contains(f.Summary, tc.summary) {
				t.Errorf("severity %s summary %q; want %s and %q", f.Severity, f.Summary, tc.want, tc.summary)
			}
		})
	}
}
