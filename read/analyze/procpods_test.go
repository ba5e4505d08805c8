package analyze_test

import (
	"bytes"
	"strings"
	"testing"
)

// Incident 002's first question is "which pod?": the holder process's
// cgroup (processes/tasks.json pod_uid, container_id) names the pod and
// container through the runtime's or the kubelet's lists, in the finding.
func TestHolderNamedByPodAndContainer(t *testing.T) {
	const (
		uid = "6b1f0e2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
		cid = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
	)
	withCgroup := func(files map[string][]byte) {
		files["processes/tasks.json"] = bytes.Replace(files["processes/tasks.json"],
			[]byte(`"comm":"node_exporter",`), []byte(`"comm":"node_exporter","pod_uid":"`+uid+`","container_id":"`+cid+`",`), 1)
	}
	cases := []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"runtime", map[string]string{
			"runtime/containerd/cri-pods.json":       `{"items":[{"id":"s1","metadata":{"name":"node-exporter-x7k2p","uid":"` + uid + `","namespace":"monitoring"},"state":"SANDBOX_READY"}]}`,
			"runtime/containerd/cri-containers.json": `{"containers":[{"id":"` + cid + `","podSandboxId":"s1","metadata":{"name":"node-exporter"},"labels":{"io.kubernetes.pod.uid":"` + uid + `"}}]}`,
		}, "node_exporter[21839] `/bin/node_exporter --path.procfs=/host/proc --path.sysfs=/host/sys --path.rootfs=/host` in pod monitoring/node-exporter-x7k2p, container node-exporter"},
		{"kubelet", map[string]string{
			"kubelet/pods.json": `{"items":[{"metadata":{"uid":"` + uid + `","name":"node-exporter-x7k2p","namespace":"monitoring"},"status":{"phase":"Running","containerStatuses":[{"name":"node-exporter","containerID":"containerd://` + cid + `"}]}}]}`,
		}, "in pod monitoring/node-exporter-x7k2p, container node-exporter"},
		{"unknown pod", nil, "in pod " + uid + " (a UID neither the kubelet's list nor the runtime names), container 9f8e7d6c5b4a3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := fixture(t, "incident002-rbd-held-in-namespace")
			withCgroup(files)
			for k, v := range tc.extra {
				files[k] = []byte(v)
			}
			r := analyzeFiles(t, files)
			f := only(t, r, "mount-held-in-foreign-namespace")
			if !strings.Contains(f.Summary, tc.want) {
				t.Errorf("summary does not name the pod as %q:\n%s", tc.want, f.Summary)
			}
			if !strings.Contains(f.Explanation, tc.want) {
				t.Errorf("explanation does not name the pod as %q:\n%s", tc.want, f.Explanation)
			}
		})
	}
}
