package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/nodesnap/nodesnap/test/testkit"
)

// findingSections returns the finding IDs of a report page's sections, in
// order, failing unless the page parses as HTML with no script element.
func findingSections(t *testing.T, page string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("report is not HTML: %v", err)
	}
	var ids []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if n.Data == "script" {
				t.Error("report has a <script> element")
			}
			for _, a := range n.Attr {
				if a.Key == "data-finding-id" {
					ids = append(ids, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return ids
}

// report writes the page to -o (mode 0600, the path printed), to stdout
// with '-o -', and analyze --html prints the same bytes with analyze's
// exit status; a bundle that cannot be read leaves no file behind.
func TestReportCommand(t *testing.T) {
	sick := analyzeBundle(t, map[string]string{
		"host/summary.json":   `{"hostname":"n1"}`,
		"journal/kubelet.log": "Nov 21 08:59:00 n1 kubelet[1]: E1121 08:59:00.000000 1 kubelet.go:1] \"Skipping pod synchronization\" err=\"PLEG is not healthy: pleg was last seen active 3m0s ago <script>alert(1)</script>\"\n",
	})
	dir := t.TempDir()
	out := filepath.Join(dir, "r.html")
	r := runNodesnap(t, time.Minute, nil, "report", "--output-file", out, sick)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != out || r.stderr != "" {
		t.Fatalf("report: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("report file: %v, %v", fi, err)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if ids := findingSections(t, string(page)); strings.Join(ids, ",") != "kubelet-pleg-unhealthy" {
		t.Errorf("report's findings %v", ids)
	}
	if !strings.Contains(string(page), "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the log line's markup is not shown escaped")
	}
	if n := len(page); n > 2<<20 {
		t.Errorf("report is %d bytes", n)
	}

	r = runNodesnap(t, time.Minute, nil, "report", "--output-file", "-", sick)
	if r.code != exitOK || r.stdout != string(page) {
		t.Errorf("report -o -: exit %d, %d bytes, want the %d bytes of the file", r.code, len(r.stdout), len(page))
	}
	r = runNodesnap(t, time.Minute, nil, "analyze", "--html", sick)
	if r.code != exitPartial || r.stdout != string(page) {
		t.Errorf("analyze --html: exit %d, %d bytes, want exit %d and the report's %d bytes", r.code, len(r.stdout), exitPartial, len(page))
	}
	r = runNodesnap(t, time.Minute, nil, "analyze", "--html", "--json", sick)
	if r.code != exitUsage {
		t.Errorf("analyze --html --json: exit %d, want %d", r.code, exitUsage)
	}

	junk := filepath.Join(dir, "junk.tar.gz")
	if err := os.WriteFile(junk, []byte("not a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, time.Minute, nil, "report", "--output-file", filepath.Join(dir, "junk.html"), junk)
	if r.code != exitFatal || r.stderr == "" {
		t.Errorf("report of junk: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	if names := readDir(t, dir); strings.Join(names, ",") != "junk.tar.gz,r.html" {
		t.Errorf("left in the output directory: %v", names)
	}
}

func TestReportName(t *testing.T) {
	for in, want := range map[string]string{
		"/x/nodesnap-n1-20261121T101500Z.tar.gz": "nodesnap-n1-20261121T101500Z.html",
		"nodesnap-n1-20261121T101500Z.tar.zst":   "nodesnap-n1-20261121T101500Z.html",
		"b.tgz":                                  "b.html",
		"bundle":                                 "bundle.html",
		".tar.gz":                                ".tar.gz.html",
		"dir/nodesnap-n1-20261121T101500Z-2.tar.gz": "nodesnap-n1-20261121T101500Z-2.html",
	} {
		if got := reportName(in); got != want {
			t.Errorf("reportName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The real binary end to end: a collection of the fixture host root
// (a kubelet thread in D state on FUSE), then its report, whose findings
// are analyze's and whose collector table names every collector that ran.
func TestReportOfCollectedBundle(t *testing.T) {
	bin := testkit.Binary(t)
	root, err := filepath.Abs("testdata/root")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(bin, "collect", "-q", "--root", root, "--output-dir", out, "--only", "host,processes", "--timeout", "60s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("collect: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	p := bundlePath(t, out)
	var rep struct {
		Findings []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	r := runNodesnap(t, time.Minute, nil, "analyze", "--json", p)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("analyze --json: exit %d, %v\n%s", r.code, err, r.stderr)
	}
	var want []string
	for _, f := range rep.Findings {
		want = append(want, f.ID)
	}
	if len(want) == 0 {
		t.Fatal("analyze found nothing in the fixture root's bundle (its kubelet thread in D state should be a finding)")
	}
	html := filepath.Join(t.TempDir(), "r.html")
	r = runNodesnap(t, time.Minute, nil, "report", "--output-file", html, p)
	if r.code != exitOK {
		t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if got := findingSections(t, string(page)); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("report's findings %v, analyze's %v", got, want)
	}
	for _, s := range []string{"fixture-node", "<td>host</td>", "<td>processes</td>", `aria-label="When each collector ran and how long it took"`} {
		if !strings.Contains(string(page), s) {
			t.Errorf("report lacks %q", s)
		}
	}
}

// report DIR: one page for a directory of bundles; a bundle that cannot
// be read is on the page and makes the exit status 3; a directory
// without bundles (nor an extracted bundle) is refused.
func TestReportFleetCommand(t *testing.T) {
	dir := t.TempDir()
	for name, scenario := range map[string]string{"nodesnap-a-20261121T090000Z.tar.gz": "healthy", "nodesnap-b-20261121T090000Z.tar.gz": "incident003-cephfs-hung"} {
		b, err := os.ReadFile(fixtureBundle(t, scenario))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "fleet.html")
	r := runNodesnap(t, time.Minute, nil, "report", "--output-file", out, dir)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != out {
		t.Fatalf("report DIR: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("Fleet: 2 nodes, 1 with a warning or critical finding")) || !bytes.Contains(page, []byte("hung-mount")) {
		t.Errorf("fleet page lacks its counts or findings:\n%.2000s", page)
	}
	if err := os.WriteFile(filepath.Join(dir, "nodesnap-c-20261121T090000Z.tar.gz"), []byte("not gzip"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runNodesnap(t, time.Minute, nil, "report", "--output-file", out, dir)
	if r.code != exitPartial || !strings.Contains(r.stderr, "1 of 3 bundles could not be read") {
		t.Errorf("a broken bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNodesnap(t, time.Minute, nil, "report", t.TempDir())
	if r.code != exitFatal || !strings.Contains(r.stderr, "not an extracted bundle") {
		t.Errorf("empty directory: exit %d\n%s", r.code, r.stderr)
	}
}
