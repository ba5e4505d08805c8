package fakehost_test

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/engine/supervisor"
	"github.com/nodesnap/nodesnap/engine/supervisor/supervisortest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from this run")

// mountedVolume is the fake host's one CSI volume, mounted (in its
// mountinfo) on a FUSE filesystem that exists only there: nothing probes
// it for real, since every path is under the root.
const mountedVolume = "/var/lib/kubelet/pods/0d7b7c52-3f1e-4c59-9a55-5a0f2f1b6a11/volumes/kubernetes.io~csi/pvc-7f3d/mount"

// host copies testdata/host into a temporary directory and adds what
// cannot be committed: each task's mountinfo and its root link (an
// absolute link to the copy, as /proc/<pid>/root leads to the host's
// root).
func host(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "host")
	err := filepath.WalkDir("testdata/host", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata/host", p)
		to := filepath.Join(root, rel)
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
	mi := "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"41 22 0:52 / " + mountedVolume + " rw,relatime shared:30 - fuse.fixturefs fixture rw\n"
	ents, err := os.ReadDir(filepath.Join(root, "proc"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || !e.IsDir() {
			continue
		}
		pdir := filepath.Join(root, "proc", e.Name())
		dirs := []string{pdir}
		tasks, _ := os.ReadDir(filepath.Join(pdir, "task"))
		for _, tk := range tasks {
			dirs = append(dirs, filepath.Join(pdir, "task", tk.Name()))
		}
		for _, d := range dirs {
			if err := os.WriteFile(filepath.Join(d, "mountinfo"), []byte(mi), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(root, filepath.Join(d, "root")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Every listed collector over the fake host, without root or network:
// the bundle's listing is the golden one.
func TestEveryCollectorOverTheFakeHost(t *testing.T) {
	root := host(t)
	// The kubelet and the API server are the network's: neither answers
	// here (a closed loopback port; no kubeconfig in the fake host).
	dead := closedPort(t)
	supervisortest.Flags(t, "kubelet", "--kubelet-url=https://"+dead, "--kubelet-readonly-url=", "--kubelet-healthz-url=")
	t.Setenv("KUBECONFIG", "")
	// The kernel's log is the running kernel's whatever the root: a
	// fixture cannot stand in for it.
	supervisortest.Flags(t, "journal", "--journal-kernel=false")
	var only []string
	for _, s := range collectors.All() {
		if !s.Hidden {
			only = append(only, s.Name)
		}
	}
	c, _ := supervisortest.Run(t, supervisor.Options{Only: only, Timeout: 90 * time.Second,
		Common: collectors.Common{Root: root, Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"),
			ProbeTimeout: 2 * time.Second}})

	var b bytes.Buffer
	fmt.Fprintf(&b, "# go test ./test/fakehost -update rewrites this file: every collector's status over\n# testdata/host, then the files it wrote.\n")
	byCollector := map[string][]string{}
	for _, f := range c.Manifest.Files {
		byCollector[f.Collector] = append(byCollector[f.Collector], f.Path)
	}
	res := c.Manifest.Collectors
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	for _, r := range res {
		fmt.Fprintf(&b, "%s %s\n", r.Name, r.Status)
		files := byCollector[r.Name]
		sort.Strings(files)
		for _, f := range files {
			fmt.Fprintf(&b, "  %s\n", f)
		}
		t.Logf("%s %s %s %q", r.Name, r.Status, r.Error, r.Notes)
	}
	const golden = "testdata/golden.txt"
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with go test ./test/fakehost -update)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("the fake host's bundle differs from %s (regenerate with go test ./test/fakehost -update if the change is meant):\n%s", golden, diff(string(want), b.String()))
	}
	if len(res) != len(only) {
		t.Errorf("the manifest lists %d collectors, %d ran", len(res), len(only))
	}
}

// diff lists the lines only one side has.
func diff(want, got string) string {
	w := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	g := map[string]bool{}
	var out []string
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
