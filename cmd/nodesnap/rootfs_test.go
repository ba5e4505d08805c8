package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/internal/human"
)

// copyTree copies a fixture tree (files, directories, symlinks as links).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fixtureMount is a mount only the fixture's mount tables have.
const fixtureMount = "/var/lib/kubelet/pods/fixture-only-pod/volumes/kubernetes.io~csi/pvc-fixture/mount"

// fixtureRoot copies testdata/root and adds what the mount collectors
// read (a mount table per task, ns and root links per process). It
// returns the copy and the fixture's pids.
func fixtureRoot(t *testing.T) (string, map[int]bool) {
	t.Helper()
	src, err := filepath.Abs("testdata/root")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "host")
	copyTree(t, src, root)
	mi := "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"41 22 0:52 / " + fixtureMount + " rw,relatime shared:30 - fuse.fixturefs fixture rw\n"
	pids := map[int]bool{}
	ents, _ := os.ReadDir(filepath.Join(root, "proc"))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		pids[pid] = true
		pdir := filepath.Join(root, "proc", e.Name())
		os.WriteFile(filepath.Join(pdir, "mountinfo"), []byte(mi), 0o644)
		os.Symlink(root, filepath.Join(pdir, "root")) // as /proc/<pid>/root leads to the host's root
		tasks, _ := os.ReadDir(filepath.Join(pdir, "task"))
		for _, tk := range tasks {
			os.WriteFile(filepath.Join(pdir, "task", tk.Name(), "mountinfo"), []byte(mi), 0o644)
			os.Symlink(root, filepath.Join(pdir, "task", tk.Name(), "root"))
		}
		// The process's own ns link, as the thread group leader's.
		if l, err := os.Readlink(filepath.Join(pdir, "task", e.Name(), "ns", "mnt")); err == nil {
			os.MkdirAll(filepath.Join(pdir, "ns"), 0o755)
			os.Symlink(l, filepath.Join(pdir, "ns", "mnt"))
		}
	}
	if len(pids) < 3 {
		t.Fatalf("fixture has %d processes", len(pids))
	}
	return root, pids
}

// A run with --root pointed at a fixture host tree reads the host only
// from there: the hostname, kernel, boot and machine ids are the
// fixture's, the processes are exactly the fixture's (none of the real
// machine's, not even nodesnap's own), and no file of the bundle carries
// the real machine's boot id, machine id or hostname. Every collector this
// build has runs, except kubelet (it talks to the kubelet over the
// network, not through the root).
func TestCollectRootReadsOnlyFixture(t *testing.T) {
	root, pids := fixtureRoot(t)
	var only, extra []string
	for _, s := range collectors.All() {
		if !s.Hidden && s.Name != "kubelet" {
			only = append(only, s.Name)
		}
		if s.Name == "journal" {
			// The kernel's log (dmesg, /dev/kmsg) is the running
			// kernel's whatever the root: right in a container, which
			// shares the host's kernel; a fixture cannot stand in.
			extra = append(extra, "--journal-kernel=false")
		}
	}
	out := t.TempDir()
	args := append([]string{"collect", "-q", "--root", root, "--output-dir", out, "--only", strings.Join(only, ","), "--timeout", "60s"}, extra...)
	r := runNodesnap(t, 90*time.Second, nil, args...)
	if r.code != exitOK && r.code != exitPartial {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	p := bundlePath(t, out)
	if !strings.HasPrefix(filepath.Base(p), "nodesnap-fixture-node-") {
		t.Errorf("bundle %s is not named after the fixture's hostname", p)
	}
	c := mustValidate(t, p)
	h := c.Manifest.Host
	readFixture := func(rel string) string {
		b, _ := os.ReadFile(filepath.Join(root, rel))
		return strings.TrimSpace(string(b))
	}
	if h.Hostname != "fixture-node" || h.Kernel != readFixture("proc/sys/kernel/osrelease") ||
		h.BootID != readFixture("proc/sys/kernel/random/boot_id") || h.MachineID != readFixture("etc/machine-id") {
		t.Errorf("manifest host %+v is not the fixture's", h)
	}
	for _, s := range c.Manifest.Collectors {
		t.Logf("%-12s %-11s %s", s.Name, s.Status, human.FirstLine(s.Error))
	}

	var tasks []struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(c.Files["processes/tasks.json"], &tasks); err != nil {
		t.Fatalf("processes/tasks.json: %v", err)
	}
	seen := map[int]bool{}
	for _, tk := range tasks {
		if !pids[tk.PID] {
			t.Errorf("pid %d in the bundle is not in the fixture: read from the real /proc", tk.PID)
		}
		seen[tk.PID] = true
	}
	if len(seen) != len(pids) {
		t.Errorf("bundle has pids %v, fixture %v", keys(seen), keys(pids))
	}

	real := map[string]string{}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		real["boot id"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		real["machine id"] = strings.TrimSpace(string(b))
	}
	if hn, err := os.Hostname(); err == nil && len(hn) >= 6 { // shorter names occur in ordinary text
		real["hostname"] = hn
	}
	for path, data := range c.Files {
		for what, v := range real {
			if v != "" && strings.Contains(string(data), v) {
				t.Errorf("%s holds the real machine's %s (%s): read outside --root", path, what, v)
			}
		}
	}
	// The mounts collector, where this build has it, lists the fixture's
	// mount table.
	if m := c.Manifest.Collector("mounts"); m != nil && m.Status == "ok" {
		found := false
		for path, data := range c.Files {
			found = found || strings.HasPrefix(path, "mounts/") && strings.Contains(string(data), "fixture-only-pod")
		}
		if !found {
			t.Errorf("no file of the mounts collector lists the fixture's mount %s", fixtureMount)
		}
	}
}

func keys(m map[int]bool) []int {
	var k []int
	for n := range m {
		k = append(k, n)
	}
	sort.Ints(k)
	return k
}
