package roundtrip_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// fusectlMounted reports whether fusectl is mounted at its standard
// place in the test's mount namespace.
func fusectlMounted(t *testing.T) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 4 && fs[4] == "/sys/fs/fuse/connections" && strings.Contains(sc.Text(), " - fusectl ") {
			return true
		}
	}
	return false
}

// hungFinding returns the hung-mount finding naming mountpoint.
func hungFindingFor(t *testing.T, r *analyze.Report, mp string) analyze.Finding {
	t.Helper()
	for _, f := range findings(r, "hung-mount") {
		if strings.Contains(f.Summary, mp) {
			return f
		}
		// Mounts of one cause are one finding; each mount's own fix is
		// that of its member.
		for _, m := range f.Members {
			if strings.Contains(m.Summary, mp) {
				f.Summary, f.Remediation = m.Summary, m.Remediation
				return f
			}
		}
	}
	t.Fatalf("no hung-mount finding for %s:\n%s", mp, dump(r))
	return analyze.Finding{}
}

// fixCommand cuts the shell command out of the remediation line that
// contains marker: from marker to the end, or to the "   (" aside.
func fixCommand(t *testing.T, f analyze.Finding, marker string) string {
	t.Helper()
	for _, l := range f.Remediation {
		if i := strings.Index(l, marker); i >= 0 {
			cmd := l[i:]
			if j := strings.Index(cmd, "   ("); j >= 0 {
				cmd = cmd[:j]
			}
			return cmd
		}
	}
	t.Fatalf("no remediation with %q: %q", marker, f.Remediation)
	return ""
}

// The fixes analyze prints for a hung FUSE mount, run as printed: the
// abort works where fusectl is not mounted (it mounts it first; the test
// runs it in a private mount namespace then, so the mount goes away with
// it), wakes the process stuck on the mount, and leaves the mount failing
// at once with ENOTCONN; umount -l removes the other mount.
func TestRealFUSEFixesWorkAsPrinted(t *testing.T) {
	testkit.RequireFUSE(t)
	for _, tool := range []string{"sh", "mountpoint", "mount", "umount", "unshare", "stat", "timeout"} {
		testkit.RequireTool(t, tool)
	}
	abortMe := testkit.HungFUSE(t, "", testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
	unmountMe := testkit.HungFUSE(t, "", testkit.FUSEStartHung(), testkit.FUSESubtype("ceph-fuse"))
	victim := exec.Command("stat", abortMe.Mountpoint())
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- victim.Wait() }()
	t.Cleanup(func() { _ = victim.Process.Kill() })
	abortMe.WaitBlocked(1, 10*time.Second)

	r, _ := collect(t, collectors.Common{}, "processes", "mountprobe")
	abort := fixCommand(t, hungFindingFor(t, r, abortMe.Mountpoint()), "mountpoint -q ")
	lazy := fixCommand(t, hungFindingFor(t, r, unmountMe.Mountpoint()), "umount -l ")
	t.Logf("printed fixes: %s | %s", abort, lazy)

	had := fusectlMounted(t)
	run := exec.Command("sh", "-c", abort)
	if !had {
		// The old fix fails here, as on nodes without fusectl.
		i := strings.Index(abort, "echo 1")
		if i < 0 {
			t.Fatalf("the printed fix has no abort: %s", abort)
		}
		if out, err := exec.Command("sh", "-c", abort[i:]).CombinedOutput(); err == nil {
			t.Errorf("without fusectl the bare abort succeeded: %s", out)
		}
		run = exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", abort)
	}
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the printed abort failed: %v: %s", err, out)
	}
	if fusectlMounted(t) != had {
		t.Errorf("fusectl mounted before: %v, after: %v; the test must leave it as it was", had, !had)
	}
	select {
	case err := <-exited:
		t.Logf("the stuck stat woke up: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the process stuck on %s did not wake up after the abort", abortMe.Mountpoint())
	}
	out, err := exec.Command("timeout", "5", "stat", abortMe.Mountpoint()).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not connected") {
		t.Errorf("after the abort, stat of the mount: %v: %s; want Transport endpoint is not connected", err, out)
	}

	if out, err := exec.Command("sh", "-c", lazy).CombinedOutput(); err != nil {
		t.Fatalf("the printed lazy unmount failed: %v: %s", err, out)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), " "+unmountMe.Mountpoint()+" ") {
		t.Errorf("%s is still mounted after the printed umount -l", unmountMe.Mountpoint())
	}
}
