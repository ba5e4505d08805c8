package analyze

import (
	"bytes"
	"context"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// A bundle taken without the kubelet's pod list (its token refused, say)
// still names pods, from the runtime's CRI sandboxes; the kubelet's list
// wins where both exist, and a runtime's sandbox never counts as a pod the
// kubelet runs.
func TestRuntimePodNames(t *testing.T) {
	const criPods = `{
  "items": [
    {"id": "sb-old", "metadata": {"name": "writer", "uid": "uid-1", "namespace": "storage", "attempt": 0}, "state": "SANDBOX_NOTREADY"},
    {"id": "sb-new", "metadata": {"name": "writer", "uid": "uid-1", "namespace": "storage", "attempt": 1}, "state": "SANDBOX_READY"},
    {"id": "sb-2", "metadata": {"name": "csi-node-x", "uid": "uid-2", "namespace": "kube-system"}, "state": "SANDBOX_READY"},
    {"id": "sb-3", "metadata": {"name": "", "uid": ""}, "state": "SANDBOX_READY"}
  ]
}
`
	const kubeletPods = `{"kind":"PodList","items":[{"metadata":{"uid":"uid-2","name":"csi-node-x-renamed","namespace":"kube-system"},"status":{"phase":"Running"}}]}`
	for _, tc := range []struct {
		name    string
		kubelet bool
		want    map[string]string
	}{
		{"runtime only", false, map[string]string{"uid-1": "storage/writer (uid-1)", "uid-2": "kube-system/csi-node-x (uid-2)", "uid-9": "uid-9"}},
		{"kubelet first", true, map[string]string{"uid-1": "storage/writer (uid-1)", "uid-2": "kube-system/csi-node-x-renamed (uid-2)"}},
	} {
		st := newState()
		st.manifest = &bundle.Manifest{SchemaVersion: bundle.SchemaVersion}
		files := map[string]string{"runtime/containerd/cri-pods.json": criPods}
		if tc.kubelet {
			files["kubelet/pods.json"] = kubeletPods
		}
		for name, data := range files {
			if err := st.consume(context.Background(), bundle.Entry{Name: name, Size: int64(len(data)), Reader: bytes.NewReader([]byte(data))}); err != nil {
				t.Fatalf("%s: consume %s: %v", tc.name, name, err)
			}
		}
		if len(st.unreadable) > 0 {
			t.Errorf("%s: unreadable %+v", tc.name, st.unreadable)
		}
		for uid, want := range tc.want {
			if got := st.podName(uid); got != want {
				t.Errorf("%s: podName(%s) = %q, want %q", tc.name, uid, got, want)
			}
		}
		if _, ok := st.pods["uid-1"]; ok {
			t.Errorf("%s: a runtime sandbox became a pod the kubelet runs", tc.name)
		}
		if st.podsSeen != tc.kubelet {
			t.Errorf("%s: podsSeen %v", tc.name, st.podsSeen)
		}
	}
}

// A cri-pods.json that is not one: reported unreadable, no panic.
func TestRuntimePodsUnreadable(t *testing.T) {
	for _, data := range []string{`[1,2]`, `{"items": {"a": 1}}`, `{"items": [{"metadata": "x"}]}`, `{"items": []} trailing`} {
		st := newState()
		st.manifest = &bundle.Manifest{SchemaVersion: bundle.SchemaVersion}
		if err := st.consume(context.Background(), bundle.Entry{Name: "runtime/crio/cri-pods.json", Size: int64(len(data)), Reader: bytes.NewReader([]byte(data))}); err != nil {
			t.Fatalf("consume: %v", err)
		}
		if len(st.unreadable) != 1 {
			t.Errorf("%s: unreadable %+v, want one", data, st.unreadable)
		}
	}
}
