package analyze_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// Hostile bundles: the analyzer refuses unsafe archives with a clear
// error, reads broken evidence as "unreadable" without stopping, never
// writes anything, and never panics.

type rawEntry struct {
	hdr  tar.Header
	body []byte
	// short writes only the first bytes of a body the header claims to
	// be longer (no tar.Writer.Close).
	short bool
}

// rawArchive builds a tar.gz by hand.
func rawArchive(t testing.TB, entries []rawEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Size == 0 && h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		h.Mode = 0o600
		h.ModTime = time.Unix(1763700000, 0)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.body) > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
		if e.short {
			if err := gz.Close(); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func manifestJSON(t testing.TB, version int) []byte {
	t.Helper()
	m := map[string]any{"schema_version": version, "tool": map[string]string{"name": "nodesnap", "version": "x"},
		"host": map[string]string{"hostname": "evil"}, "status": "complete", "collectors": []any{}, "files": []any{}}
	if version >= 2 {
		m["manifest_sha256"] = strings.Repeat("0", 64) // sealed below
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if version >= 2 {
		if err := bundle.SealManifest(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func TestHostileArchivesAreRefused(t *testing.T) {
	man := rawEntry{hdr: tar.Header{Name: "manifest.json"}, body: manifestJSON(t, bundle.SchemaVersion)}
	cases := []struct {
		name    string
		entries []rawEntry
		raw     []byte
		want    string
		unsafe  bool
	}{
		{name: "traversal", entries: []rawEntry{man, {hdr: tar.Header{Name: "../../evil"}, body: []byte("x")}}, want: "leaves the bundle", unsafe: true},
		{name: "nested traversal", entries: []rawEntry{man, {hdr: tar.Header{Name: "journal/../../../evil.log"}, body: []byte("x")}}, want: "leaves the bundle", unsafe: true},
		{name: "absolute", entries: []rawEntry{man, {hdr: tar.Header{Name: "/etc/evil"}, body: []byte("x")}}, want: "absolute", unsafe: true},
		{name: "symlink", entries: []rawEntry{man, {hdr: tar.Header{Name: "journal/kubelet.log", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}}}, want: "symbolic link", unsafe: true},
		{name: "hard link", entries: []rawEntry{man, {hdr: tar.Header{Name: "journal/kubelet.log", Typeflag: tar.TypeLink, Linkname: "manifest.json"}}}, want: "hard link", unsafe: true},
		{name: "device node", entries: []rawEntry{man, {hdr: tar.Header{Name: "dev/sda", Typeflag: tar.TypeBlock}}}, want: "device node", unsafe: true},
		{name: "10 GiB claimed", entries: []rawEntry{man, {hdr: tar.Header{Name: "journal/kernel.log", Size: 10 << 30}, body: []byte("INFO: task x:1 blocked for more than 120 seconds.\n"), short: true}}, want: "claims 10737418240 bytes", unsafe: true},
		{name: "duplicate", entries: []rawEntry{man, {hdr: tar.Header{Name: "a"}, body: []byte("1")}, {hdr: tar.Header{Name: "a"}, body: []byte("2")}}, want: "appears twice", unsafe: true},
		{name: "not an archive", raw: []byte("PK\x03\x04 this is a zip"), want: "not a gzip or zstd", unsafe: true},
		{name: "manifest not first", entries: []rawEntry{{hdr: tar.Header{Name: "journal/kubelet.log"}, body: []byte("x")}, man}, want: "first entry is \"journal/kubelet.log\""},
		{name: "unknown schema version", entries: []rawEntry{{hdr: tar.Header{Name: "manifest.json"}, body: manifestJSON(t, 99)}}, want: "schema version 99 is not supported"},
		{name: "manifest not JSON", entries: []rawEntry{{hdr: tar.Header{Name: "manifest.json"}, body: []byte("{\"schema_version\": 1,")}}, want: "not valid JSON"},
		{name: "empty archive", entries: []rawEntry{}, want: "empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Run from an empty directory inside a temporary tree: the
			// traversal entries would land in its parents.
			top := t.TempDir()
			work := filepath.Join(top, "a", "b")
			if err := os.MkdirAll(work, 0o700); err != nil {
				t.Fatal(err)
			}
			t.Chdir(work)
			data := c.raw
			if data == nil {
				data = rawArchive(t, c.entries)
			}
			p := filepath.Join(top, "bundle.tar.gz")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
			if err == nil {
				t.Fatalf("analysis succeeded: %v", ids(r))
			}
			if r != nil {
				t.Errorf("a report came with the error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q lacks %q", err, c.want)
			}
			if c.unsafe && !errors.Is(err, bundle.ErrUnsafe) {
				t.Errorf("error %q does not wrap bundle.ErrUnsafe", err)
			}
			// Nothing was written anywhere in the tree.
			var found []string
			_ = filepath.WalkDir(top, func(q string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && q != p {
					found = append(found, q)
				}
				return nil
			})
			if len(found) > 0 {
				t.Errorf("files written: %v", found)
			}
		})
	}
}

// Broken collector files do not stop the analysis: each is an info
// finding, and what the other files show is still found.
func TestBrokenEvidenceIsReportedNotFatal(t *testing.T) {
	files := fixture(t, "incident002-rbd-held-in-namespace")
	files["processes/tasks.json"] = []byte("[\n{\"pid\":1,\"tid\":1,\"comm\":\"systemd\"},\n{\"pid\":2,\"tid\":")
	files["openfiles/holders.json"] = []byte("{\"devices\": [ {\"dev\": 7 } ]}")
	files["mountprobe/probes.json"] = []byte("\x00\x01 not json at all")
	files["dirshape/shape.json"] = []byte("{}{}")
	files["kubelet/goroutine-debug2.txt"] = []byte("goroutine x [\n\n\ngoroutine 1 [running]\n#\n")
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	held := only(t, r, "mount-held-in-foreign-namespace")
	if !strings.Contains(held.Explanation, "node_exporter[21839]") {
		t.Errorf("the held mount finding lost its holder: %s", held.Explanation)
	}
	bad := map[string]bool{}
	for _, f := range findings(r, "unreadable-evidence") {
		if f.Severity != analyze.Info || len(f.Evidence) != 1 || f.Evidence[0].Path != f.Subject {
			t.Errorf("unreadable finding %+v", f)
		}
		bad[f.Subject] = true
	}
	for _, p := range []string{"processes/tasks.json", "openfiles/holders.json", "mountprobe/probes.json", "dirshape/shape.json"} {
		if !bad[p] {
			t.Errorf("%s not reported unreadable; findings:\n%s", p, dump(r))
		}
	}
	if len(findings(r, "analyze-internal-error")) > 0 {
		t.Errorf("internal error:\n%s", dump(r))
	}
	for _, f := range findings(r, "unreadable-evidence") {
		if strings.Contains(f.Evidence[0].What, "internal error") {
			t.Errorf("a reader panicked: %s", f.Evidence[0].What)
		}
	}
}

// A line of a log far longer than any buffer, and binary junk, are read
// through without losing the line numbers after them.
func TestLongAndBinaryLogLines(t *testing.T) {
	files := fixture(t, "healthy")
	long := strings.Repeat("x", 3<<20)
	files["journal/kubelet.log"] = []byte("first\n" + long + "\n\x00\xff\xfe binary\nNov 21 kubelet: E1121 \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago\"\n")
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Zstd), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := only(t, r, "kubelet-pleg-unhealthy")
	l := f.Evidence[0].Lines
	if len(l) != 1 || l[0].N != 4 {
		t.Errorf("PLEG line evidence %+v, want line 4", l)
	}
}

// A log of nothing but matching lines, each about another pod: what is
// kept is bounded (a count per pod beyond the first thousands), and the
// findings are capped per kind.
func TestFloodOfMatchingLogLines(t *testing.T) {
	files := fixture(t, "healthy")
	var b strings.Builder
	for i := 0; i < 30000; i++ {
		fmt.Fprintf(&b, "Nov 21 kubelet[1]: E1121 err=\"orphaned pod \\\"%08d-0000-4000-8000-000000000000\\\" found, but volume paths are still present on disk\"\n", i)
	}
	files["journal/kubelet.log"] = []byte(b.String())
	r, err := analyze.AnalyzeFile(context.Background(), makeBundle(t, files, bundle.Gzip), analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fs := findings(r, "orphaned-pod-volume-paths")
	if len(fs) != 51 {
		t.Fatalf("%d orphaned-pod findings, want the cap of 50 and one saying how many more", len(fs))
	}
	more := fs[len(fs)-1]
	if more.Subject != "(more)" || !strings.Contains(more.Summary, "1950 more orphaned-pod-volume-paths findings") || !strings.Contains(more.Summary, "28000 more matching log lines") {
		t.Errorf("the last finding: %s %s", more.Subject, more.Summary)
	}
}
