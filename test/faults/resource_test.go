package faults

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// An output filesystem that fills up: exit 1 with a clear message, and
// nothing left behind.
func TestOutputFilesystemFull(t *testing.T) {
	testkit.RequireRoot(t)
	for i := 0; i < rounds(1, 3); i++ {
		n := newNode(t)
		// Enough for a little staging, not for the whole run.
		big := strings.Repeat("kubelet log line that fills the output filesystem\n", 80000)
		if err := os.WriteFile(n.root+"/var/log/kubelet.log", []byte(big), 0o600); err != nil {
			t.Fatal(err)
		}
		out := testkit.MountTmpfs(t, "", "size=1m,mode=0700")
		// --min-free 0: the check before starting would refuse this
		// filesystem; here it must fill up during the run.
		r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--min-free", "0")...)
		o := outcome{fault: "output filesystem full"}
		if r.code != 1 || !strings.Contains(r.stderr, "no space") {
			t.Errorf("exit %d, stderr %q: want 1 and a message saying the disk is full", r.code, r.stderr)
		}
		_, co := checkOutput(t, out, true, n.secrets)
		o.noBundle, o.valid = co.noBundle, co.valid
		if !co.noBundle {
			t.Errorf("a bundle was written to a full filesystem")
		}
		o.failed = t.Failed()
		record(o)
	}
}

// A read-only output directory: refused at once with a clear message.
func TestOutputDirectoryReadOnly(t *testing.T) {
	testkit.RequireRoot(t)
	n := newNode(t)
	out := testkit.MountTmpfs(t, "", "size=1m,mode=0755")
	if err := unix.Mount("", out, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out)...)
	o := outcome{fault: "output directory read-only"}
	if r.code != 1 || !strings.Contains(r.stderr, "read-only") {
		t.Errorf("exit %d, stderr %q: want 1 and a message naming the read-only filesystem", r.code, r.stderr)
	}
	_, co := checkOutput(t, out, true, n.secrets)
	o.noBundle = co.noBundle
	o.failed = t.Failed()
	record(o)
}

// As an unprivileged user: refused by default (exit 2, nothing written);
// with --allow-non-root a partial bundle that says it was not run as root,
// at the end of the output even with -q and as an analyze finding.
func TestNotRoot(t *testing.T) {
	testkit.RequireRoot(t) // to switch to nobody
	n := newNode(t)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := testkit.Binary(t)
	// nobody must be able to run the binary and read the fixture.
	for _, p := range []string{bin, n.root} {
		for d := p; d != "/" && d != "."; d = parent(d) {
			st, err := os.Stat(d)
			if err == nil && st.Mode().Perm()&0o005 == 0 {
				os.Chmod(d, st.Mode().Perm()|0o005)
			}
		}
	}
	refused := runAs(t, 65534, bin, n.args(out)...)
	if refused.code != 2 || !strings.Contains(refused.stderr, "needs root") || !strings.Contains(refused.stderr, "--allow-non-root") {
		t.Errorf("without --allow-non-root: exit %d, want 2 (refused) with a message naming the flag\nstderr:\n%s", refused.code, refused.stderr)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("a refused run left %d file(s) in the output directory", len(ents))
	}
	r := runAs(t, 65534, bin, n.args(out, "--allow-non-root")...)
	o := outcome{fault: "not root (uid 65534)"}
	if r.code != 3 {
		t.Errorf("exit %d, want 3 (partial)\nstderr:\n%s", r.code, r.stderr)
	}
	// n.args has -q: the caveat is still the end of the output.
	if !strings.Contains(r.stderr, "warning: nodesnap ran as uid 65534, not root") {
		t.Errorf("-q output does not say the run was not root:\n%s", r.stderr)
	}
	c, co := checkOutput(t, out, false, nil)
	o.valid = co.valid
	if c != nil {
		if len(c.Manifest.Warnings) == 0 || !strings.Contains(c.Manifest.Warnings[0], "not root") {
			t.Errorf("manifest warnings %q do not say nodesnap was not root", c.Manifest.Warnings)
		}
		if c.Manifest.Status != "partial" {
			t.Errorf("status %s, want partial", c.Manifest.Status)
		}
		ents, _ := os.ReadDir(out)
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".tar.gz") {
				continue
			}
			a := nodesnap(t, time.Minute, nil, "analyze", "--json", filepath.Join(out, e.Name()))
			if !strings.Contains(a.stdout, `"id": "evidence-missing"`) || !strings.Contains(a.stdout, `"subject": "not-root"`) {
				t.Errorf("analyze has no evidence-missing finding about the run without root:\n%s", a.stdout)
			}
		}
	}
	o.failed = t.Failed()
	record(o)
}

func parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

func runAs(t *testing.T, uid int, bin string, args ...string) run {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	return execRun(t, runTimeout+30*time.Second, cmd)
}

// A command line longer than the 128 KiB nodesnap reads is flagged as
// truncated in processes/tasks.json; it used to be cut without a word.
func TestLongCommandLineFlagged(t *testing.T) {
	testkit.RequireRoot(t)
	n := newNode(t)
	// One argument may not pass 128 KiB (MAX_ARG_STRLEN): two of 100.
	long := "--arg=" + strings.Repeat("x", 100<<10)
	holder := exec.Command("/bin/sh", "-c", "sleep 600; :", "rel-long-cmdline", long, long)
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); holder.Wait() })
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "processes")...)
	o := outcome{fault: "command line over 128 KiB"}
	if r.code != 0 && r.code != 3 {
		t.Errorf("exit %d\n%s", r.code, r.stderr)
	}
	c, co := checkOutput(t, out, false, nil)
	o.valid = co.valid
	if c != nil {
		var tasks []struct {
			PID       int      `json:"pid"`
			Cmdline   []string `json:"cmdline"`
			Truncated bool     `json:"cmdline_truncated"`
		}
		if err := json.Unmarshal(c.Files["processes/tasks.json"], &tasks); err != nil {
			t.Fatalf("processes/tasks.json: %v", err)
		}
		found := false
		for _, tk := range tasks {
			if tk.PID != holder.Process.Pid {
				if tk.Truncated {
					t.Errorf("pid %d flagged truncated with a %d-argument command line", tk.PID, len(tk.Cmdline))
				}
				continue
			}
			found = true
			if !tk.Truncated {
				t.Errorf("the 200 KiB command line of pid %d is not flagged truncated", tk.PID)
			}
		}
		if !found {
			t.Errorf("pid %d not in processes/tasks.json", holder.Process.Pid)
		}
	}
	o.failed = t.Failed()
	record(o)
}
