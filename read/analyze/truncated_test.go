package analyze_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// A half-uploaded attachment: a real bundle cut at many offsets is read as
// far as it goes. Cut inside manifest.json, nothing can be said and the
// error says the bundle is truncated; cut later, the report holds the
// findings of the files before the cut (their evidence never in a file
// after it) and a bundle-truncated finding naming where it ends and every
// file that is missing. zstd decodes a block at a time: a small bundle is
// one block, so a cut zstd bundle holds nothing past its manifest.
func TestTruncatedBundleIsReadAsFarAsItGoes(t *testing.T) {
	for _, format := range []string{bundle.Gzip, bundle.Zstd} {
		t.Run(format, func(t *testing.T) {
			whole := makeBundle(t, fixture(t, "incident003-cephfs-hung"), format)
			full, err := analyze.AnalyzeFile(context.Background(), whole, analyze.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(findings(full, "bundle-truncated")) != 0 {
				t.Fatalf("the whole bundle reads as truncated:\n%s", dump(full))
			}
			data, err := os.ReadFile(whole)
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := bundle.ReadManifest(context.Background(), whole)
			if err != nil {
				t.Fatal(err)
			}
			sawFindings, sawManifestCut := false, false
			for _, frac := range []float64{0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99} {
				n := int(float64(len(data)) * frac)
				cut := filepath.Join(t.TempDir(), "cut."+format)
				if err := os.WriteFile(cut, data[:n], 0o600); err != nil {
					t.Fatal(err)
				}
				rep, err := analyze.AnalyzeFile(context.Background(), cut, analyze.Options{})
				if err != nil {
					if !errors.Is(err, bundle.ErrTruncated) || !strings.Contains(err.Error(), "manifest.json") {
						t.Fatalf("cut at %d of %d bytes: %v", n, len(data), err)
					}
					sawManifestCut = true
					continue
				}
				f := only(t, rep, "bundle-truncated")
				if f.Severity != analyze.Warning || !strings.HasPrefix(f.Summary, "bundle truncated ") {
					t.Errorf("cut at %d: %+v", n, f)
				}
				missing, _ := f.Evidence[0].Record.([]string)
				if len(missing) == 0 {
					t.Errorf("cut at %d: no missing file named: %+v", n, f.Evidence)
				}
				for _, p := range missing {
					if !slices.ContainsFunc(m.Files, func(fe bundle.FileEntry) bool { return fe.Path == p }) {
						t.Errorf("cut at %d: %s is named missing but the manifest does not list it", n, p)
					}
				}
				if rep.FilesRead+len(missing) != len(m.Files)+1 && rep.FilesRead+len(missing) != len(m.Files)+2 {
					// +1 for manifest.json; +1 more when the cut entry was
					// read in part and is also named missing.
					t.Errorf("cut at %d: %d entries read and %d missing, the manifest lists %d files", n, rep.FilesRead, len(missing), len(m.Files))
				}
				for _, g := range rep.Findings {
					if g.ID == "bundle-truncated" || g.ID == "unreadable-evidence" {
						continue
					}
					sawFindings = true
					for _, e := range g.Evidence {
						if e.Path != f.Subject && slices.Contains(missing, e.Path) {
							t.Errorf("cut at %d: finding %s shows evidence from %s, which is after the cut", n, g.ID, e.Path)
						}
					}
				}
			}
			if (format == bundle.Gzip && !sawFindings) || !sawManifestCut {
				t.Errorf("no cut showed findings from before the cut (%v) or a cut inside the manifest (%v)", sawFindings, sawManifestCut)
			}
		})
	}
}
