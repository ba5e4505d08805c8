package report

import (
	"bytes"
	"context"
	"html"
	"strings"
	"testing"
	"time"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/diff"
)

func diffPageOf(t *testing.T, oldName, newName string) []byte {
	t.Helper()
	// diff refuses a bundle that does not validate: settings as collect
	// writes them.
	valid := func(m *bundle.Manifest) {
		m.Settings.MaxFileBytes, m.Settings.MaxBundleBytes, m.Settings.Concurrency = 64<<20, 1<<30, 4
		for i, c := range m.Collectors {
			for j, f := range c.Files {
				m.Collectors[i].Files[j] = c.Name + "/" + f
			}
		}
	}
	a, err := diff.Load(context.Background(), writeBundle(t, fixtureFiles(t, oldName), valid))
	if err != nil {
		t.Fatal(err)
	}
	b, err := diff.Load(context.Background(), writeBundle(t, fixtureFiles(t, newName), valid))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteDiff(&buf, diff.Compare(a, b)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The diff of a healthy node and incident 003, both ways, and of a
// bundle with itself: a valid page, in the report's rules, holding each
// change the text diff prints.
func TestDiffPages(t *testing.T) {
	page := diffPageOf(t, "healthy", "incident003-cephfs-hung")
	doc := checkPage(t, page)
	for _, want := range []string{"Findings (analyze)", "hung-mount", "Hung mounts (1 new, 0 gone)", "kubernetes.io~cephfs",
		"Worse: a warning or critical finding appeared", "Tasks in D state (1 new, 0 gone)", "Log signatures"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("healthy → 003: page lacks %q", want)
		}
	}
	marks := map[string]int{}
	for _, td := range elements(doc, "td") {
		if c := attr(td, "class"); strings.HasPrefix(c, "mark-") {
			marks[c]++
		}
	}
	if marks["mark-add"] == 0 {
		t.Errorf("no row marked added: %v", marks)
	}
	texts, classes := svgTexts(t, doc, "Log signatures")
	hasAll(t, "the signature change chart", texts, "0 → ")
	hasAll(t, "the signature change chart's bars", classes, "old", "st-bad")

	page = diffPageOf(t, "incident003-cephfs-hung", "healthy")
	checkPage(t, page)
	if !bytes.Contains(page, []byte("No new warning or critical finding.")) || !bytes.Contains(page, []byte(`class="mark-del"`)) {
		t.Error("003 → healthy: the way back is not shown as removals without a new finding")
	}
	page = diffPageOf(t, "healthy", "healthy")
	checkPage(t, page)
	if !bytes.Contains(page, []byte("Nothing noteworthy changed.")) {
		t.Error("a bundle against itself: page does not say nothing changed")
	}
}

// Hostile text in either bundle stays text, and long lists are cut.
func TestDiffPageHostileAndBounded(t *testing.T) {
	s := `"><script>alert(1)</script><svg onload=x>` + strings.Repeat("x", 2000)
	d := &diff.Diff{Old: diff.Side{Bundle: s, Hostname: s, Kernel: s, Status: s, CollectedAt: time.Now()}, New: diff.Side{Bundle: s, Hostname: s + "2", Runtimes: map[string]string{s: s}},
		HostsDiffer: true, ObfuscationDiffers: true, Notes: []string{s},
		FindingsNew:     []diff.FindingRef{{ID: s, Subject: s, Severity: analyze.Critical, Summary: s}},
		PodPhaseChanges: []diff.ValueChange{{Name: s, Old: s, New: s}}, Worse: true}
	for i := range maxDiffRows + 50 {
		n := s + strings.Repeat("x", i)
		d.HungNew = append(d.HungNew, n)
		for _, l := range []*[]string{&d.HungGone, &d.DStateNew, &d.DStateGone, &d.PodsAdded, &d.PodsRemoved, &d.ForeignDevicesNew, &d.ForeignDevicesGone} {
			*l = append(*l, n)
		}
		d.HostMountsAdded = append(d.HostMountsAdded, diff.Mount{Mountpoint: n, FSType: n})
		for _, l := range []*[]diff.CountChange{&d.Goroutines, &d.Signatures, &d.DirGrowth} {
			*l = append(*l, diff.CountChange{Name: n, Old: uint64(i), New: uint64(2 * i)})
		}
	}
	var buf bytes.Buffer
	if err := WriteDiff(&buf, d); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	if bytes.Contains(buf.Bytes(), []byte("<script>")) {
		t.Error("a bundle's text became markup")
	}
	for _, want := range []string{"… and 50 more, not listed here", "This page quotes at most about 1 MiB of the bundles"} {
		if !bytes.Contains(buf.Bytes(), []byte(want)) {
			t.Errorf("the cut page does not say %q", want)
		}
	}
	t.Logf("%d bytes", buf.Len())
	if err := WriteDiff(&buf, nil); err == nil {
		t.Error("WriteDiff(nil): no error")
	}
}

// A directory dirshape stopped reading is "at least" so many on the page,
// in its table and its chart, and an exact count is not.
func TestDiffPageLowerBounds(t *testing.T) {
	d := &diff.Diff{DirGrowth: []diff.CountChange{
		{Name: "/var/lib/kubelet/pods/u1/volumes/x/data", Old: 60000, New: 1200000, NewAtLeast: true},
		{Name: "/var/lib/kubelet/pods", Old: 1000, New: 70000},
	}}
	var buf bytes.Buffer
	if err := WriteDiff(&buf, d); err != nil {
		t.Fatal(err)
	}
	checkPage(t, buf.Bytes())
	page := html.UnescapeString(buf.String())
	for _, want := range []string{"at least 1,200,000", "at least +1,140,000", "60,000 → at least 1,200,000"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	for _, not := range []string{"at least 60,000", "at least 70,000", "at least 1,000"} {
		if strings.Contains(page, not) {
			t.Errorf("the page says %q of an exact count", not)
		}
	}
}
