package testkit

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// ReadTree reads every file under dir into slash-separated relative paths
// → contents: a fixture directory as the files of a bundle (analyze's
// incident scenarios, used by analyze, report and diff tests).
func ReadTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatalf("testkit: reading the fixture %s: %v", dir, err)
	}
	return files
}
