// Package bundletest builds nodesnap bundles from fixture trees for tests.
// It lives apart from testkit so that testkit stays free of the bundle
// package and its dependencies can use testkit in their own tests.
package bundletest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// Stage writes files (slash-separated path under the bundle -> content,
// the first path element naming the collector) under staging, appends a
// text FileEntry for each to m.Files, in path order, and returns one
// CollectorResult (status ok) per collector with the names of its files,
// and the collectors in path order. With relative, a
// collector lists its files relative to its own directory; without, by
// their path in the bundle (as the manifest does).
func Stage(t testing.TB, staging string, files map[string][]byte, m *bundle.Manifest, relative bool) (cols map[string]*bundle.CollectorResult, order []string) {
	t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	cols = map[string]*bundle.CollectorResult{}
	for _, n := range names {
		col, _, _ := strings.Cut(n, "/")
		if cols[col] == nil {
			cols[col] = &bundle.CollectorResult{Name: col, Status: bundle.StatusOK, Files: []string{}}
			order = append(order, col)
		}
		p := filepath.Join(staging, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, files[n], 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(files[n])
		m.Files = append(m.Files, bundle.FileEntry{Path: n, Collector: col, Size: int64(len(files[n])), SHA256: hex.EncodeToString(sum[:]), Kind: bundle.KindText})
		if relative {
			cols[col].Files = append(cols[col].Files, strings.TrimPrefix(n, col+"/"))
		} else {
			cols[col].Files = append(cols[col].Files, n)
		}
	}
	return cols, order
}
