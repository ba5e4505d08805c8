package report

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/test/testkit"

	"golang.org/x/net/html"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// maxReportBytes is the size a report of a typical bundle must stay under.
const maxReportBytes = 2 << 20

// fixtureFiles reads ../../read/analyze/testdata/<name> (the analyze package's
// incident scenarios) into bundle paths → contents, as analyze's own
// tests do.
func fixtureFiles(t *testing.T, name string) map[string][]byte {
	t.Helper()
	return testkit.ReadTree(t, filepath.Join("..", "..", "read", "analyze", "testdata", name))
}

// writeBundle writes files into a real bundle with bundle.Write, with a
// manifest listing each file under the collector its first path element
// names; a fixture's _manifest.json adds hung mounts and collectors, and
// mod may change the manifest last.
func writeBundle(t *testing.T, files map[string][]byte, mod func(*bundle.Manifest)) string {
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
		Settings:   bundle.Settings{Root: "/", TimeoutSeconds: 120, Compression: bundle.Gzip},
		Collectors: []bundle.CollectorResult{},
		Files:      []bundle.FileEntry{},
		Redaction:  bundle.RedactionSummary{Rules: map[string]int{}},
		HungMounts: []bundle.HungItem{},
		Omitted:    []bundle.Omitted{},
	}
	var extra struct {
		HungMounts []bundle.HungItem        `json:"hung_mounts"`
		Collectors []bundle.CollectorResult `json:"collectors"`
	}
	if b, ok := files["_manifest.json"]; ok {
		if err := json.Unmarshal(b, &extra); err != nil {
			t.Fatalf("_manifest.json: %v", err)
		}
		delete(files, "_manifest.json")
		m.HungMounts = append(m.HungMounts, extra.HungMounts...)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	cols := map[string]int{}
	for i, n := range names {
		col, _, _ := strings.Cut(n, "/")
		if _, ok := cols[col]; !ok {
			start := now.Add(time.Duration(len(cols)) * 300 * time.Millisecond)
			cols[col] = len(m.Collectors)
			m.Collectors = append(m.Collectors, bundle.CollectorResult{Name: col, Status: bundle.StatusOK, StartedAt: &start, DurationSeconds: 0.2 + float64(i%5)/10, TimeoutSeconds: 60, Files: []string{}})
		}
		c := &m.Collectors[cols[col]]
		c.Files = append(c.Files, strings.TrimPrefix(n, col+"/"))
		p := filepath.Join(staging, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, files[n], 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(files[n])
		m.Files = append(m.Files, bundle.FileEntry{Path: n, Collector: col, Size: int64(len(files[n])), SHA256: hex.EncodeToString(sum[:]), Kind: bundle.KindText})
	}
	for _, c := range extra.Collectors {
		if i, ok := cols[c.Name]; ok {
			c.Files = m.Collectors[i].Files
			m.Collectors[i] = c
		} else {
			c.Files = []string{}
			m.Collectors = append(m.Collectors, c)
		}
	}
	if mod != nil {
		mod(m)
	}
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if _, err := bundle.Write(context.Background(), out, bundle.Gzip, m, staging, now); err != nil {
		t.Fatalf("writing the bundle: %v", err)
	}
	return out
}

// render loads and renders the bundle at p.
func render(t *testing.T, p string) (*analyze.Report, []byte) {
	t.Helper()
	rep, m, err := Load(context.Background(), p)
	if err != nil {
		t.Fatalf("loading %s: %v", p, err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, rep, m); err != nil {
		t.Fatalf("rendering: %v", err)
	}
	return rep, buf.Bytes()
}

// checkPage parses the page as HTML and checks what every report must
// be: one document, no script or embedded content, no attribute that
// names another document (only "#anchor" links, each to an id on the
// page), and under the size bound. It returns the parsed document.
func checkPage(t *testing.T, page []byte) *html.Node {
	t.Helper()
	if len(page) > maxReportBytes {
		t.Errorf("report is %d bytes, over %d", len(page), maxReportBytes)
	}
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("not HTML: %v", err)
	}
	ids := map[string]bool{}
	var hrefs []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "iframe", "object", "embed", "img", "link", "base", "form", "image", "foreignobject", "use", "animate", "set":
				t.Errorf("page has a <%s> element", n.Data)
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				v := strings.ToLower(strings.TrimSpace(a.Val))
				if strings.HasPrefix(k, "on") {
					t.Errorf("<%s> has an event handler attribute %s=%q", n.Data, a.Key, a.Val)
				}
				if strings.Contains(v, "://") || strings.HasPrefix(v, "//") || strings.Contains(v, "javascript:") || strings.Contains(v, "url(") {
					t.Errorf("<%s %s=%q> names something outside the page", n.Data, a.Key, a.Val)
				}
				if k == "id" {
					if ids[a.Val] {
						t.Errorf("id %q twice", a.Val)
					}
					ids[a.Val] = true
				}
				if k == "href" || k == "src" || k == "xlink:href" || k == "action" {
					if !strings.HasPrefix(a.Val, "#") {
						t.Errorf("<%s %s=%q> is not a link within the page", n.Data, a.Key, a.Val)
					}
					hrefs = append(hrefs, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, h := range hrefs {
		if !ids[strings.TrimPrefix(h, "#")] {
			t.Errorf("link %q leads to no id on the page", h)
		}
	}
	if !bytes.Contains(page, []byte(`http-equiv="Content-Security-Policy" content="default-src 'none'`)) {
		t.Error("page lacks its Content-Security-Policy")
	}
	return doc
}

// elements returns the elements named tag, in document order.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	if n.Type == html.ElementNode && n.Data == tag {
		out = append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = append(out, elements(c, tag)...)
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// Every scenario of analyze's fixtures renders to a valid page holding
// every finding (by ID, in the analysis' order, with its evidence paths),
// the collector chart, and a timeline where the findings quote dated log
// lines.
func TestIncidentReports(t *testing.T) {
	dirs, err := os.ReadDir(filepath.Join("..", "..", "read", "analyze", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		seen++
		t.Run(d.Name(), func(t *testing.T) {
			rep, page := render(t, writeBundle(t, fixtureFiles(t, d.Name()), nil))
			doc := checkPage(t, page)
			var got []string
			for _, s := range elements(doc, "section") {
				if id := attr(s, "data-finding-id"); id != "" {
					got = append(got, id)
				}
			}
			var want []string
			for _, f := range rep.Findings {
				want = append(want, f.ID)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("findings on the page %v, analysis %v", got, want)
			}
			text := textOf(doc)
			for _, f := range rep.Findings {
				for _, e := range f.Evidence {
					if !strings.Contains(text, e.Path) {
						t.Errorf("finding %s: evidence path %s not on the page", f.ID, e.Path)
					}
				}
				for _, r := range f.Remediation {
					if !strings.Contains(text, firstWords(r)) {
						t.Errorf("finding %s: fix %q not on the page", f.ID, r)
					}
				}
			}
			svgs := elements(doc, "svg")
			labels := map[string]bool{}
			for _, s := range svgs {
				labels[attr(s, "aria-label")] = true
			}
			if !labels["When each collector ran and how long it took"] {
				t.Error("no collector chart")
			}
			if datedEvidence(rep) > 0 {
				if !labels["Timeline of the findings' dated log lines"] {
					t.Errorf("%d dated evidence lines but no timeline", datedEvidence(rep))
				}
				// One dot per dated line (none cut at this size).
				dots := 0
				for _, s := range svgs {
					if attr(s, "aria-label") == "Timeline of the findings' dated log lines" {
						dots = len(elements(s, "circle"))
					}
				}
				if dots != datedEvidence(rep) {
					t.Errorf("timeline has %d dots, the evidence %d dated lines", dots, datedEvidence(rep))
				}
			}
			if len(rep.Findings) == 0 && !strings.Contains(text, "No findings") {
				t.Error("a healthy bundle's page does not say there are no findings")
			}
		})
	}
	if seen < 8 {
		t.Fatalf("only %d fixture scenarios found", seen)
	}
}

// firstWords is the start of s as the page shows it (text is not
// rewrapped, but a long item may be cut).
func firstWords(s string) string {
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// datedEvidence counts the distinct dated evidence lines per finding ID,
// as the timeline draws them.
func datedEvidence(rep *analyze.Report) int {
	seen := map[string]bool{}
	for _, f := range rep.Findings {
		for _, e := range f.Evidence {
			for _, l := range e.Lines {
				if _, ok := lineTime(l.Text, rep.CollectedAt); ok {
					seen[fmt.Sprintf("%s\x00%s\x00%d", f.ID, e.Path, l.N)] = true
				}
			}
		}
	}
	return len(seen)
}

// Incident 003: the hung cephfs mount is shown with the kernel stack of
// the probe that blocked on it, and the timeline holds the kernel's and
// the kubelet's lines.
func TestHungMountStacks(t *testing.T) {
	rep, page := render(t, writeBundle(t, fixtureFiles(t, "incident003-cephfs-hung"), nil))
	doc := checkPage(t, page)
	text := textOf(doc)
	for _, want := range []string{
		"/var/lib/kubelet/pods/8a4b6c2d-1e3f-4a5b-9c7d-0e1f2a3b4c5d/volumes/kubernetes.io~cephfs/pvc-5c1e9a7b-2d4f-4e6a-8b0c-1d2e3f4a5b6c",
		"[<0>] ceph_mdsc_do_request+0x1a4/0x280 [ceph]",
		"wchan ceph_mdsc_do_request",
		"syscall newfstatat",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if len(findingsWith(rep, "hung-mount")) == 0 {
		t.Fatalf("the analysis found no hung mount: %v", rep.Findings)
	}
	var lanes []string
	for _, s := range elements(doc, "svg") {
		if attr(s, "aria-label") == "Timeline of the findings' dated log lines" {
			for _, l := range elements(s, "text") {
				if attr(l, "class") == "lbl" {
					lanes = append(lanes, textOf(l))
				}
			}
		}
	}
	if strings.Join(lanes, ",") != "hung-mount · kernel.log,hung-mount · kubelet.log" {
		t.Errorf("timeline lanes %q, want the kernel's and the kubelet's lines of the hung mount", lanes)
	}
}

func findingsWith(rep *analyze.Report, id string) []analyze.Finding {
	var out []analyze.Finding
	for _, f := range rep.Findings {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

// A bundle whose every string is hostile (markup in the hostname, log
// lines, paths, collector errors and notes, hung mount targets and
// stacks) renders as text: no element, attribute or URL of its own
// reaches the page.
func TestHostileBundleIsEscaped(t *testing.T) {
	const x = `"><script>alert(1)</script><img src=x onerror=alert(2)>'`
	files := map[string][]byte{
		"host/summary.json": []byte(`{"hostname":"n1"}`),
		// A PLEG line (a finding with this line as evidence), and a
		// byte-array output decoding to markup.
		"journal/kubelet.log": []byte("2026-11-21T09:00:00Z n1 kubelet[1]: E1121 09:00:00.000000 1 kubelet.go:1] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago " + x + " https://evil.example/x\"\n"),
		// A path with quotes and markup in the bundle.
		"journal/k\"'<b>x</b>.log": []byte("2026-11-21T09:00:01Z n1 kernel: nfs: server " + strings.ReplaceAll(x, " ", "_") + " not responding, still trying\n"),
	}
	p := writeBundle(t, files, func(m *bundle.Manifest) {
		m.Host.Hostname = x
		m.Host.Kernel = x
		m.Warnings = []string{x}
		m.Status = bundle.StatusPartial
		m.Collectors = append(m.Collectors, bundle.CollectorResult{Name: "kubelet" + x, Status: bundle.StatusTimeout + x, Error: x + "\n" + x, Notes: []string{x},
			Remedies: []bundle.Remedy{{Missing: []string{x}, Reason: x, Fix: []string{x}}}, Files: []string{}})
		m.HungMounts = append(m.HungMounts, bundle.HungItem{Op: x, Target: "/mnt/" + x, Collector: x})
		m.Omitted = append(m.Omitted, bundle.Omitted{Path: x, Reason: x})
	})
	rep, page := render(t, p)
	doc := checkPage(t, page)
	if len(findingsWith(rep, "kubelet-pleg-unhealthy")) != 1 {
		t.Fatalf("the hostile log line made no PLEG finding: %v", rep.Findings)
	}
	if bytes.Contains(page, []byte("<script")) || bytes.Contains(page, []byte("<img")) || bytes.Contains(page, []byte("<b>x")) {
		t.Error("markup from the bundle reached the page")
	}
	text := textOf(doc)
	for _, want := range []string{"<script>alert(1)</script>", "journal/k\"'<b>x</b>.log", "https://evil.example/x"} {
		if !strings.Contains(text, want) {
			t.Errorf("the bundle's text %q is not shown as text", want)
		}
	}
	if len(elements(doc, "b")) != countTag(page, "<b>") {
		t.Error("a <b> element that the template did not write")
	}
}

func countTag(page []byte, tag string) int { return bytes.Count(page, []byte(tag)) }

// However large the analysis, the page stays under the bound: lists are
// cut and the quoted text shares one budget, and the page says so.
func TestHugeReportStaysBounded(t *testing.T) {
	long := strings.Repeat("Apr 04 16:25:40 node7 kernel: libceph: mon0 session lost <x> ", 40)
	rep := &analyze.Report{Bundle: "b.tar.gz", Hostname: "n1", CollectedAt: time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC), Counts: map[string]int{"critical": 1000}}
	for i := 0; i < 1000; i++ {
		f := analyze.Finding{ID: "ceph-session-lost", Severity: analyze.Critical, Title: "t", Summary: long, Explanation: long, Remediation: []string{long}}
		for j := 0; j < 30; j++ {
			e := analyze.Evidence{Path: "journal/kernel.log", Record: map[string]string{"k": long}}
			for k := 0; k < 60; k++ {
				e.Lines = append(e.Lines, analyze.Line{N: k + 1, Text: long})
			}
			f.Evidence = append(f.Evidence, e)
		}
		rep.Findings = append(rep.Findings, f)
	}
	rep.Facts = hugeFacts(long)
	m := &bundle.Manifest{Host: bundle.Host{Hostname: "n1"}}
	for i := 0; i < 5000; i++ {
		m.Files = append(m.Files, bundle.FileEntry{Path: "journal/" + strings.Repeat("x", 200), Collector: "journal"})
		m.Collectors = append(m.Collectors, bundle.CollectorResult{Name: "c", Status: "error", Error: long, Notes: []string{long}})
		m.HungMounts = append(m.HungMounts, bundle.HungItem{Target: long})
	}
	var buf bytes.Buffer
	if err := Write(&buf, rep, m); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	for _, want := range []string{"more findings of lower severity", "more files, not listed here", "are cut short below", "more collectors, not listed here",
		"more held devices, not drawn here", "more directories are not drawn", "more frames (4985 goroutines) are not drawn"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("page does not say %q", want)
		}
	}
	t.Logf("%d bytes", buf.Len())
}

// hugeFacts are analyze's facts at their bounds, every text long.
func hugeFacts(long string) *analyze.Facts {
	f := &analyze.Facts{KubeletGoroutines: &analyze.GoroutineCount{Path: long, Total: 5000, ByFrame: map[string]int{}}, DirShape: &layout.DirShapeReport{}}
	for i := range 5000 {
		f.KubeletGoroutines.ByFrame[fmt.Sprintf("k8s.io/%d/%s", i, long)] = 1
	}
	for i := range analyze.MaxFactDevices {
		d := analyze.HeldDevice{Dev: long, Name: long, FSTypes: []string{long}, Sources: []string{long}, Image: long, KernelThreads: []string{long}, OnlyOutsideHostNamespace: i%2 == 0}
		for j := range analyze.MaxFactNamespaces {
			ns := analyze.HolderNamespace{Inode: uint64(j), MountPoints: []string{long, long}, ProcessCount: 1000}
			for k := range analyze.MaxFactHolders {
				ns.Holders = append(ns.Holders, analyze.Holder{PID: k, Comm: long, Uses: []string{long}, Pod: long})
			}
			d.Namespaces = append(d.Namespaces, ns)
		}
		f.HeldDevices = append(f.HeldDevices, d)
	}
	for i := range 200 {
		r := layout.DirShapeRoot{Path: long}
		for j := range 50 {
			r.Largest = append(r.Largest, layout.DirShapeDir{Path: fmt.Sprintf("%d/%d/%s", i, j, long), Subdirs: uint64(j * 1000), Entries: uint64(j * 1001)})
			r.Deleting = append(r.Deleting, layout.DeletingGroup{Parent: fmt.Sprintf("%d/%d/%s", i, j, long), Count: uint64(j)})
		}
		f.DirShape.Roots = append(f.DirShape.Roots, r)
	}
	return f
}

// A report without a manifest still renders the findings.
func TestWithoutManifest(t *testing.T) {
	rep := &analyze.Report{Hostname: "n1", Findings: []analyze.Finding{{ID: "kernel-hung-task", Severity: analyze.Warning, Title: "t", Summary: "s"}}, Counts: map[string]int{"warning": 1}}
	var buf bytes.Buffer
	if err := Write(&buf, rep, nil); err != nil {
		t.Fatal(err)
	}
	doc := checkPage(t, buf.Bytes())
	if !strings.Contains(textOf(doc), "manifest was not available") || len(elements(doc, "section")) != 1 {
		t.Errorf("page without a manifest:\n%s", buf.String())
	}
	if err := Write(&buf, nil, nil); err == nil {
		t.Error("no error rendering nothing")
	}
}
