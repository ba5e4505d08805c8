package events

import "testing"

// The volume manager's error when a pod's volumes are not mounted in
// time names the first volume it waits for whatever header the record
// has: the kubelet's structured line, or the error value quoted alone.
// Other records that only mention unmounted volumes name none. The lines
// are written in the kubelet's form with made-up objects.
func TestWaitedVolumeByShape(t *testing.T) {
	cases := []struct {
		name   string
		line   string
		ok     bool
		volume string
	}{
		{name: "the error value quoted alone", ok: true, volume: "cache",
			line: `unmounted volumes=[cache], unattached volumes=[cache kube-api-access-x7k2p], failed to process volumes=[]: context deadline exceeded`},
		{name: "the kubelet's structured line", ok: true, volume: "data",
			line: `E0302 10:00:00.123456    4121 pod_workers.go:1301] "Error syncing pod, skipping" err="unmounted volumes=[data], unattached volumes=[], failed to process volumes=[]: context deadline exceeded" pod="shop/web-0" podUID="0c7e2f1a-5b3d-4e6f-8a9b-1c2d3e4f5a6b"`},
		{name: "an empty list names no volume", ok: false,
			line: `unmounted volumes=[], unattached volumes=[], failed to process volumes=[]: context deadline exceeded`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if ok != c.ok || ev.Keys.Volume != c.volume || ok && ev.Op != OpMount {
				t.Fatalf("ok=%v op=%q volume=%q, want ok=%v volume=%q (event %+v)", ok, ev.Op, ev.Keys.Volume, c.ok, c.volume, ev)
			}
		})
	}
	if v := waitedVolume(`list of unmounted volumes=[a]`); v != "" {
		t.Errorf("a list without the unattached one took %q", v)
	}
}
