package reliability

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, link string
	typ        byte
	size       int64
	body       string
}

func hostileArchive(t *testing.T, entries []entry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o600, Size: e.size}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		tw.WriteHeader(h)
		if e.body != "" {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "hostile.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Hostile bundles given to every reading command are refused with a clear
// error, quickly, and nothing is written outside a temporary directory.
func TestHostileBundles(t *testing.T) {
	evil := filepath.Join(os.TempDir(), "nodesnap-reliability-evil")
	os.Remove(evil)
	manifest := entry{name: "manifest.json", body: `{"schema_version":1}`}
	cases := map[string][]entry{
		"path traversal":  {manifest, {name: "../../../../" + strings.TrimPrefix(evil, "/"), body: "x"}},
		"absolute path":   {manifest, {name: evil, body: "x"}},
		"symlink out":     {manifest, {name: "host/passwd", typ: tar.TypeSymlink, link: "/etc/shadow"}},
		"hard link":       {manifest, {name: "host/x", typ: tar.TypeLink, link: "/etc/shadow"}},
		"10 GiB claim":    {{name: "manifest.json", size: 10 << 30}},
		"broken manifest": {{name: "manifest.json", body: `{"schema_version":1,`}},
		"unknown version": {{name: "manifest.json", body: `{"schema_version":42}`}},
		"not a bundle":    {{name: "README", body: "hello"}},
	}
	for name, entries := range cases {
		p := hostileArchive(t, entries)
		for _, sub := range [][]string{{"validate", p}, {"inspect", p}, {"analyze", p}, {"redact", "-o", filepath.Join(t.TempDir(), "out.tar.gz"), p}} {
			t.Run(name+"/"+sub[0], func(t *testing.T) {
				cwd := t.TempDir()
				cmd := nodesnapIn(t, cwd, sub...)
				r := execRun(t, 30*time.Second, cmd)
				o := outcome{fault: "hostile bundle (" + sub[0] + ")", noBundle: true}
				if r.code == 0 {
					t.Errorf("%s accepted a hostile bundle (%s)", sub[0], name)
				}
				if !strings.HasPrefix(r.stderr, "nodesnap: ") {
					t.Errorf("%s: no clear error: %q", sub[0], r.stderr)
				}
				if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
					t.Errorf("%s panicked: %s", sub[0], r.stderr)
				}
				if _, err := os.Lstat(evil); err == nil {
					t.Errorf("%s wrote %s", sub[0], evil)
					os.Remove(evil)
				}
				if left, _ := os.ReadDir(cwd); len(left) != 0 {
					t.Errorf("%s wrote into its working directory: %v", sub[0], left)
				}
				o.failed = t.Failed()
				record(o)
			})
		}
	}
}
