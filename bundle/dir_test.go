package bundle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodesnap/nodesnap/bundle"
)

// writeDir writes files (slash paths) under a new directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// An extracted bundle is walked manifest first, then in lexical order, and
// refused as an archive is: links, FIFOs, devices, sizes past the limits, a
// directory that holds no bundle.
func TestWalkDirectory(t *testing.T) {
	ok := map[string]string{"manifest.json": "{}", "host/a.txt": "a", "journal/k.log": "kk", "host/b/c.txt": "c"}
	walk := func(dir string, lim bundle.Limits) ([]string, error) {
		var names []string
		err := bundle.Walk(context.Background(), dir, lim, func(e bundle.Entry) error {
			names = append(names, e.Name)
			return nil
		})
		return names, err
	}
	names, err := walk(writeDir(t, ok), bundle.DefaultLimits)
	if err != nil || strings.Join(names, ",") != "manifest.json,host/a.txt,host/b/c.txt,journal/k.log" {
		t.Fatalf("walk: %v %v", names, err)
	}
	// tar xzf of an archive with a top-level directory.
	top := t.TempDir()
	inner := writeDir(t, ok)
	if err := os.Rename(inner, filepath.Join(top, "nodesnap-n1-20261121T090000Z")); err != nil {
		t.Fatal(err)
	}
	if names, err := walk(top, bundle.DefaultLimits); err != nil || len(names) != 4 {
		t.Fatalf("top-level directory: %v %v", names, err)
	}

	cases := []struct {
		name  string
		setup func(dir string) error
		lim   bundle.Limits
		want  string
	}{
		{"symlink", func(d string) error { return os.Symlink("/etc/hostname", filepath.Join(d, "host", "evil")) }, bundle.DefaultLimits, "symbolic link"},
		{"symlinked manifest", func(d string) error {
			if err := os.Remove(filepath.Join(d, "manifest.json")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(d, "host", "a.txt"), filepath.Join(d, "manifest.json"))
		}, bundle.DefaultLimits, "symbolic link"},
		{"fifo", func(d string) error { return syscall.Mkfifo(filepath.Join(d, "host", "pipe"), 0o600) }, bundle.DefaultLimits, "a bundle holds only regular files"},
		{"entry too big", nil, bundle.Limits{MaxEntryBytes: 1, MaxTotalBytes: 1 << 20, MaxEntries: 100}, "over the limit"},
		{"too many entries", nil, bundle.Limits{MaxEntryBytes: 1 << 20, MaxTotalBytes: 1 << 20, MaxEntries: 2}, "more than 2 entries"},
		{"no manifest", func(d string) error { return os.Remove(filepath.Join(d, "manifest.json")) }, bundle.DefaultLimits, "not an extracted bundle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeDir(t, ok)
			if c.setup != nil {
				if err := c.setup(dir); err != nil {
					t.Fatal(err)
				}
			}
			_, err := walk(dir, c.lim)
			if err == nil || !errors.Is(err, bundle.ErrUnsafe) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want ErrUnsafe with %q", err, c.want)
			}
		})
	}
}
