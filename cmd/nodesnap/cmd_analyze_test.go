package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
)

// analyzeBundle writes a small bundle holding files.
func analyzeBundle(t *testing.T, files map[string]string) string {
	t.Helper()
	staging := t.TempDir()
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	m := &bundle.Manifest{SchemaVersion: bundle.SchemaVersion, Tool: bundle.Tool{Name: "nodesnap", Version: "test"}, Host: bundle.Host{Hostname: "n1"},
		StartedAt: now, FinishedAt: now, Status: "complete", Settings: bundle.Settings{Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{}, Files: []bundle.FileEntry{}, Redaction: bundle.RedactionSummary{Rules: map[string]int{}},
		HungMounts: []bundle.HungItem{}, Omitted: []bundle.Omitted{}}
	for name, content := range files {
		p := filepath.Join(staging, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(content))
		col, _, _ := strings.Cut(name, "/")
		m.Files = append(m.Files, bundle.FileEntry{Path: name, Collector: col, Size: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), Kind: bundle.KindText})
	}
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		t.Fatal(err)
	}
	return out
}

// The exit status says whether anything at warning or above was found;
// --json prints the same report for machines; unsafe archives are refused.
func TestAnalyzeCommand(t *testing.T) {
	sick := analyzeBundle(t, map[string]string{
		"host/summary.json":   `{"hostname":"n1"}`,
		"journal/kubelet.log": "Nov 21 kubelet[1]: E1121 \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago\"\n",
	})
	// A kubelet's first seconds: every start logs a PLEG that has not
	// relisted yet (a real v1.34 kubelet's line), which is no finding.
	healthy := analyzeBundle(t, map[string]string{"host/summary.json": `{"hostname":"n1"}`, "journal/kubelet.log": "Nov 21 kubelet[1]: I1121 all is well\n" +
		`2026-11-23T19:26:17.027707+0000 vm kubelet[26344]: E1123 19:26:17.022706   26344 kubelet.go:2452] "Skipping pod synchronization" err="[container runtime status check may not have completed yet, PLEG is not healthy: pleg has yet to be successful]"` + "\n"})

	r := runNodesnap(t, time.Minute, nil, "analyze", sick)
	if r.code != exitPartial || !strings.Contains(r.stdout, "kubelet-pleg-unhealthy") || !strings.Contains(r.stdout, "Fix:") || r.stderr != "" {
		t.Errorf("sick bundle: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = runNodesnap(t, time.Minute, nil, "analyze", "--json", sick)
	var rep struct {
		Findings []struct {
			ID       string `json:"id"`
			Severity string `json:"severity"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitPartial {
		t.Fatalf("--json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].ID != "kubelet-pleg-unhealthy" || rep.Findings[0].Severity != "warning" {
		t.Errorf("--json findings %+v", rep.Findings)
	}

	r = runNodesnap(t, time.Minute, nil, "analyze", healthy)
	if r.code != exitOK || !strings.Contains(r.stdout, "No findings") {
		t.Errorf("healthy bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A traversal entry: refused, exit 1.
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range []struct{ name, body string }{{"manifest.json", `{"schema_version":1}`}, {"../../evil", "x"}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	evil := filepath.Join(t.TempDir(), "evil.tar.gz")
	if err := os.WriteFile(evil, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, time.Minute, nil, "analyze", evil)
	if r.code != exitFatal || !strings.Contains(r.stderr, "leaves the bundle") || r.stdout != "" {
		t.Errorf("hostile bundle: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}

	r = runNodesnap(t, time.Minute, nil, "analyze")
	if r.code != exitUsage {
		t.Errorf("no argument: exit %d, want %d", r.code, exitUsage)
	}
	r = runNodesnap(t, time.Minute, nil, "analyze", "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "3  a finding of severity warning or critical") || !strings.Contains(r.stdout, "--output") {
		t.Errorf("--help: exit %d\n%s", r.code, r.stdout)
	}
}
