package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodesnap/nodesnap/bundle"
)

// fixtureBundle writes analyze's incident fixture name as a bundle that
// validates (diff refuses one that does not): each file listed by its
// collector, the first element of its path.
func fixtureBundle(t *testing.T, name string) string {
	t.Helper()
	root := filepath.Join("..", "..", "read", "analyze", "testdata", name)
	staging := t.TempDir()
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine: []string{"nodesnap", "collect"}, Host: bundle.Host{Hostname: "n1"}, StartedAt: now, FinishedAt: now, Status: "complete",
		Settings: bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: bundle.Gzip}, Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{},
		Redaction: bundle.RedactionSummary{Rules: map[string]int{}}, HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{}}
	cols := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "_manifest.json" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(staging, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			return err
		}
		col, _, _ := strings.Cut(name, "/")
		i, ok := cols[col]
		if !ok {
			i = len(m.Collectors)
			cols[col] = i
			m.Collectors = append(m.Collectors, bundle.CollectorResult{Name: col, Status: bundle.StatusOK, Files: []string{}})
		}
		m.Collectors[i].Files = append(m.Collectors[i].Files, name)
		sum := sha256.Sum256(b)
		m.Files = append(m.Files, bundle.FileEntry{Path: name, Collector: col, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]), Kind: bundle.KindText})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		t.Fatal(err)
	}
	return out
}

// Through the real binary: a new hung mount is exit 3 and named, the way
// back is 0, --json parses, a cut bundle and bad arguments are refused.
func TestDiffCommand(t *testing.T) {
	healthy := fixtureBundle(t, "healthy")
	sick := fixtureBundle(t, "incident003-cephfs-hung")

	r := runNodesnap(t, time.Minute, nil, "diff", healthy, sick)
	if r.code != exitPartial || r.stderr != "" {
		t.Fatalf("healthy → incident 003: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"+ critical hung-mount (0:61)", "Hung mounts (1 new, 0 gone)", "kubernetes.io~cephfs",
		"4130911 kubelet in ceph_mdsc_do_request", "libceph-session-lost", "Worse: a warning or critical finding appeared"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if utf8.RuneCountInString(l) > 100 {
			t.Errorf("line wider than 100 columns: %q", l)
		}
	}

	r = runNodesnap(t, time.Minute, nil, "diff", "--json", sick, healthy)
	var d struct {
		FindingsGone []struct{ ID string } `json:"findings_gone"`
		HungGone     []string              `json:"hung_mounts_gone"`
		Worse        bool                  `json:"worse"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || r.code != exitOK {
		t.Fatalf("--json back: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if d.Worse || len(d.HungGone) != 1 || len(d.FindingsGone) == 0 {
		t.Errorf("--json back: %+v", d)
	}

	r = runNodesnap(t, time.Minute, nil, "diff", healthy, healthy)
	if r.code != exitOK || !strings.Contains(r.stdout, "Nothing noteworthy changed.") {
		t.Errorf("same bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	raw, err := os.ReadFile(sick)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.tar.gz")
	if err := os.WriteFile(cut, raw[:len(raw)*2/3], 0o600); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, time.Minute, nil, "diff", healthy, cut)
	if r.code != exitFatal || r.stdout != "" || !strings.Contains(r.stderr, "reading bundle "+cut) || !strings.Contains(r.stderr, "the bundle is truncated") {
		t.Errorf("cut bundle: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	// --latest: the two newest of the host, by the time in their names.
	dir := t.TempDir()
	for name, src := range map[string]string{"nodesnap-n1-20261120T090000Z.tar.gz": sick,
		"nodesnap-n1-20261121T090000Z.tar.gz": healthy, "nodesnap-n1-20261119T090000Z.tar.gz": healthy} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r = runNodesnap(t, time.Minute, nil, "diff", "--latest", dir)
	if r.code != exitOK || !strings.Contains(r.stdout, "old: "+filepath.Join(dir, "nodesnap-n1-20261120T090000Z.tar.gz")) ||
		!strings.Contains(r.stdout, "- critical hung-mount (0:61)") {
		t.Errorf("--latest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = runNodesnap(t, time.Minute, nil, "diff", "--latest", dir, healthy); r.code != exitUsage {
		t.Errorf("--latest with an argument: exit %d, want %d", r.code, exitUsage)
	}

	if r = runNodesnap(t, time.Minute, nil, "diff", healthy); r.code != exitUsage {
		t.Errorf("one argument: exit %d, want %d", r.code, exitUsage)
	}
	if r = runNodesnap(t, time.Minute, nil, "diff", "--width", "10", healthy, sick); r.code != exitUsage {
		t.Errorf("--width 10: exit %d, want %d", r.code, exitUsage)
	}
	r = runNodesnap(t, time.Minute, nil, "diff", "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "Exit status 3 means a finding of severity warning or critical appeared") || !strings.Contains(r.stdout, "--output") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
}

// diff -o html prints the page and exits as diff does; two format flags
// are a usage error.
func TestDiffHTML(t *testing.T) {
	healthy := fixtureBundle(t, "healthy")
	sick := fixtureBundle(t, "incident003-cephfs-hung")
	r := runNodesnap(t, time.Minute, nil, "diff", "-o", "html", healthy, sick)
	if r.code != exitPartial || r.stderr != "" {
		t.Fatalf("diff --html: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"<!DOCTYPE html>", `content="default-src 'none'`, "Hung mounts (1 new, 0 gone)", "kubernetes.io~cephfs", "Worse: a warning or critical finding appeared"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(r.stdout, "<script") {
		t.Error("page holds a script")
	}
	r = runNodesnap(t, time.Minute, nil, "diff", "--html", "--json", healthy, sick)
	if r.code != exitUsage || !strings.Contains(r.stderr, "--output, --json and --html each choose the format: give one") {
		t.Errorf("--html --json: exit %d\n%s", r.code, r.stderr)
	}
}
