package mountprobe

import (
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
)

// Mounts of a filesystem the kernel already shows stuck are hung without a
// probe, with the reason and the tasks' stacks as evidence; over-mounted
// and autofs mounts, and other filesystems, are left to the probe.
func TestMarkKernelStuck(t *testing.T) {
	ev := &layout.HangEvidence{PID: 42, Blocked: &layout.TaskEvidence{TID: 42, State: "S", Wchan: "request_wait_answer", Stack: []string{"request_wait_answer+0x112/0x210"}}}
	env := collectors.StandaloneEnv("mountprobe", t.TempDir(), collectors.Common{Stuck: []layout.KernelStuck{
		{Dev: "0:52", Kind: layout.StuckFUSE, Name: "FUSE connection 52", Requests: 2, TIDs: []int{42}, Reason: "2 request(s) waiting", Evidence: ev},
	}})
	p := &prober{env: env}
	stuck := &mpItem{rec: layout.MountProbe{Dev: "0:52", Mountpoint: "/mnt/a"}}
	bind := &mpItem{rec: layout.MountProbe{Dev: "0:52", Mountpoint: "/mnt/b"}}
	hidden := &mpItem{rec: layout.MountProbe{Dev: "0:52", Mountpoint: "/mnt/a"}, hidden: true}
	other := &mpItem{rec: layout.MountProbe{Dev: "0:53", Mountpoint: "/mnt/c"}}
	earlier := &mpItem{rec: layout.MountProbe{Dev: "0:52", Mountpoint: "/mnt/d", Result: layout.ProbeHung, Diagnosis: "a probe from an earlier run is still stuck on it"}, earlier: true}
	if n := p.markKernelStuck([]*mpItem{stuck, bind, hidden, other, earlier}); n != 3 {
		t.Errorf("marked %d, want 3", n)
	}
	if r := earlier.rec; earlier.kernel || r.KernelStuck == nil || r.Result != layout.ProbeHung || !strings.Contains(r.Diagnosis, "already stuck in the kernel") || !strings.Contains(r.Diagnosis, "earlier run") {
		t.Errorf("a mount an earlier probe is stuck on keeps that, with the kernel's evidence added: %+v", r)
	}
	for _, it := range []*mpItem{stuck, bind} {
		r := it.rec
		if !it.kernel || r.Result != layout.ProbeHung || r.Probed || r.KernelStuck == nil || r.KernelStuck.Requests != 2 ||
			!strings.Contains(r.Diagnosis, "already stuck in the kernel") || it.hangEvidence != ev || !strings.Contains(r.BlockedIn, "request_wait_answer") {
			t.Errorf("%s: %+v", r.Mountpoint, r)
		}
	}
	for _, it := range []*mpItem{hidden, other} {
		if it.kernel || it.rec.Result != "" {
			t.Errorf("%s must be left to the probe: %+v", it.rec.Mountpoint, it.rec)
		}
	}
	if n := (&prober{env: collectors.StandaloneEnv("mountprobe", t.TempDir(), collectors.Common{})}).markKernelStuck([]*mpItem{other}); n != 0 {
		t.Errorf("marked %d without verdicts", n)
	}
}
