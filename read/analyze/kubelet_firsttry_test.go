package analyze_test

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// TestKubeletFirstTryAtStartIsInfo: a volume operation's one failure,
// its first try (retried after the kubelet's initial 500ms) in the
// kubelet's first minute (m=+ on its monotonic clock), is a kubelet
// starting: info. A kubelet up for an hour, a second failure or a later
// backoff step stay a warning.
func TestKubeletFirstTryAtStartIsInfo(t *testing.T) {
	const uid = "a67295cf-c317-458e-9aec-775d024d89a2"
	line := func(clock, uptime, backoff string) string {
		return `E0908 16:03:` + clock + `.790374     787 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/projected/` + uid + `-kube-api-access-dpjpr podName:` + uid + ` nodeName:}" failed. No retries permitted until 2023-09-08 16:03:23.290350415 +0000 UTC m=+` + uptime + ` (durationBeforeRetry ` + backoff + `). Error: MountVolume.SetUp failed for volume "kube-api-access-dpjpr" (UniqueName: "kubernetes.io/projected/` + uid + `-kube-api-access-dpjpr") pod "kindnet-bm9w5" (UID: "` + uid + `") : configmap "kube-root-ca.crt" not found`
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  analyze.Severity
	}{
		{"first try, 4s after the start", []string{line("22", "4.300346921", "500ms")}, analyze.Info},
		{"first try, an hour after the start", []string{line("22", "3604.300346921", "500ms")}, analyze.Warning},
		{"a second failure", []string{line("22", "4.300346921", "500ms"), line("23", "5.800346921", "1s")}, analyze.Warning},
		{"a later backoff step", []string{line("22", "40.300346921", "8s")}, analyze.Warning},
		{"no monotonic clock", []string{strings.Replace(line("22", "4.3", "500ms"), " m=+4.3", "", 1)}, analyze.Warning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyzeLinesOf(t, "kubelet", tc.lines...)
			fs := findings(rep, "volume-mount-failed")
			if len(fs) != 1 {
				t.Fatalf("want one volume-mount-failed, got %v\n%s", ids(rep), dump(rep))
			}
			if fs[0].Severity != tc.want {
				t.Errorf("severity %s, want %s: %s", fs[0].Severity, tc.want, fs[0].Summary)
			}
			if tc.want == analyze.Info && !strings.Contains(fs[0].Summary, "after the kubelet started") {
				t.Errorf("the summary does not say why: %s", fs[0].Summary)
			}
		})
	}
}
