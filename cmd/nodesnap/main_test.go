package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/test/skip"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// TestMain lets the tests run this test binary as nodesnap itself: with
// NODESNAP_TEST_AS_MAIN=1 it is main(), fault-injection collectors
// included, and its children (re-executions of the same binary) inherit
// the variable.
func TestMain(m *testing.M) {
	if os.Getenv("NODESNAP_TEST_AS_MAIN") == "1" {
		main()
		return
	}
	if os.Getenv("NODESNAP_TEST_HOLD") == "1" {
		// A process a test started only for its command line (see
		// startHeldProcess): it sleeps until the test kills it.
		for {
			time.Sleep(time.Hour)
		}
	}
	testkit.Main(m)
}

type runResult struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
}

// nodesnapCmd prepares this test binary to run as nodesnap. Such a test
// runs the binary: it is skipped under go test -short (binaryTest).
func nodesnapCmd(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	binaryTest(t)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "NODESNAP_TEST_AS_MAIN=1"), env...)
	if os.Geteuid() != 0 {
		// The tests that need neither root (go test -short) still
		// collect: what root alone can read is missing, and said so.
		cmd.Env = append(cmd.Env, AllowNonRootEnv+"=1")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// binaryTest marks a test that runs nodesnap as a process (this test
// binary as main, or the built binary): it is of the binary tier, skipped
// under go test -short. The unit tier calls run() in-process instead.
func binaryTest(t testing.TB) {
	t.Helper()
	skip.Short(t, "runs nodesnap as a process (the binary tier)")
}

// runNodesnap runs nodesnap to completion, killing it (by its pid's
// process group) if it overstays limit.
func runNodesnap(t *testing.T, limit time.Duration, env []string, args ...string) runResult {
	t.Helper()
	cmd := nodesnapCmd(t, env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting nodesnap: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("nodesnap %v did not finish within %s\nstdout:\n%s\nstderr:\n%s", args, limit, out.String(), errb.String())
	}
	return runResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
}

// bundlePath returns the one bundle in dir, failing if there is not
// exactly one, and checks nothing else (staging, temporary files) is left.
func bundlePath(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	for _, e := range readDir(t, dir) {
		if strings.HasPrefix(e, ".nodesnap-") {
			t.Errorf("left behind in %s: %s", dir, e)
		}
		if strings.HasSuffix(e, ".tar.gz") || strings.HasSuffix(e, ".tar.zst") {
			found = append(found, filepath.Join(dir, e))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one bundle in %s, found %v", dir, found)
	}
	return found[0]
}

// bundleFiles is readDir without the .sha256 beside each bundle, which
// it checks are there.
func bundleFiles(t *testing.T, dir string) []string {
	t.Helper()
	names := readDir(t, dir)
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	var out []string
	for _, n := range names {
		if b, ok := strings.CutSuffix(n, outputdir.SumSuffix); ok && has[b] {
			continue
		}
		if _, ok := naming.ParseName(n); ok && !has[n+outputdir.SumSuffix] {
			t.Errorf("%s has no %s beside it", n, outputdir.SumSuffix)
		}
		out = append(out, n)
	}
	return out
}

func readDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// mustValidate validates a bundle and returns its contents.
func mustValidate(t *testing.T, p string) *bundle.Contents {
	t.Helper()
	if rep, err := bundle.Validate(context.Background(), p); err != nil {
		var probs string
		if rep != nil {
			probs = strings.Join(rep.Problems, "\n")
		}
		t.Fatalf("bundle %s does not validate: %v\n%s", p, err, probs)
	}
	c, err := bundle.ReadAll(context.Background(), p, 0)
	if err != nil {
		t.Fatalf("reading bundle: %v", err)
	}
	return c
}

func collectorByName(t *testing.T, m *bundle.Manifest, name string) *bundle.CollectorResult {
	t.Helper()
	c := m.Collector(name)
	if c == nil {
		t.Fatalf("collector %s missing from manifest", name)
	}
	return c
}

// readManifestRaw returns a bundle's manifest bytes as stored.
func readManifestRaw(p string) (*bundle.Manifest, []byte, error) {
	return bundle.ReadManifest(context.Background(), p)
}

// truncate shortens s to n bytes for a test's failure message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Every section of collect --help puts the flags' texts in one column, so
// that the sections read as one list (they used to start at four
// different columns, one section's at the third).
func TestHelpSectionsOneColumn(t *testing.T) {
	r := runNodesnap(t, time.Minute, []string{"COLUMNS="}, "collect", "--help")
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	flagLine := regexp.MustCompile(`^ +(-\w, )?--\S+( \S+)? {2,}\S`)
	cont := regexp.MustCompile(`^ {20,}\S`)
	cols := map[int]string{}
	inFlags := false
	for _, l := range strings.Split(r.stdout, "\n") {
		switch {
		case l == "General:":
			inFlags = true
		case !inFlags:
		case flagLine.MatchString(l), cont.MatchString(l):
			i := len(flagLine.FindString(l)) - 1
			if cont.MatchString(l) {
				i = len(l) - len(strings.TrimLeft(l, " "))
			}
			cols[i] = l
		}
	}
	if len(cols) != 1 {
		t.Errorf("collect --help puts flag texts at %d columns, want 1: %v", len(cols), cols)
	}
}
