package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// fastRun is the cheapest real collection: one fault-injection collector
// that writes a little for a short while.
var fastRun = []string{"--only", "test-slow", "--timeout", "30s"}

const fastEnv = "NODESNAP_TEST_SLOW=100ms"

// Two runs into one directory at once: the second waits --lock-wait,
// then refuses with exit status 4 and says who holds the directory; the
// first finishes one valid bundle; nothing else is left behind.
func TestCollectConcurrentRunsRefused(t *testing.T) {
	out := t.TempDir()
	first := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=4s"}, "collect", "-q", "--output-dir", out, "--only", "test-slow", "--timeout", "60s")
	var firstOut, firstErr bytes.Buffer
	first.Stdout, first.Stderr = &firstOut, &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan struct{})
	go func() { first.Wait(); close(firstDone) }()
	defer func() {
		select {
		case <-firstDone:
		default:
			syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
			<-firstDone
		}
	}()
	waitForLockHolder(t, out, first.Process.Pid)

	second := runNodesnap(t, 30*time.Second, []string{fastEnv}, append([]string{"collect", "--output-dir", out, "--lock-wait", "700ms"}, fastRun...)...)
	if second.code != exitLocked {
		t.Fatalf("second run: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", second.code, exitLocked, second.stdout, second.stderr)
	}
	want := "another nodesnap run (pid " + strconv.Itoa(first.Process.Pid) + ") is collecting into " + out
	if !strings.HasPrefix(second.stderr, "nodesnap: ") || !strings.Contains(second.stderr, want) {
		t.Errorf("second run's message %q does not say %q", second.stderr, want)
	}
	if second.stdout != "" {
		t.Errorf("second run printed %q on stdout", second.stdout)
	}
	if second.elapsed < 700*time.Millisecond {
		t.Errorf("second run gave up after %s, before its --lock-wait", second.elapsed)
	}

	select {
	case <-firstDone:
	case <-time.After(60 * time.Second):
		t.Fatal("first run did not finish")
	}
	if code := first.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("first run: exit %d\nstderr:\n%s", code, firstErr.String())
	}
	p := bundlePath(t, out)
	if got := strings.TrimSpace(firstOut.String()); got != p {
		t.Errorf("first run printed %q, the bundle is %s", got, p)
	}
	mustValidate(t, p)
	if names := bundleFiles(t, out); len(names) != 1 {
		t.Errorf("output directory holds %v, want only the bundle", names)
	}
}

// A run that is allowed to wait long enough starts once the other is done:
// overlapping cron runs queue instead of failing.
func TestCollectWaitsForRunningCollection(t *testing.T) {
	out := t.TempDir()
	first := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=1500ms"}, "collect", "-q", "--output-dir", out, "--only", "test-slow", "--timeout", "60s")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan struct{})
	go func() { first.Wait(); close(firstDone) }()
	defer func() { syscall.Kill(-first.Process.Pid, syscall.SIGKILL); <-firstDone }()
	waitForLockHolder(t, out, first.Process.Pid)
	second := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out, "--lock-wait", "40s"}, fastRun...)...)
	if second.code != exitOK {
		t.Fatalf("second run: exit %d\n%s", second.code, second.stderr)
	}
	<-firstDone
	if code := first.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("first run: exit %d", code)
	}
	var bundles int
	for _, n := range bundleFiles(t, out) {
		if _, ok := naming.ParseName(n); !ok {
			t.Errorf("left in the output directory: %s", n)
			continue
		}
		bundles++
		mustValidate(t, filepath.Join(out, n))
	}
	if bundles != 2 {
		t.Errorf("%d bundles, want 2", bundles)
	}
}

// waitForLockHolder waits until pid holds the lock of dir.
func waitForLockHolder(t *testing.T, dir string, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join(dir, outputdir.LockName))
		if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pid %d never took the lock of %s", pid, dir)
}

// --keep 2 after four runs leaves the newest two complete bundles and
// nothing else; each run prints (with -q) exactly its bundle's path.
func TestCollectKeep(t *testing.T) {
	out := t.TempDir()
	var paths []string
	for i := 0; i < 4; i++ {
		r := runNodesnap(t, 60*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out, "--keep", "2"}, fastRun...)...)
		if r.code != exitOK {
			t.Fatalf("run %d: exit %d\n%s", i, r.code, r.stderr)
		}
		p := strings.TrimSuffix(r.stdout, "\n")
		if strings.Contains(p, "\n") || !filepath.IsAbs(p) {
			t.Fatalf("run %d printed %q, want one path", i, r.stdout)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("run %d: its bundle is gone right after it: %v", i, err)
		}
		paths = append(paths, p)
	}
	names := bundleFiles(t, out)
	want := []string{filepath.Base(paths[2]), filepath.Base(paths[3])}
	sort.Strings(names)
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("output directory holds %v, want the newest two %v (all four: %v)", names, want, paths)
	}
	for _, n := range names {
		mustValidate(t, filepath.Join(out, n))
	}
}

func TestCollectKeepUsage(t *testing.T) {
	for _, args := range [][]string{
		{"collect", "--keep", "-1"},
		{"collect", "--keep", "2", "--output-file", filepath.Join(t.TempDir(), "b.tar.gz")},
		{"collect", "--lock-wait", "-1s"},
		{"collect", "--upload", "ftp://example.com/x"},
		{"collect", "--upload", "http://127.0.0.1:1/x", "--upload-method", "patch"},
		{"upload", "x.tar.gz"},
	} {
		r := runNodesnap(t, 30*time.Second, []string{UploadURLEnv + "="}, args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "nodesnap: ") {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", args, r.code, r.stderr, exitUsage)
		}
	}
}

// A run refuses to start, before collecting anything, when the output
// filesystem has less than --min-free available.
func TestCollectRefusesLowSpace(t *testing.T) {
	out := t.TempDir()
	r := runNodesnap(t, 30*time.Second, []string{fastEnv}, append([]string{"collect", "--output-dir", out, "--min-free", "4000TiB"}, fastRun...)...)
	if r.code != exitFatal {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitFatal, r.stderr)
	}
	for _, want := range []string{"not enough free space", out, "--min-free", "-o"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("message %q does not mention %q", r.stderr, want)
		}
	}
	if strings.Contains(r.stderr, "test-slow") {
		t.Errorf("it collected before refusing:\n%s", r.stderr)
	}
	if names := readDir(t, out); len(names) != 0 {
		t.Errorf("left in the output directory: %v", names)
	}
}

// On a small filesystem the default check (256 MiB, or --max-bundle-size
// if smaller) refuses; with a smaller --max-bundle-size the same run goes.
func TestCollectDefaultMinFree(t *testing.T) {
	testkit.RequireRoot(t)
	out := testkit.MountTmpfs(t, "", "size=8m,mode=0700")
	r := runNodesnap(t, 30*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out}, fastRun...)...)
	if r.code != exitFatal || !strings.Contains(r.stderr, "256.0 MiB") {
		t.Fatalf("8 MiB filesystem: exit %d, stderr %q; want a refusal naming 256 MiB", r.code, r.stderr)
	}
	r = runNodesnap(t, 30*time.Second, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out, "--max-bundle-size", "4MiB"}, fastRun...)...)
	if r.code != exitOK {
		t.Fatalf("with --max-bundle-size 4MiB: exit %d\n%s", r.code, r.stderr)
	}
	mustValidate(t, bundlePath(t, out))
}

// A run waiting for the lock that is told to stop (SIGTERM from cron's
// timeout, Ctrl-C) stops at once, writes nothing, and leaves the other
// run and its lock alone.
func TestCollectSignalWhileWaitingForLock(t *testing.T) {
	out := t.TempDir()
	first := nodesnapCmd(t, []string{"NODESNAP_TEST_SLOW=10s"}, "collect", "-q", "--output-dir", out, "--only", "test-slow", "--timeout", "60s")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan struct{})
	go func() { first.Wait(); close(firstDone) }()
	defer func() { syscall.Kill(-first.Process.Pid, syscall.SIGKILL); <-firstDone }()
	waitForLockHolder(t, out, first.Process.Pid)

	// A loaded machine can take longer than the pause to bring the second
	// run to its wait: a stop before it (while it checks the directory) is
	// a clean stop too, but not the one under test, so it is tried again
	// with a longer pause while the first run still holds the lock.
	waited := false
	for _, pause := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
		second := nodesnapCmd(t, []string{fastEnv}, append([]string{"collect", "-q", "--output-dir", out, "--lock-wait", "60s"}, fastRun...)...)
		var errb bytes.Buffer
		second.Stderr = &errb
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
		secondDone := make(chan struct{})
		go func() { second.Wait(); close(secondDone) }()
		time.Sleep(pause) // waiting for the lock by now, unless the machine is slow
		second.Process.Signal(syscall.SIGTERM)
		select {
		case <-secondDone:
		case <-time.After(10 * time.Second):
			syscall.Kill(-second.Process.Pid, syscall.SIGKILL)
			<-secondDone
			t.Fatal("the waiting run did not stop on SIGTERM")
		}
		if code := second.ProcessState.ExitCode(); code != exitFatal || !strings.Contains(errb.String(), "stopped while") {
			t.Fatalf("waiting run: exit %d, stderr %q; want %d and a message", code, errb.String(), exitFatal)
		}
		if strings.Contains(errb.String(), "stopped while waiting") {
			waited = true
			break
		}
		t.Logf("stopped before it waited (after %s): %s", pause, strings.TrimSpace(errb.String()))
		select {
		case <-firstDone:
			t.Fatal("the first run finished before the second was seen waiting for its lock")
		default:
		}
	}
	if !waited {
		t.Fatal("the second run never reached its wait for the lock")
	}
	<-firstDone
	if code := first.ProcessState.ExitCode(); code != exitOK {
		t.Fatalf("first run: exit %d", code)
	}
	mustValidate(t, bundlePath(t, out))
	if names := bundleFiles(t, out); len(names) != 1 {
		t.Errorf("output directory holds %v", names)
	}
}
