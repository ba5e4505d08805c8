package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSamplePages writes each fixture scenario's bundle and page into the
// directory $NODESNAP_REPORT_SAMPLES, to look at in a browser (the
// screenshot in docs/report.md comes from incident003-cephfs-hung):
//
//	NODESNAP_REPORT_SAMPLES=$PWD/samples go test -run TestSamplePages ./report/
func TestSamplePages(t *testing.T) {
	dir := os.Getenv("NODESNAP_REPORT_SAMPLES")
	if dir == "" {
		t.Skip("NODESNAP_REPORT_SAMPLES is not set: no sample pages asked for")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(filepath.Join("..", "analyze", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		p := writeBundle(t, fixtureFiles(t, d.Name()), nil)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		kept := filepath.Join(dir, d.Name()+".tar.gz")
		if err := os.WriteFile(kept, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, page := render(t, kept)
		checkPage(t, page)
		if err := os.WriteFile(filepath.Join(dir, d.Name()+".html"), bytes.Clone(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
