package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// A collector that stat()s into a hung FUSE mount in-process (the
// kubelet's mistake in incident 003) is killed at its deadline with the
// kernel's word on where it hung; everything else completes, the bundle
// validates, and the exit status says partial.
func TestCollectSurvivesHungFUSE(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	root := t.TempDir()
	mp := filepath.Join(root, "var/lib/kubelet/pods/6f1c1b9e-2a51-4c1e-9d0e-5c1f7e1a2b3c/volumes/kubernetes.io~csi/pvc-0a1b/mount")
	f := testkit.HungFUSE(t, mp, testkit.FUSEStartHung())
	out := t.TempDir()
	const timeout = 20 * time.Second
	r := runNodesnap(t, timeout+15*time.Second,
		[]string{"NODESNAP_TEST_STAT_PATH=" + filepath.Join(f.Mountpoint(), "data")},
		"collect", "--output-dir", out, "--only", "host,processes,test-hang-stat", "--timeout", timeout.String(), "--collector-timeout", "3s")
	if r.code != exitPartial {
		t.Fatalf("exit status %d, want %d (partial)\nstderr:\n%s", r.code, exitPartial, r.stderr)
	}
	if r.elapsed > timeout+5*time.Second {
		t.Errorf("collect took %s, over its %s deadline", r.elapsed, timeout)
	}
	c := mustValidate(t, bundlePath(t, out))
	m := c.Manifest
	hs := collectorByName(t, m, "test-hang-stat")
	if hs.Status != bundle.StatusTimeout {
		t.Fatalf("test-hang-stat status %q, want timeout (error %q)", hs.Status, hs.Error)
	}
	ev := hs.HangEvidence
	if ev == nil || ev.Blocked == nil {
		t.Fatalf("no hang evidence with a blocked thread: %+v", ev)
	}
	where := strings.Join(append([]string{ev.Blocked.Wchan}, ev.Blocked.Stack...), " ")
	if !strings.Contains(where, "fuse") && !strings.Contains(where, "request_wait_answer") {
		t.Errorf("hang evidence does not point at FUSE: wchan %q stack %q", ev.Blocked.Wchan, ev.Blocked.Stack)
	}
	t.Logf("hang evidence: %s; syscall %s; stack %q", ev.String(), ev.Blocked.Syscall, ev.Blocked.Stack)
	if ev.Blocked.Syscall == "" {
		t.Errorf("hang evidence has no syscall")
	}
	if _, ok := c.Files["test-hang-stat/before.txt"]; !ok {
		t.Errorf("what the collector wrote before it hung was not kept: %v", hs.Files)
	}
	for _, name := range []string{"host", "processes"} {
		if got := collectorByName(t, m, name).Status; got != bundle.StatusOK {
			t.Errorf("%s status %q, want ok", name, got)
		}
	}
	if m.Status != "partial" {
		t.Errorf("manifest status %q, want partial", m.Status)
	}
}

// Collectors that panic, exit non-zero, or write past the per-file cap do
// not spoil the bundle; the manifest says exactly what happened to each.
func TestCollectFaultyCollectors(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 60*time.Second, []string{"NODESNAP_TEST_BIG_BYTES=3145728"},
		"collect", "--output-dir", out, "--only", "host,test-panic,test-exit,test-bigfile", "--max-file-size", "1MiB", "--timeout", "30s")
	if r.code != exitPartial {
		t.Fatalf("exit status %d, want %d\nstderr:\n%s", r.code, exitPartial, r.stderr)
	}
	c := mustValidate(t, bundlePath(t, out))
	m := c.Manifest

	p := collectorByName(t, m, "test-panic")
	if p.Status != bundle.StatusError || !strings.Contains(p.Error, "panicked") || !strings.Contains(p.Error, "nil map") {
		t.Errorf("test-panic: status %q error %q, want error naming the panic", p.Status, p.Error)
	}
	if _, ok := c.Files["test-panic/note.txt"]; !ok {
		t.Errorf("test-panic's file written before the panic is missing")
	}
	e := collectorByName(t, m, "test-exit")
	if e.Status != bundle.StatusError || e.ExitCode == nil || *e.ExitCode != 7 || !strings.Contains(e.Error, "status 7") {
		t.Errorf("test-exit: status %q exit %v error %q, want error with status 7", e.Status, e.ExitCode, e.Error)
	}
	b := collectorByName(t, m, "test-bigfile")
	if b.Status != bundle.StatusOK {
		t.Errorf("test-bigfile status %q (%s)", b.Status, b.Error)
	}
	var big *bundle.FileEntry
	for i := range m.Files {
		if m.Files[i].Path == "test-bigfile/big.txt" {
			big = &m.Files[i]
		}
	}
	if big == nil || !big.Truncated || big.Size != 1<<20 {
		t.Fatalf("big.txt entry %+v, want truncated at 1 MiB", big)
	}
	if len(c.Files["test-bigfile/big.txt"]) != 1<<20 {
		t.Errorf("big.txt holds %d bytes, want %d", len(c.Files["test-bigfile/big.txt"]), 1<<20)
	}
	if got := collectorByName(t, m, "host").Status; got != bundle.StatusOK {
		t.Errorf("host status %q", got)
	}
}

// SIGTERM at any point leaves either a complete, valid bundle (marked
// interrupted) or none at all, and never a staging directory or a
// temporary file.
func TestCollectSIGTERMAnyTime(t *testing.T) {
	binaryTest(t)
	delays := []time.Duration{0, 20 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 1500 * time.Millisecond, 2600 * time.Millisecond}
	interrupted := 0
	defer func() {
		// Most delays land mid-collection: the test must have seen the
		// interesting case, a bundle finished after the signal.
		if interrupted == 0 && !t.Failed() {
			t.Errorf("no run produced an interrupted bundle; the signal path was not exercised")
		}
	}()
	for _, d := range delays {
		t.Run(d.String(), func(t *testing.T) {
			out := t.TempDir()
			cmd := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=2s"}, "collect", "-q", "--output-dir", out, "--only", "host,processes,test-slow", "--timeout", "30s")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(d)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Fatal("nodesnap did not exit within 30s of SIGTERM")
			}
			code := cmd.ProcessState.ExitCode()
			names := bundleFiles(t, out)
			for _, n := range names {
				if strings.HasPrefix(n, ".nodesnap-") {
					t.Errorf("left behind: %s", n)
				}
			}
			switch len(names) {
			case 0:
				// Killed before a bundle could exist: acceptable only
				// as a fatal exit or a signal death, never as success.
				if code == exitOK || code == exitPartial {
					t.Errorf("exit status %d but no bundle", code)
				}
			case 1:
				c := mustValidate(t, filepath.Join(out, names[0]))
				if c.Manifest.Interrupted == nil && code != exitOK {
					t.Errorf("bundle not marked interrupted, exit %d", code)
				}
				if c.Manifest.Interrupted != nil {
					interrupted++
				}
				if c.Manifest.Interrupted != nil && (code != exitPartial || c.Manifest.Status != "partial") {
					t.Errorf("interrupted bundle: exit %d status %s, want 3 and partial", code, c.Manifest.Status)
				}
				for _, content := range c.Files {
					if strings.Contains(string(content), "sekrit-token-") {
						t.Errorf("unredacted token in an interrupted bundle")
					}
				}
			default:
				t.Errorf("more than one file in output: %v", names)
			}
		})
	}
}

// A second signal abandons the run: no bundle, no staging, exit 1.
func TestCollectSecondSignalAbandons(t *testing.T) {
	out := t.TempDir()
	cmd := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=20s"}, "collect", "-q", "--output-dir", out, "--only", "test-slow", "--timeout", "60s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatal("nodesnap did not exit after two signals")
	}
	if names := bundleFiles(t, out); len(names) != 0 {
		// Both signals may land before the handler runs the first: then
		// the first finishes a bundle, which must validate.
		if len(names) == 1 && !strings.HasPrefix(names[0], ".") {
			mustValidate(t, filepath.Join(out, names[0]))
			return
		}
		t.Fatalf("left in output: %v", names)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitFatal {
		t.Errorf("exit status %d, want %d", code, exitFatal)
	}
}

// An output filesystem that fills up is a clear fatal error: exit 1, no
// bundle, nothing half-written left.
func TestCollectFullDisk(t *testing.T) {
	testkit.RequireRoot(t)
	out := testkit.MountTmpfs(t, "", "size=512k,mode=0700")
	// --min-free 0: the check before starting would refuse this disk;
	// here the disk must fill while the bundle is written.
	r := runNodesnap(t, 60*time.Second, []string{"NODESNAP_TEST_BIG_BYTES=4194304"},
		"collect", "--output-dir", out, "--only", "host,test-bigfile", "--timeout", "30s", "--min-free", "0")
	if r.code != exitFatal {
		t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, exitFatal, r.stdout, r.stderr)
	}
	t.Logf("stderr: %s", r.stderr)
	if !strings.Contains(r.stderr, "no space") {
		t.Errorf("error does not say the disk is full:\n%s", r.stderr)
	}
	if names := readDir(t, out); len(names) != 0 {
		t.Errorf("left in the full output directory: %v", names)
	}
}

// The usage errors exit 2 and name the problem.
func TestCollectUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"collect", "--only", "no-such-collector"},
		{"collect", "--bogus-flag"},
		{"collect", "--timeout", "-1s"},
		{"collect", "--output", "yaml"},
		{"collect", "extra-arg"},
		{"validate"},
	} {
		r := runNodesnap(t, 30*time.Second, nil, args...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %q", args, r.code, exitUsage, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "nodesnap: ") {
			t.Errorf("%v: stderr %q does not start with a clear message", args, r.stderr)
		}
	}
	if _, err := os.Stat("/var/tmp"); err == nil {
		// The usage errors must not have written anything.
		for _, n := range readDir(t, "/var/tmp") {
			if strings.HasPrefix(n, ".nodesnap-") {
				t.Errorf("usage error left %s in /var/tmp", n)
			}
		}
	}
}
