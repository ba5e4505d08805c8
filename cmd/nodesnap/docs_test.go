package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/collectors"
)

// referenceDir is the committed output of `nodesnap docs`.
const referenceDir = "../../docs/reference"

// The committed reference pages are exactly what `nodesnap docs` writes
// now: a flag, command or collector added without regenerating them fails
// here.
func TestDocsReferenceUpToDate(t *testing.T) {
	dir := t.TempDir()
	if code := run(context.Background(), []string{"docs", "--dir", dir}); code != exitOK {
		t.Fatalf("nodesnap docs: exit %d", code)
	}
	const fix = "regenerate with: go run ./cmd/nodesnap docs --dir docs/reference"
	got, want := readTree(t, dir), readTree(t, referenceDir)
	for name, b := range got {
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("docs/reference/%s is missing; %s", name, fix)
		case !bytes.Equal(b, w):
			t.Errorf("docs/reference/%s is out of date; %s\n%s", name, fix, lineDiff(string(w), string(b)))
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("docs/reference/%s is no longer generated; %s", name, fix)
		}
	}
	if _, ok := got[CollectorsDocName]; !ok {
		t.Errorf("no %s generated", CollectorsDocName)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = b
	}
	return m
}

// Man pages too, one per command, and a stale page of a command that no
// longer exists is removed while other files stay.
func TestDocsMan(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "nodesnap-gone.8"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, "other.8"), []byte("keep"), 0o644)
	if code := run(context.Background(), []string{"docs", "--format", "man", "--dir", dir}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, n := range []string{"nodesnap.8", "nodesnap-collect.8", "nodesnap-upload.8", "other.8"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nodesnap-gone.8")); err == nil {
		t.Errorf("stale page kept")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "nodesnap-collect.8"))
	if !strings.Contains(string(b), ".TH \"NODESNAP\" \"8\"") || !strings.Contains(string(b), `\fB--upload-timeout\fP`) || !strings.Contains(string(b), "nodesnap-<host>-<UTC time>") {
		t.Errorf("nodesnap-collect.8 does not look like the collect page:\n%s", truncate(string(b), 500))
	}
	if code := run(context.Background(), []string{"docs", "--format", "pdf", "--dir", dir}); code != exitUsage {
		t.Errorf("--format pdf: exit %d, want %d", code, exitUsage)
	}
}

// docs/bundle.md's table of what each collector writes is generated from
// the collectors' Spec.Files: a collector added or a file described
// differently without regenerating it fails here.
func TestBundleDocUpToDate(t *testing.T) {
	const page = "../../docs/bundle.md"
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	got, err := spliceBundleFiles(string(b))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(page, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != string(b) {
		t.Errorf("docs/bundle.md's collector table is out of date; regenerate with: go test ./cmd/nodesnap -run TestBundleDocUpToDate -update\n%s", lineDiff(string(b), got))
	}
	for _, s := range collectors.All() {
		if !s.Hidden && !strings.Contains(got, "| `"+s.Name+"` | `") {
			t.Errorf("collector %s has no line in the generated table", s.Name)
		}
	}
}
