package analyze_test

import (
	"strings"
	"testing"
)

// A kubelet's record cut before its pod names the pod's volume by its
// pod-local name only: when one pod has a volume of that name failing the
// same way, the record is that pod's, not a finding about a "pod" named
// like the volume; when two pods have one, it stays on its own.
func TestCutRecordJoinsItsPodsFinding(t *testing.T) {
	const uid = "5b0e2c1a-7d3f-4e8a-9c6b-1f2e3d4c5b6a"
	wait := func(hh, pod, tail string) string {
		return `Nov 21 09:` + hh + ` node1 kubelet[2211]: E1121 09:` + hh + `.000000    2211 kubelet.go:2075] "Unable to attach or mount volumes for pod; skipping pod" err="unmounted volumes=[data], unattached volumes=[data kube-api-access-x]: context deadline exceeded" pod="` + pod + tail
	}
	one := []string{
		wait("10:01", "shop/db-0", `"`),
		`Nov 21 09:10:01 node1 kubelet[2211]: E1121 09:10:01.000000    2211 pod_workers.go:1324] "Error syncing pod, skipping" err="unmounted volumes=[data], unattached volumes=[data kube-api-access-x]: context deadline exceeded" pod="shop/db-0" podUID="` + uid + `"`,
		wait("12:03", "sh", ``), // cut inside pod=
	}
	r := analyzeFiles(t, map[string][]byte{
		"host/summary.json":   []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(strings.Join(one, "\n") + "\n"),
	})
	f := only(t, r, "pod-volumes-not-mounted")
	if !strings.Contains(f.Subject, "shop/db-0") {
		t.Errorf("subject %q:\n%s", f.Subject, dump(r))
	}
	n := 0
	for _, e := range f.Evidence {
		for _, l := range e.Lines {
			if l.N == 3 {
				n++
			}
		}
	}
	if n != 1 {
		t.Errorf("the cut record is not in the pod's finding:\n%s", dump(r))
	}

	two := []string{wait("10:01", "shop/db-0", `"`), wait("10:02", "shop/db-1", `"`), wait("12:03", "sh", ``)}
	r = analyzeFiles(t, map[string][]byte{
		"host/summary.json":   []byte(`{"hostname":"node1"}`),
		"journal/kubelet.log": []byte(strings.Join(two, "\n") + "\n"),
	})
	var subjects []string
	for _, f := range r.Findings {
		if f.ID == "pod-volumes-not-mounted" {
			subjects = append(subjects, f.Subject)
		}
	}
	if len(subjects) != 3 {
		t.Errorf("two pods with a volume data: the cut record must stay on its own, got %q:\n%s", subjects, dump(r))
	}
}
