package roundtrip_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// A pod volume hangs and mountprobe runs out of time before its probe
// answers (a collector timeout below the probe deadline), as with many
// hung mounts ahead of it: analyze says the mount was not probed and
// shows what the bundle holds instead, a thread of a process named
// kubelet asleep in request_wait_answer; nothing claims that no mount
// hung.
func TestRealNotProbedPodVolume(t *testing.T) {
	testkit.RequireFUSE(t)
	testkit.RequireTool(t, "stat")
	root := t.TempDir()
	const uid = "0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f"
	host := "/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-77/mount"
	vol := testkit.HungFUSE(t, filepath.Join(root, host), testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))

	// A process whose comm is "kubelet" stats a path on the volume.
	bin := filepath.Join(t.TempDir(), "kubelet")
	statPath, _ := exec.LookPath("stat")
	copyFile(t, statPath, bin)
	victim := exec.Command(bin, filepath.Join(vol.Mountpoint(), "x"))
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill() })
	vol.WaitBlocked(1, 10*time.Second)

	// mountprobe's probe deadline (ProbeTimeout) is longer than the
	// collectors' deadline, as when many hung mounts are ahead of it: the
	// volume is deterministically "not probed". (dirshape's own timeout on
	// the path is not part of this run: whether its scan reaches the
	// volume before its budget ends depends on the machine's load.)
	r := collectWith(t, supervisor.Options{CollectorTimeout: 1400 * time.Millisecond,
		Common: collectors.Common{Root: root, Proc: "/proc", Sys: "/sys", ProbeTimeout: 5 * time.Second}},
		"processes", "mountprobe")
	var f analyze.Finding
	for _, g := range findings(r, "mount-not-probed") {
		if strings.Contains(g.Summary, vol.Mountpoint()) {
			f = g
		}
	}
	if f.ID == "" {
		t.Fatalf("no mount-not-probed finding for %s:\n%s", vol.Mountpoint(), dump(r))
	}
	if f.Severity != analyze.Critical {
		t.Errorf("severity %s", f.Severity)
	}
	wantIn(t, "summary", f.Summary, "not probed", "fuse.ceph-fuse code")
	// No pod list in this bundle: whether the pod is gone, and so whether
	// this is the kubelet's housekeeping, is said to be unknown.
	wantIn(t, "explanation", f.Explanation, fmt.Sprintf("kubelet[%d]", victim.Process.Pid), "request_wait_answer", "Whether that pod still exists is unknown", "housekeeping")
	wantIn(t, "evidence", evidenceText(f), "processes/tasks.json", "\"result\":\"unfinished\"")
	wantIn(t, "remediation", strings.Join(f.Remediation, "\n"), "mount -t fusectl none /sys/fs/fuse/connections;", fmt.Sprintf("/%d/abort", vol.ConnID()))
	for _, g := range r.Findings {
		if strings.Contains(g.Explanation, "No probed mount hung, so") {
			t.Errorf("%s says no mount hung although one was not probed: %s", g.ID, g.Explanation)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// collectWith is collect with run options of the test's own.
func collectWith(t *testing.T, opts supervisor.Options, only ...string) *analyze.Report {
	t.Helper()
	ctx := context.Background()
	opts.OutputDir, opts.Only = t.TempDir(), only
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}
	res, err := supervisor.Run(ctx, opts)
	if err != nil {
		t.Fatalf("collect %v: %v", only, err)
	}
	for _, c := range res.Manifest.Collectors {
		t.Logf("collector %s: %s %.2fs %s %v", c.Name, c.Status, c.DurationSeconds, c.Error, c.Notes)
	}
	r, err := analyze.AnalyzeFile(ctx, res.Bundle.Path, analyze.Options{})
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	return r
}
