package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/internal/human"
	"github.com/nodesnap/nodesnap/read/analyze"
	"github.com/nodesnap/nodesnap/read/fleetview"
)

// A fleet directory holds one bundle per node (nodesnap fleet writes
// them, with its fleet.json, into one directory). Its page is the one
// aggregation `nodesnap fleet analyze` prints (package fleetview): which
// node has which finding, the nodes that differ from the rest, each
// node's row of fleet.json (with the nodes that have no bundle and why),
// then each node's findings in short; the evidence is in each bundle's
// own report.

// Bounds of a fleet page.
const (
	MaxFleetBundles  = 2000
	maxFleetColumns  = 40  // finding kinds in the table
	maxFleetListed   = 10  // findings listed in a node's section
	maxFleetDiffList = 20  // finding IDs named per node that differs
	maxFleetDiffRows = 200 // nodes that differ shown
	maxFleetRunRows  = 200 // rows of fleet.json shown (the bad ones first)
)

// HoldsBundles reports whether p is a fleet's directory, not an extracted
// bundle: no manifest.json at its top, and a fleet.json or at least one
// file named as a bundle.
func HoldsBundles(p string) bool {
	if _, err := os.Lstat(filepath.Join(p, bundle.ManifestName)); err == nil {
		return false
	}
	if st, err := os.Stat(filepath.Join(p, fleetview.FleetFile)); err == nil && st.Mode().IsRegular() {
		return true
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Type().IsRegular() && fleetview.IsBundleName(e.Name()) {
			return true
		}
	}
	return false
}

// LoadFleet analyses the bundles of dir as `nodesnap fleet analyze` does
// (fleetview.Load): those its fleet.json names, or every bundle in it. A
// bundle that cannot be read is kept with its error (the page lists it);
// a directory without bundles or fleet.json rows, or one that cannot be
// listed, is an error.
func LoadFleet(ctx context.Context, dir string) (*fleetview.View, error) {
	v, err := fleetview.LoadWith(ctx, dir, fleetview.Options{MaxBundles: MaxFleetBundles})
	if errors.Is(err, fleetview.ErrNoBundles) {
		return nil, fmt.Errorf("%s holds no bundle (no *.tar.gz, *.tar.zst or *.tgz, no node in a fleet.json): give a bundle, or a directory of bundles such as nodesnap fleet writes", dir)
	}
	return v, err
}

// fleetPage is what the fleet template shows.
type fleetPage struct {
	Title      string
	Dir        string
	Nodes      int
	Unreadable []fleetBad
	Sick       int // nodes with a warning or critical finding
	Columns    []fleetColumn
	MoreCols   int
	Rows       []fleetRow
	Chart      *chart
	Diffs      []fleetDiff
	MoreDiffs  int
	Runs       []fleetRun
	RunsBad    int // rows of fleet.json whose node has no good bundle
	MoreRuns   int
	Sections   []fleetSection
	BudgetCut  int
}

type fleetBad struct{ Node, Path, Err string }

type fleetColumn struct {
	ID, Title, Severity string
	Nodes               int
}

type fleetRow struct {
	Anchor, Host, Worst string
	Cells               []fleetCell
}

type fleetCell struct {
	Class, Text string
}

// fleetDiff is a node unlike the rest.
type fleetDiff struct {
	Anchor, Node      string
	Has, Lacks, Other []string
}

// fleetRun is a node's row of fleet.json.
type fleetRun struct {
	Anchor, Node, Status, Class, Reason, Bundle, Seconds string
}

type fleetSection struct {
	Anchor, Host, Bundle, Kernel, Collected, Status, Worst string
	Counts                                                 map[string]int
	Findings                                               []fleetFinding
	More                                                   int
}

type fleetFinding struct {
	Severity, ID, Subject, Summary string
}

// WriteFleet renders a fleet view as one HTML document: a chart and a
// table of which node has which finding, the nodes that differ, the
// collection's row per node, then each node in short, under the report's
// rules.
func WriteFleet(w io.Writer, v *fleetview.View) error {
	if v == nil || len(v.Nodes)+len(v.Missing) == 0 {
		return errors.New("no bundles to render")
	}
	var buf bytes.Buffer
	if err := pageTemplate().ExecuteTemplate(&buf, "fleet", buildFleetPage(v)); err != nil {
		return fmt.Errorf("rendering the fleet report: %w", err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("writing the fleet report: %w", err)
	}
	return nil
}

// barClass colours a finding's bar by its severity.
func barClass(s analyze.Severity) string {
	switch s {
	case analyze.Critical:
		return "st-bad"
	case analyze.Warning:
		return "st-warn"
	}
	return "st-info"
}

func buildFleetPage(v *fleetview.View) *fleetPage {
	p := &fleetPage{Dir: human.Cut(v.Dir, 1000), Title: "nodesnap fleet report: " + human.Cut(filepath.Base(v.Dir), 200)}
	// As the report's: at most about 1 MiB of the bundles' text.
	bud := &budget{left: maxBundleText}
	// anchors links a node's name (fleet.json's rows, the differences) to
	// its section: the first of that name, as two bundles of one host
	// (two collections, no fleet.json) share a name but not an anchor.
	anchors := map[string]string{}
	var good []fleetview.Node
	for _, n := range v.Nodes {
		if n.Report == nil {
			msg := n.Error
			if msg == "" {
				msg = "not analysed"
			}
			p.Unreadable = append(p.Unreadable, fleetBad{Node: human.Cut(n.Name, 200), Path: human.Cut(filepath.Join(v.Dir, n.Bundle), 1000), Err: human.Cut(msg, 2000)})
			continue
		}
		good = append(good, n)
		if _, ok := anchors[n.Name]; !ok {
			anchors[n.Name] = fmt.Sprintf("node-%d", len(good))
		}
		for _, f := range n.Report.Findings {
			if f.Severity >= analyze.Warning {
				p.Sick++
				break
			}
		}
	}
	p.Nodes = len(good)
	// fleet.json's rows take from the budget first: why a node has no
	// bundle matters more than one more finding's summary.
	p.Runs, p.RunsBad, p.MoreRuns = fleetRuns(v, anchors, bud)

	// The findings, grouped by fleetview: worst first, then the most nodes.
	groups := v.Findings
	if len(groups) > maxFleetColumns {
		p.MoreCols = len(groups) - maxFleetColumns
		groups = groups[:maxFleetColumns]
	}
	var bars []hbar
	for _, g := range groups {
		p.Columns = append(p.Columns, fleetColumn{ID: human.Cut(g.ID, 200), Title: human.Cut(g.Title, 300), Severity: g.Severity.String(), Nodes: len(g.Nodes)})
		pct := 100 * float64(len(g.Nodes)) / float64(max(len(good), 1))
		bars = append(bars, hbar{Label: g.ID, Value: float64(len(g.Nodes)), Class: barClass(g.Severity),
			Text: fmt.Sprintf("%s (%s) · %s", plural(len(g.Nodes), "node", "nodes"), fmtPct(pct), g.Severity), Title: human.Cut(g.ID+": "+g.Title, 1000)})
	}
	if len(bars) > maxBars {
		bars = bars[:maxBars]
	}
	p.Chart = barChart("Nodes per finding", bars, 0, "", bud)

	for i, n := range good {
		anchor := fmt.Sprintf("node-%d", i+1)
		host := human.Cut(orUnknown(n.Name), 200)
		row := fleetRow{Anchor: anchor, Host: host, Worst: "none"}
		per := map[string][]analyze.Finding{}
		worst := -1
		for _, f := range n.Report.Findings {
			per[f.ID] = append(per[f.ID], f)
			worst = max(worst, int(f.Severity))
		}
		for _, g := range groups {
			fs := per[g.ID]
			if len(fs) == 0 {
				row.Cells = append(row.Cells, fleetCell{Class: "sev-none", Text: "·"})
				continue
			}
			w := analyze.Info
			for _, f := range fs {
				w = max(w, f.Severity)
			}
			text := w.String()
			if len(fs) > 1 {
				text += fmt.Sprintf(" ×%d", len(fs))
			}
			row.Cells = append(row.Cells, fleetCell{Class: "sev-" + w.String(), Text: text})
		}
		if worst >= 0 {
			row.Worst = analyze.Severity(worst).String()
		}
		p.Rows = append(p.Rows, row)
		rep := n.Report
		s := fleetSection{Anchor: anchor, Host: host, Bundle: human.Cut(filepath.Join(v.Dir, n.Bundle), 1000), Kernel: human.Cut(n.Kernel, 300),
			Collected: fmtTime(rep.CollectedAt), Status: human.Cut(n.Status, 100), Counts: rep.Counts, Worst: row.Worst}
		if h := human.Cut(rep.Hostname, 200); h != "" && h != host {
			s.Host = host + " (" + h + ")"
		}
		for i, f := range rep.Findings {
			if i >= maxFleetListed {
				s.More = len(rep.Findings) - maxFleetListed
				break
			}
			s.Findings = append(s.Findings, fleetFinding{Severity: f.Severity.String(), ID: human.Cut(f.ID, 200), Subject: bud.take(f.Subject, 500), Summary: bud.take(f.Summary, 1000)})
		}
		p.Sections = append(p.Sections, s)
	}

	for i, d := range v.Differences {
		if i == maxFleetDiffRows {
			p.MoreDiffs = len(v.Differences) - i
			break
		}
		p.Diffs = append(p.Diffs, fleetDiff{Anchor: anchors[d.Node], Node: human.Cut(d.Node, 200),
			Has: cutList(d.Has, maxFleetDiffList), Lacks: cutList(d.Lacks, maxFleetDiffList), Other: cutList(d.Other, maxFleetDiffList)})
	}
	p.BudgetCut = bud.cut
	return p
}

// fleetRuns is the fleet.json table: every node fleet.json lists, those
// without a good bundle first, at most maxFleetRunRows.
func fleetRuns(v *fleetview.View, anchors map[string]string, bud *budget) (rows []fleetRun, bad, more int) {
	var good []fleetRun
	add := func(n fleetview.Node, ok bool) {
		if n.FleetStatus == "" {
			return // no fleet.json, or a row without a status
		}
		r := fleetRun{Anchor: anchors[n.Name], Node: human.Cut(n.Name, 200), Status: human.Cut(n.FleetStatus, 100), Reason: n.Reason,
			Bundle: human.Cut(n.Bundle, 500), Class: "st-ok"}
		if n.Seconds > 0 {
			r.Seconds = fmt.Sprintf("%.1f s", n.Seconds)
		}
		switch {
		case !ok:
			r.Class = "st-bad"
		case n.FleetStatus != "ok":
			r.Class = "st-warn"
		}
		if r.Class == "st-ok" {
			good = append(good, r)
			return
		}
		bad++
		rows = append(rows, r)
	}
	for _, n := range v.Missing {
		add(n, false)
	}
	for _, n := range v.Nodes {
		add(n, n.Report != nil)
	}
	rows = append(rows, good...)
	if len(rows) > maxFleetRunRows {
		more = len(rows) - maxFleetRunRows
		rows = rows[:maxFleetRunRows]
	}
	for i := range rows {
		rows[i].Reason = bud.take(rows[i].Reason, 300)
	}
	return rows, bad, more
}

// cutList keeps the first n entries of l, each cut short, and says how
// many it left out.
func cutList(l []string, n int) []string {
	var out []string
	for i, s := range l {
		if i == n {
			out = append(out, fmt.Sprintf("… and %d more", len(l)-n))
			break
		}
		out = append(out, human.Cut(s, 300))
	}
	return out
}
