package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fixtureBundle writes analyze's incident fixture name as a bundle.
func fixtureBundle(t *testing.T, name string) string {
	t.Helper()
	root := filepath.Join("..", "..", "analyze", "testdata", name)
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "_manifest.json" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return analyzeBundle(t, files)
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
	if r.code != exitFatal || r.stdout != "" || !strings.Contains(r.stderr, "reading bundle "+cut) || !strings.Contains(r.stderr, "unsafe or malformed bundle") {
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
	if r.code != exitOK || !strings.Contains(r.stdout, "Exit status 3 means a finding of severity warning or critical appeared") || !strings.Contains(r.stdout, "--json") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
}
