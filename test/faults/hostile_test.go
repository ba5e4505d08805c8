package faults

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/test/testkit"
)

type entry struct {
	name, link string
	typ        byte
	size       int64
	body       string
}

func hostileArchive(t *testing.T, entries []entry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o600, Size: e.size}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		tw.WriteHeader(h)
		if e.body != "" {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "hostile.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Hostile bundles given to every reading command are refused with a clear
// error, quickly, and nothing is written outside a temporary directory.
func TestHostileBundles(t *testing.T) {
	evil := filepath.Join(os.TempDir(), "nodesnap-reliability-evil")
	os.Remove(evil)
	manifest := entry{name: "manifest.json", body: `{"schema_version":1}`}
	cases := map[string][]entry{
		"path traversal":  {manifest, {name: "../../../../" + strings.TrimPrefix(evil, "/"), body: "x"}},
		"absolute path":   {manifest, {name: evil, body: "x"}},
		"symlink out":     {manifest, {name: "host/passwd", typ: tar.TypeSymlink, link: "/etc/shadow"}},
		"hard link":       {manifest, {name: "host/x", typ: tar.TypeLink, link: "/etc/shadow"}},
		"10 GiB claim":    {{name: "manifest.json", size: 10 << 30}},
		"broken manifest": {{name: "manifest.json", body: `{"schema_version":1,`}},
		"unknown version": {{name: "manifest.json", body: `{"schema_version":42}`}},
		"not a bundle":    {{name: "README", body: "hello"}},
	}
	for name, entries := range cases {
		p := hostileArchive(t, entries)
		for _, sub := range [][]string{{"validate", p}, {"inspect", p}, {"analyze", p}, {"redact", "--output-file", filepath.Join(t.TempDir(), "out.tar.gz"), p}} {
			t.Run(name+"/"+sub[0], func(t *testing.T) {
				cwd := t.TempDir()
				cmd := nodesnapIn(t, cwd, sub...)
				r := execRun(t, 30*time.Second, cmd)
				o := outcome{fault: "hostile bundle (" + sub[0] + ")", noBundle: true}
				if r.code == 0 {
					t.Errorf("%s accepted a hostile bundle (%s)", sub[0], name)
				}
				if !strings.HasPrefix(r.stderr, "nodesnap: ") {
					t.Errorf("%s: no clear error: %q", sub[0], r.stderr)
				}
				if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
					t.Errorf("%s panicked: %s", sub[0], r.stderr)
				}
				if _, err := os.Lstat(evil); err == nil {
					t.Errorf("%s wrote %s", sub[0], evil)
					os.Remove(evil)
				}
				if left, _ := os.ReadDir(cwd); len(left) != 0 {
					t.Errorf("%s wrote into its working directory: %v", sub[0], left)
				}
				o.failed = t.Failed()
				record(o)
			})
		}
	}
}

// realManifest is the manifest.json of a real collection of a fixture
// node: schema-valid, so that what follows it is what a reader judges.
func realManifest(t *testing.T) []byte {
	t.Helper()
	n := newNode(t)
	out := t.TempDir()
	r := nodesnap(t, runTimeout+30*time.Second, nil, n.args(out, "--only", "host")...)
	if r.code != 0 && r.code != 3 {
		t.Fatalf("collect: exit %d\n%s", r.code, r.stderr)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tar.gz") {
			_, raw, err := bundle.ReadManifest(context.Background(), filepath.Join(out, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
	}
	t.Fatal("collect wrote no bundle")
	return nil
}

// claimsArchive is a bundle of a few megabytes whose only entry is a
// manifest listing n files, every one the same but for its name: it
// compresses about 50:1, far past what a real manifest (one sha256 digest
// per file) can.
func claimsArchive(t *testing.T, n int) string {
	t.Helper()
	prefix := `{"schema_version":1,"tool":{"name":"nodesnap","version":"x","go_version":"go"},"command_line":[],` +
		`"started_at":"2026-11-21T10:00:00Z","finished_at":"2026-11-21T10:00:01Z","duration_seconds":1,"status":"complete",` +
		`"host":{"hostname":"h","kernel":"k"},"settings":{},"redaction":{"total":0,"rules":{}},` +
		`"collectors":[{"name":"host","status":"ok","files":[]}],"files":[`
	suffix := `],"hung_mounts":[],"omitted":[]}`
	entry := func(i int) string {
		return fmt.Sprintf(`{"path":"host/f%08d","collector":"host","size":1,"sha256":"%064d","kind":"text"}`, i, 0)
	}
	size := int64(len(prefix)+len(suffix)) + int64(n)*int64(len(entry(0))) + int64(n-1)
	p := filepath.Join(t.TempDir(), "claims.tar.gz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "manifest.json", Typeflag: tar.TypeReg, Mode: 0o600, Size: size}); err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriterSize(tw, 1<<20)
	bw.WriteString(prefix)
	for i := 0; i < n; i++ {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(entry(i))
	}
	bw.WriteString(suffix)
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(tw.Close(), gz.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bundles whose manifest is real and schema-valid but whose archive
// holds what validate refuses (a path leaving the bundle, a symlink, a
// hard link), and a bundle of a few megabytes whose manifest claims
// millions of files: every reading command refuses them, quickly, within
// a memory bound set by the bundle's size. inspect used to read the
// manifest alone and print "complete" (exit 0) for the first three; the
// last cost validate 26 s and 3.3 GiB, inspect 3.2 GiB.
func TestHostileBundlesWithAValidManifest(t *testing.T) {
	testkit.RequireRoot(t) // the fixture collection
	m := entry{name: "manifest.json", body: string(realManifest(t))}
	evil := filepath.Join(os.TempDir(), "nodesnap-reliability-evil")
	os.Remove(evil)
	nClaims := rounds(400_000, 1_600_000)
	cases := map[string]string{
		"path traversal, valid manifest":                   hostileArchive(t, []entry{m, {name: "host/../../../../" + strings.TrimPrefix(evil, "/"), body: "x"}}),
		"symlink, valid manifest":                          hostileArchive(t, []entry{m, {name: "host/uname.txt", typ: tar.TypeSymlink, link: "/etc/shadow"}}),
		"hard link, valid manifest":                        hostileArchive(t, []entry{m, {name: "host/uname.txt", typ: tar.TypeLink, link: "/etc/shadow"}}),
		fmt.Sprintf("manifest claiming %d files", nClaims): claimsArchive(t, nClaims),
	}
	for name, p := range cases {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// What a reader may use: a fixed allowance for the process, plus
		// the manifest a bundle of this size may hold
		// (bundle.ManifestBudget) decoded at 20 bytes of memory per byte.
		rssLimit := 64<<20 + 20*bundle.ManifestBudget(st.Size())
		for _, sub := range [][]string{{"validate", p}, {"inspect", p}, {"analyze", p}, {"redact", "--output-file", filepath.Join(t.TempDir(), "out.tar.gz"), p}} {
			t.Run(name+"/"+sub[0], func(t *testing.T) {
				cwd := t.TempDir()
				cmd, mem := nodesnapInCgroup(t, cwd, sub...)
				r := execRun(t, 30*time.Second, cmd)
				o := outcome{fault: "hostile bundle, valid manifest (" + sub[0] + ")", noBundle: true}
				if r.code == 0 {
					t.Errorf("%s accepted it (exit 0):\n%s", sub[0], r.stdout)
				}
				if !strings.HasPrefix(r.stderr, "nodesnap: ") || strings.Contains(r.stderr, "panic") {
					t.Errorf("%s: no clear error: %q", sub[0], r.stderr)
				}
				if mem != "" {
					peak := readInt(t, filepath.Join(mem, "memory.max_usage_in_bytes"))
					t.Logf("%s: exit %d in %s, peak memory %d MiB, bundle %d KiB", sub[0], r.code, r.elapsed.Round(time.Millisecond), peak>>20, st.Size()>>10)
					if peak > rssLimit {
						t.Errorf("%s peaked at %d MiB for a %d KiB bundle, over %d MiB", sub[0], peak>>20, st.Size()>>10, rssLimit>>20)
					}
				}
				if _, err := os.Lstat(evil); err == nil {
					t.Errorf("%s wrote %s", sub[0], evil)
					os.Remove(evil)
				}
				if left, _ := os.ReadDir(cwd); len(left) != 0 {
					t.Errorf("%s wrote into its working directory: %v", sub[0], left)
				}
				o.failed = t.Failed()
				record(o)
			})
		}
	}
}

// nodesnapInCgroup is nodesnapIn for a command whose memory is measured:
// it moves itself into a memory cgroup of its own (mem) before it execs,
// since ru_maxrss would report this test process's peak, which execve
// inherits. mem is "" where no cgroup could be made.
func nodesnapInCgroup(t *testing.T, dir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := nodesnapIn(t, dir, args...)
	mem := memCgroup(t)
	if mem != "" {
		bin := cmd.Path
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, mem, bin}, args...)
	}
	return cmd, mem
}

// memCgroup makes a cgroup v1 memory cgroup for one command and removes it
// afterwards; "" (and a logged reason) where there is none to make, and
// then the command's memory is not checked.
func memCgroup(t *testing.T) string {
	t.Helper()
	const root = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Logf("no cgroup v1 memory controller at %s: the reader's peak memory is not checked", root)
		return ""
	}
	dir := filepath.Join(root, fmt.Sprintf("nodesnap-reliability-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Logf("cannot make a memory cgroup (%v): the reader's peak memory is not checked", err)
		return ""
	}
	t.Cleanup(func() {
		// Empty once the reader has exited; rmdir is how a cgroup goes.
		for i := 0; i < 50; i++ {
			if err := syscall.Rmdir(dir); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("memory cgroup %s could not be removed", dir)
	})
	return dir
}

func readInt(t *testing.T, p string) int64 {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}
