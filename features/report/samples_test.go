package report

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodesnap/nodesnap/test/skip"
)

// TestSamplePages writes each fixture scenario's bundle and page into the
// directory $NODESNAP_REPORT_SAMPLES, to look at in a browser, and
// pictures.html, the page with every picture (graphFiles); the
// screenshots in docs/report.md come from incident003-cephfs-hung,
// signatures and pictures:
//
//	NODESNAP_REPORT_SAMPLES=$PWD/samples go test -run TestSamplePages ./features/report/
func TestSamplePages(t *testing.T) {
	dir := skip.OptIn(t, "NODESNAP_REPORT_SAMPLES", "sample pages")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(filepath.Join("..", "..", "read", "analyze", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	scenarios := map[string]map[string][]byte{"pictures": graphFiles(t)}
	for _, d := range dirs {
		if d.IsDir() {
			scenarios[d.Name()] = fixtureFiles(t, d.Name())
		}
	}
	for name, files := range scenarios {
		p := writeBundle(t, files, nil)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		kept := filepath.Join(dir, name+".tar.gz")
		if err := os.WriteFile(kept, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, page := render(t, kept)
		checkPage(t, page)
		if err := os.WriteFile(filepath.Join(dir, name+".html"), bytes.Clone(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
