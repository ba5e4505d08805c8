package faults

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/testkit"
)

func TestMain(m *testing.M) { testkit.MainThen(m, printSummary) }

// full reports whether the long suite was asked for.
func full() bool { return os.Getenv("NODESNAP_RELIABILITY") == "full" }

// rounds is how many times a fault is tried.
func rounds(fast, long int) int {
	if full() {
		return long
	}
	return fast
}

// outcome is one run of nodesnap under a fault.
type outcome struct {
	fault       string
	valid       bool // a bundle was written and validates
	noBundle    bool // no bundle, which the fault allowed
	leaked      int  // planted secrets found in the bundle or in staging
	overrun     time.Duration
	failed      bool
	description string
}

var (
	resultsMu sync.Mutex
	results   []outcome
)

func record(o outcome) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, o)
}

// run is one nodesnap invocation.
type run struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
	out     string
}

// nodesnap runs the real binary with args, killing it if it overstays
// limit (which is itself a failure).
func nodesnap(t *testing.T, limit time.Duration, env []string, args ...string) run {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return execRun(t, limit, cmd)
}

// execRun runs cmd (in its own process group) to completion, killing the
// group if it overstays limit, which is itself a failure.
func execRun(t *testing.T, limit time.Duration, cmd *exec.Cmd) run {
	t.Helper()
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Errorf("%v still running after %s: killed", cmd.Args, limit)
	}
	return run{code: cmd.ProcessState.ExitCode(), stdout: so.String(), stderr: se.String(), elapsed: time.Since(start)}
}

// checkOutput validates what a run left in dir: exactly one valid bundle
// (or none, if allowNone), no staging or temporary files, and none of the
// secrets in any byte of the bundle.
func checkOutput(t *testing.T, dir string, allowNone bool, secrets []string) (c *bundle.Contents, o outcome) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var bundles []string
	for _, e := range ents {
		switch {
		case strings.HasPrefix(e.Name(), ".nodesnap-"):
			t.Errorf("left behind in the output directory: %s", e.Name())
			o.failed = true
		case strings.HasSuffix(e.Name(), ".tar.gz"), strings.HasSuffix(e.Name(), ".tar.zst"):
			bundles = append(bundles, filepath.Join(dir, e.Name()))
		}
	}
	switch len(bundles) {
	case 0:
		if !allowNone {
			t.Errorf("no bundle written")
			o.failed = true
		}
		o.noBundle = true
		return nil, o
	case 1:
	default:
		t.Errorf("%d bundles written: %v", len(bundles), bundles)
		o.failed = true
	}
	rep, err := bundle.Validate(context.Background(), bundles[0])
	if err != nil {
		var probs []string
		if rep != nil {
			probs = rep.Problems
		}
		t.Errorf("bundle does not validate: %v %v", err, probs)
		o.failed = true
		return nil, o
	}
	o.valid = true
	c, err = bundle.ReadAll(context.Background(), bundles[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		for name, b := range c.Files {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("planted secret found in %s", name)
				o.leaked++
			}
		}
	}
	return c, o
}

// nodesnapIn prepares the real binary to run in dir.
func nodesnapIn(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testkit.Binary(t), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
