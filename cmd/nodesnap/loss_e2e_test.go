package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// analyzeFindings runs nodesnap analyze --json on a bundle and returns
// its findings.
func analyzeFindings(t *testing.T, p string) []struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Summary string `json:"summary"`
} {
	t.Helper()
	r := runNodesnap(t, time.Minute, nil, "analyze", "--json", p)
	var rep struct {
		Findings []struct {
			ID      string `json:"id"`
			Subject string `json:"subject"`
			Summary string `json:"summary"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("analyze --json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", r.code, err, r.stdout, r.stderr)
	}
	return rep.Findings
}

// missingFinding returns the summary of the evidence-missing finding about
// subject, failing the test when analyze has none.
func missingFinding(t *testing.T, p, subject string) string {
	t.Helper()
	fs := analyzeFindings(t, p)
	for _, f := range fs {
		if f.ID == "evidence-missing" && f.Subject == subject {
			return f.Summary
		}
	}
	t.Errorf("analyze has no evidence-missing finding about %s: %+v", subject, fs)
	return ""
}

// A bundle that reached --max-bundle-size is partial (exit 3), says so at
// the end even with --quiet, and analyze names what was left out.
func TestCollectSizeCapIsPartial(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, time.Minute, []string{"NODESNAP_TEST_BIG_BYTES=307200"},
		"collect", "-q", "--output-dir", out, "--only", "host,test-bigfile", "--timeout", "30s", "--max-bundle-size", "100KiB", "--min-free", "0")
	if r.code != exitPartial {
		t.Fatalf("exit %d, want %d (partial)\nstdout:\n%s\nstderr:\n%s", r.code, exitPartial, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "size cap (--max-bundle-size 102400 bytes) was reached") || !strings.Contains(r.stderr, "test-bigfile/big.txt") {
		t.Errorf("--quiet did not say the size cap left files out:\n%s", r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 {
		t.Errorf("--quiet stdout is not one line: %q", r.stdout)
	}
	p := bundlePath(t, out)
	c := mustValidate(t, p)
	if c.Manifest.Status != "partial" {
		t.Errorf("manifest status %s, want partial", c.Manifest.Status)
	}
	if st := collectorByName(t, c.Manifest, "test-bigfile").Status; st != bundle.StatusPartial {
		t.Errorf("test-bigfile status %s, want partial", st)
	}
	if s := missingFinding(t, p, "size-cap"); !strings.Contains(s, "test-bigfile/big.txt") || !strings.Contains(s, "102400") {
		t.Errorf("size-cap finding does not say what and why: %q", s)
	}

	// --output json says it too, in "missing".
	r = runNodesnap(t, time.Minute, []string{"NODESNAP_TEST_BIG_BYTES=307200"},
		"collect", "--output", "json", "--output-dir", t.TempDir(), "--only", "host,test-bigfile", "--timeout", "30s", "--max-bundle-size", "100KiB", "--min-free", "0")
	var res struct {
		Status     string   `json:"status"`
		Missing    []string `json:"missing"`
		ExitStatus int      `json:"exit_status"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--output json: %v\n%s", err, r.stdout)
	}
	if res.Status != "partial" || res.ExitStatus != exitPartial || !strings.Contains(strings.Join(res.Missing, "\n"), "size cap") {
		t.Errorf("--output json: status %s, exit_status %d, missing %q", res.Status, res.ExitStatus, res.Missing)
	}
}

// A --timeout too short for the collectors: each one it cut says "cut by
// --timeout", not what it reported about the node once its time was gone.
func TestCollectGlobalTimeoutNamesTheCut(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, time.Minute, []string{"NODESNAP_TEST_SLOW=20s"},
		"collect", "-q", "--output-dir", out, "--only", "host,journal,csi,test-slow", "--timeout", "1s", "--min-free", "0")
	if r.code != exitPartial {
		t.Fatalf("exit %d, want %d (partial)\nstdout:\n%s\nstderr:\n%s", r.code, exitPartial, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "cut by --timeout 1s") {
		t.Errorf("--quiet did not say --timeout cut the run:\n%s", r.stderr)
	}
	p := bundlePath(t, out)
	c := mustValidate(t, p)
	cut := 0
	for _, col := range c.Manifest.Collectors {
		if col.Status == bundle.StatusOK {
			continue
		}
		if !strings.HasPrefix(col.Error, "cut by --timeout 1s") {
			t.Errorf("%s: %s %q, want the cause named \"cut by --timeout 1s\"", col.Name, col.Status, col.Error)
			continue
		}
		cut++
	}
	if slow := collectorByName(t, c.Manifest, "test-slow"); slow.Status != bundle.StatusTimeout {
		t.Errorf("test-slow (20s of work) status %s, want timeout", slow.Status)
	}
	if cut == 0 {
		t.Error("no collector was recorded as cut by --timeout")
	}
	if s := missingFinding(t, p, "timeout"); !strings.Contains(s, "test-slow") {
		t.Errorf("timeout finding does not name the cut collector: %q", s)
	}
}

// Ctrl-C during a collector: it is recorded as interrupted, not hung, the
// end of the output says so with --quiet, and analyze reports it.
func TestCollectInterruptIsNotHung(t *testing.T) {
	out := t.TempDir()
	cmd := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=30s"}, "collect", "-q", "--output-dir", out, "--only", "host,test-slow", "--timeout", "60s", "--min-free", "0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("nodesnap did not end after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != exitPartial {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitPartial, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted by SIGINT") {
		t.Errorf("--quiet did not say the run was interrupted:\n%s", stderr.String())
	}
	p := bundlePath(t, out)
	c := mustValidate(t, p)
	slow := collectorByName(t, c.Manifest, "test-slow")
	if !strings.Contains(slow.Error, "interrupted by SIGINT") {
		t.Errorf("test-slow error %q does not say interrupted", slow.Error)
	}
	if slow.HangEvidence != nil && slow.HangEvidence.Phase != "interrupted" {
		t.Errorf("test-slow's evidence reads as a hang (phase %q)", slow.HangEvidence.Phase)
	}
	r := runNodesnap(t, time.Minute, nil, "inspect", p)
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "test-slow") && strings.Contains(l, "hung") {
			t.Errorf("inspect shows the interrupted collector as hung: %s", l)
		}
	}
	if s := missingFinding(t, p, "interrupt"); !strings.Contains(s, "SIGINT") {
		t.Errorf("interrupt finding: %q", s)
	}
}

// Incident 001's volume: a Docker (or Podman) volume that is a mount of
// its own is scanned by dirshape by default, as a pod volume is, so that
// its subdirectories are counted rather than hidden behind the mount.
func TestCollectScansRuntimeVolumeMounts(t *testing.T) {
	testkit.RequireRoot(t)
	root := t.TempDir()
	vols := map[string]int{
		"/var/lib/docker/volumes/big/_data":                300,
		"/var/lib/containers/storage/volumes/pgdata/_data": 20,
	}
	for p, n := range vols {
		dir := filepath.Join(root, p)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mnt := testkit.MountTmpfs(t, dir)
		for i := 0; i < n; i++ {
			if err := os.Mkdir(filepath.Join(mnt, fmt.Sprintf("d%05d", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := t.TempDir()
	r := runNodesnap(t, time.Minute, nil, "collect", "-q", "--output-dir", out, "--only", "dirshape", "--root", root, "--proc", "/proc", "--sys", "/sys", "--timeout", "30s", "--min-free", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	c := mustValidate(t, bundlePath(t, out))
	var rep layout.DirShapeReport
	if err := json.Unmarshal(c.Files["dirshape/shape.json"], &rep); err != nil {
		t.Fatalf("dirshape/shape.json: %v", err)
	}
	for p, n := range vols {
		var got *layout.DirShapeRoot
		for i := range rep.Roots {
			if rep.Roots[i].Path == p {
				got = &rep.Roots[i]
			}
		}
		if got == nil {
			t.Errorf("the volume mount %s was not scanned; roots: %d", p, len(rep.Roots))
			continue
		}
		if got.Kind != "volume_mount" || !got.Complete || got.Entries != uint64(n) || got.FSType != "tmpfs" {
			t.Errorf("%s: kind %s complete %v entries %d fstype %s; want volume_mount, complete, %d entries, tmpfs", p, got.Kind, got.Complete, got.Entries, got.FSType, n)
		}
	}
}
