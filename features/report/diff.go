package report

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/read/diff"
)

// maxDiffRows bounds each section of a diff page; nodesnap diff --json
// has every change.
const maxDiffRows = 200

// diffPage is what the diff template shows, already cut to the caps.
type diffPage struct {
	Title     string
	Sides     [2]diffSide
	Warnings  []string
	Notes     []string
	Changed   bool
	Worse     bool
	Sections  []diffSection
	BudgetCut int
}

type diffSide struct {
	Which, Bundle, Host, BootID, Collected, Status, Findings, Kernel, Kubelet, Runtimes string
}

// diffSection is one kind of change: a table of rows, each marked added
// (+), removed (-) or changed (~), and for counts a before/after chart.
type diffSection struct {
	ID    string
	Title string
	Head  []string
	Rows  []diffRow
	More  int
	Chart *chart
	Note  string

	bud *budget // the page's, shared by every section
}

type diffRow struct {
	Mark  string
	Class string // mark-add, mark-del or mark-chg
	Cells []string
}

// WriteDiff renders what nodesnap diff found as one HTML document, in the
// report's style and under its rules: no script, nothing fetched, every
// text from the bundles escaped, long lists cut.
func WriteDiff(w io.Writer, d *diff.Diff) error {
	if d == nil {
		return fmt.Errorf("no diff to render")
	}
	var buf bytes.Buffer
	if err := pageTemplate().ExecuteTemplate(&buf, "diff", buildDiffPage(d)); err != nil {
		return fmt.Errorf("rendering the diff: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing the diff: %w", err)
	}
	return nil
}

func buildDiffPage(d *diff.Diff) *diffPage {
	p := &diffPage{Changed: d.Changed(), Worse: d.Worse, Notes: cutAll(d.Notes, 50, 1000)}
	// As the report's: at most about 1 MiB of the bundles' text.
	bud := &budget{left: maxBundleText}
	p.Sides[0], p.Sides[1] = diffSideOf("old", d.Old), diffSideOf("new", d.New)
	p.Title = "nodesnap diff: " + p.Sides[1].Host
	if d.HostsDiffer {
		p.Warnings = append(p.Warnings, fmt.Sprintf("The bundles come from different hosts (%s, %s): every difference below may be one between two nodes, not a change of one node.", human.Cut(d.Old.Hostname, 200), human.Cut(d.New.Hostname, 200)))
	}
	if d.BootChanged {
		p.Warnings = append(p.Warnings, "The node rebooted between the two collections (its boot id changed).")
	}
	if d.ObfuscationDiffers {
		p.Warnings = append(p.Warnings, fmt.Sprintf("The bundles were obfuscated differently (%s / %s): their tokens do not compare.",
			human.Cut(orNone(d.Old.Obfuscated), 200), human.Cut(orNone(d.New.Obfuscated), 200)))
	}
	add := func(s diffSection) {
		if len(s.Rows) > 0 || s.Note != "" || s.More > 0 {
			p.Sections = append(p.Sections, s)
		}
	}
	fs := diffSection{bud: bud, ID: "d-findings", Title: "Findings (analyze)", Head: []string{"severity", "id", "subject", "summary"}}
	for _, f := range d.FindingsNew {
		fs.row("+", f.Severity.String(), f.ID, f.Subject, f.Summary)
	}
	for _, f := range d.FindingsChanged {
		fs.row("~", f.Old.String()+" → "+f.New.String(), f.ID, f.Subject, f.Summary)
	}
	for _, f := range d.FindingsGone {
		fs.row("-", f.Severity.String(), f.ID, f.Subject, f.Summary)
	}
	add(fs)
	add(listSection(bud, "d-hung", "Hung mounts", "mount", d.HungNew, d.HungGone))
	add(listSection(bud, "d-foreign", "Devices mounted only outside the host's mount namespace", "device", d.ForeignDevicesNew, d.ForeignDevicesGone))
	ms := diffSection{bud: bud, ID: "d-mounts", Title: fmt.Sprintf("Host mount table (%d added, %d removed)", len(d.HostMountsAdded), len(d.HostMountsRemoved)), Head: []string{"mountpoint", "type"}}
	for _, m := range d.HostMountsAdded {
		ms.row("+", m.Mountpoint, m.FSType)
	}
	for _, m := range d.HostMountsRemoved {
		ms.row("-", m.Mountpoint, m.FSType)
	}
	if len(d.HostMountsByType) > 0 {
		var by []string
		for _, c := range d.HostMountsByType {
			by = append(by, fmt.Sprintf("%s +%d −%d", c.FSType, c.Added, c.Removed))
		}
		ms.Note = human.Cut("By type: "+strings.Join(by, ", "), 2000)
	}
	add(ms)
	add(listSection(bud, "d-dstate", "Tasks in D state", "task", d.DStateNew, d.DStateGone))
	ps := diffSection{bud: bud, ID: "d-pods", Title: "Pods", Head: []string{"pod", "phase"}}
	for _, n := range d.PodsAdded {
		ps.row("+", n, "")
	}
	for _, c := range d.PodPhaseChanges {
		ps.row("~", c.Name, orAbsent(c.Old)+" → "+orAbsent(c.New))
	}
	for _, n := range d.PodsRemoved {
		ps.row("-", n, "")
	}
	add(ps)
	add(countSection(bud, "d-restarts", "Containers restarted (CRI attempt)", "container", d.ContainerRestart, false))
	add(countSection(bud, "d-dirs", "Largest directories that grew (entries)", "directory", d.DirGrowth, true))
	add(countSection(bud, "d-deleting", ".deleting~ entries per dirshape root", "root", d.DeletingChange, true))
	sig := countSection(bud, "d-signatures", "Log signatures (lines, in each bundle's log window)", "signature", d.Signatures, true)
	if len(d.Signatures) > 0 && d.LogWindowDiffers {
		sig.Note = "The log windows differ (--since): the counts are not over the same span."
	}
	add(sig)
	add(countSection(bud, "d-goroutines", "The kubelet's goroutines by first frame outside Go's standard library", "frame", d.Goroutines, true))
	cs := diffSection{bud: bud, ID: "d-collection", Title: "Collection", Head: []string{"what", "old", "new"}}
	if d.BundleStatus != nil {
		cs.row("~", "bundle", d.BundleStatus.Old, d.BundleStatus.New)
	}
	for _, c := range d.Collectors {
		cs.row("~", "collector "+c.Name, c.Old, c.New)
	}
	add(cs)
	vs := diffSection{bud: bud, ID: "d-versions", Title: "Versions", Head: []string{"what", "old", "new"}}
	for _, c := range d.Versions {
		vs.row("~", c.Name, orAbsent(c.Old), orAbsent(c.New))
	}
	add(vs)
	p.BudgetCut = bud.cut
	return p
}

// row adds a row marked + (added), - (removed) or ~ (changed), its cells
// cut; past maxDiffRows it is only counted.
func (s *diffSection) row(mark string, cells ...string) {
	if len(s.Rows) >= maxDiffRows {
		s.More++
		return
	}
	class := map[string]string{"+": "mark-add", "-": "mark-del"}[mark]
	if class == "" {
		class = "mark-chg"
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = s.bud.take(c, 1000)
	}
	s.Rows = append(s.Rows, diffRow{Mark: strings.Replace(mark, "-", "−", 1), Class: class, Cells: out})
}

func listSection(bud *budget, id, title, what string, added, removed []string) diffSection {
	s := diffSection{bud: bud, ID: id, Title: fmt.Sprintf("%s (%d new, %d gone)", title, len(added), len(removed)), Head: []string{what}}
	for _, a := range added {
		s.row("+", a)
	}
	for _, r := range removed {
		s.row("-", r)
	}
	return s
}

// countSection lists counts before and after; with chart, the largest
// changes are drawn as pairs of bars (old grey, new coloured).
func countSection(bud *budget, id, title, what string, cs []diff.CountChange, withChart bool) diffSection {
	s := diffSection{bud: bud, ID: id, Title: title, Head: []string{what, "old", "new", "change"}}
	for _, c := range cs {
		mark := "~"
		switch {
		case c.Old == 0:
			mark = "+"
		case c.New == 0:
			mark = "-"
		}
		change := signed(int64(c.New) - int64(c.Old))
		if c.NewAtLeast && !c.OldAtLeast {
			change = "at least " + change
		}
		s.row(mark, c.Name, atLeast(fmtCount(c.Old), c.OldAtLeast), atLeast(fmtCount(c.New), c.NewAtLeast), change)
	}
	if withChart && len(cs) > 0 {
		s.Chart = pairChart(title, cs, bud)
	}
	return s
}

// atLeast says a count is a lower bound (a directory dirshape did not
// read to its end).
func atLeast(count string, lower bool) string {
	if lower {
		return "at least " + count
	}
	return count
}

// pairChart draws, for the largest changes, the old count (grey) over the
// new one (blue, red when it grew).
func pairChart(title string, cs []diff.CountChange, bud *budget) *chart {
	cs = append([]diff.CountChange(nil), cs...)
	sort.SliceStable(cs, func(i, j int) bool {
		return math.Abs(float64(cs[i].New)-float64(cs[i].Old)) > math.Abs(float64(cs[j].New)-float64(cs[j].Old))
	})
	if len(cs) > maxBars {
		cs = cs[:maxBars]
	}
	top := 1.0
	for _, c := range cs {
		top = math.Max(top, math.Max(float64(c.Old), float64(c.New)))
	}
	const rowH = 30.0
	c := &chart{W: chartLeft + chartPlot + 200, H: float64(len(cs))*rowH + 20, Label: title + ": old (grey) and new"}
	x := func(v uint64) float64 { return math.Max(1.5, chartPlot*float64(v)/top) }
	for i, cc := range cs {
		y := 10 + float64(i)*rowH
		cls := "st-info"
		if cc.New > cc.Old {
			cls = "st-bad"
		}
		c.Rects = append(c.Rects, rect{X: chartLeft, Y: y, W: x(cc.Old), H: 11, Class: "old", Title: bud.take(fmt.Sprintf("%s: %d in the old bundle", cc.Name, cc.Old), 600)})
		c.Rects = append(c.Rects, rect{X: chartLeft, Y: y + 12, W: x(cc.New), H: 11, Class: cls, Title: bud.take(fmt.Sprintf("%s: %d in the new bundle", cc.Name, cc.New), 600)})
		c.Texts = append(c.Texts, label{X: chartLeft - 8, Y: y + 12, Anchor: "end", Class: "lbl", Text: cutLeft(cc.Name, 46)})
		c.Texts = append(c.Texts, label{X: chartLeft + chartPlot + 8, Y: y + 12, Anchor: "start", Class: "note", Text: fmt.Sprintf("%s → %s (%s)", atLeast(fmtCount(cc.Old), cc.OldAtLeast), atLeast(fmtCount(cc.New), cc.NewAtLeast), signed(int64(cc.New)-int64(cc.Old)))})
	}
	c.Lines = append(c.Lines, seg{X1: chartLeft, Y1: 6, X2: chartLeft, Y2: c.H - 6, Class: "axis"})
	return c
}

func diffSideOf(which string, s diff.Side) diffSide {
	var counts []string
	for _, sev := range []string{"critical", "warning", "info"} {
		if n := s.Findings[sev]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, sev))
		}
	}
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	var rts []string
	for k, v := range s.Runtimes {
		rts = append(rts, k+" "+v)
	}
	sort.Strings(rts)
	return diffSide{Which: which, Bundle: human.Cut(s.Bundle, 1000), Host: human.Cut(orUnknown(s.Hostname), 300), BootID: human.Cut(s.BootID, 100),
		Collected: fmtTime(s.CollectedAt), Status: human.Cut(s.Status, 100), Findings: strings.Join(counts, ", "),
		Kernel: human.Cut(s.Kernel, 300), Kubelet: human.Cut(s.Kubelet, 200), Runtimes: human.Cut(strings.Join(rts, ", "), 500)}
}

func signed(n int64) string {
	switch {
	case n > 0:
		return "+" + fmtCount(uint64(n))
	case n < 0:
		return "−" + fmtCount(uint64(-n))
	}
	return "0"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func orAbsent(s string) string {
	if s == "" {
		return "(absent)"
	}
	return s
}

// cutAll cuts each of up to n strings to each bytes, with a last line
// saying how many more there were.
func cutAll(s []string, n, each int) []string {
	b := budget{left: math.MaxInt}
	return b.takeAll(s, n, each)
}
