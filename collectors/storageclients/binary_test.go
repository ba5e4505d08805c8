package storageclients_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The real binary names a stuck FUSE connection (its daemon, its device,
// the pod whose volume it is) and a loop device stuck behind it (the
// device, its backing file on the stuck FUSE mount, the pod), from the
// kernel's own state, without probing either.
func TestBinaryNamesStuckFUSEAndLoop(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireLoop(t)
	bin := testkit.Binary(t)
	root := t.TempDir()
	const fusePod, loopPod = "5e1f0c2a-7b3d-4e8f-9a6b-1c2d3e4f5a6b", "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
	fuse := testkit.HungFUSE(t, filepath.Join(root, "var/lib/kubelet/pods", fusePod, "volumes/kubernetes.io~csi/pvc-fuse/mount"),
		testkit.FUSELoopback(t.TempDir()))
	loop := testkit.LoopExt4(t, 16, testkit.LoopImageDir(fuse.Mountpoint()))
	t.Cleanup(fuse.Resume)
	podMount := filepath.Join(root, "var/lib/kubelet/pods", loopPod, "volumes/kubernetes.io~csi/pvc-loop/mount")
	if err := os.MkdirAll(podMount, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(loop.Mountpoint, podMount, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(podMount, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(fuse.Mountpoint(), "data"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A reader blocked on a file of the FUSE mount (its descriptor names
	// the mount), then a writer blocked on the ext4 above it.
	startReader(t, filepath.Join(fuse.Mountpoint(), "data"), fuse.Hang)
	writer := startWriter(t, filepath.Join(podMount, "f"), func() {})
	waitInflight(t, filepath.Base(loop.Device), writer)

	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command(bin, "collect", "--only", "storageclients,mountprobe,processes,mounts,openfiles", "--output-dir", out,
		"--probe-timeout", "3s", "--quiet")
	b, err := cmd.CombinedOutput()
	t.Logf("collect took %v", time.Since(start))
	if code := cmd.ProcessState.ExitCode(); err != nil && code != 3 {
		t.Fatalf("collect: %v\n%s", err, b)
	}
	bundlePath := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(bundlePath, '\n'); i >= 0 {
		bundlePath = bundlePath[i+1:]
	}
	// analyze exits 3 when it finds something critical.
	aj, err := exec.Command(bin, "analyze", "-o", "json", bundlePath).Output()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 3) {
		t.Fatalf("analyze: %v", err)
	}
	var rep analyze.Report
	if err := json.Unmarshal(aj, &rep); err != nil {
		t.Fatalf("analyze output: %v", err)
	}
	find := func(dev string) *analyze.Finding {
		for i := range rep.Findings {
			if f := &rep.Findings[i]; f.ID == "hung-mount" && f.Subject == dev {
				return f
			}
		}
		var all []string
		for _, f := range rep.Findings {
			all = append(all, f.ID+" "+f.Subject+": "+f.Summary)
		}
		t.Fatalf("no hung-mount finding about %s; findings:\n%s", dev, strings.Join(all, "\n"))
		return nil
	}
	daemon := fmt.Sprintf("[%d]", os.Getpid())
	ff := find(fmt.Sprintf("0:%d", fuse.ConnID()))
	t.Logf("FUSE: %s", ff.Summary)
	for _, want := range []string{"is stuck in the kernel (not probed)", "waiting on its FUSE daemon", daemon, fusePod} {
		if !strings.Contains(ff.Summary, want) {
			t.Errorf("FUSE finding lacks %q: %s", want, ff.Summary)
		}
	}
	lf := find(fmt.Sprintf("%d:%d", loop.Major, loop.Minor))
	t.Logf("loop: %s", lf.Summary)
	for _, want := range []string{"is stuck in the kernel (not probed)", "block device " + filepath.Base(loop.Device), "backed by " + loop.Image,
		fuse.Mountpoint(), daemon, loopPod} {
		if !strings.Contains(lf.Summary, want) {
			t.Errorf("loop finding lacks %q: %s", want, lf.Summary)
		}
	}
}
