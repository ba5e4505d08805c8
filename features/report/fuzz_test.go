package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/read/analyze"
)

// FuzzWrite: whatever text a bundle holds (in a hostname, a finding's
// subject, an evidence path or line, a collector's name, error and notes,
// a hung mount's target), the page parses as HTML, carries no element
// or attribute the template did not write, and shows the text as text.
func FuzzWrite(f *testing.F) {
	for _, s := range []string{
		`"><script>alert(1)</script>`,
		`' onmouseover='x`,
		`javascript:alert(1)`,
		`</style><svg onload=alert(1)>`,
		`]]><!--`,
		"Apr 04 16:25:40 n kernel: \x00\xff</title><a href=//x>",
		`{{.Title}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		page := fuzzPage(t, s)
		// The same page with s replaced by as many harmless bytes: the
		// same elements, so nothing in s made markup of its own.
		base := fuzzPage(t, strings.Repeat("z", len(s)))
		got, want := shape(t, page), shape(t, base)
		if got != want {
			t.Errorf("page structure differs from the harmless one's:\n%s\nwant\n%s", got, want)
		}
	})
}

func fuzzPage(t *testing.T, s string) []byte {
	rep := &analyze.Report{Bundle: s, Hostname: s, Kernel: s, ToolVersion: s, BundleStatus: s, CollectedAt: time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC),
		Counts: map[string]int{"warning": 1},
		Findings: []analyze.Finding{{ID: s, Severity: analyze.Warning, Title: s, Subject: s, Summary: s, Explanation: s, Remediation: []string{s},
			Evidence: []analyze.Evidence{{Path: s, What: s, Lines: []analyze.Line{{N: 1, Text: s, Decoded: s}, {N: 2, Text: "Apr 04 16:25:40 " + s}}, Record: map[string]string{s: s}}}}},
		Facts: &analyze.Facts{
			HeldDevices: []analyze.HeldDevice{{Dev: s, Name: s, FSTypes: []string{s}, Sources: []string{s}, Image: s, KernelThreads: []string{s}, OnlyOutsideHostNamespace: true,
				Namespaces: []analyze.HolderNamespace{{Inode: 1, Nodesnap: s, MountPoints: []string{s}, ProcessCount: 2, Holders: []analyze.Holder{{PID: 1, Comm: s, Uses: []string{s}, Pod: s}}}}}},
			DirShape: &layout.DirShapeReport{Roots: []layout.DirShapeRoot{{Path: s, Status: s,
				Largest:  []layout.DirShapeDir{{Path: s, Subdirs: 70000, Entries: 70001}},
				Deleting: []layout.DeletingGroup{{Parent: s, Count: 3, Originals: []layout.DeletingOriginal{{Name: s, Count: 3}}}}}}},
			KubeletGoroutines: &analyze.GoroutineCount{Path: s, Total: 2, ByFrame: map[string]int{s: 2}},
		}}
	m := &bundle.Manifest{Host: bundle.Host{Hostname: s, BootID: s}, Status: s, Warnings: []string{s},
		Collectors: []bundle.CollectorResult{{Name: s, Status: s, Error: s, Notes: []string{s}, Remedies: []bundle.Remedy{{Missing: []string{s}, Reason: s, Fix: []string{s}}}}},
		Files:      []bundle.FileEntry{{Path: s, Collector: s, Kind: s}},
		HungMounts: []bundle.HungItem{{Op: s, Target: s, Collector: s}},
		Omitted:    []bundle.Omitted{{Path: s, Reason: s}}}
	var buf bytes.Buffer
	if err := Write(&buf, rep, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// shape lists a page's elements and attribute names in document order,
// leaving out the timeline's drawing (a line of s may carry a time of
// its own, which moves the axis) and the holder graph's (a pod's name
// with ", " takes two lines of its box); it fails on any element or
// attribute no page may hold, those drawings included.
func shape(t *testing.T, page []byte) string {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(*html.Node, bool)
	walk = func(n *html.Node, record bool) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script", "iframe", "object", "embed", "img", "link", "base", "form":
				t.Errorf("<%s> on the page", n.Data)
			case "svg":
				for _, a := range n.Attr {
					if a.Key == "aria-label" && (strings.HasPrefix(a.Val, "Timeline") || strings.HasPrefix(a.Val, "Held devices")) {
						record = false
					}
				}
			}
			if record {
				b.WriteString("<" + n.Data)
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") {
					t.Errorf("attribute %s on <%s>", a.Key, n.Data)
				}
				if a.Key == "href" && !strings.HasPrefix(a.Val, "#") {
					t.Errorf("href %q", a.Val)
				}
				if record {
					b.WriteString(" " + a.Key)
				}
			}
			if record {
				b.WriteString(">")
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, record)
		}
	}
	walk(doc, true)
	return b.String()
}
