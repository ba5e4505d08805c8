package analyze_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"
	"github.com/nodesnap/nodesnap/test/testkit/bundletest"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// manifestExtra is what a fixture's _manifest.json may add to the
// manifest built for it.
type manifestExtra struct {
	HungMounts []bundle.HungItem        `json:"hung_mounts"`
	Collectors []bundle.CollectorResult `json:"collectors"`
	Self       *bundle.Self             `json:"self"`
	// Settings.Root, when set, is the run's --root.
	Settings struct {
		Root         string  `json:"root"`
		SinceSeconds float64 `json:"since_seconds"`
	} `json:"settings"`
}

// fixture reads read/analyze/testdata/<name> into bundle paths → contents.
func fixture(t testing.TB, name string) map[string][]byte {
	t.Helper()
	return testkit.ReadTree(t, filepath.Join("testdata", name))
}

// makeBundle writes files into a real bundle with bundle.Write: a
// manifest listing each file (collector = first path element, status ok),
// plus what _manifest.json adds.
func makeBundle(t testing.TB, files map[string][]byte, format string) string {
	t.Helper()
	staging := t.TempDir()
	now := time.Date(2026, 11, 21, 9, 18, 14, 0, time.UTC)
	m := &bundle.Manifest{
		SchemaVersion: bundle.SchemaVersion,
		Tool:          bundle.Tool{Name: "nodesnap", Version: "test", GoVersion: "go"},
		CommandLine:   []string{"nodesnap", "collect"},
		Host:          bundle.Host{Hostname: "node1", Kernel: "6.1.0"},
		StartedAt:     now, FinishedAt: now.Add(5 * time.Second), DurationSeconds: 5,
		Status:     "complete",
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, MaxFileBytes: 64 << 20, MaxBundleBytes: 1 << 30, Concurrency: 4, Compression: format},
		Collectors: []bundle.CollectorResult{},
		Files:      []bundle.FileEntry{},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
	var extra manifestExtra
	if b, ok := files["_manifest.json"]; ok {
		if err := json.Unmarshal(b, &extra); err != nil {
			t.Fatalf("_manifest.json: %v", err)
		}
		delete(files, "_manifest.json")
		m.HungMounts = append(m.HungMounts, extra.HungMounts...)
		m.Self = extra.Self
		if extra.Settings.Root != "" {
			m.Settings.Root = extra.Settings.Root
		}
		m.Settings.SinceSeconds = extra.Settings.SinceSeconds
	}
	cols, order := bundletest.Stage(t, staging, files, m, true)
	for _, c := range extra.Collectors {
		if cols[c.Name] == nil {
			order = append(order, c.Name)
		}
		cc := c
		if cols[c.Name] != nil {
			cc.Files = cols[c.Name].Files
		}
		if cc.Files == nil {
			cc.Files = []string{}
		}
		cols[c.Name] = &cc
	}
	sort.Strings(order)
	for _, c := range order {
		m.Collectors = append(m.Collectors, *cols[c])
	}
	out := filepath.Join(t.TempDir(), "bundle."+format)
	if _, err := bundle.Write(context.Background(), out, format, m, staging, now); err != nil {
		t.Fatalf("writing the bundle: %v", err)
	}
	return out
}

func analyzeFixture(t testing.TB, name string) *analyze.Report {
	t.Helper()
	p := makeBundle(t, fixture(t, name), bundle.Gzip)
	rep, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
	if err != nil {
		t.Fatalf("analyze %s: %v", name, err)
	}
	return rep
}

// findings returns the findings with an ID.
func findings(r *analyze.Report, id string) []analyze.Finding {
	var out []analyze.Finding
	for _, f := range r.Findings {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

// only returns the one finding with an ID, failing otherwise.
func only(t *testing.T, r *analyze.Report, id string) analyze.Finding {
	t.Helper()
	fs := findings(r, id)
	if len(fs) != 1 {
		t.Fatalf("want exactly one %s finding, got %d; all findings:\n%s", id, len(fs), dump(r))
	}
	return fs[0]
}

func ids(r *analyze.Report) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.ID)
	}
	return out
}

func dump(r *analyze.Report) string {
	var b bytes.Buffer
	_ = analyze.WriteTextOptions(&b, r, analyze.TextOptions{})
	return b.String()
}

// evidenceText flattens a finding's evidence for searching: paths, what,
// lines, decoded output and records as JSON.
func evidenceText(f analyze.Finding) string {
	var b strings.Builder
	for _, e := range f.Evidence {
		b.WriteString(e.Path + " | " + e.What + "\n")
		for _, l := range e.Lines {
			b.WriteString(l.Text + "\n")
			if l.Decoded != "" {
				b.WriteString("DECODED: " + l.Decoded + "\n")
			}
		}
		if e.Record != nil {
			j, _ := json.Marshal(e.Record)
			b.Write(j)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// evidenceFrom returns the evidence items from one bundle path.
func evidenceFrom(f analyze.Finding, p string) []analyze.Evidence {
	var out []analyze.Evidence
	for _, e := range f.Evidence {
		if e.Path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(e.Path, p)) || path.Base(p) == "*" && strings.HasPrefix(e.Path, path.Dir(p)) {
			out = append(out, e)
		}
	}
	return out
}

func wantIn(t *testing.T, what, haystack string, needles ...string) {
	t.Helper()
	for _, n := range needles {
		if !strings.Contains(haystack, n) {
			t.Errorf("%s lacks %q:\n%s", what, n, haystack)
		}
	}
}

// bySubject returns the finding with an ID about a subject.
func bySubject(t *testing.T, r *analyze.Report, id, subject string) analyze.Finding {
	t.Helper()
	for _, f := range r.Findings {
		if f.ID == id && f.Subject == subject {
			return f
		}
	}
	t.Fatalf("no %s finding about %s; findings:\n%s", id, subject, dump(r))
	return analyze.Finding{}
}

// In incident 002's fixture, namespace 4026532601 (node_exporter) holds
// rbd3 (250:0) and a tmpfs (0:52), and copies of the host's disks.
const (
	inc002     = "incident002-rbd-held-in-namespace"
	inc002NS   = 4026532601
	inc002Dev  = "250:0"
	inc002Host = 4026531840
)

func analyzeFiles(t *testing.T, files map[string][]byte) *analyze.Report {
	t.Helper()
	p := makeBundle(t, files, bundle.Gzip)
	r, err := analyze.AnalyzeFile(context.Background(), p, analyze.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
