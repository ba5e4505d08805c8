package faults

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/engine/outputdir"
	"github.com/nodesnap/nodesnap/test/testkit"
)

// The stated bound of a run whatever its output directory does: --timeout
// plus outputdir.WriteGrace for hashing and writing, plus 2 s to give up
// on a hung directory (worker reaping, lock release).
const outputTimeout = 8 * time.Second

var outputBound = outputTimeout + outputdir.WriteGrace + 2*time.Second

// stagingHolds reports whether a staging directory under dir holds a file
// of collector c. dir is read directly: it is the backing directory, never
// the FUSE mount.
func stagingHolds(dir, c string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".nodesnap-") && e.IsDir() {
			files, _ := os.ReadDir(filepath.Join(dir, e.Name(), c))
			for _, f := range files {
				if f.Type().IsRegular() {
					return true
				}
			}
		}
	}
	return false
}

// An output directory on a mount that hangs before the run starts: the
// stat of it costs one deadline (outputdir.OpTimeout), the run ends
// with exit 1 and a message naming the hung directory, and SIGTERM ends it
// at once. It used to take 63 s with --timeout 10s and ignore SIGTERM.
func TestOutputDirectoryHungBeforeRun(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	for i := 0; i < rounds(1, 3); i++ {
		for _, sigterm := range []bool{false, true} {
			n := newNode(t)
			f := testkit.HungFUSE(t, "", testkit.FUSEStartHung())
			cmd := nodesnapIn(t, t.TempDir(), n.args(f.Mountpoint(), "--timeout", outputTimeout.String())...)
			if sigterm {
				go func() {
					time.Sleep(time.Second)
					if cmd.Process != nil {
						cmd.Process.Signal(syscall.SIGTERM)
					}
				}()
			}
			r := execRun(t, outputBound+30*time.Second, cmd)
			o := outcome{fault: "output directory on a hung mount before the run", noBundle: true}
			limit := outputdir.OpTimeout + 2*time.Second
			if sigterm {
				o.fault += " + SIGTERM"
				limit = 3 * time.Second
			}
			if r.elapsed > outputTimeout {
				o.overrun = r.elapsed - outputTimeout
			}
			if r.elapsed > limit {
				t.Errorf("run took %s, want at most %s", r.elapsed, limit)
			}
			want := "stopped answering"
			if sigterm {
				want = "stopped while"
			}
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, stderr %q: want 1 and %q", r.code, r.stderr, want)
			}
			f.Close()
			o.failed = t.Failed()
			record(o)
		}
	}
}

// An output filesystem that hangs once collectors have written into
// staging: the run gives up writing at --timeout + outputdir.WriteGrace, exits 1
// naming the hung directory and the staging it could not remove, and no
// bundle appears. It used to hang in "writing the bundle…" for ever.
func TestOutputFilesystemHangsMidRun(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		backing := t.TempDir()
		f := testkit.HungFUSE(t, "", testkit.FUSELoopback(backing))
		cmd := nodesnapIn(t, t.TempDir(), n.args(f.Mountpoint(), "--timeout", outputTimeout.String())...)
		go func() {
			// Hang as soon as the host collector's first file is staged.
			end := time.Now().Add(outputTimeout)
			for !stagingHolds(backing, "host") && time.Now().Before(end) {
				time.Sleep(5 * time.Millisecond)
			}
			f.Hang()
		}()
		r := execRun(t, outputBound+30*time.Second, cmd)
		o := outcome{fault: "output filesystem hangs mid-run", noBundle: true}
		if r.elapsed > outputTimeout {
			o.overrun = r.elapsed - outputTimeout
		}
		if r.elapsed > outputBound {
			t.Errorf("run took %s, bound %s", r.elapsed, outputBound)
		}
		if r.code != 1 || !strings.Contains(r.stderr, "stopped answering") {
			t.Errorf("exit %d, stderr %q: want 1 and a message naming the hung output directory", r.code, r.stderr)
		}
		if f.Blocked() == 0 {
			t.Errorf("the mount never hung a request: the fault did not happen")
		}
		f.Close()
		// No bundle may have reached the backing directory.
		ents, _ := os.ReadDir(backing)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".tar.gz") {
				t.Errorf("a bundle was written to a hung filesystem: %s", e.Name())
			}
		}
		o.failed = t.Failed()
		record(o)
	}
}

// The output directory is removed while collectors run; a later
// collector's file creation makes it again. The bundle must not say
// complete: it is partial, names every file that vanished as omitted,
// marks the collectors that lost files partial, and validates. It used to
// say complete, all collectors ok, with host/ processes/ mounts/ missing.
func TestOutputDirectoryDeletedMidRun(t *testing.T) {
	testkit.RequireRoot(t)
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		// A journalctl that hangs keeps the journal collector writing
		// after the directory is gone.
		path := hangingPrograms(t)
		jdir := filepath.Join(n.root, "var/log/journal/0123456789abcdef0123456789abcdef")
		os.MkdirAll(jdir, 0o755)
		os.WriteFile(filepath.Join(jdir, "system.journal"), []byte("LPKSHHRH"), 0o640)
		out := filepath.Join(t.TempDir(), "out")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := nodesnapIn(t, t.TempDir(), n.args(out, "--journal-dir", filepath.Dir(jdir), "--journal-reader", "journalctl", "--journal-timeout", "3s")...)
		cmd.Env = append(os.Environ(), path)
		go func() {
			end := time.Now().Add(runTimeout)
			for !stagingHolds(out, "host") && time.Now().Before(end) {
				time.Sleep(5 * time.Millisecond)
			}
			os.RemoveAll(out)
		}()
		r := execRun(t, runTimeout+30*time.Second, cmd)
		o := outcome{fault: "output directory deleted mid-run"}
		if r.elapsed > runTimeout+slack {
			t.Errorf("run took %s", r.elapsed)
		}
		if r.code != 3 {
			t.Errorf("exit %d, want 3 (partial)\nstderr:\n%s", r.code, r.stderr)
		}
		c, co := checkOutput(t, out, false, n.secrets)
		o.valid, o.leaked = co.valid, co.leaked
		if c != nil {
			m := c.Manifest
			if m.Status != "partial" {
				t.Errorf("status %s, want partial", m.Status)
			}
			if !strings.Contains(strings.Join(m.Warnings, " "), "removed or replaced") {
				t.Errorf("no warning that the staging directory was replaced: %q", m.Warnings)
			}
			lost := 0
			for _, om := range m.Omitted {
				if strings.Contains(om.Reason, "gone from the staging directory") {
					lost++
					if _, ok := c.Files[om.Path]; ok {
						t.Errorf("%s is both omitted and present", om.Path)
					}
				}
			}
			if lost == 0 {
				t.Errorf("no file is listed as lost, omitted: %v", m.Omitted)
			}
			if h := m.Collector("host"); h == nil || h.Status == bundle.StatusOK {
				t.Errorf("host collector %+v: want partial, it lost its files", h)
			}
		}
		o.failed = t.Failed()
		record(o)
	}
}

// A --redact-config on a mount that hangs: collect reads it in a worker
// under a deadline, so the run ends with a usage error naming the file
// within about that deadline, before anything is collected, instead of
// hanging before its first deadline exists.
func TestRedactConfigOnHungMount(t *testing.T) {
	testkit.RequireRoot(t)
	testkit.RequireFUSE(t)
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		f := testkit.HungFUSE(t, "", testkit.FUSEStartHung())
		cfg := filepath.Join(f.Mountpoint(), "rules.yaml")
		out := t.TempDir()
		r := nodesnap(t, outputBound+30*time.Second, nil, n.args(out, "--redact-config", cfg)...)
		o := outcome{fault: "--redact-config on a hung mount", noBundle: true}
		// The read's deadline (5 s), a worker's start and its reaping.
		limit := 5*time.Second + 2*time.Second
		if r.elapsed > limit {
			o.overrun = r.elapsed - limit
			t.Errorf("run took %s, want at most %s", r.elapsed, limit)
		}
		if r.code != 2 || !strings.Contains(r.stderr, "no answer within") || !strings.Contains(r.stderr, cfg) {
			t.Errorf("exit %d, stderr %q: want 2 and a message naming the hung config file", r.code, r.stderr)
		}
		if f.Blocked() == 0 {
			t.Errorf("the mount never hung a request: the fault did not happen")
		}
		if ents, _ := os.ReadDir(out); len(ents) != 0 {
			t.Errorf("the output directory holds %d entries: nothing should have been written", len(ents))
		}
		if err := f.Close(); err != nil {
			t.Errorf("unmounting the hung FUSE mount: %v", err)
		}
		o.failed = t.Failed()
		record(o)
	}
}
