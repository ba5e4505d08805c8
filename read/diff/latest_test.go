package diff_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/read/diff"
)

func TestLatest(t *testing.T) {
	dir := t.TempDir()
	touch := func(names ...string) {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name       string
		add        []string
		old, new   string
		errContain string
	}{
		{"empty", nil, "", "", "no bundle"},
		{"one", []string{"nodesnap-node1-20261120T090000Z.tar.gz"}, "", "", "only one bundle of host node1"},
		{"two plus junk and another host's older one", []string{"nodesnap-node1-20261121T090000Z.tar.zst", "notes.txt",
			"nodesnap-node2-20261119T090000Z.tar.gz", ".nodesnap-12-staging-x"},
			"nodesnap-node1-20261120T090000Z.tar.gz", "nodesnap-node1-20261121T090000Z.tar.zst", ""},
		{"same second: -N orders", []string{"nodesnap-node1-20261121T090000Z-2.tar.gz"},
			"nodesnap-node1-20261121T090000Z.tar.zst", "nodesnap-node1-20261121T090000Z-2.tar.gz", ""},
		{"another host newest", []string{"nodesnap-node2-20261122T090000Z.tar.gz"},
			"nodesnap-node2-20261119T090000Z.tar.gz", "nodesnap-node2-20261122T090000Z.tar.gz", ""},
	}
	for _, c := range cases {
		touch(c.add...)
		if c.name == "two plus junk and another host's older one" {
			// A directory named like a bundle is not one.
			if err := os.Mkdir(filepath.Join(dir, "nodesnap-node1-20261130T090000Z.tar.gz"), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		o, n, err := diff.Latest(dir)
		if c.errContain != "" {
			if err == nil || !strings.Contains(err.Error(), c.errContain) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.errContain)
			}
			continue
		}
		if err != nil || filepath.Base(o) != c.old || filepath.Base(n) != c.new {
			t.Errorf("%s: %s, %s, %v; want %s, %s", c.name, o, n, err, c.old, c.new)
		}
	}
}
