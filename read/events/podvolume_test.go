package events

import "testing"

// TestPodVolumeIsThePodsOwn: a volume named as a pod's spec names it is an
// object of that pod (two pods' "data" are two objects); a PV, a plugin's
// unique name or a handle stays global.
func TestPodVolumeIsThePodsOwn(t *testing.T) {
	for _, c := range []struct {
		k          Keys
		kind, want string
	}{
		{Keys{Pod: "e2e/a", Volume: "data"}, "volume", "data of pod e2e/a"},
		{Keys{PodUID: "0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d", Volume: "config"}, "volume", "config of pod 0f6a0c38-4a8b-4c57-9d2a-6e0c5a1b2c3d"},
		{Keys{Volume: "data"}, "volume", "data"},
		{Keys{Pod: "e2e/a", Volume: "pvc-5d1e2f3a-6b7c-4d8e-9f0a-1b2c3d4e5f60"}, "volume", "pvc-5d1e2f3a-6b7c-4d8e-9f0a-1b2c3d4e5f60"},
		{Keys{Pod: "e2e/a", Volume: "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1"}, "volume", "kubernetes.io/csi/hostpath.csi.k8s.io^vol-1"},
		{Keys{Pod: "e2e/a", Volume: "data", PV: "pv-1"}, "volume", "pv-1"},
		{Keys{Pod: "e2e/a"}, "pod", "e2e/a"},
	} {
		kind, got := c.k.Object()
		if kind != c.kind || got != c.want {
			t.Errorf("%+v: Object() = %s %q, want %s %q", c.k, kind, got, c.kind, c.want)
		}
	}
	_, a := (Keys{Pod: "e2e/a", Volume: "data"}).Object()
	_, b := (Keys{Pod: "e2e/b", Volume: "data"}).Object()
	if a == b {
		t.Errorf("two pods' own volume %q are one object: %q", "data", a)
	}
}
