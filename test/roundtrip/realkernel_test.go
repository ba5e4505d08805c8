package roundtrip_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/dirshape"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// Bundles written by the real collectors on the real kernel, for the
// incident scenarios the collectors' own tests set up: the analysis must
// name each one with the right evidence.

// collect runs the named collectors through the real supervisor (children
// are re-executions of this test binary) and analyses the bundle.
func collect(t *testing.T, common collectors.Common, only ...string) (*analyze.Report, *bundle.Manifest) {
	t.Helper()
	if common.ProbeTimeout == 0 {
		common.ProbeTimeout = 2 * time.Second
	}
	ctx := context.Background()
	res, err := supervisor.Run(ctx, supervisor.Options{OutputDir: t.TempDir(), Only: only, Timeout: 90 * time.Second, Common: common})
	if err != nil {
		t.Fatalf("collect %v: %v", only, err)
	}
	for _, c := range res.Manifest.Collectors {
		if c.Status != bundle.StatusOK {
			t.Logf("collector %s: %s %s %v", c.Name, c.Status, c.Error, c.Notes)
		}
	}
	start := time.Now()
	r, err := analyze.AnalyzeFile(ctx, res.Bundle.Path, analyze.Options{})
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	t.Logf("analysed %d files (%d bytes) in %v", r.FilesRead, r.BytesRead, time.Since(start))
	return r, res.Manifest
}

// Incident 002: a loop ext4 mounted on the host, copied into a private
// mount namespace, unmounted on the host.
func TestRealMountHeldInPrivateNamespace(t *testing.T) {
	testkit.RequireRoot(t)
	loop := testkit.LoopExt4(t, 16)
	h := testkit.HoldInPrivateNamespace(t, loop.Mountpoint)
	if err := unix.Unmount(loop.Mountpoint, 0); err != nil {
		t.Fatalf("unmount %s on the host: %v", loop.Mountpoint, err)
	}
	r, _ := collect(t, collectors.Common{}, "processes", "mounts", "openfiles")
	dev := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	f := bySubject(t, r, "mount-held-in-foreign-namespace", dev)
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s", f.Severity)
	}
	name := filepath.Base(loop.Device)
	wantIn(t, "summary", f.Summary, name, strconv.FormatUint(h.NSInode, 10), fmt.Sprintf("sleep[%d]", h.Pid))
	wantIn(t, "explanation", f.Explanation, loop.Mountpoint, "jbd2/"+name)
	mi := evidenceFrom(f, "mounts/"+layout.MountinfoTablesFile)
	if len(mi) != 1 || len(mi[0].Lines) != 1 || !strings.Contains(mi[0].Lines[0].Text, " "+dev+" / "+loop.Mountpoint+" ") {
		t.Errorf("mountinfo evidence: %+v", mi)
	}
	wantIn(t, "evidence", evidenceText(f), "openfiles/holders.json", "\"kernel_threads\"", "processes/tasks.json", "sleep infinity")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), fmt.Sprintf("nsenter -t %d -m umount %s", h.Pid, loop.Mountpoint), "losetup -d "+loop.Device)
	// What is private by design (systemd services' own tmpfs, say) is not
	// flagged: every such finding on this node is about a block device.
	for _, g := range findings(r, "mount-held-in-foreign-namespace") {
		if strings.HasPrefix(g.Subject, "0:") {
			t.Errorf("flagged a pseudo/anonymous device: %s", g.Summary)
		}
	}
}

// Incident 003 in miniature: a FUSE mount whose daemon stops answering,
// and a process stuck stat()ing it (in request_wait_answer).
func TestRealHungFUSE(t *testing.T) {
	testkit.RequireFUSE(t)
	fuse := testkit.HungFUSE(t, "", testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
	mp := fuse.Mountpoint()
	// The victim is a child: the test process never touches the mount.
	victim := exec.Command("stat", mp)
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	pid := victim.Process.Pid
	go func() { _ = victim.Wait() }()
	// Killed before the mount is torn down (cleanups run in reverse);
	// the abort then lets it die.
	t.Cleanup(func() { _ = unix.Kill(pid, unix.SIGKILL) })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(readWchan(pid), "request_wait_answer") {
		if time.Now().After(deadline) {
			t.Fatalf("the victim never blocked on the mount (wchan %q)", readWchan(pid))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, m := collect(t, collectors.Common{}, "processes", "mountprobe")
	if len(m.HungMounts) == 0 {
		t.Fatalf("the run found no hung mount")
	}
	var f analyze.Finding
	for _, g := range findings(r, "hung-mount") {
		if strings.Contains(g.Summary, mp) {
			f = g
		}
	}
	if f.ID == "" {
		t.Fatalf("no hung-mount finding for %s:\n%s", mp, dump(r))
	}
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s", f.Severity)
	}
	// Named as waiting on this mount (its command line names it), even
	// when other tests' FUSE mounts hang at the same time.
	wantIn(t, "explanation", f.Explanation, fmt.Sprintf("Tasks waiting on it: stat[%d]", pid), "request_wait_answer")
	wantIn(t, "evidence", evidenceText(f), "mountprobe/probes.json", "\"result\":\"hung\"", "manifest.json", "processes/tasks.json", fmt.Sprintf("\"pid\":%d", pid))
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "/abort", "fusermount -uz "+mp)
	// nodesnap's own stuck probe is not listed as a victim.
	for _, it := range m.HungMounts {
		if it.Evidence != nil && strings.Contains(f.Explanation, fmt.Sprintf("[%d]", it.Evidence.PID)) {
			t.Errorf("the probe worker %d is named as a waiting task", it.Evidence.PID)
		}
	}
}

func readWchan(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	return string(b)
}

// A FUSE mount whose daemon died: ENOTCONN on every access.
func TestRealDeadFUSE(t *testing.T) {
	testkit.RequireFUSE(t)
	fuse := testkit.DeadFUSE(t, "", testkit.FUSESubtype("ceph-fuse"))
	r, _ := collect(t, collectors.Common{}, "mountprobe", "mounts")
	var f analyze.Finding
	for _, g := range findings(r, "fuse-transport-not-connected") {
		if strings.Contains(g.Summary, fuse.Mountpoint()) {
			f = g
		}
		// Other dead ceph-fuse mounts of this machine's namespace are
		// one cause with it: its own finding is a member of the group.
		for _, m := range g.Members {
			if strings.Contains(m.Summary, fuse.Mountpoint()) {
				f, f.Summary = g, m.Summary
			}
		}
	}
	if f.ID == "" {
		t.Fatalf("no dead FUSE finding for %s:\n%s", fuse.Mountpoint(), dump(r))
	}
	wantIn(t, "summary", f.Summary, "fuse.ceph-fuse", "ENOTCONN")
	wantIn(t, "evidence", evidenceText(f), "\"errno\":\"ENOTCONN\"", " - fuse.ceph-fuse ")
}

// Incident 000: forty .deleting~ leftovers next to the still-mounted
// original, in a kubelet tree under --root.
func TestRealDeletingLeftovers(t *testing.T) {
	testkit.RequireRoot(t)
	root := t.TempDir()
	const uid = "8f2e6c1a-0000-4000-8000-000000000002"
	parent := filepath.Join(root, "var/lib/kubelet/pods", uid, "volumes/kubernetes.io~csi")
	for i := 0; i < 40; i++ {
		d := filepath.Join(parent, fmt.Sprintf("pvc-x.deleting~%09d", 100000000+i*7919))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if i == 17 {
			if err := os.WriteFile(filepath.Join(d, "data.bin"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	testkit.MountTmpfs(t, filepath.Join(parent, "pvc-x/mount"))
	spec, _ := collectors.Lookup("dirshape")
	o := spec.Options.(*dirshape.Options)
	saved := *o
	t.Cleanup(func() { *o = saved })
	o.Roots = nil
	r, _ := collect(t, collectors.Common{Root: root, Proc: "/proc", Sys: "/sys"}, "dirshape")
	host := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi"
	f := bySubject(t, r, "volume-dir-deleting-leftovers", host)
	wantIn(t, "summary", f.Summary, "40 .deleting~ leftovers", "39 empty, 1 not empty", "pvc-x is still mounted")
	wantIn(t, "evidence", evidenceText(f), "dirshape/shape.json", "\"count\":40")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "find "+host+" -maxdepth 1 -name 'pvc-x.deleting~*' -type d -empty -delete")
}

// Incident 001: an ext4 directory past 64,998 subdirectories.
func TestRealNlinkOverflow(t *testing.T) {
	skip.Short(t, "70,000 directories on a loop device")
	testkit.RequireLoop(t)
	const n = 70000
	l := testkit.LoopExt4(t, 128, testkit.LoopInodes(n+2000))
	big := filepath.Join(l.Mountpoint, "volumes", "leak", "_data")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testkit.ManySubdirs(t, big, n)
	t.Logf("made %d directories in %v", n, time.Since(start))
	spec, _ := collectors.Lookup("dirshape")
	o := spec.Options.(*dirshape.Options)
	saved := *o
	t.Cleanup(func() { *o = saved })
	o.Roots = []string{l.Mountpoint}
	// Read to the end: the count is exact.
	o.MaxDirTime = 0
	// The writer: a process with its working directory in it.
	w := testkit.HoldCwd(t, big)
	start = time.Now()
	r, _ := collect(t, collectors.Common{}, "dirshape", "openfiles", "processes")
	t.Logf("collected in %v", time.Since(start))
	f := bySubject(t, r, "ext4-nlink-overflow", big)
	if f.Severity != analyze.Warning {
		t.Errorf("severity %s (70,000 entries is under the critical threshold)", f.Severity)
	}
	wantIn(t, "summary", f.Summary, "70000 entries", "st_nlink 1")
	wantIn(t, "explanation", f.Explanation, fmt.Sprintf("[%d]", w.Pid), "cwd "+big)

	// Left after its first read buffer (issue 43): still named, from the
	// inode's st_nlink of 1, with the inode's estimate and a lower bound.
	o.MaxDirTime = time.Nanosecond
	r, _ = collect(t, collectors.Common{}, "dirshape", "openfiles", "processes")
	f = bySubject(t, r, "ext4-nlink-overflow", big)
	if f.Severity != analyze.Warning {
		t.Errorf("left early: severity %s (the estimate is under the critical threshold)", f.Severity)
	}
	wantIn(t, "left early: summary", f.Summary, "by its inode and at least", "st_nlink 1")
	wantIn(t, "left early: explanation", f.Explanation, fmt.Sprintf("[%d]", w.Pid))
}

// Incident 004: the csi collector on a fixture kubelet tree whose mount
// table still has a target the driver's state.json calls unpublished.
func TestRealCSIPublishedLost(t *testing.T) {
	testkit.RequireRoot(t)
	root, proc := t.TempDir(), t.TempDir()
	const uid = "9a42f711-028a-4ca2-802a-0e4db734592d"
	const vid = "e9216f9a-425b-11ef-9abf-4e607aa5fc75"
	target := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-ea31/mount"
	files := map[string]string{
		"var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-ea31/vol_data.json": `{"driverName":"hostpath.csi.k8s.io","volumeHandle":"` + vid + `","specVolID":"pvc-ea31"}`,
		"var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-ea31/mount/.keep":   "",
		"var/lib/csi-hostpath-data/state.json":                                              `{"Volumes":[{"VolName":"pvc-ea31","VolID":"` + vid + `","VolPath":"/csi-data-dir/` + vid + `","Staged":null,"Published":null}],"Snapshots":null}`,
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mountinfo := "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"812 22 253:1 /var/lib/csi-hostpath-data/" + vid + " " + target + " rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
	if err := os.MkdirAll(filepath.Join(proc, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "1", "mountinfo"), []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ := collect(t, collectors.Common{Root: root, Proc: proc}, "csi")
	f := bySubject(t, r, "csi-published-state-lost", target)
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s", f.Severity)
	}
	wantIn(t, "explanation", f.Explanation, vid, "\"Published\": null")
	wantIn(t, "evidence", evidenceText(f), "csi/inventory.json", "\"kind\":\"published-lost\"", "csi/state/", "\"published_state\":\"null\"", "vol_data")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "umount "+target)
}

// The node as it is: the real collectors on this machine must not raise
// anything at warning or above, beyond what other tests running at the
// same time leave (their fixtures live under /tmp/Test*, their processes
// are *.test binaries or nodesnap runs probing those fixtures), which is
// logged, not failed.
func TestRealNodeRaisesNoFalseAlarm(t *testing.T) {
	testkit.RequireRoot(t)
	r, _ := collect(t, collectors.Common{}, "processes", "mounts", "openfiles", "mountprobe", "dirshape", "csi")
	for _, f := range r.Findings {
		if f.Severity < analyze.Warning {
			continue
		}
		text := f.Subject + " " + f.Summary + " " + f.Explanation + " " + evidenceText(f)
		if strings.Contains(text, "/tmp/Test") || strings.Contains(text, ".test[") || strings.Contains(text, "nodesnap-testkit") || strings.Contains(text, "nodesnap[") {
			t.Logf("left by a concurrent test: %s %s: %s", f.Severity, f.ID, f.Summary)
			continue
		}
		t.Errorf("false alarm on a healthy node: %s %s: %s", f.Severity, f.ID, f.Summary)
	}
}
