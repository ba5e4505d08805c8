package diff_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
	"github.com/nodesnap/nodesnap/test/testkit/bundletest"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/diff"
)

// fixture reads analyze's incident fixture <name> into bundle paths →
// contents (the same fixtures analyze's own tests use).
func fixture(t testing.TB, name string) map[string][]byte {
	t.Helper()
	return testkit.ReadTree(t, filepath.Join("..", "analyze", "testdata", name))
}

// bundleOpts vary the manifest a test bundle gets.
type bundleOpts struct {
	host       string
	at         time.Time
	status     string
	collectors map[string]string // name → status, over "ok"
	obfuscated []string
}

// makeBundle writes files into a real bundle with bundle.Write, as
// analyze's tests do: a manifest listing each file (collector = first path
// element), plus the hung mounts of a fixture's _manifest.json. The bundle
// validates, as diff requires.
func makeBundle(t testing.TB, files map[string][]byte, o bundleOpts) string {
	t.Helper()
	if o.host == "" {
		o.host = "node1"
	}
	if o.at.IsZero() {
		o.at = time.Date(2026, 11, 21, 9, 18, 14, 0, time.UTC)
	}
	if o.status == "" {
		o.status = "complete"
	}
	staging := t.TempDir()
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Tool:          bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine:   []string{"nodesnap", "collect"},
		Host:          bundle.Host{Hostname: o.host, Kernel: "6.1.0"},
		StartedAt:     o.at, FinishedAt: o.at.Add(5 * time.Second), DurationSeconds: 5,
		Status:     o.status,
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{},
		Files:      []bundle.FileEntry{},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}, Obfuscated: o.obfuscated},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
	files = copyFiles(files)
	if b, ok := files["_manifest.json"]; ok {
		var extra struct {
			HungMounts []bundle.HungItem `json:"hung_mounts"`
		}
		if err := json.Unmarshal(b, &extra); err != nil {
			t.Fatalf("_manifest.json: %v", err)
		}
		delete(files, "_manifest.json")
		m.HungMounts = append(m.HungMounts, extra.HungMounts...)
	}
	cols, order := bundletest.Stage(t, staging, files, m, false)
	for name, status := range o.collectors {
		if cols[name] == nil {
			cols[name] = &bundle.CollectorResult{Name: name, Files: []string{}}
			order = append(order, name)
		}
		cols[name].Status = status
	}
	sort.Strings(order)
	for _, c := range order {
		m.Collectors = append(m.Collectors, *cols[c])
	}
	out := filepath.Join(t.TempDir(), "nodesnap-"+o.host+"-"+o.at.Format("20060102T150405Z")+".tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, o.at); err != nil {
		t.Fatalf("writing the bundle: %v", err)
	}
	return out
}

func copyFiles(in map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func load(t testing.TB, p string) *diff.Snapshot {
	t.Helper()
	s, err := diff.Load(context.Background(), p)
	if err != nil {
		t.Fatalf("load %s: %v", p, err)
	}
	return s
}
